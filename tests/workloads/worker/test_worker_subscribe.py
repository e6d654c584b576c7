"""Subscribe mode and the copy workload on a worker driver (workloads/worker/driver.py,
workloads/copy.py).

The fake worker (fake_worker.py) plays the group: `subscribe` assigns every partition of
the topics and says so in a rebalance event, a scripted fetch revokes them. These tests
pin the messages the adapter sends (docs/drivers.md, "Subscribe mode") and what it makes
of the events: the keys it may seek, the completion's rebalance_log, and no offsets
committed for a key the group took away during the transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ktrial.workloads.copy import CopyOptions, CopyWorkload
from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.worker import WorkerConfig, WorkerDriver
from ktrial.workloads.worker.driver import revoked_in_op

from .test_worker_driver import FAKE, config, names, requests

# one topic per key, as the queue lays keys out in subscribe mode (one partition each)
KEYS = KeyMap({k: TopicPartition(f"t{k}", 0) for k in range(3)})


@pytest.fixture(autouse=True)
def one_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PARTITIONS", "1")


def sub_driver(**kw: Any) -> WorkerDriver:
    return WorkerDriver(config(keys=KEYS, sub_via="subscribe", **kw), 7, 2, program=FAKE)


def test_open_names_the_group_only_for_a_subscribing_consumer(calls: Path) -> None:
    sub_driver().close()
    WorkerDriver(config(keys=KEYS), 8, 2, program=FAKE).close()  # assign mode
    WorkerDriver(config(keys=KEYS, sub_via="subscribe"), 9, 2, program=FAKE, consume=False).close()
    opens = [r for r in requests(calls) if r["call"] == "open"]
    assert [o["group"] for o in opens] == ["g", "", ""]
    assert opens[0]["settings"]["session.timeout.ms"] == 6000


def test_subscribe_sends_the_keys_topics_and_learns_the_assignment(calls: Path) -> None:
    d = sub_driver()
    c = d.assign([2, 0])
    assert (c.type, c.value) == ("ok", [0, 2])
    sub = next(r for r in requests(calls) if r["call"] == "subscribe")
    assert sub["topics"] == ["t0", "t2"]
    assert d._current_keys() == [0, 2]  # from the reply's rebalance event
    assert "assign" not in names(calls)
    # the next op that reads reports the assignment (the checker forgets those keys)
    assert d.execute("txn", [["send", 1, 1]]).extra.get("rebalance_log") is None
    c = d.execute("poll", [["poll"]])
    assert c.extra["rebalance_log"] == [{"type": "assigned", "keys": [0, 2]}]
    assert "rebalance_log" not in d.execute("poll", [["poll"]]).extra  # reported once
    d.close()


def test_a_poll_commits_progress_for_the_group_without_transactions(calls: Path) -> None:
    d = sub_driver()
    d.execute("send", [["send", 0, 5], ["send", 0, 6]])
    d.assign([0])
    c = d.execute("poll", [["poll"]])
    assert (c.type, c.value) == ("ok", [["poll", {"0": [[0, 5], [1, 6]]}]])
    commit = next(r for r in requests(calls) if r["call"] == "commit_offsets")
    assert commit["offsets"] == [{"topic": "t0", "partition": 0, "offset": 2}]  # next to read
    d.close()


def test_a_transaction_commits_its_offsets_through_the_transaction(calls: Path) -> None:
    d = sub_driver(txn=True)
    d.execute("txn", [["send", 1, 3]])
    d.assign([1])
    c = d.execute("txn", [["poll"], ["send", 2, 4]])
    assert c.type == "ok", c
    assert "commit_offsets" not in names(calls)  # never outside the transaction
    offsets = [r for r in requests(calls) if r["call"] == "send_offsets"][-1]
    assert offsets["group"] == "g"
    assert offsets["offsets"] == [{"topic": "t1", "partition": 0, "offset": 1}]
    d.close()


def test_a_key_revoked_during_the_transaction_aborts_it(
    calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group took key 1 away after the txn read it: its offset must not be
    committed (another member now reads it), so the transaction aborts: fail."""
    monkeypatch.setenv("FAKE_REVOKE_ON_FETCH", "2")
    d = sub_driver(txn=True)
    d.execute("txn", [["send", 1, 3]])
    d.assign([1])
    c = d.execute("txn", [["poll"], ["send", 2, 4], ["poll"]])
    assert (c.type, c.retire) == ("fail", False), c
    assert c.error["name"] == "RevokedInTransaction" and "[1]" in c.error["message"]
    # the assignment the subscribe reply carried, then the revocation
    assert c.extra["rebalance_log"] == [
        {"type": "assigned", "keys": [1]},
        {"type": "revoked", "keys": [1]},
    ]
    seq = names(calls)
    assert "abort" in seq and "commit" not in seq[seq.index("begin", 2) :]
    assert [r for r in requests(calls) if r["call"] == "send_offsets"] == []
    assert d._current_keys() == []  # nothing to rewind: the key is no longer ours
    d.close()


def test_the_copy_step_polls_outside_and_commits_inside_the_transaction(calls: Path) -> None:
    d = sub_driver(txn=True)
    d.execute("txn", [["send", 0, 5]])
    d.assign([0])
    c = d.copy_txn({0: 2}, 100)
    assert c.type == "ok", c
    assert c.value == [["poll", {"0": [[0, 5]]}], ["send", 2, [0, 105]]]
    seq = names(calls)
    step = seq[seq.index("subscribe") + 1 :]
    assert step == ["fetch", "begin", "produce", "flush", "send_offsets", "commit"]
    d.close()


def test_revoked_in_op_is_the_read_keys_a_revocation_took() -> None:
    log = [
        {"type": "assigned", "keys": [0, 1]},
        {"type": "revoked", "keys": [1, 2]},
    ]
    assert revoked_in_op(log, KEYS, {("t1", 0): 4, ("t0", 0): 1, ("other", 0): 3}) == [1]
    assert revoked_in_op(log, KEYS, {("t0", 0): 1}) == []
    assert revoked_in_op([], KEYS, {("t1", 0): 4}) == []


class Cluster:
    bootstrap_servers = "b:1"
    security = None

    def create_topics(self, topics: object, replication_factor: int) -> None:
        pass


def test_copy_opens_its_producers_and_copiers_through_the_worker(
    calls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prog = tmp_path / "franz"
    prog.write_text(f"#!/bin/sh\nexec {FAKE[0]} {FAKE[1]}\n")
    prog.chmod(0o755)
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(prog))
    wl = CopyWorkload(CopyOptions(driver="franz", run_id="r1"), 1)
    meta = wl.setup(Cluster())  # type: ignore[arg-type]
    assert meta["driver"] == "franz" and meta["driver_version"].startswith("franz-go v")
    assert meta["producer_config"]["copier"]["metadata.min.age.ms"] == 100  # franz's names
    assert meta["consumer_config"]["session.timeout.ms"] == 6000  # copiers are members
    # the drain's progress check reads the group's offsets with librdkafka's settings
    assert not isinstance(wl.progress_cfg, WorkerConfig)
    assert wl.progress_cfg is not None
    assert "fetch.wait.max.ms" in wl.progress_cfg.consumer_config()
    copier = wl._open_copier(5, 0)
    producer = wl._open_producer(6, 1000)
    assert isinstance(copier, WorkerDriver) and isinstance(producer, WorkerDriver)
    copier.close()
    producer.close()
    opens = [r for r in requests(calls) if r["call"] == "open"]
    assert [(o["group"], o["txn_id"], o["consumer"]) for o in opens] == [
        ("ktrial-r1-copy", "ktrial-r1-copier-w0", True),
        ("", "", False),
    ]
    res = wl.results()
    assert res is not None and "open" in res["clients"]["franz"]["call_ms"]


def test_copy_on_confluent_keeps_its_own_progress_settings() -> None:
    wl = CopyWorkload(CopyOptions(run_id="r2", consumer_config={"fetch.wait.max.ms": 50}), 1)
    meta = wl.setup(Cluster())  # type: ignore[arg-type]
    assert meta["driver"] == "confluent" and "librdkafka" in meta["driver_version"]
    assert wl.progress_cfg is wl.cfg and wl.results() is None
