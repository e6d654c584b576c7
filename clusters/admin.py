"""The admin-API part every backend shares: readiness, topics, in-sync waits, heal.

`AdminCluster` is the one cluster base: node lookup, `wait_ready` (a probe loop whose
probe each backend supplies), `create_topics`, `wait_in_sync`, `heal` and the default
`unsupported_faults`. The functions below it are the admin calls themselves. Readiness
and topic creation go through Kafka's admin API (never log scraping), so the same code
serves the clusters ktrial starts (local, docker) and brokers it did not (external).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from .base import ClientAdvertise, Node, node_fault_limits
from .security import Security


def admin_client(
    bootstrap: str,
    logger: str,
    extra: Mapping[str, Any] | None = None,
    on_error: Callable[[str], None] | None = None,
) -> Any:
    """An AdminClient whose librdkafka log lines go to `logger` (connection noise);
    `on_error` hears of authentication and TLS failures (which a request only sees as
    a timeout)."""
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 5000,
        "logger": logging.getLogger(logger),
        **(extra or {}),
    }
    if on_error is not None:
        conf["error_cb"] = lambda err: _report_security_error(err, on_error)
    return AdminClient(conf)


# librdkafka's error codes of a refused login or TLS handshake (_AUTHENTICATION, _SSL)
_SECURITY_ERRORS = ("_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED")


def _report_security_error(err: Any, on_error: Callable[[str], None]) -> None:
    name = getattr(err, "name", lambda: "")()
    if name in _SECURITY_ERRORS or "SASL" in str(err) or "SSL" in str(err):
        on_error(f"{name}: {getattr(err, 'str', lambda: str(err))()}")


def create_topics(
    admin: Any, topics: Mapping[str, int], rf: int, config: Mapping[str, str] | None = None
) -> list[str]:
    """Create topics (name -> partitions); an existing topic is fine. Returns those created."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    new = [
        NewTopic(t, num_partitions=p, replication_factor=rf, config=dict(config or {}))
        for t, p in topics.items()
    ]
    created = []
    for t, fut in admin.create_topics(new, operation_timeout=30, request_timeout=30).items():
        try:
            fut.result()
            created.append(t)
        except Exception as e:
            err = e.args[0] if e.args else None
            if getattr(err, "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise RuntimeError(f"creating topic {t} failed: {e}") from e
    return created


def existing_topic_problems(
    found: Mapping[str, int | None], wanted: Mapping[str, int]
) -> list[str]:
    """What keeps topics made beforehand from serving (pure): `found` maps each topic
    the cluster lists to its partition count (None: listed with an error)."""
    out = []
    for t, n in wanted.items():
        have = found.get(t)
        if t not in found or have is None:
            out.append(
                f"topic {t} does not exist: create it with {n} partitions (kafka-topics.sh "
                f"--create --topic {t} --partitions {n} --replication-factor 3)"
            )
        elif have < n:
            out.append(
                f"topic {t} has {have} partitions, the workload needs {n}: add partitions "
                f"(kafka-topics.sh --alter --topic {t} --partitions {n})"
            )
    return out


def use_existing_topics(admin: Any, topics: Mapping[str, int]) -> dict[str, int]:
    """Check that `topics` exist with enough partitions, then empty them: records an
    earlier run left would be reads of values this run never wrote. Returns, per topic,
    how many records were deleted (DeleteRecords up to the high watermark)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    md = admin.list_topics(timeout=10)
    found = {
        name: (None if t.error is not None else len(t.partitions)) for name, t in md.topics.items()
    }
    problems = existing_topic_problems(found, topics)
    if problems:
        raise ExistingTopicsError(
            "--use-existing-topics: " + "; ".join(problems) + " (or run without "
            "--use-existing-topics to let ktrial create the topics)"
        )
    tps = [TopicPartition(t, p) for t in topics for p in range(found[t] or 0)]
    ends: dict[tuple[str, int], list[int]] = {}
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
        for tp, fut in admin.list_offsets({tp: spec for tp in tps}, request_timeout=30).items():
            ends.setdefault((tp.topic, tp.partition), []).append(fut.result().offset)
    full = [TopicPartition(t, p, hi) for (t, p), (lo, hi) in ends.items() if hi > lo]
    deleted = dict.fromkeys(topics, 0)
    for (t, _p), (lo, hi) in ends.items():
        deleted[t] += max(0, hi - lo)
    if full:
        for tp, fut in admin.delete_records(full, request_timeout=30).items():
            try:
                fut.result()
            except Exception as e:
                raise ExistingTopicsError(
                    f"--use-existing-topics: topic {tp.topic} holds records of an earlier run "
                    f"and deleting them failed ({e}); allow DeleteRecords (ACL operation "
                    "DELETE on the topic) or empty the topics yourself"
                ) from None
    return deleted


class ExistingTopicsError(RuntimeError):
    """Topics made beforehand are missing, too small, or cannot be emptied."""


def out_of_sync(admin: Any, topics: Sequence[str]) -> tuple[set[int], str]:
    """Broker ids missing from some partition's ISR, and a reason text ('' when all in sync)."""
    md = admin.list_topics(timeout=5)
    missing: set[int] = set()
    reasons = []
    for t in topics:
        tm = md.topics.get(t)
        if tm is None or tm.error is not None:
            reasons.append(f"topic {t} not in metadata ({tm.error if tm else 'absent'})")
            continue
        for p in tm.partitions.values():
            if p.leader < 0:
                reasons.append(f"{t}/{p.id} has no leader")
            lag = set(p.replicas) - set(p.isrs)
            if lag:
                missing |= lag
                reasons.append(f"{t}/{p.id} replicas {p.replicas} isr {p.isrs}")
    return missing, "; ".join(reasons[:5])


class ClusterNotReady(RuntimeError):
    """The cluster did not become ready; the message names the nodes and shows their logs."""


N = TypeVar("N", bound=Node)


class AdminCluster(Generic[N]):
    """What every backend shares: node lookup, and everything done through the admin API.

    A backend fills `_nodes` and implements the hooks: `_ready_step` (one readiness
    probe), `_heal_node` (undo one node's faults), `teardown`, `metadata`; it may
    refine `_check_alive`, `_failure`, `_replication` and `_created`. Readiness,
    topic creation and in-sync waits go through Kafka's admin API (never log
    scraping), so the same code serves brokers ktrial started and brokers it did not.
    """

    kind = "admin"
    # logger of the AdminClient's own (librdkafka) lines: connection noise while brokers boot
    admin_logger = "ktrial.clusters.admin"
    ready_poll_s = 0.5
    client_advertise: ClientAdvertise | None = None
    # How clients reach the brokers (TLS, SASL: clusters/security.py); every admin client
    # here, the nemesis' lookups and the workloads' clients take it from the cluster.
    security: Security = Security()
    # The workload's topics were made beforehand (--use-existing-topics): create_topics
    # checks them and empties them instead of creating any.
    use_existing_topics = False

    def __init__(self) -> None:
        self._nodes: list[N] = []
        self.emptied_topics: dict[str, int] = {}  # topic -> records deleted before the run
        self.security_error = ""  # the last refused login / TLS handshake of an admin client

    # ------------------------------------------------------------ nodes

    @property
    def nodes(self) -> Sequence[N]:
        return tuple(self._nodes)

    def node(self, name: str) -> N:
        for n in self._nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r}; nodes are {', '.join(n.name for n in self._nodes)}")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.client_bootstrap for n in self._nodes)

    def unsupported_faults(self) -> dict[str, str]:
        """Fault family -> why not; by default what the nodes rule out (base.node_fault_limits)."""
        return node_fault_limits(self._nodes)

    def _admin_config(self) -> Mapping[str, Any]:
        return self.security.librdkafka()

    def _admin(self) -> Any:
        return admin_client(
            self.bootstrap_servers, self.admin_logger, self._admin_config(), self._security_failed
        )

    def _security_failed(self, what: str) -> None:
        self.security_error = what

    # ------------------------------------------------------------ readiness

    def _ready_step(self, admin: Any) -> str:
        """One readiness probe: '' when ready, else why not (exceptions count as 'why')."""
        raise NotImplementedError

    def _check_alive(self) -> None:
        """Raise (with the reason) when waiting longer cannot help, e.g. a broker died."""

    def _failure(self, what: str, nodes: Sequence[N]) -> Exception:
        """The error a failed wait raises; backends that own the brokers add their logs."""
        return ClusterNotReady(what)

    def _not_ready(self, timeout: float, why: str) -> Exception:
        return self._failure(f"not ready after {timeout:.0f}s ({why})", self._nodes)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Probe through the admin API until `_ready_step` says ready, or fail after `timeout`."""
        deadline = time.monotonic() + timeout
        admin = self._admin()
        while True:
            self._check_alive()
            try:
                why = self._ready_step(admin)
            except Exception as e:
                why = f"{type(e).__name__}: {e}"
            if not why:
                return
            poll = getattr(admin, "poll", None)
            if callable(poll):
                poll(0)  # serves error_cb: a refused login or TLS handshake is named
            if time.monotonic() >= deadline:
                if self.security_error:
                    why += f"; the brokers refused the connection: {self.security_error}"
                raise self._not_ready(timeout, why)
            time.sleep(self.ready_poll_s)

    # ------------------------------------------------------------ topics

    def _replication(self, replication_factor: int) -> int:
        """The replication factor actually used for a requested one."""
        return replication_factor

    def _created(self, topics: list[str]) -> None:
        """Called with the topics this cluster just created (external deletes them later)."""

    def create_topics(
        self,
        topics: Mapping[str, int],
        replication_factor: int = 3,
        config: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Create topics (name -> partitions) and wait until every replica is in sync;
        with `use_existing_topics`, check and empty the topics instead."""
        admin = self._admin()
        if self.use_existing_topics:
            self.emptied_topics.update(use_existing_topics(admin, topics))
        else:
            rf = self._replication(replication_factor)
            self._created(create_topics(admin, topics, rf, config))
        self.wait_in_sync(list(topics), timeout, admin)

    def _out_of_sync(self, admin: Any, topics: Sequence[str]) -> tuple[list[N], str]:
        """Nodes that should be but are not in some partition's ISR, and a reason text."""
        missing, why = out_of_sync(admin, topics)
        return [n for n in self._nodes if n.node_id in missing], why

    def wait_in_sync(self, topics: Sequence[str], timeout: float = 60.0, admin: Any = None) -> None:
        """Wait until every partition of `topics` has a leader and all replicas in its ISR."""
        admin = admin or self._admin()
        deadline = time.monotonic() + timeout
        why = ""
        lagging: list[N] = []
        while time.monotonic() < deadline:
            try:
                lagging, why = self._out_of_sync(admin, topics)
                if not lagging and not why:
                    return
            except Exception as e:
                why = str(e)
            time.sleep(0.3)
        raise self._failure(
            f"topics {', '.join(topics)} not in sync after {timeout:.0f}s: {why}", lagging
        )

    # ------------------------------------------------------------ heal

    def _heal_node(self, node: N) -> None:
        """Undo what faults may have left on one node (resume, flush rules, lift limits)."""

    def heal(self, timeout: float = 120.0) -> None:
        """Undo every fault a test may have left: each node's own (`_heal_node`), then
        start the stopped nodes and wait until the cluster is ready."""
        for n in self._nodes:
            self._heal_node(n)
        for n in self._nodes:
            if not n.is_running():
                n.start()
        self.wait_ready(timeout)
