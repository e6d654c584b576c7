"""Worker settings (workloads/worker/config.py) and choosing a driver for the queue."""

from __future__ import annotations

import re
from pathlib import Path

import confluent_kafka as ck
import pytest
from ktrial.workloads.confluent import library_version as confluent_version
from ktrial.workloads.copy import CopyOptions, CopyWorkload
from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.options import CommonOptions, workload_options
from ktrial.workloads.queue import QueueOptions, QueueWorkload
from ktrial.workloads.worker.config import BIN_DIR, WorkerConfig, library_version, worker_program

KEYS = KeyMap({0: TopicPartition("t", 0)})


def test_franz_settings_are_the_careful_defaults_with_overrides() -> None:
    cfg = WorkerConfig(
        bootstrap="b:1",
        keys=KEYS,
        group_id="g",
        txn=True,
        idempotence=True,
        producer_overrides={"acks": "1"},
        consumer_overrides={"fetch.max.wait.ms": 100},
    )
    p, c = cfg.producer_config(), cfg.consumer_config()
    assert p["acks"] == "1" and p["enable.idempotence"] is True
    assert p["transaction.timeout.ms"] == 10000 and p["bootstrap.servers"] == "b:1"
    assert c["isolation.level"] == "read_committed" and c["fetch.max.wait.ms"] == 100
    assert c["group.id"] == "g"
    s = cfg.settings(produce=False, consume=True)
    assert "acks" not in s and "group.id" not in s and s["auto.offset.reset"] == "earliest"
    assert (
        "transaction.timeout.ms"
        not in WorkerConfig(bootstrap="b", keys=KEYS, group_id="g").producer_config()
    )
    # one Go scheduler thread per franz worker (bench/RESULTS.md, TXNPERF), the drain's
    # consumer-only workers included; java has no such setting
    assert s["gomaxprocs"] == 1 and cfg.settings(True, False)["gomaxprocs"] == 1
    java = WorkerConfig(bootstrap="b", keys=KEYS, group_id="g", worker="java")
    assert "gomaxprocs" not in java.settings(True, True)


def fake_program(tmp_path: Path) -> Path:
    prog = tmp_path / "w"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    return prog


def test_a_worker_that_was_not_built_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match=r"not built: run scripts/setup\.sh"):
        worker_program("franz")
    with pytest.raises(ValueError, match="unknown worker driver"):
        worker_program("kcat")
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(fake_program(tmp_path)))
    assert worker_program("franz") == tmp_path / "w"


def test_the_queue_takes_the_driver_and_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(fake_program(tmp_path)))
    opts = workload_options("queue", txn=False, driver="franz")
    assert opts == {"txn": False, "driver": "franz"}
    wl = QueueWorkload(QueueOptions.from_dict(opts), 1)

    class Cluster:
        bootstrap_servers = "b:1"

        def create_topics(self, topics: object, replication_factor: int) -> None:
            pass

    meta = wl.setup(Cluster())  # type: ignore[arg-type]
    assert meta["driver"] == "franz" and isinstance(wl.cfg, WorkerConfig)
    # the library version workers/franz/go.mod pins, for the report and junit.xml
    gomod = (BIN_DIR.parent / "franz" / "go.mod").read_text()
    assert re.match(r"franz-go v\d+\.\d+\.\d+$", meta["driver_version"])
    assert f"github.com/twmb/franz-go {meta['driver_version'].split()[1]}" in gomod
    assert meta["consumer_config"]["isolation.level"] == "read_committed"
    assert "fetch.wait.max.ms" not in meta["consumer_config"]  # not librdkafka's settings
    assert workload_options("queue") == {"txn": True}  # confluent unless asked


def test_drivers_the_queue_cannot_run_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(fake_program(tmp_path)))
    with pytest.raises(ValueError, match="unknown driver"):
        QueueWorkload(QueueOptions(driver="kcat"), 1)
    # a worker driver subscribes (its own group consumer), a mix of clients does not
    QueueWorkload(QueueOptions(driver="franz", sub_via="subscribe"), 1)
    with pytest.raises(ValueError, match="driver-mix with --sub-via subscribe"):
        QueueWorkload(QueueOptions(driver_mix=("franz", "confluent"), sub_via="subscribe"), 1)
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(tmp_path / "gone"))
    with pytest.raises(ValueError, match="not built"):
        QueueWorkload(QueueOptions(driver="franz"), 1)
    with pytest.raises(ValueError, match="not built"):  # copy too, before any broker
        CopyWorkload(CopyOptions(driver="franz"), 1)
    with pytest.raises(ValueError, match="unknown driver"):
        CopyWorkload(CopyOptions(driver="kcat"), 1)


def test_library_versions() -> None:
    assert library_version("kcat") is None  # no such worker
    text = confluent_version()
    assert re.fullmatch(r"confluent-kafka \S+, librdkafka \S+", text)
    assert ck.libversion()[0] in text


def test_txn_cost_and_copy_take_a_worker_driver() -> None:
    assert workload_options("txn-cost", driver="franz") == {"driver": "franz"}
    # a workload that does not say it takes drivers refuses a worker's
    with pytest.raises(ValueError, match="does not run this workload"):
        CommonOptions(driver="franz").refuse_queue_only()
    CommonOptions(driver="confluent").refuse_queue_only()  # the default: no refusal
    assert workload_options("copy", driver="java") == {"driver": "java"}
    assert workload_options("copy", driver="java", concurrency=2) == {
        "driver": "java",
        "copiers": 2,
    }
    with pytest.raises(ValueError, match="--sub-via apply to the queue"):
        workload_options("copy", driver="franz", sub_via="subscribe")


@pytest.mark.parametrize("worker", ["franz", "java"])
def test_a_group_consumer_gets_short_session_settings(worker: str) -> None:
    """Subscribe mode (and copy's copiers): a crashed member must leave within seconds,
    not the clients' default 45 s; assign mode sends no group settings at all."""
    cfg = WorkerConfig(bootstrap="b:1", keys=KEYS, group_id="g", worker=worker)
    assert "session.timeout.ms" not in cfg.consumer_config()
    sub = WorkerConfig(
        bootstrap="b:1",
        keys=KEYS,
        group_id="g",
        worker=worker,
        sub_via="subscribe",
        consumer_overrides={"session.timeout.ms": 10000},
    )
    c = sub.consumer_config()
    assert c["session.timeout.ms"] == 10000 and c["heartbeat.interval.ms"] == 1000
    assert c["max.poll.interval.ms"] == 60000
    assert "group.id" not in sub.settings(False, True)  # a field of open, not a setting
    assert "session.timeout.ms" not in sub.settings(True, False)  # producers: no group
