"""Throughput collapse: stretches in which the cluster accepted (almost) nothing.

Starvation and stuck keys judge values that were written; a cluster that stops
accepting writes leaves them nothing to judge (a broker paused with replication
factor 1 took every transaction down to nothing for 4.5 minutes, and both passed).
This rule judges the work itself: per window of the judged span, the values
acknowledged in it, against a reference rate the run itself set.

* **The figure** is acknowledged values (by the time of their ack or commit), not ok
  client ops: an ok poll that returns nothing is cheap, and consumers polling empty
  topics at full speed would hide a cluster that accepts nothing. Ok client ops of the
  window are told beside it. Consumption is starvation's and stuck-partition's to judge.
* **The reference** is the median window of the run's fault-free time (the windows no
  fault was active in: what the system does unhurt), or of all judged windows when no
  window is free of faults (a dense soak schedule). The plain median of the run would
  itself be collapsed when the collapse lasts over half the run.
* **A window collapses** when its values are under ``throughput_ratio`` (10%) of the
  reference. Only full windows inside the judged span are judged (the warm-up and the
  drain never are), and only when the reference has at least
  ``starvation_min_offered`` values: a slower run says nothing either way.
* **Faults** (checker/excuse.py): consecutive collapsed windows are one stall; the
  episode whose allowance holds its start excuses its windows that end within that
  allowance, and the rest are judged (a broker of a minority paused past the failover
  bound excuses only ``recovery_s`` from its start).

Pure: numpy arrays of times and the faults in, (metric, violations, excused) out.
Definitions in docs/anomalies.md, "Liveness".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .excuse import Excuser, Fault, episode_names

NS = 1_000_000_000
MAX_LISTED = 50
MAX_WINDOWS = 1_000_000  # 116 days of 10 s windows; beyond, the rule does not judge


def _median(xs: Any) -> float:
    return float(np.median(xs)) if len(xs) else 0.0


def _count(times: Any, edges: Any) -> Any:
    """How many of `times` fall in each [edges[i], edges[i + 1])."""
    t = np.sort(np.asarray(times, dtype=np.int64))
    at = np.searchsorted(t, edges, side="left")
    return np.diff(at)


def _touched(spans: Iterable[tuple[int, int]], edges: Any) -> Any:
    """Per window [edges[i], edges[i + 1]), whether any span [a, b] meets it."""
    n = len(edges) - 1
    pairs = np.array(list(spans), dtype=np.int64).reshape(-1, 2)
    if n <= 0 or not len(pairs):
        return np.zeros(max(n, 0), dtype=bool)
    i = np.maximum(np.searchsorted(edges, pairs[:, 0], side="right") - 1, 0)
    j = np.minimum(np.searchsorted(edges, pairs[:, 1], side="left"), n)
    keep = j > i
    marks = np.zeros(n + 1, dtype=np.int64)
    np.add.at(marks, i[keep], 1)
    np.add.at(marks, j[keep], -1)
    return np.cumsum(marks[:-1]) > 0


def throughput_collapse(
    acks: Any,
    oks: Any,
    start_ns: int,
    end_ns: int,
    t0: int,
    faults: Sequence[Fault],
    ex: Excuser | None,
    demand: Iterable[tuple[int, int]],
    *,
    window_s: float,
    ratio: float,
    min_reference: int,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(metric, violations, stalls a fault excused) over the full windows of
    [start_ns, end_ns]; `acks`: ack times of acknowledged values, `oks`: completion
    times of ok client ops (nanoseconds, the history's clock; `t0` its first op);
    `demand`: the spans in which writes were wanted (a write op in flight, a writer's
    slot waiting for its successor: checker/attended.py): a window none meets is idle,
    neither judged nor part of the reference."""
    w_ns = max(1, round(window_s * NS))
    n = max(0, (end_ns - start_ns) // w_ns)
    too_many = n > MAX_WINDOWS
    if too_many:
        n = 0
    edges = start_ns + w_ns * np.arange(n + 1, dtype=np.int64)
    values = _count(acks, edges) if n else np.zeros(0, dtype=np.int64)
    ops = _count(oks, edges) if n else np.zeros(0, dtype=np.int64)
    busy = _touched(demand, edges)
    free = ~_touched(((f.start_ns, f.end_ns) for f in faults), edges) & busy
    base = values[free] if free.any() else values[busy]
    reference = _median(base)
    metric: dict[str, Any] = {
        "window_s": window_s,
        "ratio": ratio,
        "windows": int(busy.sum()),
        "idle_windows": int(n - busy.sum()),
        "reference": round(reference, 1),
        "reference_from": "fault-free windows" if free.any() else "judged windows",
        "reference_windows": len(base),
        "min_reference": min_reference,
        "judged": bool(busy.any()) and reference >= min_reference,
        "min_ratio": None,
        "collapsed_windows": [],
    }
    if too_many:
        metric["note"] = f"not judged: over {MAX_WINDOWS:,} windows (a history spread over years)"
    if not metric["judged"]:
        return metric, [], []

    def row(i: int) -> dict[str, Any]:
        return {
            "from_s": round((int(edges[i]) - t0) / NS, 3),
            "to_s": round((int(edges[i + 1]) - t0) / NS, 3),
            "values": int(values[i]),
            "ok_ops": int(ops[i]),
            "ratio": round(int(values[i]) / reference, 4),
        }

    shares = values / reference
    low = np.flatnonzero(busy & (values < ratio * reference)).tolist()
    rows = {i: row(i) for i in low}
    excused_at: set[int] = set()
    excused: list[dict[str, Any]] = []
    for run in _runs(low) if ex else ():
        assert ex is not None
        lo = int(edges[run[0]])
        until = ex.allowed_until(lo)
        done = [i for i in run if until is not None and int(edges[i + 1]) <= until]
        if done:
            excused_at.update(done)
            hi = int(edges[done[-1] + 1])
            rec = _record([rows[i] for i in done], metric, faults, lo, hi, t0)
            named = ex.covering(lo, hi)
            rec["faults"] = [f for e in named for f in e.fault_ids()]
            rec["explanation"] += f"; excused: within what {episode_names(named)} allowed"
            excused.append(rec)
    for i in low:
        rows[i]["collapsed"] = True
        if i in excused_at:
            rows[i]["excused"] = True
    violations = []
    for run in _runs([i for i in low if i not in excused_at]):
        lo, hi = int(edges[run[0]]), int(edges[run[-1] + 1])
        rec = _record([rows[i] for i in run], metric, faults, lo, hi, t0)
        if ex:
            rec["explanation"] += "; " + ex.why_not(lo, hi, t0)
        violations.append(rec)
    judged = busy.copy()
    judged[sorted(excused_at)] = False
    metric.update(
        min_ratio=_low(shares[busy]),
        collapsed_windows=[rows[i] for i in low][:MAX_LISTED],
    )
    if ex:
        outside = busy & (ex.which_all(edges[:-1], edges[1:]) < 0)
        metric.update(
            min_ratio_not_excused=_low(shares[judged]),
            # the margin of the windows no fault's allowance held (None: every window was
            # in one, as under a dense schedule); the windows above count those too
            min_ratio_outside_faults=_low(shares[outside]),
            excused_windows=len(excused_at),
        )
    return metric, violations, excused


def _low(shares: Any) -> float | None:
    return round(float(shares.min()), 4) if len(shares) else None


def _runs(idx: list[int]) -> list[list[int]]:
    """Window indices grouped into runs of adjacent windows."""
    out: list[list[int]] = []
    for i in idx:
        if out and out[-1][-1] == i - 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _record(
    rows: list[dict[str, Any]],
    metric: dict[str, Any],
    faults: Sequence[Fault],
    lo: int,
    hi: int,
    t0: int,
) -> dict[str, Any]:
    """The record of consecutive collapsed windows [lo, hi] (ns), judged against the
    metric's reference."""
    reference, ratio = metric["reference"], metric["ratio"]
    values = sum(r["values"] for r in rows)
    ops = sum(r["ok_ops"] for r in rows)
    worst = min(rows, key=lambda r: r["values"])
    active = [f for f in faults if f.start_ns < hi and f.end_ns > lo]
    nodes = sorted({n for f in active for n in f.nodes})
    secs = rows[-1]["to_s"] - rows[0]["from_s"]
    window = rows[0]["to_s"] - rows[0]["from_s"]
    n_ref = metric["reference_windows"]
    text = (
        f"throughput collapsed from {rows[0]['from_s']:g} s to {rows[-1]['to_s']:g} s "
        f"({len(rows)} window{'s' * (len(rows) > 1)} of {window:g} s): {values} values "
        f"acknowledged ({values / secs:.2f}/s) and {ops} ok client ops; worst window "
        f"{worst['from_s']:g}-{worst['to_s']:g} s: {worst['values']} values against the "
        f"run's median of {reference:g} per window (over its {n_ref} "
        f"{metric['reference_from'].replace('windows', 'window' if n_ref == 1 else 'windows')}"
        f"; threshold {100 * ratio:g}%: {ratio * reference:g})"
    )
    if active:
        text += "; faults active then: " + ", ".join(
            f"{f.label()} ({f.id}) {(f.start_ns - t0) / NS:.1f}-{(f.end_ns - t0) / NS:.1f} s"
            for f in active[:3]
        )
        if len(active) > 3:
            text += f" and {len(active) - 3} more"
    return {
        "type": "throughput-collapse",
        "from_s": rows[0]["from_s"],
        "to_s": rows[-1]["to_s"],
        "windows": len(rows),
        "values": values,
        "ok_ops": ops,
        "reference": reference,
        "reference_from": metric["reference_from"],
        "ratio": round(values / (len(rows) * reference), 4),
        "worst": worst,
        "nodes": nodes,
        "active_faults": [f.id for f in active],
        "explanation": text,
    }
