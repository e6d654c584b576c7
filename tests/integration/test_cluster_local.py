"""The local backend against real brokers: traffic, node faults, partitions, teardown, clean."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from ktrial.clusters import cgroups
from ktrial.clusters.local import LocalCluster, LocalNode

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
                if m.error() is None:
                    got.append(int(m.value()))
    finally:
        c.close()
    return got


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
