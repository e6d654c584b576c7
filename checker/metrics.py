"""Metrics: op counts, info causes, latencies, realtime lag and unseen over time.

Realtime lag follows Jepsen: for each key, the time from which each dense
position was known to exist (some ok op had sent or read that far); a poll that
began at time t having read up to position d is at least t - (time position d+1
was known to exist) stale.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from itertools import accumulate
from operator import itemgetter
from typing import Any

import orjson

from .logs import Logs
from .prepare import Prepared
from .window import JudgedWindow

MAX_POINTS = 2000
MAX_CONSUMERS = 100  # realtime_lag.per_consumer lists at most this many
_second = itemgetter(1)


def downsample(points: list[tuple[float, float]], n: int = MAX_POINTS) -> list[list[float]]:
    """At most n points: the highest y of each run (peaks matter on these plots), then
    the last point as it is (where a series ends matters too)."""
    if len(points) <= n:
        return [[x, y] for x, y in points]
    m = len(points) - 1
    k = n - 1
    out: list[list[float]] = []
    for j in range(k):  # k runs of m // k or m // k + 1 points
        chunk = points[j * m // k : (j + 1) * m // k]
        x, y = max(chunk, key=_second)
        out.append([x, y])
    x, y = points[-1]
    out.append([x, y])
    return out


def _quantiles(xs: list[float]) -> dict[str, float]:
    xs.sort()
    n = len(xs)

    def q(f: float) -> float:
        return round(xs[min(n - 1, int(f * n))], 3)

    return {"count": n, "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": round(xs[-1], 3)}


def info_cause(error: Any) -> str:
    if error is None:
        return "no error recorded"
    if isinstance(error, dict):
        for k in ("type", "cause", "name", "class", "code", "exception", "error"):
            if k in error:
                return str(error[k])[:80]
        # no field naming the cause: the whole object (different objects stay apart)
        opts = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
        return orjson.dumps(error, option=opts, default=str).decode()[:80]
    if isinstance(error, list) and error:
        return str(error[0])[:80]
    return str(error)[:80]


def counts_latency(p: Prepared) -> tuple[dict[str, Any], dict[str, int], dict[str, Any]]:
    counts: dict[str, dict[str, int]] = {}
    causes: dict[str, int] = {}
    lat: dict[tuple[str, str], list[float]] = {}  # (f, type) -> latencies, in first-seen order
    for r in p.ops:
        f, typ = r.f, r.type
        c = counts.get(f)
        if c is None:
            counts[f] = c = {"ok": 0, "fail": 0, "info": 0}
        c[typ] = c.get(typ, 0) + 1
        if typ == "info" and r.is_data:  # a crash op is info by construction, as in Jepsen
            cause = "never completed" if r.comp_pos is None else info_cause(r.error)
            causes[cause] = causes.get(cause, 0) + 1
        # a completion without an invoke counts as invoked at its own line: no latency
        ct = r.comp_time
        if ct is not None and r.inv_pos != r.comp_pos:
            xs = lat.get((f, typ))
            if xs is None:
                xs = lat[f, typ] = []
            xs.append((ct - r.inv_time) / 1e6)
    latency: dict[str, dict[str, dict[str, float]]] = {}
    for (f, typ), xs in lat.items():
        latency.setdefault(f, {})[typ] = _quantiles(xs)
    return counts, top_causes(causes), latency


MAX_CAUSES = 50  # info causes listed; the rest are summed under OTHER_CAUSES
OTHER_CAUSES = "(other causes)"


def top_causes(causes: dict[str, int]) -> dict[str, int]:
    """The most frequent causes, most frequent first (errors that embed a number, like
    the Java client's 'Expiring 1 record(s) for t-0:120034 ms has passed', may each be
    their own cause: thousands of them)."""
    ranked = sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) <= MAX_CAUSES:
        return dict(ranked)
    out = dict(ranked[: MAX_CAUSES - 1])
    rest = ranked[MAX_CAUSES - 1 :]
    out[f"{OTHER_CAUSES} ({len(rest):,})"] = sum(n for _c, n in rest)
    return out


def throughput(p: Prepared) -> dict[str, Any]:
    """ok ops per second over the run (by f, and of all data ops), and over time.

    The run spans the earliest to the latest `time` of any op; ops are binned by
    completion time in bins of `bin_s` seconds (1 s, wider for runs over 1,000 s).
    """
    t0, t1 = p.first_time or 0, p.last_time or 0
    span_s = (t1 - t0) / 1e9
    width = max(1, math.ceil(span_s / 1000))
    width_ns = width * 1_000_000_000
    by_f: dict[str, int] = {}
    bins: dict[int, int] = {}
    n_data = 0
    for r in p.ops:
        ct = r.comp_time
        if ct is None or r.type != "ok":
            continue
        f = r.f
        by_f[f] = by_f.get(f, 0) + 1
        if r.is_data:
            n_data += 1
            b = (ct - t0) // width_ns
            bins[b] = bins.get(b, 0) + 1

    def rate(n: int) -> float | None:
        return round(n / span_s, 3) if span_s > 0 else None

    pts = [(float(b * width), n / width) for b, n in sorted(bins.items())]
    return {
        "ok_data_per_s": rate(n_data),
        "ok_per_s_by_f": {f: rate(n) for f, n in sorted(by_f.items())},
        "bin_s": width,
        "over_time": downsample(pts),
    }


def unseen_over_time(p: Prepared) -> tuple[int, list[list[float]]]:
    """Acknowledged-but-never-read values after each ok data op (Jepsen's `unseen`)."""
    t0 = p.first_time or 0
    pts = [((t - t0) / 1e9, float(c)) for t, c in p.unseen_points]
    return p.unseen_count, downsample(pts)


def _top(ps: Any) -> int | None:
    """The furthest known position of one chunk (a range, an array, or a list with None)."""
    if type(ps) is range:
        return ps[-1]  # type: ignore[no-any-return]
    if None in ps:
        known = [d for d in ps if d is not None]
        return max(known) if known else None
    return max(ps)  # type: ignore[no-any-return]


def _read_tops(reads: Any) -> dict[str, int | None]:
    """key -> the furthest known position an op read (keys in first-read order).

    The same as run_first_last_max(read_positions(...))[2], without the lists: this
    runs for every ok op of a million-op history.
    """
    out: dict[str, int | None] = {}
    for c in reads:
        k = c[0]
        d = _top(c[1])
        if k not in out:
            out[k] = d
        elif d is not None:
            cur = out[k]
            if cur is None or d > cur:
                out[k] = d
    return out


class _Consumer:
    """One consumer's positions for realtime lag, kept so that a poll costs O(log keys),
    not O(keys): a heap of when each key's next record was known to exist (the oldest
    is the stalest key), and the poll times with a decreasing stack of their indices,
    so the latest poll since any given one is a binary search away.

    realtime_lag works on these fields directly (a million polls: no method calls)."""

    __slots__ = ("desc", "heap", "keys", "seq", "times")

    def __init__(self) -> None:
        self.keys: dict[str, tuple[int, float, int, int]] = {}  # k -> (d, since, poll no, seq)
        self.heap: list[tuple[float, int, str]] = []  # (since, seq, key), stale entries too
        self.times: list[int] = []  # poll times, in order
        self.desc: list[int] = []  # indices into times, their times strictly decreasing
        self.seq = 0  # a key keeps its first place: ties go to the key assigned or read first

    def reset(self) -> None:
        self.keys = {}
        self.heap = []

    def latest_since(self, start: int) -> int | None:
        """The largest poll time from poll number `start` on (None: no poll since)."""
        j = bisect_left(self.desc, start)
        return None if j == len(self.desc) else self.times[self.desc[j]]


def _known_since(p: Prepared, logs: Logs) -> dict[str, list[float]]:
    """key -> [earliest time dense position d was known to exist, for each d].

    Each ok op's furthest position per key counts, at its completion; recording every
    position it sent or read gives the same suffix minimum (knowing d+1 exists means d
    exists too) with less bookkeeping."""
    inf = float("inf")
    key_logs = logs.keys
    arrs: dict[str, list[float]] = {}
    for r in p.ops:
        t = r.comp_time
        if t is None or r.type != "ok":
            continue
        for k, v, o, _i in r.writes:
            kl = key_logs.get(k)
            if kl is None:
                continue
            d = kl.dense.get(o) if o is not None else None  # KeyLog.pos, inlined
            if d is None:
                d = kl.first.get(v)
                if d is None:
                    continue
            a = arrs.get(k)
            if a is None:
                a = arrs[k] = [inf] * len(kl.values)
            if t < a[d]:
                a[d] = t
        for c in r.reads:
            k, ps = c[0], c[1]
            if type(ps) is range:
                d = ps[-1]
            else:
                d = _top(ps)
                if d is None:
                    continue
            a = arrs.get(k)
            if a is None:
                a = arrs[k] = [inf] * len(key_logs[k].values)
            if t < a[d]:
                a[d] = t
    for k, a in arrs.items():
        a = list(accumulate(reversed(a), min))  # a suffix minimum
        a.reverse()
        arrs[k] = a
    return arrs


def realtime_lag(p: Prepared, logs: Logs, judged: JudgedWindow | None = None) -> dict[str, Any]:
    """Jepsen's realtime lag (docs/anomalies.md). With a judged window (checker/window.py)
    only polls invoked inside it count towards `worst`, `per_key` and `per_consumer`
    (`worst_any_poll` keeps the worst of every poll, the drain's included); `over_time`
    always has every poll."""
    t0 = p.first_time or 0
    lo, hi = (judged.start_ns, judged.end_ns) if judged is not None else (-math.inf, math.inf)
    any_worst: dict[str, Any] | None = None
    any_raw = 0.0
    # exists[k][d]: earliest time dense position d was known to exist
    exists = _known_since(p, logs)
    per_key: dict[str, float] = {}
    per_proc: dict[Any, float] = {}
    worst: dict[str, Any] = {"key": None, "lag_ms": 0.0, "time_s": 0.0, "process": None}
    worst_raw = 0.0
    pts: list[tuple[float, float]] = []
    inf = float("inf")
    heappush, heappop = heapq.heappush, heapq.heappop

    def since(k: str, d: int) -> float:
        """When the record after position d of key k was first known to exist."""
        known_at = exists.get(k)
        return inf if known_at is None or d + 1 >= len(known_at) else known_at[d + 1]

    def close(c: _Consumer, k: str) -> None:
        """Key k leaves the consumer or moves on: its worst lag while it stayed put
        was at the latest poll since (lag only grows while nothing new is read)."""
        t = c.latest_since(c.keys[k][2])
        if t is not None and lo <= t <= hi:
            lag = max(0.0, (t - c.keys[k][1]) / 1e6)
            if lag > per_key.get(k, -1.0):
                per_key[k] = round(lag, 3)

    def set_(c: _Consumer, k: str, d: int) -> None:
        s = since(k, d)
        cur = c.keys.get(k)
        seq = cur[3] if cur is not None else c.seq
        c.seq += 1
        c.keys[k] = (d, s, len(c.times), seq)
        heappush(c.heap, (s, seq, k))

    consumers: dict[Any, _Consumer] = {}
    for r in p.ops:
        proc = r.process
        c = consumers.get(proc)
        if c is None:
            c = consumers[proc] = _Consumer()
        f = r.f
        if f == "crash":  # a crash op is info by construction: the client is gone
            for k in c.keys:
                close(c, k)
            c.reset()
            continue
        if r.type != "ok":
            continue
        if f == "assign":
            old = c.keys
            keep = {k: old[k][0] for k in (r.keys or ()) if k in old and not r.seek}
            for k in old:
                close(c, k)
            c.reset()
            for k in r.keys or ():
                set_(c, k, keep.get(k, -1))
            continue
        if f == "subscribe":
            for k in c.keys:
                close(c, k)
            c.reset()
            continue
        reads = r.reads
        if not reads and f != "poll":
            continue  # an empty poll is measured too: a starving consumer is the point
        keys = c.keys
        times = c.times
        n_polls = len(times)
        for k, d in _read_tops(reads).items():
            cur = keys.get(k)
            if cur is None:
                seq = c.seq
                if d is None:
                    d = -1
            elif d is not None and d > cur[0]:
                seq = cur[3]
                # close(c, k), inlined: the key moves on
                desc = c.desc
                j = bisect_left(desc, cur[2])
                if j != len(desc) and lo <= times[desc[j]] <= hi:
                    lag = max(0.0, (times[desc[j]] - cur[1]) / 1e6)
                    if lag > per_key.get(k, -1.0):
                        per_key[k] = round(lag, 3)
            else:
                continue
            # set, inlined: since(k, d)
            known_at = exists.get(k)
            s = inf if known_at is None or d + 1 >= len(known_at) else known_at[d + 1]
            c.seq += 1
            keys[k] = (d, s, n_polls, seq)
            heappush(c.heap, (s, seq, k))
        t = r.inv_time
        # the poll: its time, and the stack of decreasing times
        desc = c.desc
        while desc and times[desc[-1]] <= t:
            desc.pop()
        desc.append(n_polls)
        times.append(t)
        if not keys:
            pts.append(((t - t0) / 1e9, 0.0))
            continue
        # the stalest key: ties go to the key assigned or read first
        h = c.heap
        while True:
            s_top, seq, k_top = h[0]
            cur = keys.get(k_top)
            if cur is not None and cur[1] == s_top and cur[3] == seq:
                break
            heappop(h)  # superseded
        top = max(0.0, (t - s_top) / 1e6)
        pts.append(((t - t0) / 1e9, round(top, 3)))
        if not lo <= t <= hi:  # outside the judged window: in over_time only
            if top > any_raw:
                any_raw = top
                any_worst = {
                    "key": k_top,
                    "lag_ms": round(top, 3),
                    "time_s": (t - t0) / 1e9,
                    "process": proc,
                }
            continue
        if top > per_proc.get(proc, -1.0):
            per_proc[proc] = round(top, 3)
        if top > worst_raw:  # unrounded: ties go to the earliest poll
            worst_raw = top
            worst = {
                "key": k_top,
                "lag_ms": round(top, 3),
                "time_s": (t - t0) / 1e9,
                "process": proc,
            }
    for c in consumers.values():
        for k in c.keys:
            close(c, k)
    # the stalest consumers first (a run renumbering crashed clients may have thousands)
    stalest = sorted(per_proc.items(), key=lambda pl: -pl[1])[:MAX_CONSUMERS]
    out = {
        "worst": worst,
        "per_key": per_key,
        "per_consumer": {str(proc): lag for proc, lag in stalest},
        "over_time": downsample(pts),
    }
    if judged is not None:
        out["worst_any_poll"] = worst if any_worst is None or any_raw <= worst_raw else any_worst
    return out
