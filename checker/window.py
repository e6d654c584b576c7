"""The judged window: the part of a run whose liveness is judged.

Two stretches of a ktrial run say nothing about how the system under test behaved
and would dominate its liveness numbers if they were judged:

* the **warm-up**: clients connecting, topics' leaders settling, consumers being
  assigned; starvation there is start-up, not a fault's effect;
* the **drain**: after the heal, fresh consumers read every key back from offset 0,
  so their realtime lag is as old as the run.

``judged_window`` is the one definition, shared by the checker (realtime lag's worst
value, starvation) and the report (headlines and plots). It is pure: test.json's
metadata and a few times in, a window out. Without metadata (a bare history from any
tool) the whole history is judged, exactly as before the window existed. Definitions
in docs/anomalies.md, section "Liveness".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

NS = 1_000_000_000
WARMUP_SETTING = "liveness_warmup_s"  # test.json (top level or checker section), seconds


class JudgedWindow(NamedTuple):
    """[start_ns, end_ns] in the history's own time; `why` says what was left out ("" when
    nothing was)."""

    start_ns: int
    end_ns: int
    why: str

    @property
    def excluded(self) -> bool:
        return bool(self.why)

    def contains(self, t_ns: int) -> bool:
        return self.start_ns <= t_ns <= self.end_ns

    def to_json(self, t0: int) -> dict[str, Any]:
        """{from_s, to_s, why}, seconds counted from `t0` (the history's earliest time),
        as every other time in results.json."""
        return {
            "from_s": round((self.start_ns - t0) / NS, 3),
            "to_s": round((self.end_ns - t0) / NS, 3),
            "why": self.why,
        }


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _setting(meta: Mapping[str, Any], name: str) -> Any:
    """A setting at test.json's top level or in its checker/options/workload section."""
    for d in (meta, meta.get("checker"), meta.get("options"), meta.get("workload")):
        if isinstance(d, Mapping) and name in d:
            return d[name]
    return None


def warmup_s(meta: Mapping[str, Any] | None, window_s: float) -> float:
    """Seconds of warm-up: test.json's `liveness_warmup_s` if set; else one liveness window
    for a run ktrial made (test.json has `ktrial_version`); else 0 (nothing is known)."""
    if not isinstance(meta, Mapping):
        return 0.0
    given = _number(_setting(meta, WARMUP_SETTING))
    if given is not None:
        return max(0.0, given)
    return float(window_s) if meta.get("ktrial_version") else 0.0


def drain_started_ns(meta: Mapping[str, Any] | None) -> int | None:
    """The drain's start as test.json records it (`drain.started_s`, history seconds)."""
    drain = meta.get("drain") if isinstance(meta, Mapping) else None
    started = _number(drain.get("started_s")) if isinstance(drain, Mapping) else None
    return None if started is None else round(started * NS)


def had_drain(meta: Mapping[str, Any] | None) -> bool:
    """test.json says a drain ran (a `drain` section)."""
    return isinstance(meta, Mapping) and isinstance(meta.get("drain"), Mapping)


def drain_start_in_history(ops: Iterable[tuple[Any, int, bool]]) -> int | None:
    """Where the drain began, from the ops alone: (process, invoke time, is the op an
    `assign` with `seek_to_beginning`) of every client op.

    The drain is the run's tail in which only fresh processes work, each beginning with
    an assign that seeks to the beginning: the earliest such process start S before which
    every older process had invoked its last op. None when there is no such tail (for
    runs written before test.json recorded `drain.started_s`)."""
    first: dict[Any, tuple[int, bool]] = {}
    last: dict[Any, int] = {}
    for process, t, seek in ops:
        cur = first.get(process)
        if cur is None or t < cur[0]:
            first[process] = (t, seek)
        if t > last.get(process, t - 1):
            last[process] = t
    starts = sorted(t for t, seek in first.values() if seek)
    if not starts:
        return None
    # candidates in time order; an older process still invoking after S rules S out
    older = sorted((t, last[p]) for p, (t, _s) in first.items())
    for s in starts:
        if all(end < s for t, end in older if t < s):
            return s
    return None


def judged_window(
    meta: Mapping[str, Any] | None,
    first_time: int | None,
    last_time: int | None,
    *,
    window_s: float = 10.0,
    first_fault_ns: int | None = None,
    drain_start_ns: int | None = None,
) -> JudgedWindow:
    """The window of history time whose liveness is judged, and why it is narrower than
    [first_time, last_time] when it is.

    meta: test.json's object (None for a bare history: the whole history is judged).
    window_s: the liveness window (the warm-up's default length).
    first_fault_ns: when the first fault began; the warm-up never hides a fault.
    drain_start_ns: where the caller found the drain in the history, used only when
        test.json says a drain ran but not when it began (older runs).

    The end is the drain's start (test.json's `drain.started_s`). The start is the first
    op plus the warm-up (`warmup_s`), or the first fault if that comes sooner. A warm-up
    that would leave nothing to judge is not applied.
    """
    first = int(first_time or 0)
    last = max(int(last_time or first), first)
    if not isinstance(meta, Mapping) or not meta:
        return JudgedWindow(first, last, "")
    why: list[str] = []
    end = last
    drain = drain_started_ns(meta)
    if drain is None and had_drain(meta):
        drain = drain_start_ns
    if drain is not None and first < drain <= last:
        end = drain
        why.append(f"the drain, from {(drain - first) / NS:,.1f} s (consumers re-reading from 0)")
    start = first
    warm = warmup_s(meta, window_s)
    if warm > 0:
        start = first + round(warm * NS)
        cut = first_fault_ns is not None and first <= first_fault_ns < start
        if cut:
            assert first_fault_ns is not None
            start = first_fault_ns
        if start >= end:  # a run shorter than its warm-up: judge it all
            start = first
        elif start > first:
            why.insert(
                0,
                f"the warm-up, the first {(start - first) / NS:,.1f} s"
                + (" (until the first fault)" if cut else " (before any fault)"),
            )
    return JudgedWindow(start, end, "; ".join(why))
