"""Plots of the background load (load.jsonl) and of the nodes' memory, on the history's
time axis with the fault windows shaded (docs/load.md).

- ``load``: offered, produced and consumed messages/s; produce p50/p99; e2e p50/p99;
  the windows the checker judged behind marked red;
- ``node-memory``: the load's produce and e2e p99 on top, and under it, per node,
  anonymous memory, page cache, the memory cgroup's usage and limit (a squeeze shows as
  the limit appearing), its limit hits/s (each one a direct reclaim of the cgroup: what
  cgroup v1 counts of it), refaults/s (evicted pages read back), the host's direct
  reclaim (pages scanned/s, allocation stalls/s: global reclaim only), memory pressure
  (PSI "some", % of time: the host's, and the cgroup's where it has one), major
  faults/s, broker RSS and CPU (cores): so a produce-p99 spike and the start of reclaim
  line up on one time axis.

Both use the report's left and right margins, so their time axes line up with the
other plots. A function returns None when it has nothing to draw.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from ..histories.loadlog import LOAD_FILE, LoadLog, LoadLogError, read_loadlog
from .faults import FaultWindow
from .plots import DPI, MARGINS, shade_faults

LOAD_PLOT_TITLES = {
    "load": "Background load: offered vs consumed, produce and end-to-end latency",
    "node-memory": "Load latency and the nodes' memory, reclaim, faults and CPU",
}
BEHIND = "#d62728"
NODE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
NodeSample = tuple[float, dict[str, dict[str, Any]]]  # (history seconds, node -> figures)


def load_offset(log: LoadLog, test: dict[str, Any]) -> float:
    """History seconds of the generator's time 0 (0 when test.json cannot tell)."""
    wall0 = test.get("history_wall_start")
    start = log.start_time
    if isinstance(wall0, (int, float)) and start is not None:
        return start - float(wall0)
    return 0.0


def node_samples(lines: Iterable[str]) -> list[NodeSample]:
    """The node-stats ops of a history's lines: (seconds, value), in order (pure)."""
    out: list[NodeSample] = []
    for line in lines:
        if '"node-stats"' not in line:
            continue
        try:
            op = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(op, dict) or op.get("f") != "node-stats":
            continue
        v, t = op.get("value"), op.get("time")
        if isinstance(v, dict) and isinstance(t, (int, float)):
            out.append((t / 1e9, {k: x for k, x in v.items() if isinstance(x, dict)}))
    return out


def read_node_samples(history: Path) -> list[NodeSample]:
    try:
        with history.open(encoding="utf-8", errors="replace") as f:
            return node_samples(f)
    except OSError:
        return []


def series(
    samples: Sequence[NodeSample], node: str, key: str, gaps: bool = False
) -> tuple[list[float], list[float]]:
    """A figure of one node over time (samples where it is known). With `gaps`, a sample
    that has the figure as null gives NaN, so a drawn line breaks there (a limit that
    was lifted, then set again) instead of joining across."""
    ts, ys = [], []
    for t, v in samples:
        fig = v.get(node, {})
        x = fig.get(key)
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            ts.append(t)
            ys.append(float(x))
        elif gaps and key in fig and x is None and ys:
            ts.append(t)
            ys.append(math.nan)
    return ts, ys


def rate(
    ts: Sequence[float], ys: Sequence[float], scale: float = 1.0
) -> tuple[list[float], list[float]]:
    """Per-second rate of a counter between samples (a reset, e.g. a restarted broker's
    own counters, gives no point)."""
    out_t, out_y = [], []
    for i in range(1, len(ts)):
        dt = ts[i] - ts[i - 1]
        dy = ys[i] - ys[i - 1]
        if dt > 0 and dy >= 0:
            out_t.append(ts[i])
            out_y.append(dy / dt * scale)
    return out_t, out_y


def _panel_figure(n: int) -> tuple[Any, list[Axes]]:
    fig, axes = plt.subplots(n, 1, figsize=(12.0, 1.9 * n + 0.9), sharex=True, squeeze=False)
    return fig, [a[0] for a in axes]


def _finish(
    fig: Any, axes: list[Axes], title: str, handles: list[Any], out: Path, dpi: int = DPI
) -> Path:
    axes[0].set_title(title, loc="left", fontsize=11)
    axes[-1].set_xlabel("time since start (s)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        h, _ = ax.get_legend_handles_labels()
        if h:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, frameon=False)
    if handles:
        axes[-1].legend(
            handles=handles + axes[-1].get_legend_handles_labels()[0],
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=7.5,
            frameon=False,
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.subplots_adjust(
        left=MARGINS["left"], right=MARGINS["right"], top=0.95, bottom=0.07, hspace=0.12
    )
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def _behind_spans(results: dict[str, Any] | None) -> list[tuple[float, float]]:
    live = ((results or {}).get("metrics") or {}).get("liveness") or {}
    load = live.get("load") or {}
    return [
        (float(w["from_s"]), float(w["to_s"]))
        for w in load.get("windows") or ()
        if isinstance(w, dict) and w.get("behind")
    ]


def _latency_panel(ax: Axes, log: LoadLog, off: float, which: str) -> bool:
    t = [s.t + off for s in log.seconds]
    drew = False
    for q, style in (("p50", "-"), ("p99", ":")):
        ys = [getattr(s, f"{which}_{q}_ms") for s in log.seconds]
        pts = [(a, b) for a, b in zip(t, ys, strict=True) if b is not None and b > 0]
        if pts:
            ax.plot(*zip(*pts, strict=True), linestyle=style, linewidth=1.2, label=f"{which} {q}")
            drew = True
    if drew:
        ax.set_yscale("log")
    ax.set_ylabel(f"{'e2e' if which == 'e2e' else 'produce'} (ms)")
    return drew


def plot_load(
    log: LoadLog,
    off: float,
    faults: Sequence[FaultWindow],
    end_s: float,
    out: Path,
    behind: Sequence[tuple[float, float]] = (),
) -> Path | None:
    """Offered / produced / consumed per second, produce and e2e quantiles."""
    # the sliver of an interval the generator writes at its stop would read as a drop
    log = LoadLog(log.start, [s for s in log.seconds if s.dt >= 0.1], log.final)
    if not log.seconds:
        return None
    fig, (a0, a1, a2) = _panel_figure(3)
    t = [s.t + off for s in log.seconds]

    def per_s(attr: str) -> list[float]:
        return [getattr(s, attr) / s.dt if s.dt > 0 else 0.0 for s in log.seconds]

    a0.plot(t, per_s("offered"), color="#7f7f7f", linewidth=1.6, label="offered")
    a0.plot(t, per_s("produced"), color="#1f77b4", linewidth=1.0, label="produced")
    a0.plot(t, per_s("consumed"), color="#2ca02c", linewidth=1.0, label="consumed")
    if any(s.shed for s in log.seconds):
        a0.plot(t, per_s("shed"), color="#ff7f0e", linewidth=1.0, label="shed")
    a0.set_ylabel("messages/s")
    a0.set_ylim(bottom=0)
    _latency_panel(a1, log, off, "produce")
    _latency_panel(a2, log, off, "e2e")
    handles: list[Any] = []
    for ax in (a0, a1, a2):
        handles = shade_faults(ax, faults)
        for a, b in behind:
            ax.axvspan(a, b, facecolor="none", edgecolor=BEHIND, hatch="xx", linewidth=0)
    if behind:
        handles.append(Patch(facecolor="none", edgecolor=BEHIND, hatch="xx", label="behind"))
    if end_s > 0:
        a2.set_xlim(0, max(end_s, t[-1]) * 1.01)
    return _finish(fig, [a0, a1, a2], LOAD_PLOT_TITLES["load"], handles, out)


MEMORY_PANELS: tuple[tuple[str, str], ...] = (
    ("anon", "anon (MiB)"),
    ("cache", "page cache (MiB)"),
    ("limit", "cgroup usage,\nlimit (MiB)"),
    ("hits", "limit hits/s\n(cgroup reclaim)"),
    ("refault", "refaults/s"),
    ("reclaim", "direct reclaim\n(host)"),
    ("psi", "PSI some (%)"),
    ("majflt", "major faults/s"),
    ("rss", "broker RSS (MiB)"),
    ("cpu", "broker CPU (cores)"),
)
MIB = 1 / (1 << 20)


@dataclass(frozen=True)
class Line:
    """One line of a memory panel (pure data: what `panel_lines` decided to draw)."""

    label: str
    colour: str
    style: str
    ts: list[float]
    ys: list[float]


def _mib(xy: tuple[list[float], list[float]]) -> tuple[list[float], list[float]]:
    return xy[0], [y * MIB for y in xy[1]]


def _host_lines(what: str, samples: Sequence[NodeSample], node: str) -> list[Line]:
    """Host-wide figures (every local node carries the same; the first one's are drawn)."""
    keys = {
        "reclaim": (
            ("host_pgscan_direct", "pages scanned/s", "#d62728", 1.0),
            ("host_allocstall", "allocation stalls/s", "#9467bd", 1.0),
        ),
        "psi": (("host_psi_some_us", "memory some (host)", "#7f7f7f", 1e-4),),  # us/s -> %
    }[what]
    out = []
    for key, label, colour, scale in keys:
        ts, ys = rate(*series(samples, node, key), scale=scale)
        if ts:
            out.append(Line(label, colour, "-", ts, ys))
    return out


def panel_lines(what: str, samples: Sequence[NodeSample], nodes: Sequence[str]) -> list[Line]:
    """The lines of one memory panel (pure): per node, in the node's colour, plus the
    host's for host-wide figures. Counters become per-second rates."""
    out: list[Line] = []
    if what in ("reclaim", "psi") and nodes:
        out += _host_lines(what, samples, nodes[0])
        if what == "reclaim":
            return out
    for i, node in enumerate(nodes):
        c = NODE_COLOURS[i % len(NODE_COLOURS)]

        def add(
            xy: tuple[list[float], list[float]], label: str = node, style: str = "-", c: str = c
        ) -> None:
            if xy[0]:
                out.append(Line(label, c, style, xy[0], xy[1]))

        if what == "anon":
            xy = series(samples, node, "cgroup_anon_bytes")
            add(_mib(xy if xy[0] else series(samples, node, "rss_anon_bytes")))
        elif what == "cache":
            add(_mib(series(samples, node, "cache_bytes")))
        elif what == "limit":
            add(_mib(series(samples, node, "cgroup_usage_bytes")))
            add(_mib(series(samples, node, "cgroup_limit_bytes", gaps=True)), f"{node} limit", ":")
        elif what == "hits":
            add(rate(*series(samples, node, "cgroup_failcnt")))
            # cgroup v2 counts the reclaim's scans too
            add(rate(*series(samples, node, "cgroup_pgscan_direct")), f"{node} pages scanned", "--")
        elif what == "refault":
            add(rate(*series(samples, node, "cgroup_refault")))
        elif what == "psi":  # cgroup v2 (or a cgroup2 hierarchy beside v1)
            add(rate(*series(samples, node, "cgroup_psi_some_us"), scale=1e-4))
        elif what == "majflt":
            add(rate(*series(samples, node, "majflt")))
        elif what == "rss":
            add(_mib(series(samples, node, "rss_bytes")))
        elif what == "cpu":
            add(rate(*series(samples, node, "cpu_ms"), scale=1e-3))
        else:
            raise ValueError(f"unknown memory panel {what!r}")
    return out


def plot_node_memory(
    samples: Sequence[NodeSample],
    log: LoadLog | None,
    off: float,
    faults: Sequence[FaultWindow],
    end_s: float,
    out: Path,
    panels: Sequence[str] | None = None,
    height: float = 1.9,
    dpi: int = DPI,
) -> Path | None:
    """The load's p99s on top, the nodes' memory figures under it (one time axis).
    `panels` (keys of MEMORY_PANELS, default all) picks the panels; a panel with
    nothing to draw (e.g. no cgroup limit figures) is left out."""
    if len(samples) < 2:
        return None
    nodes = sorted({n for _t, v in samples for n in v})
    labels = dict(MEMORY_PANELS)
    chosen = [
        (w, panel_lines(w, samples, nodes)) for w in (panels or [k for k, _ in MEMORY_PANELS])
    ]
    chosen = [(w, lines) for w, lines in chosen if lines]
    if not chosen:
        return None
    fig, axes = plt.subplots(
        len(chosen) + 1, 1, figsize=(12.0, height * (len(chosen) + 1) + 0.9), sharex=True
    )
    top = axes[0]
    if log is not None and log.seconds:
        t = [s.t + off for s in log.seconds]
        for attr, label, colour in (
            ("produce_p99_ms", "produce p99", "#1f77b4"),
            ("e2e_p99_ms", "e2e p99", "#2ca02c"),
        ):
            pts = [(a, getattr(s, attr)) for a, s in zip(t, log.seconds, strict=True)]
            pts = [(a, b) for a, b in pts if b is not None and b > 0]
            if pts:
                top.plot(*zip(*pts, strict=True), color=colour, linewidth=1.0, label=label)
        top.set_yscale("log")
    top.set_ylabel("load p99 (ms)")
    for ax, (what, lines) in zip(axes[1:], chosen, strict=True):
        for ln in lines:
            ax.plot(
                ln.ts, ln.ys, color=ln.colour, linestyle=ln.style, linewidth=1.0, label=ln.label
            )
        ax.set_ylabel(labels[what], fontsize=8)
    handles: list[Any] = []
    for ax in axes:
        handles = shade_faults(ax, faults)
    if end_s > 0:
        axes[-1].set_xlim(0, end_s * 1.01)
    return _finish(fig, list(axes), LOAD_PLOT_TITLES["node-memory"], handles, out, dpi)


def load_plots(
    run_dir: Path,
    history: Path,
    test: dict[str, Any],
    results: dict[str, Any] | None,
    faults: Sequence[FaultWindow],
    end_s: float,
    plots_dir: Path,
) -> dict[str, Path | None]:
    """The load plots of a run: {} when the run had no background load (no load.jsonl);
    a bad load.jsonl draws nothing (the checker reports the error)."""
    path = run_dir / LOAD_FILE
    if not path.is_file():
        return {}
    try:
        log = read_loadlog(path)
    except (LoadLogError, OSError):
        return {"load": None, "node-memory": None}
    off = load_offset(log, test)
    end = max(end_s, (log.seconds[-1].t + off) if log.seconds else 0.0)
    return {
        "load": plot_load(log, off, faults, end, plots_dir / "load.png", _behind_spans(results)),
        "node-memory": plot_node_memory(
            read_node_samples(history), log, off, faults, end, plots_dir / "node-memory.png"
        ),
    }
