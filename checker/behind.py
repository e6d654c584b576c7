"""Behind: did the background load keep up? (load.jsonl, docs/load.md)

The benchmark's definition: a window is *behind* when its consumers read under
`ratio` (97%) of the messages offered in it, or its end-to-end p99 is over
`e2e_p99_limit_ms` (5 s). Windows are `window_s` long on the generator's clock; a
window with less than half its length of telemetry (the last, cut by the stop) or
with nothing offered is not judged. The end-to-end p99 of a window is exact to the
generator's histogram buckets (its seconds' histograms merged).

A behind window during a fault, or within `recovery_s` after its heal, is excused
(listed, not a violation), as the other liveness checks excuse stalls. Pure: the
telemetry comes in as a parsed :class:`~ktrial.histories.loadlog.LoadLog`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..histories.loadlog import LoadLog, LoadSecond, merge, quantile

MAX_LISTED = 20
RATIO = 0.97
E2E_P99_LIMIT_MS = 5000.0


@dataclass(frozen=True)
class Window:
    index: int
    from_s: float  # generator clock
    to_s: float
    covered_s: float
    offered: int
    consumed: int
    shed: int
    errors: int
    e2e_p99_ms: float | None
    produce_p99_ms: float | None
    consumers: tuple[int, ...]

    @property
    def ratio(self) -> float | None:
        return None if self.offered <= 0 else self.consumed / self.offered

    def behind(self, ratio: float, limit_ms: float) -> list[str]:
        """Why this window is behind ([] when it is not)."""
        why = []
        r = self.ratio
        if r is not None and r < ratio:
            why.append(f"consumed {self.consumed} of {self.offered} offered ({100 * r:.1f}%)")
        if self.e2e_p99_ms is not None and self.e2e_p99_ms > limit_ms:
            why.append(f"e2e p99 {self.e2e_p99_ms:g} ms")
        return why

    def idle_consumers(self) -> list[int]:
        """Consumers that read nothing in a window where others read."""
        if sum(self.consumers) <= 0:
            return []
        return [i for i, n in enumerate(self.consumers) if n == 0]


def windows(seconds: Sequence[LoadSecond], window_s: float) -> list[Window]:
    """The seconds grouped into windows of `window_s` by the start of each interval."""
    if window_s <= 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    groups: dict[int, list[LoadSecond]] = {}
    for s in seconds:
        groups.setdefault(int(max(0.0, s.t - s.dt) // window_s), []).append(s)
    out = []
    for i in sorted(groups):
        g = groups[i]
        width = max((len(s.consumers) for s in g), default=0)
        per = [0] * width
        for s in g:
            for j, n in enumerate(s.consumers):
                per[j] += n
        out.append(
            Window(
                index=i,
                from_s=i * window_s,
                to_s=(i + 1) * window_s,
                covered_s=sum(s.dt for s in g),
                offered=sum(s.offered for s in g),
                consumed=sum(s.consumed for s in g),
                shed=sum(s.shed for s in g),
                errors=sum(s.errors for s in g),
                e2e_p99_ms=quantile(merge(s.e2e_hist for s in g), 0.99)
                if any(s.e2e_hist for s in g)
                else max((s.e2e_p99_ms for s in g if s.e2e_p99_ms is not None), default=None),
                produce_p99_ms=quantile(merge(s.produce_hist for s in g), 0.99)
                if any(s.produce_hist for s in g)
                else max(
                    (s.produce_p99_ms for s in g if s.produce_p99_ms is not None), default=None
                ),
                consumers=tuple(per),
            )
        )
    return out


def consumer_progress(judged: Sequence[Window], totals: Sequence[int]) -> list[dict[str, Any]]:
    """Each consumer's progress (per-consumer, not only totals): what it read over the
    run (`totals`, the generator's final counts), its share of everything read, and over
    the judged windows the fewest it read in one and in how many it read nothing while
    others read (starved). Pure."""
    width = max([len(totals), *(len(w.consumers) for w in judged)], default=0)
    all_read = sum(totals)
    out = []
    for i in range(width):
        read = totals[i] if i < len(totals) else 0
        per = [w.consumers[i] if i < len(w.consumers) else 0 for w in judged]
        out.append(
            {
                "consumer": i,
                "read": read,
                "share": round(read / all_read, 4) if all_read else None,
                "min_window_read": min(per) if per else None,
                "idle_windows": sum(
                    1 for w, n in zip(judged, per, strict=True) if n == 0 and sum(w.consumers) > 0
                ),
            }
        )
    return out


def _runs(ws: list[Window]) -> list[list[Window]]:
    runs: list[list[Window]] = []
    for w in ws:
        if runs and runs[-1][-1].index + 1 == w.index:
            runs[-1].append(w)
        else:
            runs.append([w])
    return runs


def judge(
    log: LoadLog,
    window_s: float,
    *,
    ratio: float = RATIO,
    e2e_p99_limit_ms: float = E2E_P99_LIMIT_MS,
    excused_spans: Sequence[tuple[float, float, str]] = (),
    offset_s: float = 0.0,
    warmup_s: float = 0.0,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(metric, violations, excused) of the load's telemetry.

    `offset_s` turns the generator's clock into the history's (history seconds = load
    seconds + offset_s); `excused_spans` are (from_s, to_s, why) in history seconds.
    Windows starting in the load's first `warmup_s` seconds (its warm-up: fresh
    partitions' leaders, the JIT, the first batches) are not judged, as the other
    liveness checks leave out the run's warm-up (checker/window.py); a warm-up that
    would leave nothing to judge is not applied."""
    full = [w for w in windows(log.seconds, window_s) if w.covered_s >= window_s / 2 and w.offered]
    judged = [w for w in full if w.from_s >= warmup_s - 1e-9]
    if not judged:  # a load shorter than its warm-up: judge it all (as checker/window.py)
        judged, warmup_s = full, 0.0

    def h(x: float) -> float:
        return round(x + offset_s, 3)

    def excuse(w: Window) -> str | None:
        for a, b, why in excused_spans:
            if h(w.from_s) < b and h(w.to_s) > a:
                return why
        return None

    behind_w = [(w, w.behind(ratio, e2e_p99_limit_ms)) for w in judged]
    bad = [(w, why) for w, why in behind_w if why]
    excused_w = [(w, why, excuse(w)) for w, why in bad]
    violations: list[dict[str, Any]] = []
    excused: list[dict[str, Any]] = []
    reasons = {w.index: why for w, why in bad}
    for kept, target in ((False, violations), (True, excused)):
        ws = [w for w, _why, ex in excused_w if (ex is not None) == kept]
        for run in _runs(ws):
            off = sum(w.offered for w in run)
            con = sum(w.consumed for w in run)
            worst = max(run, key=lambda w: w.e2e_p99_ms or 0.0)
            rec: dict[str, Any] = {
                "type": "behind",
                "from_s": h(run[0].from_s),
                "to_s": h(run[-1].to_s),
                "windows": len(run),
                "offered": off,
                "consumed": con,
                "ratio": round(con / off, 4) if off else None,
                "e2e_p99_ms": worst.e2e_p99_ms,
                "idle_consumers": sorted({c for w in run for c in w.idle_consumers()}),
            }
            first = "; ".join(reasons[run[0].index])
            rec["explanation"] = (
                f"the load fell behind from {rec['from_s']:g} s to {rec['to_s']:g} s: "
                f"{con} of {off} offered messages consumed"
                + (f" ({100 * con / off:.1f}%)" if off else "")
                + f", worst window e2e p99 {worst.e2e_p99_ms} ms (behind: under "
                f"{100 * ratio:g}% consumed or e2e p99 over {e2e_p99_limit_ms:g} ms in a "
                f"{window_s:g} s window; first window: {first})"
            )
            if rec["idle_consumers"]:
                rec["explanation"] += (
                    f"; consumers {', '.join(map(str, rec['idle_consumers']))} read nothing "
                    "in some of these windows while others read"
                )
            if kept:
                why = next(ex for w, _y, ex in excused_w if w is run[0])
                rec["excused_by"] = why
            target.append(rec)
    ratios = [w.ratio for w in judged if w.ratio is not None]
    not_excused = [w.ratio for w, _why, ex in excused_w if ex is None and w.ratio is not None] + [
        w.ratio for w, why in behind_w if not why and w.ratio is not None
    ]
    final = log.final or {}
    totals = final.get("consumers")
    per_consumer: list[int] = (
        totals
        if isinstance(totals, list) and all(isinstance(x, int) for x in totals)
        else [sum(x) for x in zip(*(s.consumers for s in log.seconds), strict=False)]
    )
    metric: dict[str, Any] = {
        "window_s": window_s,
        "warmup_s": warmup_s,
        "ratio_threshold": ratio,
        "e2e_p99_limit_ms": e2e_p99_limit_ms,
        "windows_judged": len(judged),
        "behind_windows": len(bad),
        "under_ratio_windows": sum(1 for w in judged if w.ratio is not None and w.ratio < ratio),
        "excused_windows": sum(1 for _w, _y, ex in excused_w if ex is not None),
        "min_ratio": round(min(ratios), 4) if ratios else None,
        "min_ratio_not_excused": round(min(not_excused), 4) if not_excused else None,
        "max_e2e_p99_ms": max(
            (w.e2e_p99_ms for w in judged if w.e2e_p99_ms is not None), default=None
        ),
        "offered": sum(s.offered for s in log.seconds),
        "produced": sum(s.produced for s in log.seconds),
        "consumed": sum(s.consumed for s in log.seconds),
        "shed": sum(s.shed for s in log.seconds),
        "errors": sum(s.errors for s in log.seconds),
        "per_consumer": per_consumer,
        "consumers": consumer_progress(judged, per_consumer),
        "windows": [
            {
                "from_s": h(w.from_s),
                "to_s": h(w.to_s),
                "offered": w.offered,
                "consumed": w.consumed,
                "ratio": round(w.ratio, 4) if w.ratio is not None else None,
                "e2e_p99_ms": w.e2e_p99_ms,
                "produce_p99_ms": w.produce_p99_ms,
                "consumers": list(w.consumers),
                "behind": bool(w.behind(ratio, e2e_p99_limit_ms)),
            }
            for w in judged
        ][: 4 * MAX_LISTED],
    }
    return metric, violations, excused


def verdict(
    metric: dict[str, Any],
    violations: list[dict[str, Any]],
    excused: list[dict[str, Any]],
    bad: bool,
) -> dict[str, Any]:
    """The ``behind`` item of results' liveness checks."""
    ok = not violations
    if violations:
        text = violations[0]["explanation"] + (
            f" (+{len(violations) - 1} more episodes)" if len(violations) > 1 else ""
        )
    elif not metric["windows_judged"]:
        text = f"no {metric['window_s']:g} s window of load telemetry was judged"
    else:
        text = (
            f"the load kept up in {metric['windows_judged']} windows of {metric['window_s']:g} s: "
            f"lowest share consumed {metric['min_ratio']}, highest e2e p99 "
            f"{metric['max_e2e_p99_ms']} ms; {metric['offered']} offered, "
            f"{metric['consumed']} consumed, {metric['shed']} shed, {metric['errors']} errors"
        )
    if excused:
        text += (
            f" ({len(excused)} behind episodes excused by faults; first: "
            f"{excused[0]['explanation']})"
        )
    return {
        "ok": ok,
        "bad": bad and not ok,
        "value": metric["min_ratio_not_excused"],
        "threshold": metric["ratio_threshold"],
        "explanation": text,
    }


def add_to_liveness(
    live: dict[str, Any],
    log: LoadLog,
    fault_spans: Sequence[tuple[float, float, str]],
    offset_s: float,
    window_s: float,
    liveness_bad: bool,
    warmup_s: float = 0.0,
) -> None:
    """Put the load's judgement into results' liveness section: ``load`` (the metric,
    with the excused episodes), a ``behind`` check and its violations."""
    metric, violations, excused = judge(
        log, window_s, excused_spans=fault_spans, offset_s=offset_s, warmup_s=warmup_s
    )
    metric["excused"] = excused[:MAX_LISTED]
    live["load"] = metric
    live["violations"] = [*live.get("violations", ()), *violations]
    live.setdefault("checks", {})["behind"] = verdict(metric, violations, excused, liveness_bad)
