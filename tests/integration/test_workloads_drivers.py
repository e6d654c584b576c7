"""The confluent driver and the drain against real brokers: real errors, real reads.

Error classification meets the errors the cluster really returns (unknown
partition, a fenced transactional producer, a leader that stops answering), and
the drain is checked on its own: it reads every offset back, and names the keys
it could not catch up on.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.workloads.confluent import ConfluentDriver, DriverConfig
from ktrial.workloads.drain import drain
from ktrial.workloads.driver import KeyMap, TopicPartition

pytestmark = pytest.mark.integration


def fresh_topic(cluster: Any, name: str, partitions: int = 2) -> tuple[str, KeyMap]:
    topic = f"ktrial-drv-{name}-{int(time.time() * 1000)}"
    cluster.create_topics({topic: partitions}, replication_factor=3)
    return topic, KeyMap({k: TopicPartition(topic, k) for k in range(partitions)})


def cfg_for(cluster: Any, keys: KeyMap, **kw: Any) -> DriverConfig:
    return DriverConfig(
        bootstrap=cluster.bootstrap_servers, keys=keys, group_id=f"g-{time.time_ns()}", **kw
    )


def test_send_to_a_partition_that_does_not_exist_is_fail(local_cluster: Any) -> None:
    topic, _keys = fresh_topic(local_cluster, "nopart")
    bad = KeyMap({0: TopicPartition(topic, 0), 7: TopicPartition(topic, 99)})
    d = ConfluentDriver(cfg_for(local_cluster, bad), 0, 0, consume=False)
    try:
        ok = d.execute("send", [["send", 0, 1]])
        assert ok.type == "ok" and ok.value[0][2][0] == 0  # offset from the delivery report
        c = d.execute("send", [["send", 7, 2]])
        assert c.type == "fail", c
        assert c.error["name"] in ("_UNKNOWN_PARTITION", "UNKNOWN_TOPIC_OR_PART"), c.error
        assert c.value == [["send", 7, 2]]  # no offset: never written
    finally:
        d.close()


def test_fenced_transactional_producer_is_retired(local_cluster: Any) -> None:
    _topic, keys = fresh_topic(local_cluster, "fence")
    cfg = cfg_for(local_cluster, keys, txn=True)
    old = ConfluentDriver(cfg, 0, 5)
    new = None
    try:
        assert old.execute("txn", [["send", 0, 1]]).type == "ok"
        new = ConfluentDriver(cfg, 1, 5)  # same slot -> same transactional.id: fences `old`
        c = old.execute("txn", [["send", 0, 2], ["poll"]])
        assert c.retire, c
        assert c.type in ("info", "fail"), c
        assert "FENCED" in str(c.error).upper() or "EPOCH" in str(c.error).upper(), c.error
        assert new.execute("txn", [["send", 0, 3]]).type == "ok"
    finally:
        old.close(abrupt=True)
        if new is not None:
            new.close()


def test_deliberate_abort_is_fail_and_rewinds_the_consumer(local_cluster: Any) -> None:
    _topic, keys = fresh_topic(local_cluster, "abort", partitions=1)
    cfg = cfg_for(local_cluster, keys, txn=True, poll_ms=2000)
    w = ConfluentDriver(cfg, 0, 11, consume=False)
    r = ConfluentDriver(cfg, 1, 12)
    try:
        for v in range(5):
            assert w.execute("txn", [["send", 0, v]]).type == "ok"
        assert r.assign([0]).type == "ok"
        first = r.execute("txn", [["poll"], ["send", 0, 100]], abort=True)
        assert first.type == "fail" and first.error == {"name": "DeliberateAbort"}
        read = first.value[0][1]["0"]
        assert read and read[0] == [0, 0]
        assert isinstance(first.value[1][2], list)  # the aborted send was acknowledged
        again = r.execute("txn", [["poll"]])
        assert again.type == "ok"
        assert again.value[0][1]["0"][: len(read)] == read  # re-read from the same place
        assert 100 not in [v for _, v in again.value[0][1]["0"]]  # aborted: invisible
    finally:
        w.close()
        r.close()


def test_send_to_a_silent_leader_is_info(healed_local_cluster: Any) -> None:
    topic, keys = fresh_topic(healed_local_cluster, "silent", partitions=1)
    admin = AdminClient({"bootstrap.servers": healed_local_cluster.bootstrap_servers})
    leader_id = admin.list_topics(topic, timeout=20).topics[topic].partitions[0].leader
    leader = next(n for n in healed_local_cluster.nodes if n.node_id == leader_id)
    cfg = cfg_for(
        healed_local_cluster,
        keys,
        op_timeout_s=10.0,
        producer_overrides={"message.timeout.ms": 2000, "request.timeout.ms": 1000},
    )
    d = ConfluentDriver(cfg, 0, 0, consume=False)
    try:
        assert d.execute("send", [["send", 0, 1]]).type == "ok"
        leader.pause()
        try:
            c = d.execute("send", [["send", 0, 2]])
        finally:
            leader.resume()
        assert c.type == "info", c  # it may well have been appended: unknown
        assert not c.retire
        assert c.error["name"] in ("_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT"), c.error
    finally:
        d.close(abrupt=True)


def test_drain_reads_every_offset_and_names_lagging_keys(
    local_cluster: Any, tmp_path: Path
) -> None:
    topic, keys = fresh_topic(local_cluster, "drain", partitions=3)
    p = ck.Producer({"bootstrap.servers": local_cluster.bootstrap_servers, "acks": "all"})
    for i in range(300):
        p.produce(topic, str(i).encode(), partition=i % 2)  # key 2 stays empty
    assert p.flush(30) == 0
    cfg = cfg_for(local_cluster, keys, poll_ms=500, max_poll_records=50)
    hist = tmp_path / "h.jsonl"
    with HistoryWriter(hist) as w:
        rec = Recorder(w)
        res = drain(
            rec,
            lambda pr: ConfluentDriver(cfg, pr, -1, produce=False),
            {0: 150, 1: 150, 2: 0},
            60.0,
        )
        assert res["caught_up"] and res["lagging_keys"] == {}, res
        assert res["records"] == 300
        # A target beyond the end of key 1: reported, within the time limit.
        t0 = time.monotonic()
        res2 = drain(
            rec, lambda pr: ConfluentDriver(cfg, pr, -1, produce=False), {0: 150, 1: 151}, 5.0
        )
        assert time.monotonic() - t0 < 30
        assert not res2["caught_up"]
        assert res2["lagging_keys"] == {"1": {"position": 150, "target": 151}}
    ops = read_history(hist)
    assert ops[0].f == "assign" and ops[0].extra.get("seek_to_beginning") is True
    got = sorted(
        v
        for o in ops
        if o.type == "ok" and o.f == "poll"
        for m in o.value
        for recs in (m.records or {}).values()
        for _, v in recs
    )
    # The first drain read each record once; the second read them all again.
    assert sorted(set(got)) == list(range(300)) and len(got) == 600
