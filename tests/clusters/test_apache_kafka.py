"""Apache Kafka across versions (clusters/apache_kafka.py): the format command each
version and transaction version gets, the refusals, and what test.json records."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ktrial.clusters import apache_kafka
from ktrial.clusters.apache_kafka import ApacheKafka
from ktrial.clusters.install import KafkaInstall
from ktrial.clusters.kafka_features import FeatureProbeError
from ktrial.clusters.kafka_versions import UnsupportedVersion
from ktrial.clusters.system import NodePaths

PATHS = NodePaths("java", "/k/*", "/w", "/w/data", "/w/logs")


def kafka(version: str, profile: str = "safe", tv: int | None = None) -> ApacheKafka:
    k = ApacheKafka(version, profile, transaction_version=tv)
    k.install = KafkaInstall(version, Path("/k"), "maven-cache")
    return k


def features(cmd: list[str]) -> list[str]:
    """The NAME=LEVEL of every --feature in a format command."""
    assert cmd[cmd.index("kafka.tools.StorageTool") + 1] == "format"
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--feature"]


@pytest.mark.parametrize(
    ("version", "profile", "tv", "expected"),
    [
        # 3.7's format takes no --feature: unsafe runs without the ELR switch it lacks
        ("3.7.2", "safe", None, []),
        ("3.7.2", "unsafe", None, []),
        # 3.9 takes --feature but has no ELR feature
        ("3.9.2", "unsafe", None, []),
        ("4.0.2", "safe", None, []),
        ("4.0.2", "safe", 1, ["transaction.version=1"]),
        ("4.0.2", "unsafe", None, ["eligible.leader.replicas.version=0"]),
        ("4.1.1", "safe", 2, ["transaction.version=2"]),
        (
            "4.1.1",
            "unsafe",
            1,
            ["eligible.leader.replicas.version=0", "transaction.version=1"],
        ),
    ],
)
def test_the_format_command_of_each_version(
    version: str, profile: str, tv: int | None, expected: list[str]
) -> None:
    cmd = kafka(version, profile, tv).format_command(PATHS, "CID")
    assert cmd[:2] == ["java", "-Xmx256m"]
    assert cmd[cmd.index("-t") + 1] == "CID" and cmd[cmd.index("-c") + 1] == "/w/server.properties"
    assert features(cmd) == expected


def test_a_transaction_version_the_kafka_cannot_format_is_refused_up_front() -> None:
    with pytest.raises(
        UnsupportedVersion, match=re.escape("Kafka 3.9.2 has no transaction.version")
    ):
        ApacheKafka("3.9.2", transaction_version=1)
    with pytest.raises(
        UnsupportedVersion, match=re.escape("Kafka 3.7.2 has no transaction.version")
    ):
        ApacheKafka("3.7.2", transaction_version=2)
    with pytest.raises(
        UnsupportedVersion, match=re.escape("Kafka 3.6.2 is not a supported version")
    ):
        ApacheKafka("3.6.2")
    ApacheKafka("4.0.2", transaction_version=1)  # fine


def test_kafka_home_is_checked_once_its_version_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """No version asked for: KAFKA_HOME's own version decides, at prepare()."""
    home = KafkaInstall("3.9.1", Path("/opt/kafka/libs"), "KAFKA_HOME")
    monkeypatch.setattr(apache_kafka, "resolve", lambda *a, **kw: home)
    k = ApacheKafka(None, transaction_version=2)
    with pytest.raises(
        UnsupportedVersion, match=re.escape("Kafka 3.9.1 has no transaction.version")
    ):
        k.prepare(auto_install=False, log=lambda _m: None)
    assert k.install is None
    ok = ApacheKafka(None)
    ok.prepare(auto_install=False, log=lambda _m: None)
    assert ok.version == "3.9.1" and ok.line.line == "3.9"


def test_test_json_records_the_protocol_as_formatted_until_the_brokers_say() -> None:
    k = kafka("4.1.1", tv=1)
    assert k.metadata()["kafka_line"] == "4.1"
    assert k.transactions() == {
        "transaction_version": 1,
        "protocol": "v1",
        "requested": 1,
        "source": "format",
    }
    k.observed_features = {"transaction.version": 2, "metadata.version": 27}
    meta: dict[str, Any] = k.metadata()
    assert meta["transactions"]["transaction_version"] == 2  # the brokers win
    assert meta["transactions"]["protocol"] == "v2"
    assert meta["transactions"]["source"] == "broker"
    assert meta["features"] == {"metadata.version": 27, "transaction.version": 2}


def test_a_3x_broker_runs_the_classic_protocol_without_the_feature() -> None:
    # 3.7 has no transaction.version feature; 3.9 has it, at level 0 only
    for version, level in (("3.7.2", None), ("3.9.2", 0)):
        k = kafka(version)
        k.observed_features = {"metadata.version": 21}
        t = k.transactions()
        assert t["transaction_version"] == level and t["protocol"] == "v1", t
    # 4.x with the level at 0 (left out of the answer): the classic protocol too
    k = kafka("4.0.2")
    k.observed_features = {"metadata.version": 25}
    assert k.transactions()["transaction_version"] == 0
    assert k.transactions()["protocol"] == "v1"
    # the version's default when nobody asked and the brokers were not reached
    assert kafka("4.0.2").transactions()["transaction_version"] == 2


def test_observe_asks_once_and_records_why_it_could_not(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def unreachable(bootstrap: str) -> dict[str, int]:
        calls.append(bootstrap)
        raise FeatureProbeError("no broker answered ApiVersions (x)")

    monkeypatch.setattr(apache_kafka, "finalized_features", unreachable)
    k = kafka("4.1.1", tv=2)
    k.observe("10.0.0.1:9092")
    t = k.transactions()
    assert t["source"] == "format" and t["transaction_version"] == 2
    assert t["observe_error"] == "no broker answered ApiVersions (x)"
    monkeypatch.setattr(apache_kafka, "finalized_features", lambda b: {"transaction.version": 2})
    k.observe("10.0.0.1:9092")
    k.observe("10.0.0.1:9092")  # once answered, not asked again
    assert k.transactions()["source"] == "broker" and "observe_error" not in k.transactions()
    assert calls == ["10.0.0.1:9092"]


def test_sasl_brokers_resolve_names_from_their_own_hosts_file() -> None:
    """With SASL on a listener the broker reverse-resolves each client while it logs in;
    in a namespace without DNS that hung every login, so such brokers get a hosts file
    (every node's address) and the JVM option that makes it the only resolver."""
    from ktrial.clusters.kafka_config import NodeAddr, Ports, client_listener_security

    me = NodeAddr(1, "10.213.0.11", Ports(9092, 9093, 9094))
    peer = NodeAddr(2, "10.213.0.12", Ports(9092, 9093, 9094))
    plain = ApacheKafka("4.1.1", "safe")
    sasl = ApacheKafka(
        "4.1.1", "safe", broker_config=client_listener_security("SASL_PLAINTEXT", {"u": "p"})
    )
    for k in (plain, sasl):
        k.install = KafkaInstall("4.1.1", Path("/k"), "maven-cache")
    assert "hosts" not in plain.node_files(me, [me, peer], PATHS, None)
    assert not any("jdk.net.hosts.file" in a for a in plain.run_command(PATHS, "r1", "n1"))
    hosts = sasl.node_files(me, [me, peer], PATHS, None)["hosts"].splitlines()
    assert "127.0.0.1 localhost" in hosts and "10.213.0.12 node-2" in hosts
    assert "-Djdk.net.hosts.file=/w/hosts" in sasl.run_command(PATHS, "r1", "n1")
