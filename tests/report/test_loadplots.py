"""Plots of the background load and the nodes' memory (report/loadplots.py)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from ktrial.histories.loadlog import read_loadlog
from ktrial.report.faults import FaultWindow
from ktrial.report.loadplots import (
    load_offset,
    load_plots,
    node_samples,
    plot_load,
    plot_node_memory,
    rate,
    series,
)

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "load" / "kfake-3000.jsonl"


def stats_line(t_s: float, n: int, pgscan: int, cpu_ms: int, pid: int = 10) -> str:
    fig = {
        "pid": pid,
        "rss_bytes": 300 << 20,
        "rss_anon_bytes": 250 << 20,
        "cgroup_anon_bytes": (200 + n) << 20,
        "cache_bytes": 50 << 20,
        "cpu_ms": cpu_ms,
        "majflt": n,
        "host_pgscan_direct": pgscan,
        "host_allocstall": pgscan // 10,
        "host_psi_some_us": n * 1000,
    }
    op = {"index": n, "time": int(t_s * 1e9), "process": "nemesis", "type": "info"}
    return json.dumps({**op, "f": "node-stats", "value": {"n1": fig, "n2": fig}})


def test_node_samples_and_rates() -> None:
    lines = [stats_line(t, t, t * t * 100, t * 500) for t in range(1, 6)]
    lines.insert(2, json.dumps({"index": 99, "time": 1, "process": 0, "f": "send"}))
    samples = node_samples(lines)
    assert [t for t, _v in samples] == [1.0, 2.0, 3.0, 4.0, 5.0]
    ts, ys = series(samples, "n1", "cpu_ms")
    assert ys == [500.0, 1000.0, 1500.0, 2000.0, 2500.0]
    assert rate(ts, ys, 1e-3)[1] == [0.5, 0.5, 0.5, 0.5]  # cores
    # a counter that goes down (a restarted broker) gives no point there
    assert rate([1.0, 2.0, 3.0], [10.0, 2.0, 4.0]) == ([3.0], [2.0])


def test_plots_draw_pngs(tmp_path: Path) -> None:
    log = read_loadlog(SAMPLE)
    faults = [FaultWindow("pause", 1.0, 2.0, "pause", "resume", ["n1"])]
    out = plot_load(log, 0.5, faults, 6.0, tmp_path / "load.png", behind=[(2.0, 3.0)])
    assert out is not None and out.read_bytes().startswith(b"\x89PNG")
    samples = node_samples([stats_line(t, t, t * 100, t * 400) for t in range(1, 8)])
    mem = plot_node_memory(samples, log, 0.5, faults, 8.0, tmp_path / "mem.png")
    assert mem is not None and mem.read_bytes().startswith(b"\x89PNG")
    assert plot_node_memory(samples[:1], log, 0.0, [], 8.0, tmp_path / "no.png") is None


def test_load_plots_of_a_run_dir(tmp_path: Path) -> None:
    assert load_plots(tmp_path, tmp_path / "history.jsonl", {}, None, [], 5.0, tmp_path) == {}
    shutil.copy(SAMPLE, tmp_path / "load.jsonl")
    log = read_loadlog(SAMPLE)
    assert log.start_time is not None
    test = {"history_wall_start": log.start_time - 3.0}
    assert abs(load_offset(log, test) - 3.0) < 1e-6
    (tmp_path / "history.jsonl").write_text(
        "\n".join(stats_line(t, t, 0, t * 100) for t in range(1, 6)) + "\n"
    )
    plots = load_plots(tmp_path, tmp_path / "history.jsonl", test, None, [], 5.0, tmp_path / "p")
    assert set(plots) == {"load", "node-memory"}
    assert all(p is not None and p.exists() for p in plots.values())
    (tmp_path / "load.jsonl").write_text("garbage\nmore garbage\n")
    bad = load_plots(tmp_path, tmp_path / "history.jsonl", test, None, [], 5.0, tmp_path / "q")
    assert bad == {"load": None, "node-memory": None}


def squeezed_line(t_s: int, limit: int | None) -> str:
    """A cgroup v1 node squeezed from t=3: its limit appears, limit hits and refaults
    climb (what node-stats records of cgroup reclaim on v1)."""
    hits = max(0, t_s - 2) * 50
    fig = {
        "pid": 10,
        "cgroup_anon_bytes": 200 << 20,
        "cache_bytes": 40 << 20,
        "cgroup_usage_bytes": 240 << 20,
        "cgroup_limit_bytes": limit,
        "cgroup_failcnt": hits,
        "cgroup_refault": hits * 3,
        "cgroup_pgscan_direct": None,
        "host_pgscan_direct": 7,
        "host_allocstall": 1,
        "host_psi_some_us": t_s * 20_000,
    }
    op = {"index": t_s, "time": int(t_s * 1e9), "process": "nemesis", "type": "info"}
    return json.dumps({**op, "f": "node-stats", "value": {"n1": fig}})


def test_memory_panels_show_the_squeeze_and_the_cgroup_reclaim(tmp_path: Path) -> None:
    from ktrial.report.loadplots import panel_lines

    lines = [squeezed_line(t, None if t < 3 else 256 << 20) for t in range(1, 7)]
    samples = node_samples(lines)
    limit = panel_lines("limit", samples, ["n1"])
    assert [(ln.label, ln.style) for ln in limit] == [("n1", "-"), ("n1 limit", ":")]
    assert limit[1].ts == [3.0, 4.0, 5.0, 6.0] and limit[1].ys == [256.0] * 4  # MiB, once set
    # lifted at 7 s and set again at 8 s: the line breaks (NaN) rather than joining across
    again = node_samples([*lines, squeezed_line(7, None), squeezed_line(8, 128 << 20)])
    ys = panel_lines("limit", again, ["n1"])[1].ys
    assert ys[:4] == [256.0] * 4 and math.isnan(ys[4]) and ys[5] == 128.0
    (hits,) = panel_lines("hits", samples, ["n1"])  # no v2 scan counter on v1: one line
    assert hits.ys == [0.0, 50.0, 50.0, 50.0, 50.0]  # limit hits per second
    (ref,) = panel_lines("refault", samples, ["n1"])
    assert ref.ys == [0.0, 150.0, 150.0, 150.0, 150.0]
    # the host's direct reclaim did not move (cgroup reclaim is not global reclaim)
    assert {ln.label: set(ln.ys) for ln in panel_lines("reclaim", samples, ["n1"])} == {
        "pages scanned/s": {0.0},
        "allocation stalls/s": {0.0},
    }
    (psi,) = panel_lines("psi", samples, ["n1"])
    assert psi.label == "memory some (host)" and set(psi.ys) == {2.0}  # 20 ms/s = 2%
    with pytest.raises(ValueError, match="unknown memory panel"):
        panel_lines("bogus", samples, ["n1"])
    # a chosen subset; panels with nothing to draw are left out
    out = plot_node_memory(samples, None, 0.0, [], 6.0, tmp_path / "m.png", ["limit", "hits"])
    assert out is not None and out.read_bytes().startswith(b"\x89PNG")
    plain = node_samples([stats_line(t, t, 0, t) for t in range(1, 5)])
    assert plot_node_memory(plain, None, 0.0, [], 5.0, tmp_path / "n.png", ["limit"]) is None
