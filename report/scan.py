"""One streaming pass over history.jsonl collecting what the report draws.

The report must cope with million-op histories, so it reads the file once,
line by line, and keeps only compact arrays: per (f, type) the completion time
and latency of each op (paired with its invoke by process), completions per
second by type, the nemesis ops (for fault windows) and the few ops that
anomaly examples cite. It parses each line with orjson but does not build
micro-op tuples: the checker already validated the history, and a report of a
slightly damaged history is more useful than none, so unreadable lines are
counted and skipped rather than fatal.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .faults import FaultTracker, FaultWindow

NS = 1_000_000_000


@dataclass
class Series:
    """Completion times (s since start) and latencies (ms) of one (f, type)."""

    t_s: array = field(default_factory=lambda: array("d"))
    latency_ms: array = field(default_factory=lambda: array("f"))

    def add(self, t_s: float, lat_ms: float) -> None:
        self.t_s.append(t_s)
        self.latency_ms.append(lat_ms)

    def __len__(self) -> int:
        return len(self.t_s)


@dataclass
class HistoryScan:
    ops: int = 0
    end_s: float = 0.0
    bad_lines: int = 0
    latency: dict[tuple[str, str], Series] = field(default_factory=dict)
    # completions by type -> {second: n}
    throughput: dict[str, Counter[int]] = field(default_factory=dict)
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # client (f, type) -> n
    faults: list[FaultWindow] = field(default_factory=list)
    ops_by_index: dict[int, dict[str, Any]] = field(default_factory=dict)
    in_flight: int = 0  # invokes never completed (run cut short)

    @property
    def has_ops(self) -> bool:
        return self.ops > 0


def scan_history(path: Path, wanted: Iterable[int] = ()) -> HistoryScan:
    """Read `path` once; keep full ops only for the indices in `wanted`.

    The loop is written for speed (locals, no per-op method calls): it is the
    part of a report that grows with the history.
    """
    want = set(wanted)
    scan = HistoryScan()
    faults = FaultTracker()
    pending: dict[Any, tuple[int, str]] = {}  # process -> (invoke ns, f)
    if not path.exists():
        return scan
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    counts = scan.counts
    per_type: dict[str, Counter[int]] = scan.throughput
    # (f, type) -> (times, latencies) appenders
    series: dict[tuple[str, str], tuple[Any, Any]] = {}
    n_ops = bad = 0
    end_ns = 0
    with path.open("rb") as fh:
        for n, raw in enumerate(fh):
            try:
                op = loads(raw)
                t = int(op.get("time", 0))
                typ = op["type"]
                f = op["f"]
                process = op.get("process")
            except (decode_error, KeyError, TypeError, ValueError, AttributeError):
                if raw.strip():
                    bad += 1
                continue
            if typ.__class__ is not str or f.__class__ is not str:
                typ, f = str(typ), str(f)
            if typ[:1] == ":":
                typ = typ[1:]
            if f[:1] == ":":
                f = f[1:]
            n_ops += 1
            if t > end_ns:
                end_ns = t
            if want:
                index = op.get("index", n)
                if isinstance(index, int) and index in want:
                    scan.ops_by_index[index] = op
            if process == "nemesis" or process == ":nemesis":
                if typ != "invoke":
                    faults.add(f, t / NS, op.get("value"))
                continue
            if typ == "invoke":
                pending[process] = (t, f)
                continue
            counts[(f, typ)] += 1
            c = per_type.get(typ)
            if c is None:
                c = per_type[typ] = Counter()
            c[t // NS] += 1
            inv = pending.pop(process, None)
            if inv is not None:
                key = (inv[1], typ)
                app = series.get(key)
                if app is None:
                    s = scan.latency[key] = Series()
                    app = series[key] = (s.t_s.append, s.latency_ms.append)
                app[0](t / NS)
                app[1]((t - inv[0]) / 1e6)
    scan.ops = n_ops
    scan.bad_lines = bad
    scan.end_s = end_ns / NS
    scan.in_flight = len(pending)
    scan.faults = faults.windows(scan.end_s)
    return scan
