"""Each composite fault against real brokers reaches the state it is meant to reach, as the
admin API (or Toxiproxy) reports it — not only that its commands ran.

partition-then-kill needs the `unsafe` profile (followers leave the ISR after 3 s, an
out-of-sync replica may be elected). Every test here runs on one `unsafe` cluster of the
module's own (the others do not depend on the profile), healed after each test, with
faster failure detection (a broker is fenced 5 s after its last heartbeat instead of
9 s): an election after a kill and a leader's move off an isolated node come sooner,
which is most of what these tests wait for. One cluster start for the module instead of
one for partition-then-kill alone.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from ktrial.clusters.local import LocalCluster
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.nemesis import ClientProxies, Nemesis, plan_proxies
from ktrial.nemesis.iptables import COMMENT_PREFIX, tagged_rules

from .conftest import local_cluster_skip_reason

pytestmark = pytest.mark.integration

# a broker is fenced (its leaderships move) this long after its last heartbeat
FAST_FENCING = {"broker.session.timeout.ms": "5000", "broker.heartbeat.interval.ms": "1000"}


@pytest.fixture(scope="module")
def unsafe_cluster() -> Iterator[LocalCluster]:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = LocalCluster(nodes=3, profile="unsafe", broker_config=FAST_FENCING)
    with cluster:
        yield cluster


@pytest.fixture
def cluster(unsafe_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The module's cluster, healed after the test (nodes started, rules flushed)."""
    yield unsafe_cluster
    unsafe_cluster.heal()


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[Recorder, Path]]:
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    yield Recorder(writer), path
    writer.close()


def ops_of(path: Path) -> list[Any]:
    return [op for op in read_history(path) if op.process == "nemesis"]


def by_f(ops: list[Any], f: str) -> Any:
    return next(op for op in ops if op.f == f)


class TxnLoop:
    """A transactional producer committing small transactions in a loop, recording each as
    a `txn` invoke/completion (what the nemesis reads to see one in flight)."""

    def __init__(self, bootstrap: str, topic: str, txn_id: str, recorder: Recorder) -> None:
        self.p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": txn_id,
                "transaction.timeout.ms": 10000,
            }
        )
        self.p.init_transactions(30)
        self.topic, self.rec = topic, recorder
        self.stop = threading.Event()
        self.commits = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            op = self.rec.invoke(0, "txn", [["send", "k", self.commits]])
            try:
                self.p.begin_transaction()
                self.p.produce(self.topic, b"x")
                time.sleep(0.05)  # a transaction stays open a little while
                self.p.commit_transaction(5)
                self.commits += 1
                self.rec.complete(op, "ok", [["send", "k", [None, self.commits]]])
            except Exception as e:
                self.rec.complete(op, "info", None, error=str(e))
                return

    def __enter__(self) -> TxnLoop:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(15)
        del self.p  # no client left reconnecting after the test


class ProduceLoop:
    """Keep writing to a topic (a follower falls out of the ISR only of a partition that
    is written to)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.topic = topic
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            with contextlib.suppress(BufferError):  # the queue is full: poll, then retry
                self.p.produce(self.topic, str(i).encode())
            self.p.poll(0.02)
            i += 1

    def __enter__(self) -> ProduceLoop:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.p.flush(10)
        del self.p


def test_partition_then_kill_reaches_an_isr_of_one_then_an_unclean_leader(
    cluster: LocalCluster, history: tuple[Recorder, Path]
) -> None:
    cluster.create_topics({"ptk": 1})
    rec, path = history
    nem = Nemesis(cluster, rec, rng=random.Random(2), partitions=["ptk"])
    try:
        with ProduceLoop(cluster.bootstrap_servers, "ptk"):
            fault = nem.start("partition-then-kill", hold=1, isr_wait=20, elect_wait=30)
        leader = fault.info["leader"]
        assert not cluster.node(leader).is_running()  # the last in-sync replica died
        assert tagged_rules(cluster.node(leader), COMMENT_PREFIX)
        nem.stop(fault)
        assert cluster.node(leader).is_running()
        assert tagged_rules(cluster.node(leader), COMMENT_PREFIX) == []
    finally:
        nem.heal_all()
    ops = ops_of(path)
    assert [op.f for op in ops] == [
        "start-partition-then-kill",
        "cut-replication",
        "isr-shrunk",
        "kill-last-isr",
        "leader-elected",
        "stop-partition-then-kill",
    ]
    assert by_f(ops, "start-partition-then-kill").value["before"]["isr"] != [leader]
    assert by_f(ops, "isr-shrunk").value["seen"]["isr"] == [leader]  # admin: ISR of one
    elected = by_f(ops, "leader-elected").value
    assert elected["seen"]["leader"] != leader and elected["unclean"] is True


def test_kill_during_commit_kills_the_coordinator_with_a_transaction_in_flight(
    cluster: LocalCluster, history: tuple[Recorder, Path]
) -> None:
    cluster.create_topics({"kdc": 1})
    rec, path = history
    txn_id = "ktrial-itest-kdc"
    nem = Nemesis(
        cluster, rec, rng=random.Random(3), partitions=["kdc"], transactional_ids=[txn_id]
    )
    with TxnLoop(cluster.bootstrap_servers, "kdc", txn_id, rec) as loop:
        deadline = time.monotonic() + 30  # the first commit waits for the coordinator
        while loop.commits == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert loop.commits > 0
        # the coordinator as the admin API names it, independently of the fault
        states = nem.ctx.roles.states()  # type: ignore[union-attr]
        from ktrial.nemesis.roles import coordinator_partition

        p = coordinator_partition(txn_id, len(states["__transaction_state"]))
        leader = f"n{states['__transaction_state'][p].leader}"
        # its followers cut off its replication listener for 1 s first (the window of
        # bench/findings/2026-12-02-ssh-torn-txn): real iptables rules, gone at the kill
        fault = nem.start("kill-during-commit", commit_wait=5, cut_replication=1)
        killed = fault.info["nodes"]
        down = not cluster.node(killed[0]).is_running()
        rules_after_kill = tagged_rules(cluster.node(killed[0]), COMMENT_PREFIX)
        nem.stop(fault)
    nem.heal_all()
    assert killed == [leader] and down and rules_after_kill == []
    ops = ops_of(path)
    assert [op.f for op in ops] == [
        "start-kill-during-commit",
        "cut-coordinator-replication",
        "kill-coordinator",
        "heal-replication",
        "stop-kill-during-commit",
    ]
    cut = by_f(ops, "cut-coordinator-replication").value
    assert cut["node"] == leader and cut["rules"] == 2 and cut["txn_in_flight"] >= 1
    assert by_f(ops, "heal-replication").value["rules_removed"] == 2
    kill = by_f(ops, "kill-coordinator").value
    assert kill["txn_in_flight"] >= 1 and kill["waited_s"] >= 1.0
    start = by_f(ops, "start-kill-during-commit").value
    assert start["partition"] == f"__transaction_state/{p}" and start["node"] == leader


def test_isolate_leader_then_restart_the_stale_replica(
    cluster: LocalCluster, history: tuple[Recorder, Path]
) -> None:
    cluster.create_topics({"ilr": 1})
    rec, path = history
    nem = Nemesis(cluster, rec, rng=random.Random(4), partitions=["ilr"])
    try:
        # fenced 5 s after its last heartbeat (FAST_FENCING): the leader moves well within 12 s
        # (7 s of margin for a loaded CI machine)
        fault = nem.start("isolate-leader-restart-stale", isolate=12, wait=60)
        nem.stop(fault)
    finally:
        nem.heal_all()
    ops = ops_of(path)
    old = by_f(ops, "start-isolate-leader-restart-stale").value["leader"]
    moved = by_f(ops, "leader-moved").value["seen"]  # the admin API: a new leader ...
    assert moved["leader"] != old and old not in moved["isr"]  # ... and the old one stale
    # every replica out of the ISR at the heal is stale: the old leader always, and on a
    # loaded machine sometimes a follower that fell behind too; each one is restarted
    stale = by_f(ops, "heal-isolation").value["stale"]
    assert old in stale
    assert sorted(op.value["node"] for op in ops if op.f == "restart-stale") == sorted(stale)
    assert all(tagged_rules(n, COMMENT_PREFIX) == [] for n in cluster.nodes)


def test_asymmetric_link_slows_a_leader_but_not_the_coordinator(
    cluster: LocalCluster, history: tuple[Recorder, Path], tmp_path: Path
) -> None:
    cluster.create_topics({"asym": 3})
    txn_id = "ktrial-itest-asym"
    Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id}
    ).init_transactions(30)
    plan = plan_proxies([n.name for n in cluster.nodes])
    rec, path = history
    with ClientProxies(plan, log_path=tmp_path / "toxiproxy.log").attach(cluster) as proxies:
        nem = Nemesis(
            cluster,
            rec,
            rng=random.Random(5),
            partitions=["asym"],
            proxies=proxies,
            transactional_ids=[txn_id],
        )
        try:
            fault = nem.start("asymmetric-link", attributes={"latency": 1500})
            slow, fast = fault.info["nodes"], fault.info["fast"]
            on = {n.name: [t["name"] for t in proxies.api().toxics(n.name)] for n in cluster.nodes}
            nem.stop(fault)
            off = {n.name: proxies.api().toxics(n.name) for n in cluster.nodes}
        finally:
            nem.heal_all()
    assert fast and set(slow).isdisjoint(fast)  # the leader slowed is not the coordinator
    assert on == {n.name: ([fault.id] if n.name in slow else []) for n in cluster.nodes}
    assert all(v == [] for v in off.values())
    start = by_f(ops_of(path), "start-asymmetric-link").value
    assert start["role"]["coordinators"][txn_id]["node"] == fast[0]


def test_rolling_isr_restart_brings_each_replica_back_in_sync(
    cluster: LocalCluster, history: tuple[Recorder, Path]
) -> None:
    cluster.create_topics({"rir": 1}, replication_factor=2)
    rec, path = history
    nem = Nemesis(cluster, rec, rng=random.Random(6), partitions=["rir"])
    try:
        fault = nem.start("rolling-isr-restart", settle=0, wait=60, how="kill")
        nem.stop(fault)
    finally:
        nem.heal_all()
    ops = ops_of(path)
    before = by_f(ops, "start-rolling-isr-restart").value["before"]
    restarted = [op.value for op in ops if op.f == "replica-restarted"]
    assert [r["node"] for r in restarted] == [
        *[n for n in before["isr"] if n != before["leader"]],
        before["leader"],
    ]
    assert all(r["listening"] and r["in_sync_again"] for r in restarted)
