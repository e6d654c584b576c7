"""Workload construction from CLI options: validation, key layout, test.json fragments."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from ktrial.commands.run import parse_overrides
from ktrial.workloads import make_workload
from ktrial.workloads.confluent import DriverConfig
from ktrial.workloads.options import workload_options
from ktrial.workloads.queue import QueueOptions, QueueWorkload, key_layout

# the default wait of a poll inside a transaction (QueueOptions.txn_poll_ms)
TXN_POLL_MS = 20


def test_unknown_options_are_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown options \\['bogus'\\]"):
        make_workload("queue", {"bogus": 1}, 1)
    with pytest.raises(ValueError, match="unknown workload"):
        make_workload("nope", {}, 1)


def test_key_layout_and_partitions_per_topic() -> None:
    km = key_layout("t", 8, 4)
    assert km.tp(5).topic == "t-1" and km.tp(5).partition == 1
    assert km.key_of("t-1", 1) == 5
    assert km.topics() == ["t-0", "t-1"]
    assert km.to_json()["5"] == {"topic": "t-1", "partition": 1}
    assert QueueOptions(sub_via="subscribe").ppt == 1  # a topic per key: subscribe names keys
    assert QueueOptions().ppt == 4


def test_cli_flags_map_to_workload_options() -> None:
    q = workload_options("queue", True, False, "subscribe", 0.1, 50, 100.0, 8)
    assert q == {
        "txn": True,
        "idempotence": False,
        "sub_via": "subscribe",
        "abort_p": 0.1,
        "crash_clients": 50,
        "rate": 100.0,
        "concurrency": 8,
    }
    make_workload("queue", q, 1)
    c = workload_options("copy", None, True, None, 0.05, 20, None, 4)
    assert c == {"crash_clients": 20, "abort_p": 0.05, "copiers": 4}
    make_workload("copy", c, 1)


def test_overrides() -> None:
    assert parse_overrides(("linger.ms=5", " acks = 1 "), "--p") == {"linger.ms": "5", "acks": "1"}
    with pytest.raises(click.BadParameter):
        parse_overrides(("linger.ms",), "--p")


def test_client_configs_a_careful_tester_chooses() -> None:
    cfg = DriverConfig(
        bootstrap="b:1",
        keys=key_layout("t", 1, 1),
        group_id="g",
        txn=True,
        producer_overrides={"linger.ms": 7},
        consumer_overrides={"fetch.wait.max.ms": 9},
    )
    p, c = cfg.producer_config(), cfg.consumer_config()
    assert p["acks"] == "all" and p["enable.idempotence"] is True and p["linger.ms"] == 7
    assert p["message.timeout.ms"] <= p["transaction.timeout.ms"]  # librdkafka requires it
    assert c["isolation.level"] == "read_committed" and c["enable.auto.commit"] is False
    assert c["fetch.wait.max.ms"] == 9 and c["group.id"] == "g"
    plain = DriverConfig(
        bootstrap="b:1", keys=key_layout("t", 1, 1), group_id="g", idempotence=False
    ).producer_config()
    assert plain["enable.idempotence"] is False and "transaction.timeout.ms" not in plain


class _Cluster:
    """Just enough of a cluster for QueueWorkload.setup (no broker is contacted)."""

    bootstrap_servers = "unused:9092"

    def create_topics(self, topics: dict[str, int], replication_factor: int = 3) -> None:
        pass


@pytest.mark.parametrize("driver", ["confluent", "franz"])
def test_polls_of_a_txn_run_wait_txn_poll_ms(
    driver: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every poll of a txn run is inside a transaction and waits txn_poll_ms; a run without
    transactions waits poll_ms. Both are recorded in test.json's workload_options."""
    worker = tmp_path / "w"
    worker.write_text("#!/bin/sh\n")
    worker.chmod(0o755)
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(worker))  # built or not
    defaults = QueueOptions()
    assert defaults.poll_ms == 100 and defaults.txn_poll_ms == TXN_POLL_MS
    for txn, want in ((True, 7), (False, 90)):
        opts = {"txn": txn, "poll_ms": 90, "txn_poll_ms": 7, "driver": driver}
        wl = QueueWorkload(QueueOptions.from_dict(opts), 1)
        meta = wl.setup(_Cluster())  # type: ignore[arg-type]
        assert wl.cfg is not None and wl.cfg.poll_ms == want
        assert meta["workload_options"]["txn_poll_ms"] == 7
        assert meta["workload_options"]["poll_ms"] == 90
