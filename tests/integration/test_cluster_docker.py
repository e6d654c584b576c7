"""The docker backend against a real dockerd and the locally built image.

One 3-node cluster serves the tests in file order (readiness, produce/consume, a
partition, pause, kill), then its teardown is checked for residue; last, a short
`ktrial run --cluster docker` as a user runs it. Only one docker cluster exists at a
time. The first run on a machine builds the image (debootstrap: minutes).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ktrial.clusters import dockerd
from ktrial.clusters.docker import DockerCluster

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.docker]

KTRIAL = [sys.executable, "-m", "ktrial"]
MESSAGES = 100


def _skip_reason() -> str | None:
    """Why the docker backend cannot run here: what real brokers need, plus dockerd."""
    for tool in ("dockerd", "debootstrap"):
        if shutil.which(tool) is None:
            return f"`{tool}` not installed (run scripts/setup.sh)"
    return local_cluster_skip_reason()


@pytest.fixture(scope="module")
def cluster() -> Iterator[DockerCluster]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    c = DockerCluster(nodes=3, profile="safe", heap_mb=384)
    try:
        c.start()
        yield c
    finally:
        c.teardown()


def _topic(cluster: DockerCluster) -> str:
    return f"docker-{cluster.run_id}"


def _produce(cluster: DockerCluster, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
        }
    )
    errors: list[str] = []
    for v in values:
        p.produce(topic, v.encode(), on_delivery=lambda e, m: errors.append(str(e)) if e else None)
    assert p.flush(60) == 0
    assert errors == []


def _consume_all(cluster: DockerCluster, topic: str, expect: int) -> list[str]:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expect and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append((m.value() or b"").decode())
    finally:
        c.close()
    return got


def _can_connect(src_node: object, host: str, port: int) -> bool:
    """TCP connect from inside a container (bash's /dev/tcp; minbase has no netcat)."""
    script = f"exec 3<>/dev/tcp/{host}/{port}"
    out = src_node.exec(  # type: ignore[attr-defined]
        ["bash", "-c", f"timeout 3 bash -c '{script}' && echo ok || echo fail"], timeout=10
    )
    return out.strip() == "ok"


def test_ready_topic_rf3_produce_consume(cluster: DockerCluster) -> None:
    assert cluster.kind == "docker"
    assert len({n.address for n in cluster.nodes}) == 3
    assert all(n.address.startswith("10.214.") for n in cluster.nodes)
    topic = _topic(cluster)
    cluster.create_topics({topic: 1}, replication_factor=3)
    values = [f"v{i}" for i in range(MESSAGES)]
    _produce(cluster, topic, values)
    assert _consume_all(cluster, topic, MESSAGES) == values


def test_node_pid_is_the_broker_and_cgroup_holds_it(cluster: DockerCluster) -> None:
    for n in cluster.nodes:
        assert n.pid is not None
        cmdline = Path(f"/proc/{n.pid}/cmdline").read_bytes()
        assert b"kafka.Kafka" in cmdline and f"-Dktrial.run={cluster.run_id}".encode() in cmdline
        assert n.cgroup is not None
        procs = Path(n.cgroup, "cgroup.procs").read_text().split()
        assert str(n.pid) in procs
        assert n.log_path.exists() and n.log_path.stat().st_size > 0  # the bind mount


def test_partition_isolates_one_node_and_heals(cluster: DockerCluster) -> None:
    n1, n2, n3 = cluster.nodes
    assert _can_connect(n1, n3.address, n3.ports.replication)
    for peer in (n1, n2):
        n3.exec(["iptables", "-w", "-A", "INPUT", "-s", peer.address, "-j", "DROP"])
        n3.exec(["iptables", "-w", "-A", "OUTPUT", "-d", peer.address, "-j", "DROP"])
    try:
        assert not _can_connect(n1, n3.address, n3.ports.replication)
        assert not _can_connect(n3, n2.address, n2.ports.replication)
        assert _can_connect(n1, n2.address, n2.ports.replication)  # only n3 is cut off
    finally:
        n3.exec(["iptables", "-w", "-F"])
    assert _can_connect(n1, n3.address, n3.ports.replication)
    cluster.wait_ready(120)


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_pause_freezes_and_resume_thaws(cluster: DockerCluster) -> None:
    n2 = cluster.nodes[1]
    pid = n2.pid
    assert pid is not None
    n2.pause()
    try:
        assert n2.paused and n2.is_running()
        time.sleep(0.5)
        before = _cpu_ticks(pid)
        time.sleep(1.5)
        assert _cpu_ticks(pid) == before  # a JVM that runs at all burns some CPU
        # exec still works (network namespace, host tools) while frozen: heals need it
        assert "INPUT" in n2.exec(["iptables", "-S"])
    finally:
        n2.resume()
    assert not n2.paused
    cluster.wait_ready(120)


def test_kill_then_start_keeps_acknowledged_data(cluster: DockerCluster) -> None:
    n3 = cluster.nodes[2]
    old = n3.pid
    n3.kill()
    assert not n3.is_running() and n3.pid is None
    assert n3.returncode == 137  # SIGKILL
    n3.start()
    assert n3.pid is not None and n3.pid != old
    cluster.wait_ready(120)
    topic = _topic(cluster)
    cluster.wait_in_sync([topic], 120)
    assert len(_consume_all(cluster, topic, MESSAGES)) == MESSAGES


def _own_dockerd_pid() -> int | None:
    return dockerd.daemon_pid(dockerd.default_paths())


def test_teardown_leaves_nothing(cluster: DockerCluster) -> None:
    run_id = cluster.run_id
    owned = bool(cluster.engine and cluster.engine.owned)
    work_dir = cluster.work_dir
    cluster.teardown()
    assert work_dir is not None and not work_dir.exists()
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert f"kt-{run_id}" not in links
    for table in ("filter", "nat"):
        rules = subprocess.run(
            ["iptables", "-t", table, "-S"], capture_output=True, text=True
        ).stdout
        assert f"ktrial:{run_id}" not in rules
        assert "DOCKER" not in rules or not owned  # our dockerd adds no chains
    if owned:
        assert _own_dockerd_pid() is None
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert str(dockerd.default_paths().data_root) not in ps
    else:
        client = dockerd.ping(f"unix://{dockerd.SYSTEM_SOCKET}")
        assert client is not None
        assert client.containers.list(all=True, filters={"label": f"ktrial.run={run_id}"}) == []
        assert client.networks.list(filters={"label": f"ktrial.run={run_id}"}) == []


def test_ktrial_run_docker_kill_pause_is_valid(tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    store = tmp_path / "store"
    proc = subprocess.run(
        [
            *KTRIAL,
            "run",
            "--cluster",
            "docker",
            "--store",
            str(store),
            "--name",
            "dk",
            "--time-limit",
            "20",
            "--nemesis",
            "kill,pause",
            "--nemesis-interval",
            "5",
            "--seed",
            "3",
            "--no-live",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "verdict: VALID" in proc.stdout
    history = (store / "dk" / "latest" / "history.jsonl").read_text()
    assert '"kill"' in history or '"pause"' in history  # faults really happened
    run = (store / "dk" / "latest").resolve()
    rid = json.loads((run / "test.json").read_text())["cluster"]["run_id"]
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert f"kt-{rid}" not in links
    assert _own_dockerd_pid() is None
