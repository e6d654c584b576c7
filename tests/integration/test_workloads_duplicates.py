"""Proof the pipeline sees what it claims to check: a forced resend becomes a reported
duplicate, with every client ktrial drives (librdkafka, franz-go, kafka-clients).

How the resend is forced, honestly: a non-idempotent producer (acks=all, retries on,
a produce request timeout of 1 s) writes to a partition while a *follower* of it is
paused (SIGSTOP). The leader appends each produce request at once but cannot answer
before the paused follower catches up (acks=all, the follower is still in the ISR):
after the request's 1 s it answers REQUEST_TIMED_OUT (and librdkafka and kafka-clients
also give up on the request themselves after 1 s), so the client sends the batch
again. When the follower resumes, every copy commits: one value at two offsets. An
idempotent producer of the same client, writing to a second partition with the same
leader and follower during the same pause, must not duplicate (the broker drops the
resend by its sequence number): the control that shows the duplicate is the
producer's fault, not the checker's.

Each client takes the settings in its own names (docs/drivers.md, "Duplicates and lost
writes per client"); the drain reads with librdkafka for every driver: what is proven
is the producer's resend, and a duplicate is in the log whoever reads it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka.admin import AdminClient
from ktrial.checker import CheckOptions, check_file
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.workloads.confluent import ConfluentDriver, DriverConfig
from ktrial.workloads.drain import drain
from ktrial.workloads.driver import Driver, DriverFactory, KeyMap, TopicPartition
from ktrial.workloads.slot import Slot
from ktrial.workloads.tracker import OffsetTracker
from ktrial.workloads.worker import WorkerConfig, WorkerDriver, worker_program

pytestmark = pytest.mark.integration

REQUEST_TIMEOUT_MS = 1000
PAUSE_S = 4.0
# Each client's settings for "give up on a produce request after 1 s and send it again,
# for up to 25 s", in the names its driver takes. franz-go retries a record until its
# delivery timeout (it has no `retries` setting: kgo.RecordRetries is unlimited by
# default); its request.timeout.ms is the produce request's timeout the broker honours.
RESEND: dict[str, dict[str, Any]] = {
    "confluent": {
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "message.timeout.ms": 25000,
        "retries": 1000,
        "max.in.flight.requests.per.connection": 1,
    },
    "franz": {
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "delivery.timeout.ms": 25000,
        "max.in.flight.requests.per.connection": 1,
    },
    "java": {
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "delivery.timeout.ms": 25000,
        "retries": 1000,
        "max.in.flight.requests.per.connection": 1,
    },
}


def driver_param(name: str) -> Any:
    """A driver to prove; a worker driver is skipped when its program is not built."""
    if name == "confluent":
        return name
    try:
        worker_program(name)
    except ValueError as e:
        return pytest.param(name, marks=pytest.mark.skip(reason=str(e)))
    return name


DRIVERS = [driver_param("confluent"), driver_param("franz"), driver_param("java")]


def bystander(cluster: Any, topics: list[str]) -> Any:
    """A node that leads none of `topics`' partition 0: a follower of each (RF 3)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    md = admin.list_topics(timeout=20).topics
    leaders = {md[t].partitions[0].leader for t in topics}
    return next(n for n in cluster.nodes if n.node_id not in leaders)


class Producer:
    """One driver's producer on its own topic, recording sends to its own history."""

    def __init__(self, driver: str, bootstrap: str, topic: str, idempotence: bool, hist: Path):
        self.hist = hist
        self.keys = KeyMap({0: TopicPartition(topic, 0)})
        self.writer = HistoryWriter(hist)
        self.rec = Recorder(self.writer)
        self.tracker = OffsetTracker()
        self.bootstrap = bootstrap
        common: dict[str, Any] = {
            "bootstrap": bootstrap,
            "keys": self.keys,
            "group_id": f"{topic}-g",
            "idempotence": idempotence,
            "op_timeout_s": 30.0,
            "producer_overrides": RESEND[driver],
        }
        factory: Callable[[int, int], Driver]
        if driver == "confluent":
            ccfg = DriverConfig(**common)
            factory = lambda p, s: ConfluentDriver(ccfg, p, s, consume=False)  # noqa: E731
        else:
            wcfg = WorkerConfig(worker=driver, **common)
            factory = lambda p, s: WorkerDriver(wcfg, p, s, consume=False)  # noqa: E731
        self.value = 0
        self.stop = threading.Event()  # the sender's, and the slot's: no reopening after it
        self.slot = Slot(self.rec, cast(DriverFactory, factory), 0, self.stop)
        give_up = threading.Timer(60.0, self.stop.set)  # a slot retries opening until stopped
        give_up.start()
        try:
            assert self.slot.open(), self.slot.open_errors
        finally:
            give_up.cancel()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def send(self) -> None:
        mops = [["send", 0, self.value]]
        self.value += 1
        c = self.slot.record("send", mops, lambda d: d.execute("send", mops))
        self.tracker.observe(c.value)

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.send()

    def close(self) -> None:
        """Stop sending and close the client (its worker process exits); idempotent."""
        self.stop.set()
        if self.thread.ident is not None:
            self.thread.join(60)
        self.slot.close()

    def finish(self) -> dict[str, Any]:
        """Stop sending, read the partition back, check the history."""
        self.close()
        assert not self.thread.is_alive(), "a send did not complete within 60 s"
        dcfg = DriverConfig(
            bootstrap=self.bootstrap, keys=self.keys, group_id=f"{self.hist.stem}-d", poll_ms=500
        )
        dres = drain(
            self.rec,
            lambda p: ConfluentDriver(dcfg, p, -1, produce=False),
            self.tracker.targets([0]),
            60.0,
        )
        self.writer.close()
        assert dres["caught_up"], dres
        return check_file(self.hist, CheckOptions(sub_via="assign"))

    def longest_ok_send_s(self) -> float:
        """The longest acknowledged send: one that waited out the pause took >= 1 request
        timeout, so the client gave up on a request at least once."""
        invoked: dict[Any, int] = {}
        longest = 0.0
        for o in read_history(self.hist):
            if o.f != "send":
                continue
            if o.type == "invoke":
                invoked[o.process] = o.time
            elif o.type == "ok":
                longest = max(longest, (o.time - invoked[o.process]) / 1e9)
        return longest


@pytest.mark.parametrize("driver", DRIVERS)
def test_forced_resend_is_a_duplicate_unless_idempotent(
    driver: str, healed_local_cluster: Any, tmp_path: Path
) -> None:
    cluster = healed_local_cluster
    stamp = time.time_ns()
    topics = {idem: f"ktrial-dup-{driver}-{'idem' if idem else 'plain'}-{stamp}" for idem in (0, 1)}
    cluster.create_topics({t: 1 for t in topics.values()}, replication_factor=3)
    follower = bystander(cluster, list(topics.values()))
    with ExitStack() as stack:
        producers = {}
        for i, t in topics.items():
            hist = tmp_path / f"history-{i}.jsonl"
            producers[i] = Producer(driver, cluster.bootstrap_servers, t, bool(i), hist)
            stack.callback(producers[i].writer.close)
            stack.callback(producers[i].close)
        plain, idem = producers[0], producers[1]
        for p in (plain, idem):
            for _ in range(20):
                p.send()
            p.thread.start()
        try:
            follower.pause()
            time.sleep(PAUSE_S)
        finally:
            follower.resume()
        time.sleep(3.0)
        res_plain = plain.finish()
        res_idem = idem.finish()

    # Both producers met the same condition: a send that waited out the pause, i.e.
    # whose produce request timed out and was sent again.
    for name, p in (("non-idempotent", plain), ("idempotent", idem)):
        waited = p.longest_ok_send_s()
        assert waited >= 2 * REQUEST_TIMEOUT_MS / 1000, (
            f"{driver}: no {name} send waited out the paused follower (longest {waited:.2f} s):"
            " the pause forced no resend"
        )
    # The non-idempotent producer's resends are duplicates, and the checker says so.
    assert res_plain["valid"] is False, res_plain["anomalies"]
    assert "duplicate" in res_plain["bad_error_types"], res_plain["anomalies"]
    dup = res_plain["anomalies"]["duplicate"]
    assert dup["count"] >= 1
    ex = dup["examples"][0]
    assert ex["key"] == "0" and len(ex["offsets"]) >= 2, ex
    # The idempotent control: the same resends, dropped by the broker.
    assert "duplicate" not in res_idem["anomalies"], res_idem["anomalies"]["duplicate"]
    assert res_idem["valid"] is True, res_idem["anomalies"]
    print(
        f"{driver}: {dup['count']} duplicated value(s) without idempotence (e.g. value"
        f" {ex.get('value')} at offsets {ex['offsets']}), none with it"
    )
