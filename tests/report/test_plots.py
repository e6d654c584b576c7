"""report/plots.py: fault windows labelled, the judged window hatched, latency quantiles
over time (issue 14 B)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
from ktrial.report import plots
from ktrial.report.faults import FaultWindow
from ktrial.report.judged import Judged
from ktrial.report.plots import (
    _with_gaps,
    latency_quantiles,
    plot_latency_quantiles,
    plot_over_time,
    shade_faults,
)
from ktrial.report.scan import HistoryScan, Series

KILL = FaultWindow("kill", 10.0, 20.0, "kill", "start", {"nodes": ["n2", "n3"]})
PART = FaultWindow("partition", 30.0, 35.0, "start-partition", "stop-partition", None)


def test_each_fault_window_is_labelled_with_its_fault_and_nodes() -> None:
    fig, ax = plt.subplots()
    judged = Judged(5.0, 50.0, "the warm-up; the drain", 0.0, 60.0)
    handles = shade_faults(ax, [KILL, PART], judged)
    texts = [t.get_text().strip() for t in ax.texts]
    assert texts[:2] == ["kill n2,n3", "partition"]
    assert "warm-up\n(not judged)" in texts and "drain\n(not judged)" in texts
    assert [h.get_label() for h in handles] == ["fault: kill", "fault: partition", "not judged"]
    plt.close(fig)
    # nothing left out: no hatching, no "not judged" entry
    fig, ax = plt.subplots()
    handles = shade_faults(ax, [KILL], Judged(0.0, 60.0, "", 0.0, 60.0))
    assert [h.get_label() for h in handles] == ["fault: kill"]
    plt.close(fig)


def test_latency_quantiles_per_bin() -> None:
    t = np.array([0.1, 0.2, 0.3, 0.4, 5.5, 5.6])
    y = np.array([4.0, 1.0, 3.0, 2.0, 10.0, 20.0])
    q = latency_quantiles(t, y, 1.0)
    assert q["t"].tolist() == [0.0, 5.0]
    # sorted sample's element at index floor(q * n): [1, 2, 3, 4] -> p50 3, p95/p99 4
    assert q["p50"].tolist() == [3.0, 20.0]
    assert q["p95"].tolist() == [4.0, 20.0] and q["p99"].tolist() == [4.0, 20.0]
    gapped = _with_gaps(q, 1.0)  # no op from 1 s to 5 s: the line breaks
    assert gapped["t"].tolist() == [0.0, 1.0, 5.0]
    assert np.isnan(gapped["p50"][1])


def test_latency_quantiles_plot(tmp_path: Path) -> None:
    scan = HistoryScan(end_s=60.0, faults=[KILL])
    s = Series()
    for i in range(600):
        s.add(i / 10, 5.0 + (i % 7))
    scan.latency[("send", "ok")] = s
    out = plot_latency_quantiles(scan, tmp_path / "q.png")
    assert out is not None and out.read_bytes().startswith(b"\x89PNG")
    assert plot_latency_quantiles(HistoryScan(), tmp_path / "none.png") is None


def test_the_drain_does_not_set_the_lag_plots_scale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    finish = plots._finish

    def spy(fig: Any, ax: Any, handles: list[Any], title: str, out: Path) -> Path:
        seen.update(ylim=ax.get_ylim(), title=title, labels=[h.get_label() for h in handles])
        return finish(fig, ax, handles, title, out)

    monkeypatch.setattr(plots, "_finish", spy)
    points = [[t / 10, 50.0 + t % 7] for t in range(500)] + [[50.5, 45_000.0]]
    judged = Judged(0.0, 50.0, "the drain, from 50.0 s", 0.0, 51.0)
    scan = HistoryScan(end_s=51.0)
    out = plot_over_time(points, scan, tmp_path / "lag.png", "lag", "ms", "#1f77b4", judged)
    assert out is not None and out.read_bytes().startswith(b"\x89PNG")
    assert seen["ylim"][1] < 100  # the judged part fills the plot
    assert seen["title"].endswith("(not judged, off the scale: up to 45,000)")
    assert seen["labels"][:2] == ["ms", "not judged"]
