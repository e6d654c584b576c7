"""Proof the pipeline sees what it claims to check: a forced resend becomes a reported duplicate.

How the resend is forced, honestly: a non-idempotent producer (acks=all, retries on,
request.timeout.ms 1 s) writes to a partition while a *follower* of it is paused
(SIGSTOP). The leader appends each produce request at once but cannot answer
before the paused follower catches up (acks=all, the follower is still in the ISR),
so the client times the request out and resends it. When the follower resumes,
both copies commit: one value at two offsets. The same procedure with
enable.idempotence=true must not duplicate (the broker drops the resend by its
sequence number) — the control that shows the duplicate is the producer's fault,
not the checker's.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from ktrial.checker import CheckOptions, check_file
from ktrial.histories.jsonl import HistoryWriter
from ktrial.histories.recorder import Recorder
from ktrial.workloads.confluent import ConfluentDriver, DriverConfig
from ktrial.workloads.drain import drain
from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.slot import Slot
from ktrial.workloads.tracker import OffsetTracker

pytestmark = pytest.mark.integration


def leader_and_follower(cluster: Any, topic: str) -> tuple[Any, Any]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    md = admin.list_topics(topic, timeout=20).topics[topic].partitions[0]
    by_id = {n.node_id: n for n in cluster.nodes}
    follower = next(r for r in md.replicas if r != md.leader)
    return by_id[md.leader], by_id[follower]


def forced_resends(cluster: Any, tmp_path: Path, idempotence: bool) -> dict[str, Any]:
    topic = f"ktrial-dup-{'idem' if idempotence else 'plain'}-{int(time.time())}"
    cluster.create_topics({topic: 1}, replication_factor=3)
    _leader, follower = leader_and_follower(cluster, topic)
    keys = KeyMap({0: TopicPartition(topic, 0)})
    cfg = DriverConfig(
        bootstrap=cluster.bootstrap_servers,
        keys=keys,
        group_id=f"{topic}-g",
        idempotence=idempotence,
        op_timeout_s=30.0,
        producer_overrides={
            "request.timeout.ms": 1000,
            "message.timeout.ms": 25000,
            "retries": 1000,
            "max.in.flight.requests.per.connection": 1,
        },
    )
    hist = tmp_path / f"history-{idempotence}.jsonl"
    writer = HistoryWriter(hist)
    rec = Recorder(writer)
    tracker = OffsetTracker()
    stop = threading.Event()
    slot = Slot(rec, lambda p, s: ConfluentDriver(cfg, p, s, consume=False), 0, stop)
    assert slot.open()
    value = 0

    def send() -> None:
        nonlocal value
        mops = [["send", 0, value]]
        value += 1
        c = slot.record("send", mops, lambda d: d.execute("send", mops))
        tracker.observe(c.value)

    sender_stop = threading.Event()

    def sender() -> None:
        while not sender_stop.is_set():
            send()

    for _ in range(20):
        send()
    t = threading.Thread(target=sender, daemon=True)
    t.start()
    try:
        follower.pause()
        time.sleep(4.0)
    finally:
        follower.resume()
    time.sleep(3.0)
    sender_stop.set()
    t.join()
    slot.close()
    dcfg = DriverConfig(
        bootstrap=cluster.bootstrap_servers, keys=keys, group_id=f"{topic}-d", poll_ms=500
    )
    dres = drain(
        rec, lambda p: ConfluentDriver(dcfg, p, -1, produce=False), tracker.targets([0]), 60.0
    )
    writer.close()
    assert dres["caught_up"], dres
    return check_file(hist, CheckOptions(sub_via="assign"))


def test_non_idempotent_resend_is_reported_as_duplicate(
    healed_local_cluster: Any, tmp_path: Path
) -> None:
    res = forced_resends(healed_local_cluster, tmp_path, idempotence=False)
    assert res["valid"] is False, res["anomalies"]
    assert "duplicate" in res["bad_error_types"], res["anomalies"]
    dup = res["anomalies"]["duplicate"]
    assert dup["count"] >= 1
    ex = dup["examples"][0]
    assert ex["key"] == "0" and len(ex["offsets"]) >= 2, ex


def test_idempotent_producer_does_not_duplicate(healed_local_cluster: Any, tmp_path: Path) -> None:
    res = forced_resends(healed_local_cluster, tmp_path, idempotence=True)
    assert "duplicate" not in res["anomalies"], res["anomalies"]["duplicate"]
    assert res["valid"] is True, res["anomalies"]
