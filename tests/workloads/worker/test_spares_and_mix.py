"""Pre-started workers (workloads/worker/process.Spares), what a client says of itself,
and --driver-mix: several clients in one queue run, recorded per slot and per process."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from ktrial.commands.run import _driver_mix
from ktrial.histories.testmeta import TestMeta
from ktrial.report.runfacts import driver_name, driver_text
from ktrial.workloads import queue as queue_mod
from ktrial.workloads.queue import QueueOptions, QueueWorkload, check_driver
from ktrial.workloads.worker import WorkerConfig, WorkerDriver, library_version
from ktrial.workloads.worker.driver import ClientFacts
from ktrial.workloads.worker.process import Spares

from .test_worker_driver import FAKE, config, names

PY = [sys.executable, str(Path(__file__).with_name("fake_worker.py"))]


def test_a_process_takes_a_started_spare_and_a_new_one_replaces_it(calls: Path) -> None:
    spares = Spares(PY, 2)
    try:
        first = spares.take("franz-p1")  # none ready yet: started for it, two spares begun
        assert first.name == "franz-p1" and len(spares._idle) == 2
        ready = list(spares._idle)
        d = WorkerDriver(config(), 7, 0, spares=spares)
        assert d.worker is ready[0] and d.worker.name == "franz-p7"
        assert len(spares._idle) == 2 and ready[0] not in spares._idle
        assert names(calls) == ["open"]  # the spare got nothing until its process opened
        d.close()
        first.kill()
    finally:
        spares.close()
    assert spares._idle == [] and all(w.proc.poll() is not None for w in ready[1:])
    assert spares.take("after-close").proc.poll() is None  # still works, without refills
    assert spares._idle == []


def test_a_dead_spare_is_not_handed_out(calls: Path) -> None:
    spares = Spares(PY, 1)
    try:
        spares.take("a").kill()
        spares._idle[0].kill()
        w = spares.take("b")
        assert w.proc.poll() is None
        w.kill()
    finally:
        spares.close()


def test_the_transaction_protocol_a_client_reports_is_kept(
    calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TXN_PROTOCOL", "v2")
    seen = ClientFacts()
    d = WorkerDriver(config(txn=True), 7, 0, program=FAKE, observed=seen)
    assert d.execute("txn", [["send", 0, 1]]).type == "ok"
    d.close()
    out = seen.to_json()
    assert out["txn_protocol"] == "v2"
    # where the time went, per call
    assert {"open", "begin", "produce", "flush", "commit"} <= set(out["call_ms"])
    assert out["call_ms"]["commit"]["n"] == 1 and out["call_ms"]["open"]["mean"] > 0


class Cluster:
    bootstrap_servers = "b:1"
    security = None

    def create_topics(self, topics: object, replication_factor: int) -> None:
        pass


def mixed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **kw: Any) -> QueueWorkload:
    prog = tmp_path / "w"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(prog))
    monkeypatch.setenv("KTRIAL_WORKER_JAVA", str(prog))
    opts = QueueOptions.from_dict(
        {"driver_mix": ["confluent", "java", "franz"], "concurrency": 4, **kw}
    )
    return QueueWorkload(opts, 1)


def test_a_mix_records_its_drivers_per_slot_and_each_drivers_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wl = mixed(monkeypatch, tmp_path)
    meta = wl.setup(Cluster())  # type: ignore[arg-type]
    assert meta["driver"] == "mix" and meta["driver_mix"] == ["confluent", "java", "franz"]
    assert meta["slot_drivers"] == {"0": "confluent", "1": "java", "2": "franz", "3": "confluent"}
    confs = meta["driver_configs"]
    assert "message.timeout.ms" in confs["confluent"]["producer_config"]  # librdkafka's
    assert confs["java"]["producer_config"]["max.block.ms"] == 10000  # kafka-clients'
    assert confs["java"]["version"].startswith("kafka-clients 4.")
    assert "kafka-clients" in meta["driver_version"] and "franz-go" in meta["driver_version"]
    json.dumps(meta)  # test.json can hold it
    assert isinstance(wl.cfgs["java"], WorkerConfig) and wl.cfgs["java"].worker == "java"


def test_a_mix_opens_each_process_with_its_slots_driver_and_says_which(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wl = mixed(monkeypatch, tmp_path)
    wl.setup(Cluster())  # type: ignore[arg-type]
    made: list[tuple[str, int]] = []

    def fake_factory(cfg: Any, stop: Any, observed: Any, pools: Any) -> Any:
        name = getattr(cfg, "worker", "confluent")
        observed.facts["txn_protocol"] = "v2" if name == "java" else "v1"

        def open_one(process: int, slot: int) -> str:
            made.append((name, process))
            return name

        return open_one

    monkeypatch.setattr(queue_mod, "_factory_for", fake_factory)
    import threading

    factory = wl._mixed_factory(threading.Event())
    assert [factory(p, s) for p, s in [(0, 0), (1, 1), (2, 2), (3, 0), (4, 1)]] == [
        "confluent",
        "java",
        "franz",
        "confluent",
        "java",
    ]
    res = wl.results()
    assert res is not None
    assert res["process_drivers"] == {
        "0": "confluent",
        "1": "java",
        "2": "franz",
        "3": "confluent",
        "4": "java",
    }
    assert res["clients"]["java"] == {"txn_protocol": "v2"}


def test_a_mix_is_checked_like_one_driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown driver 'kcat'"):
        check_driver(QueueOptions(driver_mix=("confluent", "kcat")))
    with pytest.raises(ValueError, match="driver-mix with --sub-via subscribe is not supported"):
        mixed(monkeypatch, tmp_path, sub_via="subscribe")
    monkeypatch.setenv("KTRIAL_WORKER_JAVA", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="Maven"):
        check_driver(QueueOptions(driver_mix=("java",)))


def test_driver_mix_on_the_command_line() -> None:
    assert _driver_mix(" confluent, java ,franz", "queue", None) == ["confluent", "java", "franz"]
    with pytest.raises(click.UsageError, match="queue workload only"):
        _driver_mix("java", "copy", None)
    with pytest.raises(click.UsageError, match="not both"):
        _driver_mix("java", "queue", "franz")
    with pytest.raises(click.BadParameter, match="comma-separated"):
        _driver_mix("java,kcat", "queue", None)


def test_the_report_names_a_mix_and_the_java_client() -> None:
    mix = TestMeta.from_json(
        {
            "ktrial_version": "1",
            "driver": "mix",
            "driver_mix": ["confluent", "java"],
            "driver_version": "confluent-kafka 2.16.1; kafka-clients 4.1.1",
        }
    )
    assert driver_name(mix) == "mixed clients"
    text = driver_text(mix)
    assert text is not None and text.startswith("mix of confluent, java, round-robin")
    assert "kafka-clients 4.1.1" in text
    java = TestMeta.from_json(
        {"ktrial_version": "1", "driver": "java", "driver_version": "kafka-clients 4.1.1"}
    )
    assert driver_text(java) == "kafka-clients 4.1.1"


def test_the_java_worker_version_is_the_pom_s() -> None:
    v = library_version("java")
    assert v is not None and v.startswith("kafka-clients 4.")
    pom = (Path(__file__).resolve().parents[3] / "workers" / "java" / "pom.xml").read_text()
    assert f"<kafka.version>{v.split()[1]}</kafka.version>" in pom
