"""Every workload's clients take the cluster's TLS / SASL settings (clusters/security.py)
and name their topics after --topic-prefix (workloads/options.topic_stem). Workloads are
set up against a fake cluster that records the topics asked for; no broker."""

from __future__ import annotations

import os
from typing import Any

import pytest
from ktrial.clusters.security import Security
from ktrial.workloads import make_workload
from ktrial.workloads.options import topic_stem

SETTINGS = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": "pw",
}


class Secured:
    kind = "fake"
    bootstrap_servers = "b:9092"
    security = Security(SETTINGS)

    def __init__(self) -> None:
        self.topics: dict[str, int] = {}

    def create_topics(self, topics: dict[str, int], replication_factor: int = 3, **kw: Any) -> None:
        self.topics.update(topics)


@pytest.mark.parametrize("workload", ["queue", "copy", "txn-cost"])
def test_every_client_of_every_workload_gets_the_security(workload: str) -> None:
    wl: Any = make_workload(workload, {"producer_config": {"acks": "1"}}, 1)
    cluster = Secured()
    frag = wl.setup(cluster)
    producer = frag["producer_config"]
    producers = producer.values() if workload == "copy" else [producer]
    for p in producers:
        assert {k: p[k] for k in SETTINGS} == SETTINGS
    assert frag["producer_config"] and frag["consumer_config"]["sasl.username"] == "alice"
    if workload == "queue":
        assert producer["acks"] == "1"  # the run's overrides are kept
        assert wl.cfg.consumer_overrides["sasl.password"] == "pw"  # what the drain reads with


def test_the_franz_worker_is_sent_the_security_in_its_settings(monkeypatch: Any) -> None:
    from ktrial.workloads import queue

    monkeypatch.setattr(queue, "worker_program", lambda name: "/bin/true")
    wl: Any = make_workload("queue", {"driver": "franz"}, 1)
    wl.setup(Secured())
    sent = wl.cfg.settings(produce=True, consume=True)
    assert {k: sent[k] for k in SETTINGS} == SETTINGS


@pytest.mark.parametrize(
    ("workload", "topics"),
    [
        ("queue", {"kt.pre-q-0", "kt.pre-q-7"}),
        ("copy", {"kt.pre-in", "kt.pre-out"}),
        ("txn-cost", {"kt.pre-txncost"}),
    ],
)
def test_topic_prefix_names_the_topics(workload: str, topics: set[str]) -> None:
    cluster = Secured()
    make_workload(workload, {"topic_prefix": "kt.pre"}, 1).setup(cluster)  # type: ignore[arg-type]
    assert topics == set(cluster.topics) if workload != "queue" else topics <= set(cluster.topics)
    plain = Secured()
    make_workload(workload, {"run_id": "ab12"}, 1).setup(plain)  # type: ignore[arg-type]
    assert all(t.startswith("ktrial-ab12-") for t in plain.topics)


def test_a_bad_prefix_is_refused() -> None:
    for bad in ("has space", "slash/y", "x" * 201):
        with pytest.raises(ValueError, match="topic prefix"):
            topic_stem(bad, "r")
    assert topic_stem("", "r1") == "ktrial-r1" and topic_stem("a_b.c-1", os.name) == "a_b.c-1"
