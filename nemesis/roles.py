"""Broker roles, resolved through the admin API at the moment a fault fires.

A *role* target names nodes by what they do for the run rather than by name:

- ``leader``            — the leader of one of the workload's partitions (drawn, seeded);
- ``leaders``           — the leaders of all of the workload's partitions;
- ``isr``               — the in-sync replicas of one of the workload's partitions;
- ``followers``         — the replicas of one partition other than its leader;
- ``txn-coordinator``   — the transaction coordinators of the run's transactional ids:
  the leader of ``__transaction_state`` partition ``abs(javaHash(id)) % partitions``
  (what the broker computes; the admin client offers no FindCoordinator for them);
- ``group-coordinator`` — the coordinators of the run's consumer groups (the leader of
  ``__consumer_offsets`` partition ``abs(javaHash(group)) % partitions``, the same rule);
- ``controller``        — the active KRaft controller (see :mod:`.discovery`).

:func:`resolve_role` returns a :class:`Resolution`: the role asked for, the nodes it
resolved to, and what the cluster said (the partition, its leader, replicas and ISR,
the coordinator partition, how the controller was found). When the cluster cannot
answer, the resolution carries the error instead of nodes; the caller decides the
fallback and records it (:meth:`Resolution.fell_back`). Pure parts (the hash, the
choice among partition states) are separate from the one admin call.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..clusters.base import Cluster

log = logging.getLogger("ktrial.nemesis")

PARTITION_ROLES = ("leader", "leaders", "isr", "followers")
COORDINATOR_ROLES = ("txn-coordinator", "group-coordinator")
ROLES = ("controller", "leaders", "leader", "isr", "followers", *COORDINATOR_ROLES)
TXN_TOPIC = "__transaction_state"
GROUP_TOPIC = "__consumer_offsets"


class RoleError(RuntimeError):
    """The cluster could not say which nodes hold a role (the message says why)."""


def java_hash(text: str) -> int:
    """Java's ``String.hashCode()`` (a signed 32-bit int) of `text` (pure).

    Java hashes UTF-16 code units: characters outside the BMP count as two."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition of ``__transaction_state`` / ``__consumer_offsets`` that holds `key`:
    Kafka's ``Utils.abs(key.hashCode()) % partitions`` (abs of MIN_VALUE is 0)."""
    if partitions <= 0:
        raise ValueError(f"a coordinator topic needs partitions, not {partitions}")
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True)
class PartitionState:
    """One partition as the metadata showed it (broker ids)."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.partition}"

    def to_json(self, names: Mapping[int, str]) -> dict[str, Any]:
        """The partition with node names (ids the cluster does not know stay ids)."""
        return {
            "partition": self.name,
            "leader": names.get(self.leader, self.leader) if self.leader >= 0 else None,
            "replicas": [names.get(i, i) for i in self.replicas],
            "isr": [names.get(i, i) for i in self.isr],
        }


@dataclass
class Resolution:
    """A role resolved (or not) when a fault fired: what to record in its start op."""

    role: str
    nodes: list[str] = field(default_factory=list)
    seen: dict[str, Any] = field(default_factory=dict)  # what the admin API said
    error: str | None = None
    fallback: str | None = None  # the spec used instead, when the role was not resolved

    def fell_back(self, spec: str, nodes: list[str]) -> Resolution:
        self.fallback, self.nodes = spec, nodes
        return self

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"asked": self.role, "nodes": list(self.nodes)}
        out.update(self.seen)
        if self.error is not None:
            out["resolved"] = False
            out["error"] = self.error
        if self.fallback is not None:
            out["fallback"] = self.fallback
        return out


# ---------------------------------------------------------------- metadata (one admin call)

PartitionRef = tuple[str, int | None] | str


def refs_of(
    partitions: Iterable[PartitionRef] | Callable[[], Iterable[PartitionRef]] | None,
) -> list[PartitionRef]:
    if partitions is None:
        return []
    return list(partitions() if callable(partitions) else partitions)


def admin_of(cluster: Cluster) -> Any:
    """An AdminClient with the cluster's own settings (security included) when it has them."""
    make = getattr(cluster, "_admin", None)
    if callable(make):
        return make()
    from .discovery import _admin

    return _admin(cluster.bootstrap_servers)


def read_states(admin: Any, timeout: float = 10.0) -> dict[str, list[PartitionState]]:
    """Every topic's partitions from one metadata request (internal topics included)."""
    return states_of(admin.list_topics(timeout=timeout))


def states_of(md: Any) -> dict[str, list[PartitionState]]:
    """The partitions of a metadata answer (pure)."""
    out: dict[str, list[PartitionState]] = {}
    for name, t in md.topics.items():
        if getattr(t, "error", None) is not None:
            continue
        out[name] = sorted(
            (
                PartitionState(
                    name, int(pid), int(p.leader), tuple(p.replicas), tuple(getattr(p, "isrs", ()))
                )
                for pid, p in t.partitions.items()
            ),
            key=lambda s: s.partition,
        )
    return out


def in_use(
    states: Mapping[str, Sequence[PartitionState]], refs: Sequence[PartitionRef]
) -> list[PartitionState]:
    """The states of the workload's partitions (pure), in topic/partition order."""
    out: list[PartitionState] = []
    for ref in refs:
        topic, part = (ref, None) if isinstance(ref, str) else ref
        out += [s for s in states.get(topic, ()) if part is None or s.partition == part]
    seen: set[tuple[str, int]] = set()
    unique = []
    for s in sorted(out, key=lambda s: (s.topic, s.partition)):
        if (s.topic, s.partition) not in seen:
            seen.add((s.topic, s.partition))
            unique.append(s)
    return unique


def coordinators(
    states: Mapping[str, Sequence[PartitionState]], topic: str, keys: Sequence[str]
) -> dict[str, tuple[int, int]]:
    """key -> (coordinator partition, its leader id) (pure); RoleError when the topic is
    absent (no transaction or group was ever used) or a partition has no leader."""
    parts = {s.partition: s for s in states.get(topic, ())}
    if not parts:
        raise RoleError(f"{topic} does not exist yet (no coordinator has been used)")
    out: dict[str, tuple[int, int]] = {}
    for k in keys:
        p = coordinator_partition(k, len(parts))
        s = parts.get(p)
        if s is None or s.leader < 0:
            raise RoleError(f"{topic}/{p} (coordinator of {k!r}) has no leader now")
        out[k] = (p, s.leader)
    return out


# ---------------------------------------------------------------- resolution


@dataclass
class RoleSource:
    """What a role is resolved against: the cluster and the run's partitions, transactional
    ids and consumer groups (lists, or callables asked when the fault fires)."""

    cluster: Cluster
    partitions: Any = None
    transactional_ids: Any = None
    groups: Any = None
    controller: Callable[[], tuple[str | None, str]] | None = None

    def _list(self, what: Any) -> list[str]:
        if what is None:
            return []
        return [str(x) for x in (what() if callable(what) else what)]

    def names(self) -> dict[int, str]:
        return {n.node_id: n.name for n in self.cluster.nodes}

    def states(self, avoid: frozenset[int] = frozenset()) -> dict[str, list[PartitionState]]:
        """The metadata now. A broker cut off from the controller answers from a stale
        image: with `avoid`, an answer from one of those broker ids is asked again
        (fresh clients bootstrap from a random broker) and refused after a few tries."""
        for _ in range(6 if avoid else 1):
            md = admin_of(self.cluster).list_topics(timeout=10.0)
            if getattr(md, "orig_broker_id", -1) not in avoid:
                return states_of(md)
        raise RoleError(f"only brokers {sorted(avoid)} (cut off, stale metadata) answered")

    def resolve(self, role: str, rng: random.Random, partition: str | None = None) -> Resolution:
        """Resolve `role` now; a Resolution with `error` (and no nodes) when it cannot."""
        res = Resolution(role)
        try:
            self._resolve(res, rng, partition)
        except Exception as e:  # the admin API unreachable, a role nobody holds
            res.error = f"{type(e).__name__}: {e}" if not isinstance(e, RoleError) else str(e)
            res.nodes = []
        return res

    def _resolve(self, res: Resolution, rng: random.Random, partition: str | None) -> None:
        role, names = res.role, self.names()
        if role == "controller":
            ask = self.controller or (lambda: _controller(self.cluster))
            name, how = ask()
            res.seen["how"] = how
            if name is None:
                raise RoleError(f"the active controller is unknown ({how})")
            res.nodes = [name]
            return
        states = self.states()
        if role in PARTITION_ROLES:
            chosen = pick_partitions(role, in_use(states, partition_refs(self, partition)), rng)
            ids = nodes_for(role, chosen)
            res.seen["partitions"] = [s.to_json(names) for s in chosen]
        else:
            topic = TXN_TOPIC if role == "txn-coordinator" else GROUP_TOPIC
            keys = self._list(self.transactional_ids if topic == TXN_TOPIC else self.groups)
            if not keys:
                what = "transactional ids" if topic == TXN_TOPIC else "consumer groups"
                raise RoleError(f"the run uses no {what}, so there is no {role}")
            found = coordinators(states, topic, keys)
            res.seen["coordinators"] = {
                k: {"partition": f"{topic}/{p}", "node": names.get(lead, lead)}
                for k, (p, lead) in found.items()
            }
            ids = {lead for _, lead in found.values()}
        unknown = sorted(i for i in ids if i not in names)
        if unknown:
            raise RoleError(f"{role}: broker id(s) {unknown} are not nodes of this cluster")
        res.nodes = [n.name for n in self.cluster.nodes if n.node_id in ids]
        if not res.nodes:
            raise RoleError(f"no node holds the role {role} now")


def partition_refs(src: RoleSource, partition: str | None) -> list[PartitionRef]:
    """The workload's partitions, or the one named ``topic/p``."""
    if partition:
        topic, _, p = partition.rpartition("/")
        return [(topic, int(p))]
    refs = refs_of(src.partitions)
    if not refs:
        raise RoleError("the run named no partitions (the workload's topics are unknown)")
    return refs


def pick_partitions(
    role: str, states: Sequence[PartitionState], rng: random.Random
) -> list[PartitionState]:
    """The partitions a partition role looks at (pure but for the seeded draw): all of them
    for ``leaders``, else one drawn among those with a leader."""
    led = [s for s in states if s.leader >= 0]
    if not led:
        raise RoleError("none of the workload's partitions has a leader now")
    return led if role == "leaders" else [rng.choice(led)]


def nodes_for(role: str, chosen: Sequence[PartitionState]) -> set[int]:
    """Broker ids holding `role` in the chosen partitions (pure)."""
    if role in ("leader", "leaders"):
        return {s.leader for s in chosen}
    if role == "isr":
        return {i for s in chosen for i in s.isr}
    if role == "followers":
        ids = {i for s in chosen for i in s.replicas if i != s.leader}
        if not ids:
            raise RoleError(f"{chosen[0].name} has no followers (replication factor 1)")
        return ids
    raise RoleError(f"{role!r} is not a partition role")


def _controller(cluster: Cluster) -> tuple[str | None, str]:
    from . import discovery

    return discovery.controller_with_source(cluster)
