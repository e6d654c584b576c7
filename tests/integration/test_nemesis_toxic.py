"""A latency toxic on the Toxiproxy in front of a broker's client listener adds its delay to
a produce round trip, and removing it takes the delay away again.

The shared session cluster is reused: n1 is restarted once to advertise its proxy (and
once more at the end to advertise itself again), which is cheaper than a second cluster.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from ktrial.clusters.local import LocalCluster
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.nemesis import ClientProxies, Nemesis, plan_proxies

pytestmark = pytest.mark.integration

TOPIC = "nemesis-toxic"


@pytest.fixture
def proxied_n1(healed_local_cluster: LocalCluster, tmp_path: Path) -> Iterator[ClientProxies]:
    cluster = healed_local_cluster
    plan = plan_proxies([n.name for n in cluster.nodes])
    proxies = ClientProxies(plan, log_path=tmp_path / "toxiproxy.log").attach(cluster)
    n1 = cluster.node("n1")
    try:
        n1.set_client_advertise(plan.advertise(n1))
        n1.restart()
        cluster.wait_ready()
        yield proxies
    finally:
        n1.set_client_advertise(None)
        n1.restart()
        proxies.close()
        cluster.wait_ready()


def produce_rtts(bootstrap: str, partition: int, n: int = 5) -> list[float]:
    """Seconds per produce+flush of one record to `partition` (acks=1: one broker)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    p.produce(TOPIC, b"warm-up", partition=partition)
    assert p.flush(30) == 0
    out = []
    for i in range(n):
        t = time.monotonic()
        p.produce(TOPIC, str(i).encode(), partition=partition)
        assert p.flush(30) == 0
        out.append(time.monotonic() - t)
    return out


def test_latency_toxic_adds_delay_to_produce_and_removal_restores_it(
    healed_local_cluster: LocalCluster, proxied_n1: ClientProxies, tmp_path: Path
) -> None:
    cluster = healed_local_cluster
    cluster.create_topics({TOPIC: 3})
    md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(TOPIC, 10)
    part = next(p for p, m in md.topics[TOPIC].partitions.items() if m.leader == 1)
    assert cluster.node("n1").client_bootstrap == proxied_n1.plan.listen("n1")

    writer = HistoryWriter(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, Recorder(writer), ["toxic"], random.Random(1), proxies=proxied_n1)
    try:
        base = statistics.median(produce_rtts(cluster.bootstrap_servers, part))
        fault = nem.start("toxic", ["n1"], kind="latency", attributes={"latency": 300, "jitter": 0})
        assert [t["name"] for t in proxied_n1.api().toxics("n1")] == [fault.id]
        slow = statistics.median(produce_rtts(cluster.bootstrap_servers, part))
        nem.stop(fault)
        assert proxied_n1.api().toxics("n1") == []
        after = statistics.median(produce_rtts(cluster.bootstrap_servers, part))
    finally:
        nem.heal_all()
        writer.close()

    # a functional check of a large injected delay, not a performance measurement
    assert slow - base > 0.25, f"baseline {base:.3f}s, with a 300 ms toxic {slow:.3f}s"
    assert after < slow - 0.2, f"after removing the toxic {after:.3f}s (toxic {slow:.3f}s)"
    fs = [op.f for op in read_history(tmp_path / "history.jsonl") if op.process == "nemesis"]
    assert fs == ["toxic-on", "toxic-off"]
