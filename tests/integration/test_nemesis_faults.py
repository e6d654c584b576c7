"""Each fault family against the real local cluster: the fault takes effect at the system
level, is recorded in the history, and its stop/heal leaves nothing behind."""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from ktrial.clusters.local import LocalCluster, LocalNode
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.nemesis import Nemesis
from ktrial.nemesis.cgroups import MemoryCgroup
from ktrial.nemesis.iptables import COMMENT_PREFIX, tagged_rules
from ktrial.nemesis.memory import balloon_pids
from ktrial.nemesis.process import process_state

pytestmark = pytest.mark.integration


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[Recorder, Path]]:
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    yield Recorder(writer), path
    writer.close()


@pytest.fixture
def nemesis(
    healed_local_cluster: LocalCluster, history: tuple[Recorder, Path]
) -> Iterator[Nemesis]:
    nem = Nemesis(healed_local_cluster, history[0], rng=random.Random(7))
    yield nem
    nem.heal_all()


def nemesis_fs(path: Path) -> list[str]:
    return [op.f for op in read_history(path) if op.process == "nemesis"]


def tcp_ok(node: LocalNode, ip: str, port: int = 9092, wait: float = 2.0) -> bool:
    """Can `node` open a TCP connection to ip:port (from inside its namespace)?"""
    cmd = ["timeout", str(wait), "bash", "-c", f"exec 3<>/dev/tcp/{ip}/{port}"]
    try:
        node.exec(cmd, timeout=wait + 5)
        return True
    except subprocess.CalledProcessError:
        return False


def host_tcp_ok(ip: str, port: int = 9092) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=2.0):
            return True
    except OSError:
        return False


def test_partition_isolates_one_node_and_heal_removes_its_rules(
    nemesis: Nemesis, healed_local_cluster: LocalCluster, history: tuple[Recorder, Path]
) -> None:
    n1, n2, n3 = healed_local_cluster.nodes
    assert tcp_ok(n1, n2.address) and tcp_ok(n2, n1.address)

    fault = nemesis.start("partition", ["n1"], shape="isolate")

    assert not tcp_ok(n1, n2.address) and not tcp_ok(n1, n3.address)
    assert not tcp_ok(n2, n1.address) and not tcp_ok(n3, n1.address)
    assert tcp_ok(n2, n3.address)  # the majority still talks
    assert host_tcp_ok(n1.address)  # clients on the host still reach the isolated node
    assert tagged_rules(n1, COMMENT_PREFIX)

    nemesis.stop(fault)

    for n in (n1, n2, n3):
        assert tagged_rules(n, COMMENT_PREFIX) == []
    assert tcp_ok(n1, n2.address) and tcp_ok(n3, n1.address)
    assert nemesis_fs(history[1]) == ["start-partition", "stop-partition"]
    start = next(op for op in read_history(history[1]) if op.f == "start-partition")
    assert start.value["grudge"]["n1"] == ["n2", "n3"]


def test_one_way_partition_is_asymmetric(
    nemesis: Nemesis, healed_local_cluster: LocalCluster
) -> None:
    n1, n2, _ = healed_local_cluster.nodes
    fault = nemesis.start("partition", ["n1"], shape="one-way", direction="in")
    try:
        # n1 drops what arrives from its peers, so no connection in either direction
        # completes, but the rules exist only on n1
        assert tagged_rules(n1, COMMENT_PREFIX)
        assert tagged_rules(n2, COMMENT_PREFIX) == []
        assert not tcp_ok(n2, n1.address)
    finally:
        nemesis.stop(fault)
    assert tagged_rules(n1, COMMENT_PREFIX) == []


def test_packet_loss_drops_some_connections_and_heals(
    nemesis: Nemesis, healed_local_cluster: LocalCluster
) -> None:
    n1, n2, _ = healed_local_cluster.nodes
    fault = nemesis.start("loss", ["n1"], probability=0.5)
    script = (
        f"for i in $(seq 30); do timeout 0.3 bash -c 'exec 3<>/dev/tcp/{n2.address}/9092' "
        "&& echo ok || echo fail; done"
    )
    out = n1.exec(["bash", "-c", script], timeout=60).split()
    rules = tagged_rules(n1, COMMENT_PREFIX)
    nemesis.stop(fault)
    assert rules and all("statistic" in r for r in rules)
    assert out.count("fail") > 0, "50% loss both ways should fail some of 30 connects"
    assert tagged_rules(n1, COMMENT_PREFIX) == [] and tagged_rules(n2, COMMENT_PREFIX) == []
    assert tcp_ok(n1, n2.address)


def test_kill_removes_the_process_and_stop_restarts_it(
    nemesis: Nemesis, healed_local_cluster: LocalCluster, history: tuple[Recorder, Path]
) -> None:
    n2 = healed_local_cluster.node("n2")
    old = n2.pid
    assert old is not None
    fault = nemesis.start("kill", ["n2"])
    assert not n2.is_running()
    assert not Path(f"/proc/{old}").exists()
    nemesis.stop(fault)
    assert n2.is_running() and n2.pid != old
    assert nemesis_fs(history[1]) == ["kill", "start"]
    healed_local_cluster.wait_ready()


def can_fetch_metadata(bootstrap: str) -> bool:
    p = Producer({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000})
    try:
        p.list_topics(timeout=4)
        return True
    except KafkaException:
        return False


def test_pause_stops_progress_and_resume_restores_it(
    nemesis: Nemesis, healed_local_cluster: LocalCluster, history: tuple[Recorder, Path]
) -> None:
    n3 = healed_local_cluster.node("n3")
    direct = n3.direct_client
    assert can_fetch_metadata(direct)
    fault = nemesis.start("pause", ["n3"])
    assert process_state(n3.pid) == "T"
    assert not can_fetch_metadata(direct)  # the broker answers nothing while frozen
    nemesis.stop(fault)
    assert process_state(n3.pid) != "T"
    assert can_fetch_metadata(direct)
    assert nemesis_fs(history[1]) == ["pause", "resume"]


def test_memory_squeeze_hits_the_limit_and_release_restores_it(
    nemesis: Nemesis, healed_local_cluster: LocalCluster, history: tuple[Recorder, Path]
) -> None:
    n1 = healed_local_cluster.node("n1")
    assert n1.cgroup
    cg = MemoryCgroup(Path(n1.cgroup))
    before_limit, before_failcnt = cg.limit(), cg.failcnt()

    fault = nemesis.start("memory", ["n1"], balloon_bytes=96 << 20, min_headroom=32 << 20)
    squeezed = cg.limit()
    time.sleep(4)  # the balloon allocates against the lowered limit
    during_failcnt = cg.failcnt()
    nemesis.stop(fault)

    assert squeezed is not None and (before_limit is None or squeezed < before_limit)
    assert during_failcnt > before_failcnt, "the balloon should push the cgroup to its limit"
    assert cg.limit() == before_limit
    assert balloon_pids(cg) == []
    ops = [op for op in read_history(history[1]) if op.process == "nemesis"]
    assert [op.f for op in ops if op.f.startswith("memory")] == ["memory-squeeze", "memory-release"]
    release = next(op for op in ops if op.f == "memory-release")
    obs = release.value["observed"]["n1"]
    assert obs["failcnt_delta"] > 0
    assert set(release.value["vmstat_delta"]) == {"allocstall", "pgscan_direct", "pgsteal_direct"}
    assert release.value["limits_restored"] == {"n1": before_limit}


def test_controller_and_leaders_targets_come_from_the_cluster(
    nemesis: Nemesis, healed_local_cluster: LocalCluster
) -> None:
    from confluent_kafka.admin import AdminClient
    from ktrial.nemesis import discovery

    cluster = healed_local_cluster
    cluster.create_topics({"nemesis-targets": 2})
    md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=10)
    expect = {f"n{p.leader}" for p in md.topics["nemesis-targets"].partitions.values()}

    ctrl = nemesis.ctx.resolve("controller")
    assert len(ctrl) == 1 and ctrl[0] in {"n1", "n2", "n3"}
    assert discovery.leader_from_files(cluster.nodes) == ctrl[0]  # the KRaft quorum leader
    assert (
        set(discovery.leaders(cluster, [("nemesis-targets", 0), ("nemesis-targets", 1)])) == expect
    )
    assert set(discovery.leaders(cluster, ["nemesis-targets"])) == expect
