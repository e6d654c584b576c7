"""The local backend against real brokers: traffic, node faults, partitions, teardown, clean."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from ktrial.clusters import cgroups, netns
from ktrial.clusters import state as statemod
from ktrial.clusters.base import Unsupported
from ktrial.clusters.local import ClusterNotReady, LocalCluster, LocalNode

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, values: range) -> list[tuple[int, int]]:
    """Send values with acks=all (idempotent); return (partition, offset) of each ack."""
    acked: list[tuple[int, int]] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
        }
    )
    for v in values:
        p.produce(topic, value=str(v).encode(), partition=v % 3, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(90)
    assert left == 0, f"{left} messages not delivered"
    assert errors == []
    return acked


def consume_all(bootstrap: str, topic: str, partitions: int, expect: int) -> list[int]:
    """Read every partition from the beginning until `expect` values or 60 s."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ktrial-test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expect and time.monotonic() < deadline:
            for m in c.consume(500, timeout=1.0):
                value = m.value()
                if m.error() is None and value is not None:
                    got.append(int(value))
    finally:
        c.close()
    return got


def live_broker_config(cluster: LocalCluster, node_id: int) -> dict[str, str]:
    """The configuration a running broker reports through the admin API."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    res = ConfigResource(ConfigResource.Type.BROKER, str(node_id))
    entries = admin.describe_configs([res])[res].result(timeout=30)
    return {k: str(v.value) for k, v in entries.items()}


def fresh_topic(cluster: LocalCluster, partitions: int = 3) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topics({name: partitions}, replication_factor=3)
    return name


def proc_state(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("State:"):
            return line.split()[1]
    return "?"


def can_connect(src: LocalNode, host: str, port: int) -> bool:
    """TCP connect from inside src's namespace (2 s timeout)."""
    code = (
        "import socket,sys\n"
        f"try: socket.create_connection(({host!r}, {port}), timeout=2).close()\n"
        "except OSError: sys.exit(1)\n"
    )
    try:
        src.exec([sys.executable, "-c", code], timeout=10)
        return True
    except subprocess.CalledProcessError:
        return False


def test_produce_acks_all_and_consume_back(local_cluster: LocalCluster) -> None:
    topic = fresh_topic(local_cluster)
    acked = produce(local_cluster.bootstrap_servers, topic, range(300))
    assert len(acked) == 300
    assert {p for p, _ in acked} == {0, 1, 2}
    got = consume_all(local_cluster.bootstrap_servers, topic, 3, 300)
    assert sorted(got) == list(range(300))


def test_nodes_have_namespace_cgroup_and_logs(local_cluster: LocalCluster) -> None:
    addresses = {n.address for n in local_cluster.nodes}
    assert len(addresses) == 3
    for n in local_cluster.nodes:
        assert n.pid is not None and n.is_running()
        # the JVM itself (not a wrapper) lives in the node's memory cgroup ...
        assert n.cgroup is not None and Path(n.cgroup).name.startswith("ktrial-")
        assert n.pid in cgroups.pids(Path(n.cgroup))
        # ... and in the node's network namespace, holding the node's address
        assert os.readlink(f"/proc/{n.pid}/ns/net") != os.readlink("/proc/self/ns/net")
        assert n.address in n.exec(["ip", "-4", "-o", "addr", "show", "dev", "eth0"])
        assert f"-Dktrial.run={local_cluster.run_id}" in Path(f"/proc/{n.pid}/cmdline").read_text(
            errors="replace"
        ).replace("\0", " ")
        # log4j2 binding works: the broker writes its own log file
        assert n.log_path.is_file() and "Kafka Server started" in n.log_path.read_text()
    meta = local_cluster.metadata()
    assert meta["kind"] == "local" and meta["profile"] == "safe"
    conf = live_broker_config(local_cluster, 1)
    assert conf["min.insync.replicas"] == "2"
    assert conf["unclean.leader.election.enable"] == "false"
    assert conf["offsets.topic.replication.factor"] == "3"
    assert conf["transaction.state.log.min.isr"] == "2"


def test_kill_one_node_others_serve_and_it_rejoins(healed_local_cluster: LocalCluster) -> None:
    c = healed_local_cluster
    topic = fresh_topic(c)
    victim = c.node("n3")
    pid = victim.pid
    assert pid is not None
    victim.kill()
    assert not victim.is_running() and victim.pid is None
    assert not statemod.is_alive(pid, None)  # gone and reaped, not a zombie
    # the two survivors still take acks=all writes (min.insync.replicas=2) and serve reads
    acked = produce(c.bootstrap_servers, topic, range(100))
    assert len(acked) == 100
    assert sorted(consume_all(c.bootstrap_servers, topic, 3, 100)) == list(range(100))
    victim.start()
    assert victim.pid not in (None, pid)
    c.wait_ready(120)  # n3 registered again and back in the ready topic's ISR
    c.wait_in_sync([topic], 120)  # and caught up on the data written while it was down


def test_pause_freezes_a_node_and_resume_thaws_it(healed_local_cluster: LocalCluster) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    c = healed_local_cluster
    n = c.node("n2")
    pid = n.pid
    assert pid is not None
    only_n2 = AdminClient({"bootstrap.servers": n.client_bootstrap})
    assert only_n2.list_topics(timeout=10).brokers  # answers while running
    n.pause()
    try:
        assert n.paused and proc_state(pid) == "T"
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": n.client_bootstrap}).list_topics(timeout=3)
    finally:
        n.resume()
    assert not n.paused and proc_state(pid) != "T"
    assert n.pid == pid  # the same JVM carries on
    assert only_n2.list_topics(timeout=10).brokers
    c.wait_ready(120)


def test_iptables_in_one_namespace_cuts_traffic_and_can_be_restored(
    healed_local_cluster: LocalCluster,
) -> None:
    c = healed_local_cluster
    n1, n2, n3 = c.node("n1"), c.node("n2"), c.node("n3")
    port = n1.ports.replication
    assert can_connect(n2, n1.address, port) and can_connect(n3, n1.address, port)
    rule = ["INPUT", "-s", n2.address, "-j", "DROP"]
    n1.exec(["iptables", "-w", "-A", *rule])
    try:
        assert not can_connect(n2, n1.address, port)  # cut: n2 -> n1
        assert can_connect(n3, n1.address, port)  # only that pair
        assert "DROP" in n1.exec(["iptables", "-S", "INPUT"])
        assert "DROP" not in n2.exec(["iptables", "-S", "INPUT"])  # rules are per namespace
    finally:
        n1.exec(["iptables", "-w", "-D", *rule])
    assert can_connect(n2, n1.address, port)


def _resources(c: LocalCluster) -> dict[str, list[str]]:
    """What of this cluster exists right now, looked up independently of clean.scan()."""
    rid = c.run_id
    out = {
        "netns": [ns for ns in netns.list_netns() if rid in ns],
        "links": [ln for ln in netns.list_links() if rid in ln],
        "rules": [r for r in netns.run(["iptables", "-S"]).splitlines() if rid in r],
        "cgroups": [n.cgroup for n in c.nodes if n.cgroup and Path(n.cgroup).exists()],
        "dirs": [str(d) for d in (c.work_dir, c.state_file.dir) if d and Path(d).exists()],
    }
    procs = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            except OSError:
                continue
            if rid.encode() in raw and int(entry.name) != os.getpid():
                procs.append(entry.name)
    out["processes"] = procs
    return out


@pytest.mark.usefixtures("require_local_cluster")
def test_teardown_on_exception_leaves_nothing(tmp_path: Path) -> None:
    seen: dict[str, list[str]] = {}
    kept = tmp_path / "data"
    c = LocalCluster(nodes=2, save_data_to=kept)
    with pytest.raises(RuntimeError, match="boom"), c:  # not `as`: __enter__ is typed as the base
        # leave it in a messy state: one node paused, a helper process in a node's cgroup
        c.node("n1").pause()
        helper = c.node("n2").popen_in_cgroup(["sleep", "600"])
        seen = _resources(c)
        assert helper.pid in cgroups.pids(Path(c.node("n2").cgroup or ""))
        raise RuntimeError("boom")
    assert len(seen["netns"]) == 2 and len(seen["links"]) == 3  # bridge + 2 veths
    assert len(seen["rules"]) == 1 and len(seen["cgroups"]) == 2 and len(seen["dirs"]) == 2
    assert len(seen["processes"]) >= 3  # two JVMs and the helper
    helper.wait(10)
    assert _resources(c) == {k: [] for k in seen}
    # save_data_to (ktrial run --keep-data): each node's log dirs survive the teardown
    for n in ("n1", "n2"):
        assert (kept / n / "meta.properties").is_file()
        assert (kept / n / "__cluster_metadata-0").is_dir()


SCRIPT = """
import sys, time
from ktrial.clusters.local import LocalCluster
c = LocalCluster(nodes=1, run_id=sys.argv[1])
c.start()
print("READY", flush=True)
time.sleep(600)
"""


def test_clean_removes_leftovers_of_a_sigkilled_owner(local_cluster: LocalCluster) -> None:
    rid = statemod.new_run_id()
    owner = subprocess.Popen([sys.executable, "-c", SCRIPT, rid], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "READY"
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    st = statemod.for_run(rid).read()
    assert st["owner_pid"] == owner.pid and not statemod.state_is_live(st)
    jvm = st["nodes"][0]["pid"]
    assert statemod.is_alive(jvm, None)  # the broker outlived its owner
    assert rid in " ".join(netns.list_netns())

    out = subprocess.run(
        [sys.executable, "-m", "ktrial", "cluster", "clean"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert rid in out.stdout
    assert not statemod.is_alive(jvm, None)
    assert not [ns for ns in netns.list_netns() if rid in ns]
    assert not [ln for ln in netns.list_links() if rid in ln]
    assert rid not in netns.run(["iptables", "-S"])
    assert not [d for d in cgroups.find_all() if rid in d.name]
    assert not Path(st["work_dir"]).exists() and not statemod.for_run(rid).dir.exists()
    # a live cluster (the session one) is left alone
    assert all(n.is_running() for n in local_cluster.nodes)
    assert local_cluster.state_file.path.exists()


@pytest.mark.usefixtures("require_local_cluster")
def test_cli_up_status_down() -> None:
    ktrial = [sys.executable, "-m", "ktrial", "cluster"]
    up = subprocess.run(
        [*ktrial, "up", "--nodes", "1", "--heap-mb", "384", "--json"],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert up.returncode == 0, up.stderr
    st = json.loads(up.stdout)
    rid = st["run_id"]
    try:
        assert st["status"] == "ready" and st["owner_kind"] == "keeper"
        jvm = st["nodes"][0]["pid"]
        assert statemod.is_alive(jvm, None)  # survives the CLI's exit
        assert "-Xmx384m" in Path(f"/proc/{jvm}/cmdline").read_text().replace("\0", " ")
        status = subprocess.run([*ktrial, "status", "--json"], capture_output=True, text=True)
        assert rid in json.loads(status.stdout)
        down = subprocess.run([*ktrial, "down", rid], capture_output=True, text=True, timeout=200)
        assert down.returncode == 0, down.stderr
        assert not statemod.is_alive(jvm, None)
        assert not statemod.state_is_live(st)
        assert not [ns for ns in netns.list_netns() if rid in ns]
        assert not statemod.for_run(rid).dir.exists()
    finally:
        subprocess.run([*ktrial, "down", rid], capture_output=True, timeout=200)


def test_without_netns_brokers_share_loopback_unsafe_profile(
    make_local_cluster: Callable[..., LocalCluster],
) -> None:
    c = make_local_cluster(
        nodes=1, use_netns=False, profile="unsafe", broker_config={"log.retention.hours": "5"}
    )
    n = c.node("n1")
    assert n.address == "127.0.0.1" and n.netns is None
    assert any("partition" in f for f in c.unsupported_faults())
    with pytest.raises(Unsupported, match="namespace"):
        n.exec(["true"])
    conf = live_broker_config(c, 1)
    assert conf["min.insync.replicas"] == "1"
    assert conf["unclean.leader.election.enable"] == "true"
    assert conf["log.retention.hours"] == "5"  # --broker-config overrides reach the broker
    c.create_topics({"loop": 1}, replication_factor=1)
    produce(c.bootstrap_servers, "loop", range(0, 30, 3))
    assert sorted(consume_all(c.bootstrap_servers, "loop", 1, 10)) == list(range(0, 30, 3))


@pytest.mark.usefixtures("require_local_cluster")
def test_failed_start_names_the_node_shows_why_and_cleans_up() -> None:
    c = LocalCluster(nodes=1, use_netns=False, broker_config={"num.network.threads": "0"})
    with pytest.raises(ClusterNotReady) as err:
        c.start()
    msg = str(err.value)
    assert "n1" in msg and "num.network.threads" in msg  # which node, and Kafka's reason
    assert c.work_dir is not None and not c.work_dir.exists()
    assert not c.state_file.dir.exists()
    assert not [d for d in cgroups.find_all() if c.run_id in d.name]
