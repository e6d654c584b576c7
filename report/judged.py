"""The judged window as the report shows it: on the plots' time axis, with its reasons.

The definition is the checker's (checker/window.py). results.json carries the window
the checker used (`metrics.judged_window`, seconds from the history's first op); for
results written before it existed, the report works it out the same way from
test.json and the history it has just read. Inside it, what faults excused
(checker/excuse.py: `metrics.liveness.windows` and `excused`) is told by
`excused_html`.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
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


MAX_SHOWN = 20  # excused windows and stalls listed in report.html (results.json has more)


def _span(a: object, b: object) -> str:
    ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return f"{a:,.1f}–{b:,.1f} s" if ok else "?"  # type: ignore[str-format]


def excused_html(live: dict[str, Any] | None) -> str:
    """The Liveness section's account of faults: which stretches were judged as they are,
    which a fault excused and why, and the stalls it excused (checker/excuse.py); "" for
    results without faults (or from before the rule)."""
    w = live.get("windows") if isinstance(live, dict) else None
    if not isinstance(w, dict):
        return ""
    allowance = w.get("allowance_s")
    bound = f"{allowance:g} s" if isinstance(allowance, (int, float)) else "recovery_s"
    judged = [x for x in w.get("judged") or [] if isinstance(x, dict)]
    excused = [x for x in w.get("excused") or [] if isinstance(x, dict)]
    spans = ", ".join(_span(x.get("from_s"), x.get("to_s")) for x in judged) or "none"
    out = [
        '<div class="judged" id="fault-windows"><p>A stall (a key overdue, a starved window) '
        "is <b>excused</b> when it lies within one fault's allowance: while the fault is "
        f"active and for {escape(bound)} after its heal (the recovery bound, "
        "<code>recovery_s</code>, against which each heal's recovery is judged); a kill, "
        "stop or pause of a minority of the nodes held longer excuses only that long after "
        "its start. A stall that outlasts the allowance of the fault it began in, or "
        "happens with no fault active, is judged (docs/anomalies.md, Liveness).</p>",
        f"<p>Judged with no fault active or recovering: {escape(spans)}"
        + (f" ({w['judged_s']:,.1f} s)" if isinstance(w.get("judged_s"), (int, float)) else "")
        + ".</p>",
    ]
    if excused:
        items = "".join(
            f"<li>{escape(_span(x.get('from_s'), x.get('to_s')))}: {escape(str(x.get('why', '')))}"
            "</li>"
            for x in excused[:MAX_SHOWN]
        )
        more = (
            f"<p>… and {len(excused) - MAX_SHOWN:,} more.</p>" if len(excused) > MAX_SHOWN else ""
        )
        out.append(f"<p>Fault allowances:</p><ul>{items}</ul>{more}")
    stalls = [x for x in live.get("excused") or [] if isinstance(x, dict)]  # type: ignore[union-attr]
    counts = live.get("excused_counts")  # type: ignore[union-attr]
    total = sum(counts.values()) if isinstance(counts, dict) else len(stalls)
    if stalls:
        items = "".join(
            f"<li><b>{escape(str(x.get('type')))}</b>: {escape(str(x.get('explanation', '')))}</li>"
            for x in stalls[:MAX_SHOWN]
        )
        shown = min(len(stalls), MAX_SHOWN)
        more = f"<p>Showing {shown} of {total:,}.</p>" if total > shown else ""
        out.append(f"<p>Stalls excused ({total:,}), not violations:</p><ul>{items}</ul>{more}")
    else:
        out.append("<p>No stall needed excusing.</p>")
    out.append("</div>")
    return "".join(out)
