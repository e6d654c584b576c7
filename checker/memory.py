"""Memory growth of the brokers: a leak told from a warm-up.

Input: the `node-stats` nemesis ops (nemesis/nodestats.py writes them; their fields
are in docs/anomalies.md, "Liveness", row `memory`). Output: per node the figure that
was judged, its steady-state trend, and a `memory-growth` violation for a node whose
memory kept growing once it had settled. Pure: no I/O.

Two things make a healthy broker look like a leak, and the rule answers each:

* **A JVM touching its heap.** A broker started with `-Xms512m -Xmx512m` reserves
  its heap at once but only makes it resident as the collector first uses each
  region, so its RSS climbs for minutes (272 -> 629 MiB in a healthy 10-minute run).
  That growth is bounded by -Xmx. When the sample says how much of the heap is
  resident, the judged figure is the anonymous memory *outside* the heap: the node
  cgroup's anonymous memory (every process in the node, never page cache) or else
  the broker's own, minus the heap's resident pages. A heap filling up to -Xmx then
  moves nothing; a native leak (direct buffers, threads, a helper process in the
  node) still does.
* **Warm-up of everything else.** Class loading, the JIT's code cache, connection
  buffers all grow early and then settle. The trend is judged on the *later half*
  of each broker process's life (by time), where a warm-up has ended and a leak
  still climbs, with a slope robust to single spikes (Theil-Sen: the median of the
  pairwise slopes), not on the last sample minus the first.

A process is flagged when its steady-state growth (slope x the window's length)
exceeds both `memory_growth_min_bytes` and `memory_growth_ratio` x its settled
size (its first sample after start-up). A run too short to show that much growth in
its later half is not flagged: a warm-up and a leak cannot be told apart there.
Histories without the heap fields (older runs, brokers that are not JVMs) are judged
on RSS under the same steady-state rule.

Samples taken while a memory fault held the node (between a `memory-squeeze` and
its `memory-release`) are left out: the fault's balloon lives in the node's cgroup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..histories.model import Op
from .options import CheckOptions

NS = 1_000_000_000
MIB = 1024 * 1024
NODE_STATS = "node-stats"
SQUEEZE, RELEASE = "memory-squeeze", "memory-release"
WINDOW_SAMPLES = 3  # a process is judged when its later half holds at least this many
FIT_POINTS = 240  # the slope is fitted on at most this many samples, evenly spaced

# The figures a sample may give, best first, with how results.json and the
# explanation name them.
FIGURES: dict[str, str] = {
    "cgroup-anon-minus-heap": "non-heap anonymous memory (node cgroup anon minus JVM heap)",
    "anon-minus-heap": "non-heap anonymous memory (broker anon minus JVM heap)",
    "cgroup-anon": "anonymous memory (node cgroup)",
    "anon": "anonymous memory (broker process)",
    "rss": "RSS",
}


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def figures(st: dict[str, Any]) -> dict[str, int]:
    """The figures one node's sample gives (see FIGURES), from the fields it has."""
    out: dict[str, int] = {}
    heap = _int(st.get("heap_resident_bytes"))
    for name, src in (("cgroup-anon", "cgroup_anon_bytes"), ("anon", "rss_anon_bytes")):
        v = _int(st.get(src))
        if v is None:
            continue
        out[name] = v
        if heap is not None:
            out[f"{name}-minus-heap"] = v - heap
    rss = _int(st.get("rss_bytes"))
    if rss is not None:
        out["rss"] = rss
    return out


@dataclass(slots=True)
class Sample:
    time: int
    rss: int
    figures: dict[str, int]
    heap_max: int | None


def incarnations(samples: Sequence[Op]) -> dict[str, list[list[Sample]]]:
    """Per node, its samples split into runs of one broker process (incarnations).

    A new run starts when the sampled pid changes, when the node was missing from a
    sample in between (down), or when RSS fell below half the previous sample (a
    restart between two samples): a restarted JVM starts small again, and comparing
    across restarts would hide a leak that ended in an OOM kill. A node's sample
    without an integer `rss_bytes` is skipped.
    """
    runs: dict[str, list[list[Sample]]] = {}
    last_pid: dict[str, Any] = {}
    gone: set[str] = set()
    for op in samples:
        if not isinstance(op.value, dict):
            continue
        here: set[str] = set()
        for node, st in op.value.items():
            rss = _int(st.get("rss_bytes")) if isinstance(st, dict) else None
            if rss is None or not isinstance(st, dict):
                continue
            name = str(node)
            here.add(name)
            pid = st.get("pid")
            node_runs = runs.setdefault(name, [])
            prev = node_runs[-1][-1].rss if node_runs else None
            if (
                not node_runs
                or name in gone
                or (pid is not None and pid != last_pid.get(name, pid))
                or (prev is not None and rss < prev / 2)
            ):
                node_runs.append([])
            sample = Sample(op.time, rss, figures(st), _int(st.get("heap_max_bytes")))
            node_runs[-1].append(sample)
            last_pid[name] = pid
            gone.discard(name)
        gone |= set(runs) - here
    return runs


def fault_windows(nemesis: Sequence[Op]) -> dict[str | None, list[tuple[int, int]]]:
    """Per node, the [from, to] times a memory fault held it (None: a squeeze naming
    no node held every node; a release naming none ends every squeeze). A squeeze
    never released lasts to the end."""
    open_: dict[str | None, int] = {}
    out: dict[str | None, list[tuple[int, int]]] = {}
    for op in nemesis:
        if op.f not in (SQUEEZE, RELEASE):
            continue
        names = op.value.get("nodes") if isinstance(op.value, dict) else None
        nodes: list[str | None] = (
            [str(n) for n in names] if isinstance(names, list) and names else [None]
        )
        if op.f == RELEASE and nodes == [None]:  # a release naming no node ends them all
            nodes = list(open_)
        for n in nodes:
            if op.f == SQUEEZE:
                open_.setdefault(n, op.time)
            elif n in open_:
                out.setdefault(n, []).append((open_.pop(n), op.time))
    for n, t in open_.items():
        out.setdefault(n, []).append((t, 1 << 62))
    return out


def _held(t: int, windows: list[tuple[int, int]]) -> bool:
    return any(a <= t <= b for a, b in windows)


def theil_sen(pts: Sequence[tuple[int, int]]) -> float:
    """Median of the pairwise slopes (bytes per ns) of at most FIT_POINTS evenly
    spaced points; 0 when no two points differ in time."""
    if len(pts) > FIT_POINTS:
        idx = np.linspace(0, len(pts) - 1, FIT_POINTS).round().astype(int)
        pts = [pts[i] for i in idx]
    t = np.array([p[0] for p in pts], dtype=np.float64)
    y = np.array([p[1] for p in pts], dtype=np.float64)
    i, j = np.triu_indices(len(pts), k=1)
    dt = t[j] - t[i]
    keep = dt > 0
    if not keep.any():
        return 0.0
    return float(np.median((y[j] - y[i])[keep] / dt[keep]))


def settled_size(values: Sequence[int]) -> int:
    """The first value not under half the median: a process's size once booted."""
    half = sorted(values)[len(values) // 2] / 2
    return next((v for v in values if v >= half), values[-1])


@dataclass(frozen=True, slots=True)
class Judged:
    """The steady-state verdict on one process."""

    figure: str
    window: tuple[int, int]  # times of the window's first and last sample
    window_samples: int
    slope: float  # bytes per ns
    growth: int  # slope x window length
    baseline: int  # settled size of the figure
    flagged: bool


def judge(samples: Sequence[Sample], opts: CheckOptions) -> Judged | None:
    """The steady-state trend of one process, None when too few samples to judge.

    The figure is the best one (FIGURES order) that at least half of the samples
    give; the window is the later half of the samples that give it, by time."""
    if not samples:
        return None
    kinds = [k for k in FIGURES if 2 * sum(k in s.figures for s in samples) >= len(samples)]
    if not kinds:
        return None
    kind = kinds[0]
    pts = [(s.time, s.figures[kind]) for s in samples if kind in s.figures]
    mid = pts[0][0] + (pts[-1][0] - pts[0][0]) / 2
    win = [p for p in pts if p[0] >= mid]
    if len(win) < WINDOW_SAMPLES or win[-1][0] <= win[0][0]:
        return None
    slope = theil_sen(win)
    growth = round(slope * (win[-1][0] - win[0][0]))
    baseline = settled_size([v for _t, v in pts])
    limit = max(opts.memory_growth_min_bytes, opts.memory_growth_ratio * max(baseline, 1))
    flagged = growth > limit
    return Judged(kind, (win[0][0], win[-1][0]), len(win), slope, growth, baseline, flagged)


def memory_growth(
    nemesis: Sequence[Op], t0: int, opts: CheckOptions
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """results' liveness `memory` section (per node: RSS first/last/max and the
    steady-state verdict of its worst broker process) and the violations."""
    stats = [op for op in nemesis if op.f == NODE_STATS]
    held = fault_windows(nemesis)
    nodes: dict[str, Any] = {}
    violations: list[dict[str, Any]] = []
    for node, procs in sorted(incarnations(stats).items()):
        windows = held.get(node, []) + held.get(None, [])
        verdicts = [judge([s for s in p if not _held(s.time, windows)], opts) for p in procs]
        judged = [(i, v) for i, v in enumerate(verdicts) if v is not None]
        worst = max(judged, key=lambda iv: (iv[1].flagged, iv[1].growth), default=None)
        every = [s for p in procs for s in p]
        heap_max = next((s.heap_max for s in reversed(every) if s.heap_max is not None), None)
        info: dict[str, Any] = {
            "samples": len(every),
            "processes": len(procs),
            "first_bytes": every[0].rss,
            "last_bytes": every[-1].rss,
            "max_bytes": max(s.rss for s in every),
            "heap_max_bytes": heap_max,
            "figure": None,
            "baseline_bytes": None,
            "growth_bytes": None,
            "bytes_per_min": None,
            "window_s": None,
            "window_samples": 0,
            "flagged": False,
        }
        if worst is not None:
            i, v = worst
            info.update(
                figure=v.figure,
                baseline_bytes=v.baseline,
                growth_bytes=v.growth,
                bytes_per_min=round(v.slope * 60 * NS, 1),
                window_s=[round((v.window[0] - t0) / NS, 1), round((v.window[1] - t0) / NS, 1)],
                window_samples=v.window_samples,
                flagged=v.flagged,
            )
            if v.flagged:
                which = f" (broker process {i + 1} of {len(procs)})" * (len(procs) > 1)
                violations.append(
                    {
                        "type": "memory-growth",
                        "node": node,
                        **{k: x for k, x in info.items() if k != "flagged"},
                        "explanation": _explain(node, which, v, t0, opts),
                    }
                )
        nodes[node] = info
    return {"nodes": nodes, "samples": len(stats)}, violations


def _explain(node: str, which: str, v: Judged, t0: int, opts: CheckOptions) -> str:
    a, b = (round((t - t0) / NS, 1) for t in v.window)
    return (
        f"node {node}'s {FIGURES[v.figure]}{which} kept growing after start-up: "
        f"{v.slope * 60 * NS / MIB:+.1f} MiB/min over t={a:g}-{b:g} s (the later half of "
        f"its sampled life, {v.window_samples} samples), +{v.growth / MIB:.0f} MiB in that "
        f"window, +{100 * v.growth / max(v.baseline, 1):.0f}% of its settled "
        f"{v.baseline / MIB:.0f} MiB; "
        f"threshold +{opts.memory_growth_min_bytes / MIB:g} MiB and "
        f"+{100 * opts.memory_growth_ratio:g}%"
    )


def memory_check(
    mem: dict[str, Any], violations: list[dict[str, Any]], opts: CheckOptions
) -> tuple[Any, Any, str]:
    """(value, threshold, explanation) of the `memory-growth` liveness check: the
    largest steady-state growth of any node, in bytes (None when none was judged)."""
    growths = [n["growth_bytes"] for n in mem["nodes"].values() if n["growth_bytes"] is not None]
    if violations:
        text = "; ".join(v["explanation"] for v in violations)
    elif not mem["samples"]:
        text = "no node-stats samples in the history"
    else:
        judged = sum(n["growth_bytes"] is not None for n in mem["nodes"].values())
        text = (
            f"{len(mem['nodes'])} nodes sampled {mem['samples']} times, {judged} judged on "
            f"the later half of each broker process's sampled life; none kept growing past the "
            f"threshold"
        )
    return max(growths, default=None), opts.memory_growth_min_bytes, text
