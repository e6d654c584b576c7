"""One streaming pass over a history collecting what the report draws.

The report must cope with million-op histories, so it reads the file once,
line by line, and keeps only compact arrays: per (f, type) the completion time
and latency of each op (paired with its invoke by process), completions per
second by type, the nemesis ops (for fault windows) and the few ops that
anomaly examples cite. It parses each line with orjson but does not build
micro-op tuples: the checker already validated the history, and a report of a
slightly damaged history is more useful than none, so unreadable lines are
counted and skipped rather than fatal.

A Jepsen history.edn (or any file histories/edn.py recognises) goes through the
histories readers instead: each op arrives as an Op and is handed to the same loop in
its JSON shape. That reader validates, so a malformed EDN history raises
HistoryError (file and line) rather than being skipped; JSONL keeps its fast path.
"""

from __future__ import annotations

import contextlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..checker.window import drain_start_in_history
from ..histories.edn import is_edn_history, iter_edn_history
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


@dataclass(frozen=True, slots=True)
class TimelineOp:
    """One client op for the timeline page: times in seconds of history time."""

    process: Any
    start_s: float
    end_s: float | None  # None: never completed
    type: str  # ok | fail | info (info also for never completed)
    f: str
    index: Any
    value: str  # compact JSON, cut
    error: str | None


TIMELINE_VALUE_CHARS = 240


@dataclass
class HistoryScan:
    ops: int = 0  # history lines that are ops (invokes and completions)
    client_ops: int = 0  # logical client ops: completions, plus invokes never completed
    nemesis_ops: int = 0  # nemesis lines other than invokes
    start_s: float = 0.0  # the earliest op time
    end_s: float = 0.0
    bad_lines: int = 0
    latency: dict[tuple[str, str], Series] = field(default_factory=dict)
    # completions by type -> {second: n}
    throughput: dict[str, Counter[int]] = field(default_factory=dict)
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # client (f, type) -> n
    faults: list[FaultWindow] = field(default_factory=list)
    ops_by_index: dict[int, dict[str, Any]] = field(default_factory=dict)
    in_flight: int = 0  # invokes never completed (run cut short)
    # process -> (first invoke ns, whether it was an assign seeking to the beginning,
    # last invoke ns): where the drain began, for runs whose test.json does not say
    processes: dict[Any, tuple[int, bool, int]] = field(default_factory=dict)
    timeline: list[TimelineOp] = field(default_factory=list)  # the first ops, for the page
    timeline_limit: int = 0

    @property
    def timeline_cut(self) -> bool:
        """The timeline holds only the first ops of the history."""
        return len(self.timeline) < self.client_ops

    def drain_start_ns(self) -> int | None:
        """The drain's start as the ops show it (checker/window.py)."""
        ops: list[tuple[Any, int, bool]] = []
        for p, (first, seek, last) in self.processes.items():
            ops += [(p, first, seek), (p, last, False)]
        return drain_start_in_history(ops)

    @property
    def has_ops(self) -> bool:
        return self.ops > 0


def _brief(x: Any, limit: int = TIMELINE_VALUE_CHARS) -> str:
    try:
        s = orjson.dumps(x, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        s = str(type(x).__name__)
    return s if len(s) <= limit else s[:limit] + "…"


def _edn_items(path: Path) -> Iterator[Any]:
    """The ops of an EDN history, read and validated by histories/edn.py, as JSON."""
    for op in iter_edn_history(path):
        yield op.to_json()


def _same(x: Any) -> Any:
    return x


def scan_history(path: Path, wanted: Iterable[int] = (), timeline: int = 0) -> HistoryScan:
    """Read `path` (history.jsonl, or a Jepsen history.edn) once; keep full ops only
    for the indices in `wanted`, and the first `timeline` client ops (paired) for the
    timeline page.

    The loop is written for speed (locals, no per-op method calls): it is the
    part of a report that grows with the history.
    """
    want = set(wanted)
    scan = HistoryScan(timeline_limit=timeline)
    faults = FaultTracker()
    pending: dict[Any, tuple[int, str]] = {}  # process -> (invoke ns, f)
    procs = scan.processes
    lines: list[TimelineOp] = scan.timeline
    opened: dict[Any, Any] = {}  # process -> its pending invoke's index (timeline only)
    n_nem = 0
    if not path.exists():
        return scan
    decode_error = orjson.JSONDecodeError
    counts = scan.counts
    per_type: dict[str, Counter[int]] = scan.throughput
    # (f, type) -> (times, latencies) appenders
    series: dict[tuple[str, str], tuple[Any, Any]] = {}
    n_ops = bad = 0
    end_ns = 0
    start_ns: int | None = None
    with contextlib.ExitStack() as stack:
        # JSONL: raw lines parsed here (the fast path); EDN: ops already parsed
        source: Iterable[Any]
        parse: Callable[[Any], Any]
        if is_edn_history(path):
            source, parse = _edn_items(path), _same
        else:
            source, parse = stack.enter_context(path.open("rb")), orjson.loads
        for n, raw in enumerate(source):
            try:
                op = parse(raw)
                t = int(op.get("time", 0))
                typ = op["type"]
                f = op["f"]
                process = op.get("process")
            except (decode_error, KeyError, TypeError, ValueError, AttributeError):
                if parse is _same or raw.strip():
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
            if start_ns is None or t < start_ns:
                start_ns = t
            if want:
                index = op.get("index", n)
                if isinstance(index, int) and index in want:
                    scan.ops_by_index[index] = op
            if process == "nemesis" or process == ":nemesis":
                if typ != "invoke":
                    n_nem += 1
                    faults.add(f, t / NS, op.get("value"))
                continue
            if typ == "invoke":
                pending[process] = (t, f)
                seen = procs.get(process)
                if seen is None:
                    seek = f == "assign" and bool(
                        op.get("seek_to_beginning") or op.get("seek-to-beginning?")
                    )
                    procs[process] = (t, seek, t)
                elif t > seen[2]:
                    procs[process] = (seen[0], seen[1], t)
                if timeline:
                    opened[process] = op.get("index", n)
                continue
            counts[(f, typ)] += 1
            c = per_type.get(typ)
            if c is None:
                c = per_type[typ] = Counter()
            c[t // NS] += 1
            inv = pending.pop(process, None)
            if timeline and len(lines) < timeline:
                err = op.get("error")
                lines.append(
                    TimelineOp(
                        process,
                        (inv[0] if inv is not None else t) / NS,
                        t / NS,
                        typ,
                        f if inv is None else inv[1],
                        op.get("index", n),
                        _brief(op.get("value")),
                        None if err is None else _brief(err, 160),
                    )
                )
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
    scan.start_s = (start_ns or 0) / NS
    scan.in_flight = len(pending)
    scan.nemesis_ops = n_nem
    scan.client_ops = sum(counts.values()) + len(pending)
    for process, (t_inv, f_inv) in pending.items():
        if len(lines) >= timeline:
            break
        lines.append(
            TimelineOp(process, t_inv / NS, None, "info", f_inv, opened.get(process), "", None)
        )
    scan.faults = faults.windows(scan.end_s)
    return scan
