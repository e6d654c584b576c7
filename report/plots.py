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
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .faults import FaultWindow, family_colour
from .judged import Judged
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
MAX_LABELS = 40  # fault windows labelled on a plot; more would overlap into a smear
EXCLUDED = "#9aa0a6"  # hatching of what the judged window leaves out
QUANTILES: tuple[tuple[str, float, Literal["-", "--", ":"]], ...] = (
    ("p50", 0.5, "-"),
    ("p95", 0.95, "--"),
    ("p99", 0.99, ":"),
)


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


def shade_faults(
    ax: Axes, faults: Sequence[FaultWindow], judged: Judged | None = None
) -> list[Any]:
    """Shade each fault window, labelled with its fault and nodes, and hatch what the
    judged window leaves out (warm-up, drain); return the legend handles."""
    seen: dict[str, Any] = {}
    labelled = len(faults) <= MAX_LABELS
    for w in faults:
        colour = family_colour(w.family)
        handle: Any
        if w.instant:
            ax.axvline(w.start_s, color=colour, linewidth=1.0, linestyle=":", alpha=0.8)
            handle = Line2D([], [], color=colour, linestyle=":", label=f"{w.family} (instant)")
        else:
            ax.axvspan(w.start_s, w.end_s, color=colour, alpha=0.16, linewidth=0)
            handle = Patch(facecolor=colour, alpha=0.35, label=f"fault: {w.family}")
        if labelled:
            ax.text(
                w.start_s,
                0.985,
                " " + w.label,
                transform=ax.get_xaxis_transform(),
                rotation=90,
                va="top",
                ha="left",
                fontsize=7.5,
                color=colour,
                fontweight="bold",
                clip_on=True,
            )
        seen.setdefault(w.family, handle)
    handles = list(seen.values())
    spans = judged.spans() if judged is not None else []
    for a, b, what in spans:
        ax.axvspan(a, b, facecolor="none", edgecolor=EXCLUDED, hatch="//", linewidth=0)
        ax.text(
            (a + b) / 2,
            0.02,
            f"{what}\n(not judged)",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=7,
            color="#5f6368",
            clip_on=True,
        )
    if spans:
        handles.append(Patch(facecolor="none", edgecolor=EXCLUDED, hatch="//", label="not judged"))
    return handles


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


def plot_latency(scan: HistoryScan, out: Path, judged: Judged | None = None) -> Path | None:
    """Latency of each op over time by f, marker by outcome (ok/fail/info), log scale."""
    series = {k: s for k, s in scan.latency.items() if len(s)}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fault_handles = shade_faults(ax, scan.faults, judged)
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


def plot_throughput(scan: HistoryScan, out: Path, judged: Judged | None = None) -> Path | None:
    """Completions per second by outcome; bins widen for long runs to keep ~300 points."""
    if not any(scan.throughput.values()):
        return None
    width = max(1, math.ceil(scan.end_s / 300)) if scan.end_s > 0 else 1
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fault_handles = shade_faults(ax, scan.faults, judged)
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
    raw: Any,
    scan: HistoryScan,
    out: Path,
    title: str,
    ylabel: str,
    colour: str,
    judged: Judged | None = None,
) -> Path | None:
    """A metric the checker sampled over time (realtime lag, unseen count) as a step line.

    The checker counts its seconds from the history's first op; they are moved onto the
    other plots' axis. With a judged window the parts left out are drawn grey and the
    scale is set by the judged part (the drain re-reading from 0 would dwarf the rest).
    """
    arr = _points(raw)
    if arr is None:
        return None
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fault_handles = shade_faults(ax, scan.faults, judged)
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    arr[:, 0] += scan.start_s
    if len(arr) > 4 * MAX_POINTS:
        arr = arr[downsample(arr[:, 0], arr[:, 1], 4 * MAX_POINTS)]
    inside = np.ones(len(arr), dtype=bool)
    if judged is not None and judged.excluded:
        inside = (arr[:, 0] >= judged.from_s) & (arr[:, 0] <= judged.to_s)
    handles: list[Any] = []
    if not inside.all():
        (grey,) = ax.step(
            arr[:, 0], arr[:, 1], where="post", color=EXCLUDED, linewidth=1.0, label="not judged"
        )
        handles.append(grey)
    part = arr[inside] if inside.any() else arr
    (line,) = ax.step(
        part[:, 0], part[:, 1], where="post", color=colour, linewidth=1.3, label=ylabel
    )
    handles.insert(0, line)
    ax.set_ylabel(ylabel)
    y = part[:, 1]
    top = float(y.max()) if len(y) else 0.0
    if len(y) > 10 and top > 20 * max(float(np.percentile(y, 95)), 1.0):
        # One spike would flatten the rest of the run to zero.
        ax.set_yscale("symlog", linthresh=max(float(np.percentile(y, 50)), 1.0))
        ax.set_ylabel(f"{ylabel}, symlog")
    outside = arr[~inside, 1]
    if len(outside) and float(outside.max()) > 1.3 * max(top, 1.0):
        ax.set_ylim(0, 1.3 * max(top, 1.0))
        title += f" (not judged, off the scale: up to {float(outside.max()):,.0f})"
    else:
        ax.set_ylim(bottom=0)
    _xlim(ax, max(scan.end_s, float(arr[:, 0].max())))
    return _finish(fig, ax, [*handles, *fault_handles], title, out)


def _bin_width(span_s: float, bins: int = 120) -> float:
    """A round bin width giving about `bins` bins over span_s (at least 1 s)."""
    raw = max(span_s / bins, 1.0)
    for nice in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600):
        if nice >= raw:
            return float(nice)
    return float(math.ceil(raw / 3600) * 3600)


def latency_quantiles(t: np.ndarray, y: np.ndarray, width: float) -> dict[str, np.ndarray]:
    """Per time bin of `width` seconds with ops: bin start ("t") and each quantile of the
    latencies completed in it (the sorted sample's element at index floor(q*n), as the
    checker takes quantiles)."""
    if not len(t):
        return {"t": np.array([]), **{q: np.array([]) for q, _f, _s in QUANTILES}}
    b = np.floor(t / width).astype(np.int64)
    order = np.lexsort((y, b))
    b, ys = b[order], y[order]
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    counts = np.diff(np.r_[starts, len(b)])
    out = {"t": b[starts] * width}
    for name, f, _style in QUANTILES:
        out[name] = ys[starts + np.minimum(counts - 1, np.floor(f * counts).astype(np.int64))]
    return out


def _with_gaps(q: dict[str, np.ndarray], width: float) -> dict[str, np.ndarray]:
    """A NaN point in each run of empty bins, so the lines break where no op completed
    instead of bridging a stall (a stall is what the plot is there to show)."""
    t = q["t"]
    if len(t) < 2:
        return q
    gap = np.flatnonzero(np.diff(t) > width * 1.5)
    if not len(gap):
        return q
    out = {"t": np.insert(t, gap + 1, t[gap] + width)}
    for name, _f, _s in QUANTILES:
        out[name] = np.insert(q[name].astype(np.float64), gap + 1, np.nan)
    return out


def plot_latency_quantiles(
    scan: HistoryScan, out: Path, judged: Judged | None = None
) -> Path | None:
    """p50, p95 and p99 of op latency over time per f (Jepsen's latency-quantiles): every
    completed op (ok, fail, info) in bins of a round number of seconds."""
    by_f: dict[str, list[Series]] = {}
    for (f, _typ), s in scan.latency.items():
        if len(s):
            by_f.setdefault(f, []).append(s)
    if not by_f:
        return None
    width = _bin_width(max(scan.end_s - scan.start_s, 1.0))
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fault_handles = shade_faults(ax, scan.faults, judged)
    handles: list[Any] = []
    for i, f in enumerate(sorted(by_f)):
        t = np.concatenate([np.frombuffer(s.t_s, dtype=np.float64) for s in by_f[f]])
        y = np.concatenate([np.frombuffer(s.latency_ms, dtype=np.float32) for s in by_f[f]])
        q = _with_gaps(latency_quantiles(t, np.maximum(y.astype(np.float64), 0.01), width), width)
        c = F_COLOURS[i % len(F_COLOURS)]
        for name, _f, style in QUANTILES:
            ax.step(
                q["t"] + width / 2, q[name], where="mid", color=c, linestyle=style, linewidth=1.2
            )
        handles.append(Line2D([], [], color=c, label=f))
    handles += [
        Line2D([], [], color="#555", linestyle=style, label=name) for name, _f, style in QUANTILES
    ]
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    _xlim(ax, scan.end_s)
    title = f"Latency quantiles by operation ({width:g} s bins)"
    return _finish(fig, ax, handles + fault_handles, title, out)


def all_plots(
    scan: HistoryScan,
    metrics: dict[str, Any],
    plots_dir: Path,
    judged: Judged | None = None,
) -> dict[str, Path | None]:
    """Draw every plot into plots_dir; name -> path (None when there was no data)."""
    lag = metrics.get("realtime_lag") if isinstance(metrics.get("realtime_lag"), dict) else {}
    unseen = metrics.get("unseen") if isinstance(metrics.get("unseen"), dict) else {}
    return {
        "latency": plot_latency(scan, plots_dir / "latency.png", judged),
        "latency-quantiles": plot_latency_quantiles(
            scan, plots_dir / "latency-quantiles.png", judged
        ),
        "throughput": plot_throughput(scan, plots_dir / "throughput.png", judged),
        "realtime-lag": plot_over_time(
            (lag or {}).get("over_time"),
            scan,
            plots_dir / "realtime-lag.png",
            "Realtime lag: how stale consumers were",
            "lag (ms)",
            "#1f77b4",
            judged,
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
    "latency_quantiles",
    "plot_latency",
    "plot_latency_quantiles",
    "plot_over_time",
    "plot_throughput",
    "shade_faults",
]
