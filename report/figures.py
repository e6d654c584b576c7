"""A run's key figures: the numbers `ktrial runs --trend` compares night over night.

`run_figures(results, test)` is pure: it reads what results.json (and test.json)
already hold and never derives a figure the checker did not write. A figure an
older run's results lack is None ("missing"), never a guess:

| figure | results.json | worse when |
|---|---|---|
| ``txn_per_s`` | ``metrics.throughput.ok_per_s_by_f.txn`` | lower |
| ``ops_per_s`` | ``metrics.throughput.ok_data_per_s`` (ok send, poll and txn ops) | lower |
| ``e2e_p50``, ``e2e_p99`` (ms) | ``metrics.liveness.e2e_latency_ms`` | higher |
| ``commit_p50``, ``commit_p99`` (ms) | ``metrics.liveness.commit_latency_ms`` | higher |
| ``recovery_send``, ``recovery_read`` (s) | ``metrics.liveness.recovery.max_*_s`` | higher |
| ``mem_slope.<node>`` (MiB/min) | ``metrics.liveness.memory.nodes.<node>.bytes_per_min`` | higher |
| ``anomaly.<type>`` | ``anomalies.<type>.count`` | higher |
| ``violation.<type>`` | ``metrics.liveness.violation_counts.<type>`` | higher |

Counts: results.json lists only the anomaly types found, so a run whose results
have an ``anomalies`` section counts 0 of every other type (likewise
``violation_counts``); a run without the section has no count at all.

`series_key(name, test)` says which runs are the same test (docs/trend.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..histories.testmeta import TestMeta
from .verdict import verdict_of

Worse = Literal["higher", "lower"]
Number = int | float
MIB = 1 << 20


@dataclass(frozen=True)
class FigureSpec:
    """How a figure is shown and judged. `floor`: an absolute change smaller than this
    is never a regression, whatever the relative tolerance (a 2 ms p50 that becomes
    3 ms is +50% and noise)."""

    label: str
    unit: str
    worse: Worse
    floor: float = 0.0


# Fixed figures, in the order they are shown.
FIXED: dict[str, FigureSpec] = {
    "txn_per_s": FigureSpec("txn/s", "/s", "lower", 0.5),
    "ops_per_s": FigureSpec("ok data ops/s", "/s", "lower", 0.5),
    "e2e_p50": FigureSpec("e2e latency p50", "ms", "higher", 5.0),
    "e2e_p99": FigureSpec("e2e latency p99", "ms", "higher", 5.0),
    "commit_p50": FigureSpec("commit latency p50", "ms", "higher", 5.0),
    "commit_p99": FigureSpec("commit latency p99", "ms", "higher", 5.0),
    "recovery_send": FigureSpec("recovery: sends", "s", "higher", 1.0),
    "recovery_read": FigureSpec("recovery: reads", "s", "higher", 1.0),
}
# Figure families with a name part per node or type: `family.part`.
FAMILIES: dict[str, FigureSpec] = {
    "mem_slope": FigureSpec("memory slope", "MiB/min", "higher", 8.0),
    "anomaly": FigureSpec("anomaly", "", "higher"),
    "violation": FigureSpec("liveness violation", "", "higher"),
}
COUNTED = ("anomaly", "violation")  # families of counts (an absent type counts 0)


def family(name: str) -> str:
    """`anomaly.lost-write` -> `anomaly`; a fixed figure is its own family."""
    return name.split(".", 1)[0]


def spec(name: str) -> FigureSpec | None:
    """The spec of a figure name (None: no such figure)."""
    fam = family(name)
    if name in FIXED:
        return FIXED[name]
    if fam in FAMILIES and "." in name:
        return FAMILIES[fam]
    return None


def label(name: str) -> str:
    s = spec(name)
    if s is None or name in FIXED:
        return s.label if s else name
    part = name.split(".", 1)[1]
    return f"{s.label} {part}"


def order_key(name: str) -> tuple[int, str]:
    """Fixed figures first in their order, then memory, anomalies, violations."""
    fixed = list(FIXED)
    if name in FIXED:
        return fixed.index(name), ""
    return len(fixed) + list(FAMILIES).index(family(name)), name


@dataclass(frozen=True)
class RunFigures:
    """One run's key figures. `values` holds the figures the results gave (None: the
    section was there without that number); `counted` the families whose counts the
    results record, so an absent type of those counts 0."""

    verdict: str
    seed: int | None = None
    duration_s: float | None = None
    values: Mapping[str, Number | None] = field(default_factory=dict)
    counted: frozenset[str] = frozenset()
    bad_types: frozenset[str] = frozenset()  # anomaly types bad in this run

    def value(self, name: str) -> Number | None:
        if name in self.values:
            return self.values[name]
        return 0 if family(name) in self.counted else None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "seed": self.seed,
            "duration_s": self.duration_s,
            "figures": dict(sorted(self.values.items(), key=lambda kv: order_key(kv[0]))),
            "counted": sorted(self.counted),
            "bad_types": sorted(self.bad_types),
        }


def _num(d: Any, *path: str) -> Number | None:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def _dict(d: Any, *path: str) -> dict[str, Any] | None:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d if isinstance(d, dict) else None


def _liveness(metrics: dict[str, Any] | None) -> dict[str, Any] | None:
    return _dict(metrics, "liveness")


def _memory(metrics: dict[str, Any] | None) -> dict[str, Any] | None:
    """The per-node memory section: under liveness, or `metrics.memory` if it moves."""
    return _dict(_liveness(metrics), "memory", "nodes") or _dict(metrics, "memory", "nodes")


def _wall_s(meta: TestMeta) -> float | None:
    """test.json's wall-clock span of the run (when results.json has no duration)."""
    start, end = meta.wall_start, meta.wall_end
    return round(end - start, 3) if start is not None and end is not None and end >= start else None


def run_figures(results: dict[str, Any] | None, test: TestMeta | dict[str, Any]) -> RunFigures:
    """The key figures of one run from its results.json and test.json (pure)."""
    meta = test if isinstance(test, TestMeta) else TestMeta.from_json(test)
    if not isinstance(results, dict):
        return RunFigures(verdict_of(None), seed=meta.seed, duration_s=_wall_s(meta))
    metrics = _dict(results, "metrics")
    live = _liveness(metrics)
    values: dict[str, Number | None] = {}
    tp = _dict(metrics, "throughput")
    if tp is not None:
        by_f = _dict(tp, "ok_per_s_by_f")
        if by_f is not None and "txn" in by_f:
            values["txn_per_s"] = _num(by_f, "txn")
        if "ok_data_per_s" in tp:
            values["ops_per_s"] = _num(tp, "ok_data_per_s")
    if live is not None:
        for prefix, section in (("e2e", "e2e_latency_ms"), ("commit", "commit_latency_ms")):
            if isinstance(live.get(section), dict):
                for q in ("p50", "p99"):
                    values[f"{prefix}_{q}"] = _num(live, section, q)
        if isinstance(live.get("recovery"), dict):
            values["recovery_send"] = _num(live, "recovery", "max_send_s")
            values["recovery_read"] = _num(live, "recovery", "max_read_s")
    for node, info in sorted((_memory(metrics) or {}).items()):
        slope = _num(info, "bytes_per_min")
        values[f"mem_slope.{node}"] = None if slope is None else round(slope / MIB, 3)
    counted = set()
    anomalies = _dict(results, "anomalies")
    if anomalies is not None:
        counted.add("anomaly")
        for t, a in anomalies.items():
            n = _num(a, "count") if isinstance(a, dict) else None
            values[f"anomaly.{t}"] = int(n) if n is not None else (1 if a else 0)
    violations = _dict(live, "violation_counts")
    if violations is not None:
        counted.add("violation")
        for t, n in violations.items():
            if isinstance(n, int) and not isinstance(n, bool):
                values[f"violation.{t}"] = n
    bad = results.get("bad_error_types")
    duration = _num(results, "stats", "duration_s")
    return RunFigures(
        verdict=verdict_of(results),
        seed=meta.seed,
        duration_s=duration if duration is not None else _wall_s(meta),
        values=values,
        counted=frozenset(counted),
        bad_types=frozenset(str(t) for t in bad) if isinstance(bad, list) else frozenset(),
    )


@dataclass(frozen=True)
class SeriesKey:
    """What makes two stored runs the same test, so their figures compare: the test
    name (its folder in the store), the workload and whether it used transactions, the
    cluster kind and size, the broker profile and the fault families asked for. The
    Kafka version, the seed and the time limit are left out on purpose: a new broker
    build or seed is exactly what a nightly trend is there to judge."""

    name: str
    workload: str | None = None
    txn: bool | None = None
    cluster: str | None = None
    nodes: int | None = None
    profile: str | None = None
    faults: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "workload": self.workload,
            "txn": self.txn,
            "cluster": self.cluster,
            "nodes": self.nodes,
            "profile": self.profile,
            "faults": list(self.faults),
        }

    def describe(self) -> str:
        parts = [self.name]
        if self.workload:
            txn = {True: " (txn)", False: " (no txn)", None: ""}[self.txn]
            parts.append(f"workload {self.workload}{txn}")
        if self.cluster or self.nodes is not None:
            size = f" ×{self.nodes}" if self.nodes is not None else ""
            parts.append(f"{self.cluster or 'cluster'}{size}")
        if self.profile:
            parts.append(f"profile {self.profile}")
        parts.append(f"faults {','.join(self.faults) or 'none'}")
        return " · ".join(parts)


def _text(v: Any) -> str | None:
    return str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) and v != "" else None


def series_key(name: str, test: TestMeta | dict[str, Any]) -> SeriesKey:
    """The same-test key of a run stored under `name` with this test.json."""
    meta = test if isinstance(test, TestMeta) else TestMeta.from_json(test)
    cluster = meta.cluster or {}
    run = meta.run or {}
    nodes = cluster.get("nodes", run.get("nodes"))
    if isinstance(nodes, list):
        nodes = len(nodes)
    nem = meta.nemesis or {}
    fams = nem.get("families")
    if not isinstance(fams, list):
        fams = nem.get("faults")
    txn = meta.setting("txn")
    return SeriesKey(
        name=name,
        workload=meta.workload_name,
        txn=txn if isinstance(txn, bool) else None,
        cluster=_text(cluster.get("kind") or run.get("cluster")),
        nodes=nodes if isinstance(nodes, int) and not isinstance(nodes, bool) else None,
        profile=_text(cluster.get("profile") or run.get("profile")),
        faults=tuple(sorted({str(f) for f in fams if isinstance(f, str) and f}))
        if isinstance(fams, list)
        else (),
    )
