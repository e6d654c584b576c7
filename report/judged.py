"""The judged window as the report shows it: on the plots' time axis, with its reasons.

The definition is the checker's (checker/window.py). results.json carries the window
the checker used (`metrics.judged_window`, seconds from the history's first op); for
results written before it existed, the report works it out the same way from
test.json and the history it has just read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..checker.window import NS, judged_window
from .scan import HistoryScan


@dataclass(frozen=True)
class Judged:
    """[from_s, to_s] in history seconds (the plots' axis); `why` is "" when the whole
    history is judged."""

    from_s: float
    to_s: float
    why: str
    start_s: float  # the history's first op
    end_s: float  # its last

    @property
    def excluded(self) -> bool:
        return bool(self.why)

    def spans(self) -> list[tuple[float, float, str]]:
        """The stretches left out: (from, to, label)."""
        out = []
        if self.from_s > self.start_s:
            out.append((self.start_s, self.from_s, "warm-up"))
        if self.to_s < self.end_s:
            out.append((self.to_s, self.end_s, "drain"))
        return out if self.excluded else []

    def contains(self, t_s: float) -> bool:
        return self.from_s <= t_s <= self.to_s


def _window_s(results: dict[str, Any] | None) -> float:
    stats = (results or {}).get("stats")
    opts = stats.get("options") if isinstance(stats, dict) else None
    w = opts.get("liveness_window_s") if isinstance(opts, dict) else None
    return float(w) if isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0 else 10.0


def judged_of(results: dict[str, Any] | None, test: dict[str, Any], scan: HistoryScan) -> Judged:
    """The window the checker judged (from results.json), else the same rule applied here."""
    metrics = (results or {}).get("metrics")
    given = metrics.get("judged_window") if isinstance(metrics, dict) else None
    if isinstance(given, dict):
        a, b, why = given.get("from_s"), given.get("to_s"), given.get("why")
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and isinstance(why, str):
            return Judged(scan.start_s + a, scan.start_s + b, why, scan.start_s, scan.end_s)
    first_fault = min((w.start_s for w in scan.faults), default=None)
    w = judged_window(
        test,
        round(scan.start_s * NS),
        round(scan.end_s * NS),
        window_s=_window_s(results),
        first_fault_ns=None if first_fault is None else round(first_fault * NS),
        drain_start_ns=scan.drain_start_ns(),
    )
    return Judged(w.start_ns / NS, w.end_ns / NS, w.why, scan.start_s, scan.end_s)
