"""PNG plots of a run, each with the fault windows shaded (one colour per fault family).

Matplotlib with the Agg backend (no display needed). Every function returns the
path it wrote, or None when there was nothing to draw; the HTML report says
"not computed" for those. Point clouds are downsampled so a million-op history
still plots in seconds, keeping each time bin's worst latency so spikes survive.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .faults import FaultWindow, family_colour
from .scan import HistoryScan, Series

MAX_POINTS = 12_000  # per (f, type) series in the latency scatter
TIME_BINS = 400
TYPE_COLOURS = {"ok": "#2ca02c", "fail": "#ff7f0e", "info": "#d62728"}
TYPE_MARKERS = {"ok": "o", "fail": "x", "info": "^"}
F_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
FIGSIZE = (12.0, 3.8)
# Fixed axes geometry (no tight bbox) so every plot's time axis lines up with the
# others when they are stacked in the report; the legend lives in the right margin.
MARGINS = {"left": 0.07, "right": 0.82, "top": 0.9, "bottom": 0.14}
DPI = 96


def downsample(t: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Indices of at most ~max_points points: every time bin's maximum plus an even stride."""
    n = len(t)
    if n <= max_points:
        return np.arange(n)
    stride = np.arange(0, n, max(1, n // (max_points // 2)))
    lo, hi = float(t.min()), float(t.max())
    if hi <= lo:
        return stride
    bins = np.minimum(((t - lo) / (hi - lo) * TIME_BINS).astype(np.int64), TIME_BINS - 1)
    order = np.lexsort((-y, bins))  # by bin, then descending y
    first = np.ones(n, dtype=bool)
    first[1:] = bins[order][1:] != bins[order][:-1]
    peaks = order[first]
    return np.unique(np.concatenate([stride, peaks]))


def shade_faults(ax: Axes, faults: Sequence[FaultWindow]) -> list[Any]:
    """Shade each fault window; return one legend handle per family."""
    seen: dict[str, Any] = {}
    for w in faults:
        colour = family_colour(w.family)
        handle: Any
        if w.instant:
            ax.axvline(w.start_s, color=colour, linewidth=1.0, linestyle=":", alpha=0.8)
            handle = Line2D([], [], color=colour, linestyle=":", label=f"{w.family} (instant)")
        else:
            ax.axvspan(w.start_s, w.end_s, color=colour, alpha=0.16, linewidth=0)
            handle = Patch(facecolor=colour, alpha=0.35, label=f"fault: {w.family}")
        seen.setdefault(w.family, handle)
    return list(seen.values())


def _finish(fig: Any, ax: Axes, handles: list[Any], title: str, out: Path) -> Path:
    ax.set_title(title, loc="left", fontsize=11)
    ax.set_xlabel("time since start (s)")
    ax.grid(True, alpha=0.3)
    if handles:
        ax.legend(
            handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.subplots_adjust(**MARGINS)
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def _xlim(ax: Axes, end_s: float) -> None:
    if end_s > 0:
        ax.set_xlim(0, end_s * 1.01)


def plot_latency(scan: HistoryScan, out: Path) -> Path | None:
    """Latency of each op over time by f, marker by outcome (ok/fail/info), log scale."""
    series = {k: s for k, s in scan.latency.items() if len(s)}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fault_handles = shade_faults(ax, scan.faults)
    fs = sorted({f for f, _ in series})
    colour = {f: F_COLOURS[i % len(F_COLOURS)] for i, f in enumerate(fs)}
    types_seen: list[str] = []
    for (f, typ), s in sorted(series.items()):
        t = np.frombuffer(s.t_s, dtype=np.float64)
        y = np.maximum(np.frombuffer(s.latency_ms, dtype=np.float32), 0.01)
        idx = downsample(t, y)
        marker = TYPE_MARKERS.get(typ, ".")
        size = 4 if typ == "ok" else 14
        ax.scatter(
            t[idx],
            y[idx],
            s=size,
            marker=marker,
            c=colour[f],
            alpha=0.55 if typ == "ok" else 0.9,
            linewidths=0.8 if marker == "x" else 0,
            rasterized=True,
        )
        if typ not in types_seen:
            types_seen.append(typ)
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    _xlim(ax, scan.end_s)
    handles: list[Any] = [
        Line2D([], [], color=colour[f], marker="o", linestyle="", label=f) for f in fs
    ]
    handles += [
        Line2D([], [], color="#555", marker=TYPE_MARKERS.get(t, "."), linestyle="", label=t)
        for t in ("ok", "fail", "info")
        if t in types_seen
    ]
    return _finish(fig, ax, handles + fault_handles, "Latency by operation (ok / fail / info)", out)


def plot_throughput(scan: HistoryScan, out: Path) -> Path | None:
    """Completions per second by outcome; bins widen for long runs to keep ~300 points."""
    if not any(scan.throughput.values()):
        return None
    width = max(1, math.ceil(scan.end_s / 300)) if scan.end_s > 0 else 1
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fault_handles = shade_faults(ax, scan.faults)
    # Bins of `width` seconds; a short tail (under half a bin) joins the last full bin so the
    # line does not plunge at the end of the run.
    nbins = max(1, math.ceil(scan.end_s / width)) if scan.end_s > 0 else 1
    tail = scan.end_s - (nbins - 1) * width
    if nbins > 1 and tail < width / 2:
        nbins -= 1
        tail += width
    widths = np.full(nbins, float(width))
    widths[-1] = max(tail, 1e-3) if scan.end_s > 0 else float(width)
    x = np.arange(nbins) * width
    handles: list[Any] = []
    for typ in ("ok", "fail", "info"):
        per_sec: Counter[int] = scan.throughput.get(typ, Counter())
        if not per_sec:
            continue
        y = np.zeros(nbins)
        for sec, n in per_sec.items():
            y[min(sec // width, nbins - 1)] += n
        (line,) = ax.step(
            np.append(x, scan.end_s),
            np.append(y / widths, (y / widths)[-1]),
            where="post",
            color=TYPE_COLOURS[typ],
            label=typ,
            linewidth=1.2,
        )
        handles.append(line)
    ax.set_ylabel("completions / s")
    ax.set_ylim(bottom=0)
    _xlim(ax, scan.end_s)
    title = "Throughput by outcome" + (f" ({width} s bins)" if width > 1 else "")
    return _finish(fig, ax, handles + fault_handles, title, out)


def _points(raw: Any) -> np.ndarray | None:
    """[[t, y], ...] from results.json as an (n, 2) array, or None if absent or malformed."""
    if not isinstance(raw, list) or not raw:
        return None
    try:
        arr = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        return None
    if arr.ndim != 2 or arr.shape[1] < 2:
        return None
    return arr


def plot_over_time(
    raw: Any, scan: HistoryScan, out: Path, title: str, ylabel: str, colour: str
) -> Path | None:
    """A metric the checker sampled over time (realtime lag, unseen count) as a step line."""
    arr = _points(raw)
    if arr is None:
        return None
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fault_handles = shade_faults(ax, scan.faults)
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    if len(arr) > 4 * MAX_POINTS:
        arr = arr[downsample(arr[:, 0], arr[:, 1], 4 * MAX_POINTS)]
    (line,) = ax.step(arr[:, 0], arr[:, 1], where="post", color=colour, linewidth=1.3, label=ylabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    y = arr[:, 1]
    if len(y) > 10 and float(y.max()) > 20 * max(float(np.percentile(y, 95)), 1.0):
        # One spike (often the drain) would flatten the rest of the run to zero.
        ax.set_yscale("symlog", linthresh=max(float(np.percentile(y, 50)), 1.0))
        ax.set_ylabel(f"{ylabel}, symlog")
    _xlim(ax, max(scan.end_s, float(arr[:, 0].max())))
    return _finish(fig, ax, [line, *fault_handles], title, out)


def all_plots(
    scan: HistoryScan, metrics: dict[str, Any], plots_dir: Path
) -> dict[str, Path | None]:
    """Draw every plot into plots_dir; name -> path (None when there was no data)."""
    lag = metrics.get("realtime_lag") if isinstance(metrics.get("realtime_lag"), dict) else {}
    unseen = metrics.get("unseen") if isinstance(metrics.get("unseen"), dict) else {}
    return {
        "latency": plot_latency(scan, plots_dir / "latency.png"),
        "throughput": plot_throughput(scan, plots_dir / "throughput.png"),
        "realtime-lag": plot_over_time(
            (lag or {}).get("over_time"),
            scan,
            plots_dir / "realtime-lag.png",
            "Realtime lag: how stale consumers were",
            "lag (ms)",
            "#1f77b4",
        ),
        "unseen": plot_over_time(
            (unseen or {}).get("over_time"),
            scan,
            plots_dir / "unseen.png",
            "Unseen: acknowledged values no consumer had read yet",
            "unseen values",
            "#d62728",
        ),
    }


__all__ = [
    "Series",
    "all_plots",
    "downsample",
    "plot_latency",
    "plot_over_time",
    "plot_throughput",
    "shade_faults",
]
