"""The figures of one sweep point and the knee of a sweep (pure; docs/load.md).

A point is one offered rate on one partition count, run for `point_s` seconds; its
figures come from the last `measure_s` seconds of its telemetry (the benchmark's
method: 60 s per point, figures over the last 30). A point is *behind* when its
consumers read under 97% of what was offered there, or its end-to-end p99 is over
5 s (checker/behind.py's rule, over the measured stretch as one window).

The knee of a partition count is the highest offered rate that is not behind with
every lower rate not behind either: the most this cluster sustains. When no point is
behind, the knee is at least the highest rate tried (``knee_reached`` is False).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..checker.behind import E2E_P99_LIMIT_MS, RATIO
from ..histories.loadlog import LoadSecond, merge, quantile


@dataclass(frozen=True)
class Point:
    rate: float  # offered rate asked for
    partitions: int
    offered_rate: float | None = None  # measured, messages/s
    produced_rate: float | None = None
    consumed_rate: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p99_ms: float | None = None
    produce_p99_ms: float | None = None
    shed: int = 0
    errors: int = 0
    broker_cores: float | None = None  # CPU the brokers used, in cores
    client_cores: float | None = None  # CPU the load generator used, in cores
    behind: bool = False
    why: str = ""
    consumers: tuple[int, ...] = ()  # per-consumer messages over the measured stretch

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["consumers"] = list(self.consumers)
        return d


def measured(seconds: Sequence[LoadSecond], point_s: float, measure_s: float) -> list[LoadSecond]:
    """The seconds of the measured stretch: ending within (point_s - measure_s, point_s]."""
    lo = point_s - measure_s
    return [s for s in seconds if lo < s.t - s.dt + 1e-9 and s.t <= point_s + 0.5]


def point_figures(
    rate: float,
    partitions: int,
    seconds: Sequence[LoadSecond],
    broker_cores: float | None = None,
    ratio: float = RATIO,
    limit_ms: float = E2E_P99_LIMIT_MS,
) -> Point:
    """A point's figures from its measured seconds (none: behind, nothing measured)."""
    span = sum(s.dt for s in seconds)
    if not seconds or span <= 0:
        return Point(rate, partitions, behind=True, why="no telemetry in the measured stretch")
    offered = sum(s.offered for s in seconds)
    consumed = sum(s.consumed for s in seconds)
    e2e = merge(s.e2e_hist for s in seconds)
    prod = merge(s.produce_hist for s in seconds)
    p99 = quantile(e2e, 0.99)
    why = []
    if offered > 0 and consumed / offered < ratio:
        why.append(f"consumed {100 * consumed / offered:.1f}% of offered")
    if offered > 0 and consumed == 0:
        why.append("nothing consumed")
    if p99 is not None and p99 > limit_ms:
        why.append(f"e2e p99 {p99:g} ms")
    width = max((len(s.consumers) for s in seconds), default=0)
    per = [0] * width
    for s in seconds:
        for i, n in enumerate(s.consumers):
            per[i] += n
    cpu = [s.cpu_s for s in seconds if s.cpu_s is not None]
    return Point(
        rate=rate,
        partitions=partitions,
        offered_rate=round(offered / span, 1),
        produced_rate=round(sum(s.produced for s in seconds) / span, 1),
        consumed_rate=round(consumed / span, 1),
        e2e_p50_ms=quantile(e2e, 0.5),
        e2e_p99_ms=p99,
        produce_p99_ms=quantile(prod, 0.99),
        shed=sum(s.shed for s in seconds),
        errors=sum(s.errors for s in seconds),
        broker_cores=broker_cores,
        client_cores=round(sum(cpu) / span, 3) if cpu else None,
        behind=bool(why),
        why="; ".join(why),
        consumers=tuple(per),
    )


@dataclass(frozen=True)
class Knee:
    partitions: int
    rate: float | None  # the highest sustained rate (None: even the lowest was behind)
    reached: bool  # some higher rate was behind (else the knee is at least `rate`)
    first_behind: float | None

    def text(self) -> str:
        if self.rate is None:
            return (
                f"{self.partitions} partitions: behind already at the lowest rate "
                f"({self.first_behind:g} msg/s)"
            )
        if not self.reached:
            return (
                f"{self.partitions} partitions: no point behind; the knee is at least "
                f"{self.rate:g} msg/s (sweep higher)"
            )
        return (
            f"{self.partitions} partitions: knee at {self.rate:g} msg/s "
            f"(behind from {self.first_behind:g} msg/s)"
        )


def knees(points: Sequence[Point]) -> list[Knee]:
    """The knee of each partition count (docstring)."""
    out = []
    for parts in sorted({p.partitions for p in points}):
        row = sorted((p for p in points if p.partitions == parts), key=lambda p: p.rate)
        sustained: float | None = None
        first_behind: float | None = None
        for p in row:
            if p.behind:
                first_behind = p.rate
                break
            sustained = p.rate
        out.append(Knee(parts, sustained, first_behind is not None, first_behind))
    return out


def table(points: Sequence[Point]) -> list[str]:
    """The sweep's table as text lines: e2e p50 / p99 per rate and partition count."""

    def ms(x: float | None) -> str:
        return "-" if x is None else (f"{x:.0f}" if x >= 10 else f"{x:.1f}")

    def num(x: float | None, nd: int = 0) -> str:
        return "-" if x is None else f"{x:,.{nd}f}"

    head = (
        f"{'partitions':>10} {'offered/s':>10} {'measured/s':>10} {'consumed/s':>10} "
        f"{'e2e p50':>8} {'e2e p99':>8} {'prod p99':>8} {'brokers':>8} {'client':>7}  behind"
    )
    lines = [head, "-" * len(head)]
    for p in sorted(points, key=lambda p: (p.partitions, p.rate)):
        lines.append(
            f"{p.partitions:>10} {p.rate:>10,.0f} {num(p.offered_rate):>10} "
            f"{num(p.consumed_rate):>10} {ms(p.e2e_p50_ms):>8} {ms(p.e2e_p99_ms):>8} "
            f"{ms(p.produce_p99_ms):>8} {num(p.broker_cores, 2):>8} {num(p.client_cores, 2):>7}"
            f"  {'BEHIND: ' + p.why if p.behind else 'no'}"
        )
    return lines
