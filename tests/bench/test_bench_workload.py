"""bench/bench_workload.py's helpers and bench/drivers/timing.py (no brokers): the
argument parsing, the steady-state rates, the per-call breakdown, and that the timed
confluent driver times its client calls under the worker drivers' call names."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

import orjson
import pytest
from ktrial.workloads.confluent import DriverConfig
from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.worker.driver import ClientFacts

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


bw = load("bench_workload", BENCH / "bench_workload.py")
timing = load("drivers.timing", BENCH / "drivers" / "timing.py")


def test_settings_and_driver_variants_parse() -> None:
    assert bw.setting("linger.ms=5") == ("linger.ms", 5)
    assert bw.setting("enable.idempotence=False") == ("enable.idempotence", False)
    assert bw.setting("acks=all") == ("acks", "all")
    assert bw.driver_variant("java") == ("java", {}, {})
    assert bw.driver_variant("franz+transaction.version=1+%poll_ms=20+acks=all") == (
        "franz",
        {"transaction.version": 1, "acks": "all"},
        {"poll_ms": 20},
    )


def _history(path: Path, ops: list[tuple[int, str, str, float]]) -> Path:
    with path.open("wb") as fh:
        for p, f, ty, t in ops:
            fh.write(orjson.dumps({"process": p, "f": f, "type": ty, "time": int(t * 1e9)}))
            fh.write(b"\n")
    return path


def test_steady_rates_start_once_every_slot_invoked(tmp_path: Path) -> None:
    # two slots: process 1 starts 2 s late (a slow client start); a successor process 2
    # of slot 0 does not count as a first process
    h = _history(
        tmp_path / "h.jsonl",
        [
            (0, "txn", "invoke", 0.1),
            (0, "txn", "ok", 0.5),  # before every slot ran: not counted
            (0, "txn", "invoke", 0.6),
            (1, "txn", "invoke", 2.0),
            (0, "txn", "info", 2.5),
            (2, "txn", "invoke", 2.6),
            (1, "txn", "ok", 3.0),
            (2, "txn", "ok", 4.0),
        ],
    )
    r = bw.steady_rates(h, 2)
    assert r["ready_s"] == 2.0
    assert r["seconds"] == 2.0
    assert r["ops_per_s"] == 1.5  # info, ok, ok in 2 s
    assert r["txn_ok_per_s"] == 1.0
    assert bw.steady_rates(_history(tmp_path / "e.jsonl", []), 2) == {}


def test_latencies_give_p99(tmp_path: Path) -> None:
    ops = []
    for i in range(100):
        ops += [(i, "txn", "invoke", i), (i, "txn", "ok", i + (i + 1) / 1000)]
    lat = bw.latencies(_history(tmp_path / "h.jsonl", ops))["txn:ok"]
    assert lat["n"] == 100
    assert lat["p50"] == pytest.approx(51, abs=0.2)
    assert lat["p99"] == pytest.approx(100, abs=0.2)


def test_breakdown_per_transaction() -> None:
    calls = {"flush": {"n": 30, "mean": 200.0, "max": 900.0}, "commit": {"n": 20, "mean": 50.0}}
    calls["commit"]["max"] = 80.0
    b = timing.breakdown(calls, 20)
    assert b["flush"] == {
        "n": 30.0,
        "per_txn": 1.5,
        "mean_ms": 200.0,
        "max_ms": 900.0,
        "ms_per_txn": 300.0,
    }
    assert b["commit"]["ms_per_txn"] == 50.0
    assert timing.breakdown(calls, 0)["flush"]["per_txn"] == 0.0


def test_timed_confluent_driver_times_its_calls_under_the_workers_names() -> None:
    # no broker at this address: opening a non-transactional producer and consumer
    # needs none, and a poll waits its poll_ms and returns nothing
    keys = KeyMap({0: TopicPartition("t-0", 0)})
    cfg = DriverConfig(bootstrap="127.0.0.1:9", keys=keys, group_id="g", poll_ms=50)
    facts = ClientFacts()
    stop = threading.Event()
    make = timing.timed_confluent_factory(facts, lambda: stop)
    d = make(cfg)(0, 0)
    try:
        assert d.assign([0]).type == "ok"
        assert d.execute("poll", [["poll"]]).type == "ok"
    finally:
        d.close(abrupt=True)
    calls = facts.to_json()["call_ms"]
    assert set(calls) == {"open", "assign", "fetch"}
    assert calls["fetch"]["n"] == 1
    assert calls["fetch"]["mean"] >= 45  # the poll's wait is in the fetch's time
