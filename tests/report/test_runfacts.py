"""What ran — the system, its transaction protocol, the client driver — where people look:
report.html's configuration table and headline facts, junit.xml's properties.

Three runs: Apache Kafka 4.1 with transactions v2 read from the brokers, driven by
franz-go; an older test.json that recorded none of it (nothing shown, nothing fails);
a kfake run.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
from ktrial.histories.store import write_json
from ktrial.histories.testmeta import TestMeta
from ktrial.report import render_report
from ktrial.report.html import config_rows, section_verdict
from ktrial.report.junit import properties, write_junit
from ktrial.report.runfacts import driver_text, system_text, transaction_text
from ktrial.report.scan import HistoryScan
from ktrial.testing.sample import write_sample_run

V2_TEXT = "transactions v2 (KIP-890), transaction.version=2, read from the brokers"


def kafka41_franz() -> dict[str, Any]:
    """test.json of a Kafka 4.1.1 run with franz-go, as trial.py writes it (trimmed)."""
    return {
        "ktrial_version": "0.1.0",
        "name": "queue",
        "seed": 3,
        "cluster": {
            "kind": "local",
            "broker": "apache-kafka",
            "broker_versions": ["4.1.1"],
            "kafka_source": "maven",
            "kafka_line": "4.1",
            "transactions": {
                "transaction_version": 2,
                "protocol": "v2",
                "requested": None,
                "source": "broker",
            },
            "features": {"metadata.version": 27, "transaction.version": 2},
            "nodes": 3,
            "profile": "safe",
        },
        "workload": "queue",
        "txn": True,
        "driver": "franz",
        "driver_version": "franz-go v1.22.3",
    }


def older() -> dict[str, Any]:
    """test.json from before systems, transaction protocols and drivers were recorded."""
    return {
        "name": "queue",
        "seed": 5,
        "cluster": {"kind": "local", "nodes": ["n1", "n2", "n3"], "broker_version": "4.1.0"},
        "workload": {"name": "queue", "txn": True},
    }


def kfake() -> dict[str, Any]:
    return {
        "ktrial_version": "0.1.0",
        "name": "queue",
        "seed": 9,
        "cluster": {
            "kind": "kfake",
            "system": "franz-go-kfake",
            "kfake_module": "github.com/twmb/franz-go/pkg/kfake",
            "kfake_version": "v0.0.0-20250908181605-ff4b7b0f1cbc",
            "nodes": 3,
        },
        "workload": "queue",
        "driver": "confluent",
        "driver_version": "confluent-kafka 2.16.1, librdkafka 2.16.0",
    }


def facts_of(test: dict[str, Any], tmp_path: Path) -> str:
    page = section_verdict(None, test, HistoryScan(), tmp_path / "run")
    return page[page.index('id="facts"') : page.index('id="nemesis-line"')]


def props_of(test: dict[str, Any]) -> dict[str, str]:
    return dict(properties(TestMeta.from_json(test), None, Path("report.html")))


# -------------------------------------------------------------------- Kafka 4.1, v2, franz


def test_kafka41_v2_franz_in_the_configuration_table() -> None:
    rows = dict(config_rows(kafka41_franz()))
    assert rows["system"] == "Apache Kafka 4.1.1"
    assert rows["transaction protocol"] == V2_TEXT
    assert rows["client driver"] == "franz-go v1.22.3"
    names = [k for k, _ in config_rows(kafka41_franz())]
    assert names[:4] == ["system", "transaction protocol", "client driver", "cluster"]


def test_kafka41_v2_franz_in_the_headline_facts(tmp_path: Path) -> None:
    facts = facts_of(kafka41_franz(), tmp_path)
    assert "<span>txn protocol: <b>v2</b></span>" in facts
    assert "<span>driver: <b>franz-go</b></span>" in facts


def test_kafka41_v2_franz_in_junit_properties() -> None:
    p = props_of(kafka41_franz())
    assert p["system"] == "Apache Kafka 4.1.1" and p["kafka.version"] == "4.1.1"
    assert p["transaction.protocol"] == "v2" and p["transaction.version"] == "2"
    assert p["driver"] == "franz-go" and p["driver.version"] == "franz-go v1.22.3"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_sample_run(tmp_path_factory.mktemp("s") / "queue" / "20261129T200000")
    write_json(run / "test.json", kafka41_franz())
    render_report(run)
    write_junit(run)
    return run


def test_the_written_report_and_junit_carry_them(rendered: Path) -> None:
    page = (rendered / "report.html").read_text()
    config = page[page.index('id="config"') : page.index('<details id="raw-config">')]
    assert f'<span class="mono">{html.escape(V2_TEXT)}</span>' in config
    assert '<span class="mono">franz-go v1.22.3</span>' in config
    assert '<span class="mono">Apache Kafka 4.1.1</span>' in config
    junit = (rendered / "junit.xml").read_text()
    assert '<property name="transaction.protocol" value="v2" />' in junit
    assert '<property name="driver" value="franz-go" />' in junit
    assert '<property name="system" value="Apache Kafka 4.1.1" />' in junit


# -------------------------------------------------------------------- variants


def test_what_the_transaction_line_says_in_each_case() -> None:
    def text(transactions: dict[str, Any], driver: str = "franz") -> str | None:
        meta = kafka41_franz()
        meta["cluster"]["transactions"] = transactions
        meta["driver"] = driver
        return transaction_text(TestMeta.from_json(meta))

    v2 = {"transaction_version": 2, "protocol": "v2", "requested": 2, "source": "broker"}
    # librdkafka has no KIP-890 client side: the line says so on a v2 cluster
    assert text(v2, "confluent") == (
        f"{V2_TEXT}; librdkafka's producers keep the classic protocol (no KIP-890 client side)"
    )
    # the brokers said otherwise than asked
    assert text({**v2, "transaction_version": 1, "protocol": "v1"}) == (
        "transactions v1 (classic), transaction.version=1, asked for transaction.version=2, "
        "read from the brokers"
    )
    # the brokers could not be asked: what the format set, and why
    fmt = {**v2, "source": "format", "observe_error": "connection refused"}
    assert text(fmt) == (
        "transactions v2 (KIP-890), transaction.version=2, "
        "as formatted, not read from the brokers (connection refused)"
    )
    # 3.x: no such feature, the classic protocol
    old = {"transaction_version": None, "protocol": "v1", "requested": None, "source": "format"}
    assert text(old) == (
        "transactions v1 (classic), no transaction.version feature, "
        "as formatted, not read from the brokers"
    )
    # hand-edited nonsense is not shown
    assert text({"protocol": "v9"}) is None and text({}) is None


def test_driver_without_a_recorded_version_names_the_library() -> None:
    meta = kafka41_franz()
    del meta["driver_version"]
    assert driver_text(TestMeta.from_json(meta)) == "franz-go (worker process)"
    meta["driver"] = "confluent"
    assert driver_text(TestMeta.from_json(meta)) == "confluent-kafka (librdkafka)"


# -------------------------------------------------------------------- an older test.json


def test_an_older_test_json_shows_what_it_has_and_nothing_else(tmp_path: Path) -> None:
    test = older()
    rows = dict(config_rows(test))
    assert rows["system"] == "Kafka 4.1.0"  # the old spelling of the broker version
    assert "transaction protocol" not in rows and "client driver" not in rows
    facts = facts_of(test, tmp_path)
    assert "txn protocol" not in facts and "driver" not in facts
    p = props_of(test)
    assert p["system"] == "Kafka 4.1.0"
    assert not {"transaction.protocol", "transaction.version", "driver", "driver.version"} & set(p)


def test_a_history_without_test_json_shows_none_of_it(tmp_path: Path) -> None:
    assert config_rows({}) == []
    assert set(props_of({})) == {"verdict", "report"}
    meta = TestMeta.from_json({"cluster": {"broker": {"odd": 1}, "transactions": "v2"}})
    assert transaction_text(meta) is None and driver_text(meta) is None
    assert system_text(meta) is None


def test_a_ktrial_run_without_a_driver_was_confluent() -> None:
    """Every run ktrial recorded before drivers were chosen used confluent-kafka."""
    test = {**older(), "ktrial_version": "0.1.0"}
    assert dict(config_rows(test))["client driver"] == "confluent-kafka (librdkafka)"
    assert props_of(test)["driver"] == "confluent-kafka"


# -------------------------------------------------------------------- kfake


def test_a_kfake_run(tmp_path: Path) -> None:
    test = kfake()
    rows = dict(config_rows(test))
    assert rows["system"] == "kfake (franz-go) v0.0.0-20250908181605-ff4b7b0f1cbc"
    assert rows["client driver"] == "confluent-kafka 2.16.1, librdkafka 2.16.0"
    assert rows["cluster"] == "kfake, 3 nodes"
    assert "transaction protocol" not in rows  # kfake records none
    facts = facts_of(test, tmp_path)
    assert "<span>driver: <b>confluent-kafka</b></span>" in facts
    p = props_of(test)
    assert p["system"] == "kfake (franz-go) v0.0.0-20250908181605-ff4b7b0f1cbc"
    assert p["cluster"] == "kfake" and "kafka.version" not in p
    assert p["driver"] == "confluent-kafka"
    assert p["driver.version"] == "confluent-kafka 2.16.1, librdkafka 2.16.0"
    assert "transaction.protocol" not in p
