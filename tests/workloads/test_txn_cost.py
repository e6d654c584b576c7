"""The txn-cost workload without Kafka: options, the cell plan, the statistics, and a run
over a fake driver (what it records and how it fills the table)."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ktrial.commands.run import _parse_value
from ktrial.histories.jsonl import HistoryWriter
from ktrial.histories.recorder import Recorder
from ktrial.workloads import WORKLOADS, make_workload
from ktrial.workloads.confluent import DriverConfig
from ktrial.workloads.driver import Completion, KeyMap
from ktrial.workloads.ops import decode_value as _decode
from ktrial.workloads.options import workload_options
from ktrial.workloads.txn_cost import (
    Cell,
    PaddedWorkerDriver,
    PaddingUnsupported,
    TxnCostOptions,
    TxnCostWorkload,
    TxnSample,
    call_means,
    cell_schedule,
    format_calls,
    format_table,
    latency_ms,
    parse_int_list,
    payload,
    planned_seconds,
    quantile,
    summarize_cell,
    txn_sends,
)
from ktrial.workloads.worker import WorkerConfig

# ------------------------------------------------------------------------------ options


def test_defaults_are_the_design_matrix() -> None:
    o = TxnCostOptions()
    assert o.sizes == (5, 20, 80, 320)
    assert o.producers == (4, 16, 64)
    assert o.message_bytes == 4096
    assert o.seconds_per_cell == 10.0
    assert o.partitions == 8 and o.replication_factor == 3


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("5,20,80", (5, 20, 80)),
        (" 5, 20 ", (5, 20)),
        ("[5,20]", (5, 20)),
        (20, (20,)),
        ([5, "20"], (5, 20)),
        ((4, 16), (4, 16)),
    ],
)
def test_int_lists_parse(raw: Any, want: tuple[int, ...]) -> None:
    assert parse_int_list("sizes", raw) == want


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("", "must not be empty"),
        ("5,x", "must be integers"),
        ("5,0", "must be >= 1"),
        (-3, "must be >= 1"),
        ("5,20,5", "duplicates"),
        (True, "must be integers"),
        (1.5, "comma list"),
        ([5, 2.5], "must be integers"),
    ],
)
def test_bad_int_lists_are_refused(raw: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_int_list("sizes", raw)


@pytest.mark.parametrize(
    ("opts", "why"),
    [
        ({"bogus": 1}, r"unknown options \['bogus'\]"),
        ({"copiers": 4}, "use --workload-opt producers="),
        ({"message_bytes": 19}, "message_bytes must be an integer in"),
        ({"message_bytes": 2_000_000}, "message_bytes must be an integer in"),
        ({"message_bytes": 4096.0}, "message_bytes"),
        ({"seconds_per_cell": 0}, "seconds_per_cell must be > 0"),
        ({"seconds_per_cell": "ten"}, "seconds_per_cell"),
        ({"partitions": 0}, "partitions"),
        ({"warmup_txns": -1}, "warmup_txns"),
        ({"producers": "4,1000"}, "producers must be <= 512"),
        ({"producer_config": {"transactional.id": "x"}}, "transactional.id"),
        ({"producer_config": "acks=all"}, "producer_config must be a mapping"),
    ],
)
def test_bad_options_are_refused_clearly(opts: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        make_workload("txn-cost", opts, 1)


def test_cli_values_reach_the_workload() -> None:
    """--workload-opt K=V values go through _parse_value: comma lists arrive as strings."""
    assert "txn-cost" in WORKLOADS
    raw = {"sizes": "5,20,80", "producers": "2", "message_bytes": "1024", "seconds_per_cell": "2.5"}
    opts = {k: _parse_value(v) for k, v in raw.items()}
    opts.update(workload_options("txn-cost", None, None, None, None, None, None, None))
    wl = make_workload("txn-cost", opts, 1)
    assert isinstance(wl, TxnCostWorkload)
    assert wl.opts.sizes == (5, 20, 80) and wl.opts.producers == (2,)
    assert wl.opts.message_bytes == 1024 and wl.opts.seconds_per_cell == 2.5
    # --concurrency maps to `copiers` off the queue workload: refused with a hint
    with pytest.raises(ValueError, match="producers="):
        make_workload("txn-cost", workload_options("txn-cost", concurrency=8), 1)


def test_describe_is_a_transactional_assign_run_over_one_topic() -> None:
    wl = TxnCostWorkload(TxnCostOptions(partitions=3, producers=(2, 4), run_id="abc"), 7)
    wl.bootstrap = "b:9092"
    d = wl.describe()
    assert d["workload"] == "txn-cost"
    assert d["keys"] == {str(k): {"topic": "ktrial-abc-txncost", "partition": k} for k in range(3)}
    assert d["topics"] == {"ktrial-abc-txncost": 3}
    assert d["txn"] is True and d["sub_via"] == "assign" and d["ww_deps"] is True
    assert d["producer_config"]["acks"] == "all"
    assert d["consumer_config"]["isolation.level"] == "read_committed"
    assert d["workload_options"]["producers"] == (2, 4)
    json.dumps(d)  # test.json must be able to hold it
    # each producer count gets its own transactional.id prefix
    assert wl.driver_config(2).txn_id_prefix != wl.driver_config(4).txn_id_prefix


# ------------------------------------------------------------------------------ plan


def test_cells_run_producer_counts_outer_sizes_inner() -> None:
    assert cell_schedule([4, 16], [5, 20, 80]) == [
        Cell(4, 5),
        Cell(4, 20),
        Cell(4, 80),
        Cell(16, 5),
        Cell(16, 20),
        Cell(16, 80),
    ]
    assert planned_seconds(TxnCostOptions()) == 12 * 10.0
    assert (
        planned_seconds(TxnCostOptions(sizes=(5, 20), producers=(2, 4), seconds_per_cell=3)) == 12
    )


def test_txn_sends_spread_unique_values_over_partitions() -> None:
    assert txn_sends(10, 5, 4) == [
        ["send", 2, 10],
        ["send", 3, 11],
        ["send", 0, 12],
        ["send", 1, 13],
        ["send", 2, 14],
    ]


def test_payload_is_padded_and_reads_back_as_the_value() -> None:
    p = payload(123456, 4096)
    assert len(p) == 4096
    assert _decode(p) == 123456  # what the drain's consumers record
    assert payload(7, 20) == b"7" + b" " * 19


# ------------------------------------------------------------------------------ statistics


def test_quantile_is_nearest_rank() -> None:
    xs = [float(x) for x in range(1, 101)]
    assert quantile(xs, 0.5) == 50
    assert quantile(xs, 0.9) == 90
    assert quantile(xs, 0.99) == 99
    assert quantile([3.0], 0.99) == 3.0
    assert quantile([1.0, 2.0], 0.5) == 1.0
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_latency_ms_skips_unknown_durations() -> None:
    lat = latency_ms([0.002, None, 0.001, 0.004])
    assert lat == {"n": 3, "p50": 2.0, "p90": 4.0, "p99": 4.0, "max": 4.0}
    assert latency_ms([]) == {"n": 0, "p50": None, "p90": None, "p99": None, "max": None}


def test_cell_summary_from_synthetic_timings() -> None:
    ok = [TxnSample("ok", 20, txn_s=0.010 + i / 1000, commit_s=i / 1000) for i in range(1, 11)]
    bad = [TxnSample("fail", 20, 0.5, None), TxnSample("info", 20, 3.0, 3.0)]
    row = summarize_cell(Cell(4, 20), 1000, ok + bad, elapsed_s=2.0)
    assert row["producers"] == 4 and row["size"] == 20 and row["status"] == "done"
    assert (row["txns_ok"], row["txns_fail"], row["txns_info"]) == (10, 1, 1)
    assert row["records_ok"] == 200  # only committed transactions count
    assert row["txns_per_s"] == 5.0
    assert row["records_per_s"] == 100.0
    assert row["mb_per_s"] == 0.1  # 100 records/s * 1000 bytes
    # the info op's 3 s commit is not a committed transaction's latency
    assert row["commit_ms"] == {"n": 10, "p50": 5.0, "p90": 9.0, "p99": 10.0, "max": 10.0}
    assert row["txn_ms"]["p50"] == 15.0 and row["txn_ms"]["max"] == 20.0


def test_table_has_a_line_per_cell() -> None:
    rows = [
        summarize_cell(Cell(2, 5), 1024, [TxnSample("ok", 5, 0.02, 0.01)], 1.0),
        summarize_cell(Cell(2, 20), 1024, [], 1.0),
    ]
    text = format_table(rows)
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[:3] == ["prod", "size", "txn"]
    assert lines[1].split()[:3] == ["2", "5", "1"]
    assert lines[2].split()[:3] == ["2", "20", "0"]
    assert "-" in lines[2].split()  # no latency measured: shown as '-', not 0


# ------------------------------------------------------------------------------ a run, faked


class FakeTxnDriver:
    """Commits every transaction after `delay_s`, handing out offsets per key."""

    def __init__(self, log: dict[str, Any], delay_s: float) -> None:
        self.log = log
        self.delay_s = delay_s
        self.last_commit_s: float | None = None

    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion:
        assert f == "txn" and not abort
        time.sleep(self.delay_s)
        out = []
        with self.log["lock"]:
            self.log["txns"] += 1
            for _, k, v in value:
                off = self.log["offsets"].get(k, 0)
                self.log["offsets"][k] = off + 1
                out.append(["send", k, [off, v]])
            if self.log["txns"] == self.log.get("stop_after"):
                self.log["stop"].set()
        self.last_commit_s = self.delay_s / 2
        return Completion("ok", out)

    def assign(self, keys: Any) -> Completion:
        raise AssertionError("txn-cost producers never read")

    def close(self, abrupt: bool = False) -> None:
        self.log["closed"] += 1


def fake_run(
    tmp_path: Path, opts: TxnCostOptions, stop_after: int | None = None
) -> tuple[TxnCostWorkload, list[dict[str, Any]], dict[str, Any]]:
    stop = threading.Event()
    log: dict[str, Any] = {
        "lock": threading.Lock(),
        "txns": 0,
        "offsets": {},
        "closed": 0,
        "opened": [],
        "stop": stop,
        "stop_after": stop_after,
    }

    def factory(cfg: DriverConfig, stop: threading.Event) -> Any:
        def open_driver(process: int, slot: int) -> FakeTxnDriver:
            log["opened"].append((cfg.txn_id_prefix, slot, process))
            return FakeTxnDriver(log, 0.005)

        return open_driver

    wl = TxnCostWorkload(opts, 3, driver_factory=factory)
    wl.bootstrap = "fake:9092"
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        wl.run(Recorder(w), stop)
    ops = [json.loads(line) for line in path.read_text().splitlines()]
    return wl, ops, log


def test_a_run_walks_every_cell_and_records_each_txn(tmp_path: Path) -> None:
    opts = TxnCostOptions(
        sizes=(2, 3), producers=(1, 2), seconds_per_cell=0.3, partitions=4, warmup_txns=1
    )
    wl, ops, log = fake_run(tmp_path, opts)
    rows = wl.results()["cells"]
    assert [(r["producers"], r["size"]) for r in rows] == [(1, 2), (1, 3), (2, 2), (2, 3)]
    for r in rows:
        assert r["status"] == "done" and r["txns_ok"] > 0, r
        assert r["records_ok"] == r["txns_ok"] * r["size"]
        assert r["seconds"] >= 0.3
        assert r["commit_ms"]["p50"] == 2.5  # the driver's commit stopwatch, in ms
    # one process per producer slot, each producer count under its own transactional ids
    prefix = f"ktrial-{wl.run_id}-tc"
    opened = sorted((p, s) for p, s, _ in log["opened"])
    assert opened == [(f"{prefix}1", 0), (f"{prefix}2", 0), (f"{prefix}2", 1)]
    assert log["closed"] == 3
    # every transaction is an invoke + ok pair of one process, sends only
    inv = [o for o in ops if o["type"] == "invoke"]
    ok = [o for o in ops if o["type"] == "ok"]
    assert len(inv) == len(ok) == log["txns"] and all(o["f"] == "txn" for o in ops)
    values = [m[2] for o in inv for m in o["value"]]
    assert len(values) == len(set(values))  # unique values across the run
    for o in inv:
        assert all(m[0] == "send" and m[1] == m[2] % 4 for m in o["value"])
    for o in ok:
        assert all(isinstance(m[2], list) and m[2][0] >= 0 for m in o["value"])
    # warm-up transactions are in the history but not in the table
    warmups = sum(p for p in (1, 2) for _ in (2, 3))  # one per producer per cell
    assert len(ok) == sum(r["txns_ok"] for r in rows) + warmups


def test_cells_after_stop_are_marked_not_run(tmp_path: Path) -> None:
    opts = TxnCostOptions(sizes=(2, 3), producers=(1, 2), seconds_per_cell=5, warmup_txns=0)
    wl, _, _ = fake_run(tmp_path, opts, stop_after=20)
    rows = wl.results()["cells"]
    assert rows[0]["status"] == "cut short" and rows[0]["txns_ok"] >= 19
    assert rows[0]["seconds"] < 5
    assert [r["status"] for r in rows[1:]] == ["not run"] * 3
    assert "not run" in format_table(rows)


# ------------------------------------------------------------------------------ worker drivers

FAKE_WORKER = Path(__file__).parent / "worker" / "fake_worker.py"


def fake_worker_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: str) -> Path:
    """`driver`'s worker program is the fake worker (the JSON-lines contract, no Kafka);
    returns the file its requests are logged to."""
    prog = tmp_path / f"fake-{driver}"
    prog.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_WORKER} "$@"\n')
    prog.chmod(0o755)
    monkeypatch.setenv(f"KTRIAL_WORKER_{driver.upper()}", str(prog))
    monkeypatch.setenv("KTRIAL_WORKER_LOG", str(tmp_path / "workers.log"))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_LOG", str(log))
    return log


def test_the_driver_option_reaches_the_workload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_worker_program(tmp_path, monkeypatch, "franz")
    opts = workload_options("txn-cost", driver="franz")
    assert opts == {"driver": "franz"}
    wl = make_workload("txn-cost", opts, 1)
    assert isinstance(wl, TxnCostWorkload) and wl.opts.driver == "franz"
    wl.bootstrap = "b:9092"
    cfg = wl.driver_config(4)
    assert isinstance(cfg, WorkerConfig) and cfg.worker == "franz"
    assert cfg.txn and cfg.txn_id_prefix == f"ktrial-{wl.run_id}-tc4"
    d = wl.describe()
    assert d["driver"] == "franz" and d["driver_version"].startswith("franz-go v")
    # the settings test.json records are the worker's (franz-go's names), not librdkafka's
    assert "metadata.min.age.ms" in d["producer_config"]
    assert "socket.nagle.disable" not in d["producer_config"]
    # confluent stays librdkafka's config (PaddedTxnDriver)
    wl2 = TxnCostWorkload(TxnCostOptions(run_id="x"), 1)
    wl2.bootstrap = "b:9092"
    assert not isinstance(wl2.driver_config(4), WorkerConfig)
    assert wl2.describe()["driver"] == "confluent"


def test_driver_defaults_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert TxnCostOptions(driver="franz").producers == (4, 16, 64)
    # a java producer is a JVM: its default matrix stops at 16, and 64 is its ceiling
    assert TxnCostOptions(driver="java").producers == (4, 16)
    four64: Any = "4,64"  # as --workload-opt passes it
    assert TxnCostOptions(driver="java", producers=four64).producers == (4, 64)
    with pytest.raises(ValueError, match=r"JVM of its own.*<= 64.*default is 4,16"):
        TxnCostOptions(driver="java", producers="4,128")  # type: ignore[arg-type]
    # the ceiling counts JVMs: 128 producers two to a JVM are 64 JVMs, three need 65...
    shared: Any = {"processes_per_jvm": 2}
    assert TxnCostOptions(driver="java", producers=(128,), producer_config=shared).producers == (
        128,
    )
    with pytest.raises(ValueError, match=r"processes_per_jvm=N puts N producers in one JVM"):
        TxnCostOptions(driver="java", producers=(129,), producer_config=shared)
    with pytest.raises(ValueError, match=r"processes_per_jvm must be an integer >= 1"):
        TxnCostOptions(driver="java", producer_config={"processes_per_jvm": "all"})
    many: Any = "128"
    assert TxnCostOptions(driver="franz", producers=many).producers == (128,)
    with pytest.raises(ValueError, match="unknown driver 'kcat'"):
        make_workload("txn-cost", {"driver": "kcat"}, 1)
    # a worker that was never built is refused before any broker starts
    monkeypatch.setenv("KTRIAL_WORKER_FRANZ", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="not built"):
        make_workload("txn-cost", {"driver": "franz"}, 1)


def worker_run(
    tmp_path: Path, opts: TxnCostOptions
) -> tuple[TxnCostWorkload, list[dict[str, Any]]]:
    wl = TxnCostWorkload(opts, 3)
    wl.bootstrap = "fake:9092"
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        wl.run(Recorder(w), threading.Event())
    return wl, [json.loads(line) for line in path.read_text().splitlines()]


def test_a_worker_driver_run_pads_times_the_commit_and_reports_its_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_worker_program(tmp_path, monkeypatch, "franz")
    opts = TxnCostOptions(
        driver="franz",
        sizes=(3,),
        producers=(2,),
        seconds_per_cell=0.3,
        partitions=4,
        message_bytes=100,
        run_id="r1",
    )
    wl, ops = worker_run(tmp_path, opts)
    reqs = [json.loads(line) for line in calls.read_text().splitlines()]
    opens = [r for r in reqs if r["call"] == "open"]
    # the padding probe (a plain producer), then one transactional producer per slot,
    # every one told to pad to message_bytes; no consumer in a measuring producer
    assert opens[0]["txn_id"] == "" and opens[0]["value_bytes"] == 100
    assert sorted(r["txn_id"] for r in opens[1:]) == ["ktrial-r1-tc2-w0", "ktrial-r1-tc2-w1"]
    assert all(r["value_bytes"] == 100 and not r["consumer"] for r in opens)
    # the records travel as their values; the worker pads them
    produced = [rec["value"] for r in reqs if r["call"] == "produce" for rec in r["records"]]
    assert produced and all(v.isdigit() for v in produced)
    # each transaction: an ok txn op of sends with offsets
    ok = [o for o in ops if o["type"] == "ok"]
    assert ok and all(o["f"] == "txn" and len(o["value"]) == 3 for o in ok)
    table = wl.results()
    assert table["driver"] == "franz"
    (row,) = table["cells"]
    assert row["status"] == "done" and row["txns_ok"] > 0
    assert row["commit_ms"]["n"] == row["txns_ok"] and row["commit_ms"]["p50"] > 0
    # where the window's time went: every call of a transaction, counted in the window
    cm = row["call_ms"]
    assert {"begin", "produce", "flush", "commit"} <= set(cm)
    assert cm["commit"]["n"] >= row["txns_ok"] and cm["commit"]["mean"] > 0
    assert cm["produce"]["n"] == row["txns_ok"]  # one call for a transaction's 3 records
    assert cm["produce"]["per_txn"] == pytest.approx(cm["produce"]["mean"], abs=0.03)
    assert "open" not in cm  # the producers opened before the window
    assert set(table["clients"]["franz"]["call_ms"]) >= {"open", "commit", "close"}
    lines = format_calls(table["cells"]).splitlines()
    assert lines[0].split()[:6] == ["prod", "size", "begin", "produce", "flush", "commit"]
    assert lines[1].split()[:2] == ["2", "3"]


def test_a_worker_that_does_not_pad_fails_the_run_before_any_producer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_worker_program(tmp_path, monkeypatch, "franz")
    monkeypatch.setenv("FAKE_OLD_OPEN", "1")  # a worker built before value_bytes existed
    opts = TxnCostOptions(driver="franz", sizes=(3,), producers=(2,), seconds_per_cell=0.3)
    with pytest.raises(RuntimeError, match=r"did not confirm value_bytes=4096.*setup\.sh"):
        worker_run(tmp_path, opts)
    assert [json.loads(line)["call"] for line in calls.read_text().splitlines()] == ["open"]
    # and a producer's own open refuses it too
    cfg = WorkerConfig(bootstrap="b", keys=KeyMap({}), group_id="g", worker="franz")
    with pytest.raises(PaddingUnsupported):
        PaddedWorkerDriver(cfg, 1, 0, 64)


def test_call_means_are_the_calls_between_two_snapshots() -> None:
    before = {"begin": (2, 0.002), "commit": (2, 0.2), "produce": (10, 0.01)}
    after = {"begin": (6, 0.010), "commit": (6, 0.6), "open": (1, 1.5), "produce": (30, 0.05)}
    # 4 transactions of 5 records: one produce call per record
    assert call_means(before, after, 4) == {
        "begin": {"n": 4, "mean": 2.0, "per_txn": 2.0},
        "commit": {"n": 4, "mean": 100.0, "per_txn": 100.0},
        "open": {"n": 1, "mean": 1500.0, "per_txn": 375.0},
        "produce": {"n": 20, "mean": 2.0, "per_txn": 10.0},
    }
    assert call_means(after, after, 4) == {}
    assert call_means(before, after, 0)["open"]["per_txn"] == 1500.0  # no txn: the total
    assert format_calls([{"producers": 1, "size": 5}]) == ""  # confluent: no worker calls
