"""The transactional driver's abort policy, with a scripted producer in place of librdkafka.

A transaction that fails with a send unacknowledged must end with the process
retired (after the abort): librdkafka keeps the producer epoch across an abort and
may reuse that send's sequence number, so the broker can acknowledge the next record
as a duplicate of the unacknowledged one and drop it — a lost write CI caught and
`ktrial trace` showed (DriverConfig.retire_after_unsure_abort). The real-broker side
of the driver is covered by tests/integration/test_workloads_drivers.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from ktrial.workloads.confluent import ConfluentDriver, DriverConfig
from ktrial.workloads.driver import Completion, KeyMap, TopicPartition
from ktrial.workloads.queue import QueueOptions, QueueWorkload
from ktrial.workloads.rewind import ReadPositions


class _Msg:
    def __init__(self, offset: int | None) -> None:
        self._offset = offset

    def offset(self) -> int | None:  # confluent-kafka: None when librdkafka has no offset
        return self._offset


class ScriptedProducer:
    """Acknowledges sends on flush only when told to; records the transaction calls."""

    def __init__(
        self, ack: bool, blind: tuple[int, ...] = (), no_offset: int | None = None
    ) -> None:
        self.ack = ack
        self.blind = blind  # sends (by order) reported delivered without an offset
        self.no_offset = no_offset  # what such a report carries as its offset
        self.produced = 0
        self.pending: list[Any] = []
        self.calls: list[str] = []
        self.next_offset = 0

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, topic: str, value: bytes, partition: int, on_delivery: Any) -> None:
        self.pending.append(on_delivery)

    def flush(self, timeout: float = 0) -> int:
        if self.ack:
            for cb in self.pending:
                if self.produced in self.blind:
                    cb(None, _Msg(self.no_offset))  # "implicitly acked by subsequent batch success"
                else:
                    cb(None, _Msg(self.next_offset))
                    self.next_offset += 1
                self.produced += 1
            self.pending = []
        return len(self.pending)

    def commit_transaction(self, timeout: float = 0) -> None:
        self.calls.append("commit")

    def abort_transaction(self, timeout: float = 0) -> None:
        self.calls.append("abort")
        self.pending = []

    def purge(self, *args: Any) -> None:
        self.pending = []


def _driver(producer: ScriptedProducer, **cfg: Any) -> ConfluentDriver:
    keys = KeyMap({0: TopicPartition("t", 0)})
    config = DriverConfig(
        bootstrap="unused:9092", keys=keys, group_id="g", txn=True, op_timeout_s=0.2, **cfg
    )
    d = ConfluentDriver.__new__(ConfluentDriver)  # no librdkafka client: the producer is scripted
    d.cfg, d.process, d.stop = config, 7, None
    d._producer_stuck = False
    d.producer = producer  # type: ignore[assignment]
    d.consumer = None
    d.reads = ReadPositions()
    return d


def _txn(d: ConfluentDriver, abort: bool = False) -> Completion:
    return d.execute("txn", [["send", 0, 1], ["send", 0, 2]], abort=abort)


def test_unacknowledged_send_aborts_then_retires() -> None:
    p = ScriptedProducer(ack=False)
    c = _txn(_driver(p))
    assert c.type == "fail" and c.error["name"] == "FlushTimeout", c
    assert p.calls == ["begin", "abort"]  # aborted (readers are not held up), never committed
    assert c.retire is True  # ... and the producer is not reused
    assert c.value == [["send", 0, 1], ["send", 0, 2]]  # no offsets: fate unknown


def test_the_safeguard_can_be_turned_off_to_reproduce_the_client_bug() -> None:
    p = ScriptedProducer(ack=False)
    c = _txn(_driver(p, retire_after_unsure_abort=False))
    assert c.type == "fail" and p.calls == ["begin", "abort"]
    assert c.retire is False


@pytest.mark.parametrize("flag", [True, False])
def test_deliberate_abort_of_acknowledged_sends_keeps_the_producer(flag: bool) -> None:
    p = ScriptedProducer(ack=True)
    c = _txn(_driver(p, retire_after_unsure_abort=flag), abort=True)
    assert c.type == "fail" and c.error == {"name": "DeliberateAbort"}
    assert c.value == [["send", 0, [0, 1]], ["send", 0, [1, 2]]]
    assert p.calls == ["begin", "abort"] and c.retire is False


def test_acknowledged_transaction_commits_and_keeps_the_producer() -> None:
    p = ScriptedProducer(ack=True)
    c = _txn(_driver(p))
    assert c.type == "ok" and p.calls == ["begin", "commit"] and not c.retire


@pytest.mark.parametrize("no_offset", [None, -1])  # confluent-kafka's None, a worker's -1
def test_send_delivered_without_offset_aborts_then_retires(no_offset: int | None) -> None:
    # librdkafka inferred the first send's delivery from the second's success; the broker
    # never stored it (CI: a committed write lost). The transaction must not commit.
    p = ScriptedProducer(ack=True, blind=(0,), no_offset=no_offset)
    c = _txn(_driver(p))
    assert c.type == "fail" and c.error["name"] == "DeliveredWithoutOffset", c
    assert "value 1 to key 0" in c.error["message"]
    assert p.calls == ["begin", "abort"] and c.retire is True
    first = ["send", 0, 1] if no_offset is None else ["send", 0, [None, 1]]
    assert c.value == [first, ["send", 0, [0, 2]]]


def test_committing_sends_without_offsets_can_be_turned_back_on() -> None:
    p = ScriptedProducer(ack=True, blind=(0,))
    c = _txn(_driver(p, abort_unknown_offset=False))
    assert c.type == "ok" and p.calls == ["begin", "commit"]


@pytest.mark.parametrize("no_offset", [None, -1])  # confluent-kafka's None, a worker's -1
def test_plain_send_delivered_without_offset_is_unknown_not_ok(no_offset: int | None) -> None:
    p = ScriptedProducer(ack=True, blind=(1,), no_offset=no_offset)
    d = _driver(p)
    d.cfg = DriverConfig(bootstrap="unused:9092", keys=d.cfg.keys, group_id="g", op_timeout_s=0.2)
    c = d.execute("send", [["send", 0, 1], ["send", 0, 2]])
    assert c.type == "info" and c.error["name"] == "DeliveredWithoutOffset", c
    second = ["send", 0, 2] if no_offset is None else ["send", 0, [None, 2]]
    assert c.value == [["send", 0, [0, 1]], second]


class _Cluster:
    """Just enough of a cluster for QueueWorkload.setup (no broker is contacted)."""

    bootstrap_servers = "unused:9092"

    def create_topics(self, topics: dict[str, int], replication_factor: int = 3) -> None:
        pass


def test_option_defaults_on_reaches_the_driver_and_is_recorded() -> None:
    assert QueueWorkload(QueueOptions(txn=True), 1).opts.retire_after_unsure_abort is True
    wl = QueueWorkload(QueueOptions.from_dict({"txn": True, "retire_after_unsure_abort": False}), 1)
    meta = wl.setup(_Cluster())  # type: ignore[arg-type]
    assert wl.cfg is not None and wl.cfg.retire_after_unsure_abort is False
    assert meta["workload_options"]["retire_after_unsure_abort"] is False  # in test.json
    assert QueueWorkload(QueueOptions(txn=True), 1).opts.abort_unknown_offset is True
    wl = QueueWorkload(QueueOptions.from_dict({"txn": True, "abort_unknown_offset": False}), 1)
    meta = wl.setup(_Cluster())  # type: ignore[arg-type]
    assert wl.cfg is not None and wl.cfg.abort_unknown_offset is False
    assert meta["workload_options"]["abort_unknown_offset"] is False
