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
    """Read `path` once; keep full ops only for the indices in `wanted`."""
    want = set(wanted)
    scan = HistoryScan()
    faults = FaultTracker()
    pending: dict[Any, tuple[int, str]] = {}  # process -> (invoke ns, f)
    if not path.exists():
        return scan
    with path.open("rb") as fh:
        for n, raw in enumerate(fh):
            if not raw.strip():
                continue
            try:
                op = orjson.loads(raw)
                t = int(op.get("time", 0))
                typ = op["type"]
                f = op["f"]
                process = op.get("process")
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                scan.bad_lines += 1
                continue
            if isinstance(typ, str) and typ.startswith(":"):
                typ = typ[1:]
            if isinstance(f, str) and f.startswith(":"):
                f = f[1:]
            index = op.get("index", n)
            scan.ops += 1
            t_s = t / NS
            scan.end_s = max(scan.end_s, t_s)
            if want and isinstance(index, int) and index in want:
                scan.ops_by_index[index] = op
            if process in ("nemesis", ":nemesis"):
                if typ != "invoke":
                    faults.add(str(f), t_s, op.get("value"))
                continue
            if typ == "invoke":
                pending[process] = (t, str(f))
                continue
            scan.counts[(str(f), str(typ))] += 1
            scan.throughput.setdefault(str(typ), Counter())[int(t_s)] += 1
            inv = pending.pop(process, None)
            if inv is not None:
                key = (inv[1], str(typ))
                s = scan.latency.get(key)
                if s is None:
                    s = scan.latency[key] = Series()
                s.add(t_s, (t - inv[0]) / 1e6)
    scan.in_flight = len(pending)
    scan.faults = faults.windows(scan.end_s)
    return scan
