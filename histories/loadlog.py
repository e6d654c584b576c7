"""load.jsonl: the load generator's telemetry, one JSON object per line (docs/load.md).

ktrial-loadgen (workers/loadgen) writes a ``start`` line (its settings), one ``second``
line per interval and a ``final`` line with the totals. A ``second`` line carries the
interval's counts (offered, produced, consumed, shed, errors), the per-consumer
counts, produce and end-to-end latency quantiles, and both latency histograms as
sparse ``[[bucket middle ms, count], ...]`` lists, so that longer windows get exact
(to the bucket, ~6%) quantiles by merging.

Pure reading: this module only parses text. A torn last line (the generator killed
mid-write) is skipped; any other bad line is a :class:`LoadLogError` naming the file
and line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOAD_FILE = "load.jsonl"

Hist = dict[float, int]  # bucket middle (ms) -> count


class LoadLogError(ValueError):
    """A load.jsonl line that is not what the generator writes."""


@dataclass(frozen=True)
class LoadSecond:
    """One telemetry interval (usually a second) of the generator's clock."""

    t: float  # seconds since the generator began offering, at the interval's end
    time: float  # epoch seconds at the interval's end
    dt: float  # the interval's length in seconds
    offered: int
    produced: int
    consumed: int
    shed: int = 0
    errors: int = 0
    consumers: tuple[int, ...] = ()
    produce_p50_ms: float | None = None
    produce_p99_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p99_ms: float | None = None
    cpu_s: float | None = None
    produce_hist: tuple[tuple[float, int], ...] = ()
    e2e_hist: tuple[tuple[float, int], ...] = ()
    last_error: str | None = None


@dataclass
class LoadLog:
    start: dict[str, Any] | None = None  # the start line (settings under "config")
    seconds: list[LoadSecond] = field(default_factory=list)
    final: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)  # the generator's "error" lines
    torn: bool = False  # the last line was cut short and skipped

    @property
    def config(self) -> dict[str, Any]:
        c = (self.start or {}).get("config")
        return c if isinstance(c, dict) else {}

    @property
    def start_time(self) -> float | None:
        """Epoch seconds when the generator began offering."""
        v = (self.start or {}).get("time")
        if isinstance(v, (int, float)):
            return float(v)
        if self.seconds:
            s = self.seconds[0]
            return s.time - s.t
        return None


def _num(d: dict[str, Any], key: str, where: str, default: Any = ...) -> Any:
    v = d.get(key, default)
    if v is ...:
        raise LoadLogError(f"{where}: missing {key!r}")
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        if v is None and default is None:
            return None
        raise LoadLogError(f"{where}: {key!r} must be a number, got {v!r}")
    if isinstance(v, float) and not math.isfinite(v):
        raise LoadLogError(f"{where}: {key!r} must be finite")
    return v


def _hist(d: dict[str, Any], key: str, where: str) -> tuple[tuple[float, int], ...]:
    raw = d.get(key) or []
    if not isinstance(raw, list):
        raise LoadLogError(f"{where}: {key!r} must be a list of [ms, count] pairs")
    out = []
    for pair in raw:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in pair)
        ):
            raise LoadLogError(f"{where}: {key!r} must be a list of [ms, count] pairs")
        out.append((float(pair[0]), int(pair[1])))
    return tuple(out)


def parse_second(d: dict[str, Any], where: str) -> LoadSecond:
    consumers = d.get("consumers") or []
    if not isinstance(consumers, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) for c in consumers
    ):
        raise LoadLogError(f"{where}: 'consumers' must be a list of counts")
    err = d.get("last_error")
    return LoadSecond(
        t=float(_num(d, "t", where)),
        time=float(_num(d, "time", where)),
        dt=float(_num(d, "dt", where, 1.0)),
        offered=int(_num(d, "offered", where)),
        produced=int(_num(d, "produced", where)),
        consumed=int(_num(d, "consumed", where)),
        shed=int(_num(d, "shed", where, 0)),
        errors=int(_num(d, "errors", where, 0)),
        consumers=tuple(consumers),
        produce_p50_ms=_num(d, "produce_p50_ms", where, None),
        produce_p99_ms=_num(d, "produce_p99_ms", where, None),
        e2e_p50_ms=_num(d, "e2e_p50_ms", where, None),
        e2e_p99_ms=_num(d, "e2e_p99_ms", where, None),
        cpu_s=_num(d, "cpu_s", where, None),
        produce_hist=_hist(d, "produce_hist", where),
        e2e_hist=_hist(d, "e2e_hist", where),
        last_error=err if isinstance(err, str) else None,
    )


def parse_loadlog(lines: Iterable[str], name: str = LOAD_FILE) -> LoadLog:
    """The telemetry of `lines` (`name` is used in error messages)."""
    log = LoadLog()
    pending: tuple[int, str] | None = None  # a bad line is an error unless it is the last
    for n, raw in enumerate(lines, 1):
        if pending is not None:
            raise LoadLogError(f"{name}:{pending[0]}: {pending[1]}")
        line = raw.strip()
        if not line:
            continue
        where = f"{name}:{n}"
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            pending = (n, f"not JSON ({e.msg}); is this a load.jsonl written by ktrial-loadgen?")
            continue
        if not isinstance(d, dict):
            raise LoadLogError(f"{where}: each line must be a JSON object")
        kind = d.get("type")
        if kind == "second":
            log.seconds.append(parse_second(d, where))
        elif kind == "start":
            log.start = d
        elif kind == "final":
            log.final = d
        elif kind == "error":
            log.errors.append(str(d.get("message")))
        # other types: a newer generator's; ignored
    log.torn = pending is not None
    return log


def read_loadlog(path: str | Path) -> LoadLog:
    """Read a load.jsonl file (LoadLogError names the file and line of a bad one)."""
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as f:
            return parse_loadlog(f, str(p))
    except UnicodeDecodeError as e:
        raise LoadLogError(f"{p}: not UTF-8 text ({e.reason})") from None


# ---------------------------------------------------------------- histograms (pure)


def merge(hists: Iterable[Sequence[tuple[float, int]]]) -> Hist:
    out: Hist = {}
    for h in hists:
        for ms, n in h:
            out[ms] = out.get(ms, 0) + n
    return out


def quantile(h: Hist, q: float) -> float | None:
    """The q-quantile (0 < q <= 1) of a histogram: the smallest bucket with at least
    ceil(q * n) values at or below it; None when it is empty."""
    total = sum(h.values())
    if total <= 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for ms in sorted(h):
        seen += h[ms]
        if seen >= rank:
            return ms
    return max(h)
