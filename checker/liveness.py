"""Liveness for soaks: latency, starvation, recovery after heals, stuck keys, memory growth,
throughput collapse (checker/throughput.py).

Safety says nothing acknowledged was lost; liveness says the system kept making
progress while it was being hurt. Everything here is a pure function of the
history (the prepared client ops, the key logs, and the nemesis ops), computed
in one sort-dominated pass (O(n log n)), and every metric comes with the
threshold it was judged by, so a soak job can fail on it (``liveness_bad``)
and a reader can see how close a healthy run came.

The shared ingredient is, for each acknowledged value, *when it was offered*
(the completion time of the op that wrote it: the ack, or the commit of its
transaction) and *when it was first consumed* (the completion time of the first
ok op that read it). Definitions and why they do not false-alarm on a healthy
run are in docs/anomalies.md, section "Liveness".
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..histories.model import Op
from .attended import Attendance, attendance, idle_slots
from .excuse import Excuser, Fault, episode_names, excuser, windows
from .logs import KeyLog, Logs, iter_reads
from .memory import memory_check, memory_growth
from .options import CheckOptions
from .prepare import OpRec, Prepared
from .throughput import throughput_collapse
from .window import JudgedWindow

NS = 1_000_000_000
UNSET = -1  # "never read": history times are nanoseconds since the run started, never < 0
VIOLATION_TYPES = (
    "starvation",
    "stuck-partition",
    "slow-recovery",
    "memory-growth",
    "throughput-collapse",
    "behind",  # the background load's (checker/behind.py), added by check.py
)

# Nemesis ops that end a fault (docs/faults.md): recovery is measured from each.
HEAL_FS = frozenset(
    {
        "stop-partition",
        "stop-loss",
        "start",
        "resume",
        "memory-release",
        "toxic-off",
        "restarted",
        "stop-rolling-restart",
        "heal",
        "heal-all",
        "stop-all",
    }
)
MAX_LISTED = 50  # per-event / per-key lists kept in results.json


def is_heal(f: str) -> bool:
    """A nemesis f that ends a fault; generic `stop-X` ends X (report/faults.py agrees)."""
    return f in HEAL_FS or (f.startswith("stop-") and f != "stop-")


def quantiles(xs: list[float], nd: int = 3) -> dict[str, Any]:
    """Nearest-rank quantiles as in metrics.py: {n, p50, p90, p99, max} (n=0: no numbers)."""
    xs.sort()
    return _sorted_quantiles(xs, nd)


_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))


def _rank(f: float, n: int) -> int:
    """The index of quantile f in n sorted numbers."""
    return min(n - 1, int(f * n))


def _sorted_quantiles(xs: Any, nd: int = 3) -> dict[str, Any]:
    """quantiles() of an already sorted list or numpy array."""
    n = len(xs)
    if not n:
        return {"n": 0, **dict.fromkeys(name for name, _f in _QUANTILES)}
    return {"n": n, **{name: round(float(xs[_rank(f, n)]), nd) for name, f in _QUANTILES}}


def _array_quantiles(xs: Any, nd: int = 3) -> dict[str, Any]:
    """quantiles() of a numpy array, which is partitioned (only the quantiles' ranks are
    put in their sorted places: O(n), where a sort is O(n log n))."""
    n = len(xs)
    if n:
        xs = np.partition(xs, sorted({_rank(f, n) for _name, f in _QUANTILES}))
    return _sorted_quantiles(xs, nd)


# ----------------------------------------------------------------- first reads


def first_reads(p: Prepared, logs: Logs) -> tuple[dict[str, list[int]], dict[tuple[str, Any], int]]:
    """When each record was first read by an ok op.

    Returns (key -> per dense position the completion time of the first ok op that
    read it, or UNSET; (key, value) -> the same for records whose values a chunk
    kept because the log could not give them back). Ops are in completion order,
    so the first op to cover a position is its first reader; most reads extend a
    consumer's contiguous prefix, which is filled by slice assignment, the rest
    (seeks, gaps) one position at a time.
    """
    first = {k: [UNSET] * len(kl.values) for k, kl in logs.keys.items()}
    frontier = dict.fromkeys(first, 0)  # every position below is set
    scattered = dict.fromkeys(first, 0)  # positions at or past the frontier already set
    top = dict.fromkeys(first, 0)  # no position at or past this is set
    by_value: dict[tuple[str, Any], int] = {}
    for r in p.ops:
        if r.type != "ok" or not r.reads or r.comp_time is None:
            continue
        t = r.comp_time
        for k, ps, _i, vals, _offs in r.reads:
            if vals is not None:
                for v in vals:
                    kv = (k, v)
                    old = by_value.get(kv)
                    if old is None or t < old:
                        by_value[kv] = t
                continue
            arr = first.get(k)
            if arr is None:
                continue
            f0 = frontier[k]
            sc = 0
            if type(ps) is range:
                a, b = ps.start, ps.stop
                if b <= f0:
                    continue
                if a <= f0 and not scattered[k]:
                    arr[f0:b] = [t] * (b - f0)
                    frontier[k] = b
                    if b > top[k]:
                        top[k] = b
                    continue
                # A consumer that started past the frontier (at the end of the log, or
                # after a seek): what lies past `top` is unset, filled in one slice.
                lo, hi = max(a, f0), top[k]
                if b > hi:
                    mid = max(lo, hi)
                    arr[mid:b] = [t] * (b - mid)
                    sc = b - mid
                    top[k] = b
                    b = mid
                for d in range(lo, b):
                    if arr[d] == UNSET:
                        arr[d] = t
                        sc += 1
            else:
                hi = top[k]
                for d in ps:
                    if d is not None and d >= f0 and arr[d] == UNSET:
                        arr[d] = t
                        sc += 1
                        if d >= hi:
                            hi = d + 1
                top[k] = hi
            if sc:
                sc += scattered[k]
                n = len(arr)
                while f0 < n and arr[f0] != UNSET:
                    f0 += 1
                    sc -= 1
                frontier[k] = f0
                scattered[k] = sc
    return first, by_value


# ---------------------------------------------------------------- acknowledged


@dataclass
class Acked:
    """Acknowledged values, column-wise (parallel lists), plus per-writer facts."""

    key: list[str] = field(default_factory=list)
    value: list[Any] = field(default_factory=list)
    offset: list[int | None] = field(default_factory=list)
    ack: list[int] = field(default_factory=list)  # writer's completion time
    read: list[int] = field(default_factory=list)  # first ok read time, or UNSET
    # committed writers: (invoke time, earliest first read of any value it wrote or UNSET)
    writer_reads: list[tuple[int, int]] = field(default_factory=list)
    _np: tuple[Any, Any] | None = None

    def arrays(self) -> tuple[Any, Any]:
        """(ack, read) as int64 numpy arrays: the per-value metrics are vectorised."""
        if self._np is None or len(self._np[0]) != len(self.ack):
            self._np = (np.array(self.ack, dtype=np.int64), np.array(self.read, dtype=np.int64))
        return self._np


def acknowledged(p: Prepared, logs: Logs, skip: frozenset[str] = frozenset()) -> Acked:
    """Every value an ok op sent (and each value of an info op that an ok op read), but
    not to keys in `skip` (the copy workload's output keys: only the drain reads them)."""
    first, by_value = first_reads(p, logs)
    out = Acked()
    committed = logs.committed
    ok_reads = p.ok_reads
    keys = logs.keys
    # Hot loop (one turn per acknowledged value): per-key lookups hoisted, appends bound.
    # key -> its log: dense, values, first, first read times, offsets (Nones without one)
    cache: dict[str, tuple[Any, Any, Any, Any, Any]] = {}
    add_k, add_v, add_o = out.key.append, out.value.append, out.offset.append
    add_t, add_r, add_w = out.ack.append, out.read.append, out.writer_reads.append
    for r in p.ops:
        writes = r.writes
        if not writes or r.comp_time is None or not committed[r.id]:
            continue
        t = r.comp_time
        ok = r.type == "ok"
        earliest = UNSET
        for k, v, o, _i in writes:
            if not ok and v not in ok_reads.get(k, ()):
                continue  # an info op's unread value may never have been written
            if skip and k in skip:
                continue
            c = cache.get(k)
            if c is None:
                c = cache[k] = _key_view(keys.get(k), first.get(k))
            dense, vals, fst, arr, offs = c
            rt = UNSET
            if dense is not None:
                d = None if o is None else dense.get(o)
                if d is None or vals[d] != v:
                    d = fst.get(v)
                if d is not None:
                    rt = arr[d]
                    if o is None:
                        o = offs[d]
            if by_value:
                bv = by_value.get((k, v))
                if bv is not None and (rt == UNSET or bv < rt):
                    rt = bv
            add_k(k)
            add_v(v)
            add_o(o)
            add_t(t)
            add_r(rt)
            if rt != UNSET and (earliest == UNSET or rt < earliest):
                earliest = rt
        add_w((r.inv_time, earliest))
    return out


def _key_view(kl: KeyLog | None, arr: list[int] | None) -> tuple[Any, Any, Any, Any, Any]:
    """(dense, values, first, first read times, offsets) of a key's log, Nones without one."""
    if kl is None:
        return None, None, None, None, None
    return kl.dense, kl.values, kl.first, arr, kl.offsets


# -------------------------------------------------------------------- metrics


def e2e_latency(a: Acked) -> dict[str, Any]:
    """Ack -> first ok read, per value, in ms; unread values are counted apart."""
    ack, read = a.arrays()
    m = read != UNSET
    d = read[m] - ack[m]
    early = int(np.count_nonzero(d < 0))  # read before the producer heard the ack: legal
    np.maximum(d, 0, out=d)  # ... and counted as 0
    out = _array_quantiles(d / 1e6)
    out["unread"] = len(ack) - out["n"]
    out["read_before_ack"] = early
    return out


def commit_latency(p: Prepared) -> dict[str, Any]:
    """Latency of ok txn ops (the transaction including its commit), else of ok sends."""
    f = "txn"
    ms = _latencies_ms(p, f)
    if not ms:
        f = "send"
        ms = _latencies_ms(p, f)
    return {"f": f, **_array_quantiles(np.array(ms, dtype=np.float64))}


def _latencies_ms(p: Prepared, f: str) -> list[float]:
    """Latency in ms of each ok op of function f."""
    # a completion without an invoke has no known latency (it counts as invoked at its
    # own line)
    return [
        (r.comp_time - r.inv_time) / 1e6
        for r in p.ops
        if r.f == f and r.type == "ok" and r.comp_time is not None and r.inv_pos != r.comp_pos
    ]


def lag_allowance(opts: CheckOptions, e2e: dict[str, Any]) -> float:
    """Seconds a consumer may trail production before a window counts against it."""
    if opts.starvation_lag_s is not None:
        return float(opts.starvation_lag_s)
    p99 = (e2e.get("p99") or 0.0) / 1e3
    return min(max(p99, 1.0), opts.liveness_window_s)


def starvation(
    a: Acked,
    t0: int,
    opts: CheckOptions,
    allowance_s: float,
    judged: JudgedWindow | None = None,
    ex: Excuser | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Windows where consumers read under `starvation_ratio` of what was offered:
    (metric, violations, starved windows a fault excused).

    offered(w): values acknowledged in window w; consumed(w): how many of those an ok
    op had read by the end of w plus the lag allowance. Only windows whose end plus
    the allowance falls before the last acknowledgement are judged (after it,
    producers stopped and the rest is the drain's job), and only those offering at
    least `starvation_min_offered` values.

    With a judged window (checker/window.py), windows are cut from its start, values
    acknowledged before it (the warm-up) are not offered, and a window ending after
    it (in the drain) is not judged; `from_s` stays counted from t0.

    With an excuser (checker/excuse.py), a starved window's stall runs from its earliest
    late value's ack plus the lag allowance (when that value became overdue) to the
    window's deadline (its end plus the allowance); a fault episode whose allowance
    holds that stretch excuses the window.
    """
    w_ns = int(opts.liveness_window_s * NS)
    lag_ns = int(allowance_s * NS)
    ack, read = a.arrays()
    origin, stop = t0, None
    if judged is not None:
        origin, stop = judged.start_ns, judged.end_ns
        keep = ack >= origin
        ack, read = ack[keep], read[keep]
    judged_windows: list[dict[str, Any]] = []
    stalls: list[tuple[int, int]] = []  # per judged window, with an excuser: (lo, hi) ns
    if len(ack):
        ack, read = _exact(origin, ack, read)
        win = (ack - origin) // w_ns
        # windows are numbered from t0; times spread over years leave most of them
        # empty: then only those holding a value are counted (`slot` numbers them)
        used = None
        if int(win.max()) >= 4 * len(win) + 1024:
            used, slot = np.unique(win, return_inverse=True)
        else:
            slot = win.astype(np.int64)
        offered = np.bincount(slot)
        # a value of window w counts if read by the window's end plus the allowance
        # (relative to t0: times near 2**63 would overflow int64 in absolute terms)
        in_time = (read != UNSET) & (read - origin <= lag_ns + (win + 1) * w_ns)
        consumed = np.bincount(slot[in_time], minlength=len(offered))
        if ex:  # per window, when its earliest late value was acknowledged (from origin)
            late = ~in_time
            first_late = np.full(len(offered), _BIG, dtype=ack.dtype)
            np.minimum.at(first_late, slot[late], ack[late] - origin)
        last_ack = int(ack.max())
        shift = origin - t0  # windows start at the origin, times are told from t0
        for i in np.flatnonzero(offered >= opts.starvation_min_offered).tolist():
            w = i if used is None else int(used[i])
            if origin + (w + 1) * w_ns + lag_ns > last_ack:
                break
            if stop is not None and origin + (w + 1) * w_ns > stop:
                break
            o, c = int(offered[i]), int(consumed[i])
            if ex:
                deadline = origin + (w + 1) * w_ns + lag_ns
                lo = int(first_late[i])
                stalls.append((min(origin + lo + lag_ns, deadline), deadline))
            judged_windows.append(
                {
                    "from_s": round((shift + w * w_ns) / NS, 3),
                    "to_s": round((shift + (w + 1) * w_ns) / NS, 3),
                    "offered": o,
                    "consumed": c,
                    "ratio": round(c / o, 4),
                }
            )
    starved_at = [i for i, j in enumerate(judged_windows) if j["ratio"] < opts.starvation_ratio]
    # Consecutive starved windows are one stall, overdue from its first late value: the
    # fault episode it began in excuses its windows due before that episode's allowance
    # ends; the windows after (the starvation outlasted the fault) are judged.
    by: set[int] = set()  # starved windows excused
    run_lo: dict[int, int] = {}  # starved window -> when its run of windows became overdue
    excused: list[dict[str, Any]] = []
    for at in _index_runs(judged_windows, starved_at) if ex else ():
        assert ex is not None
        lo = stalls[at[0]][0]
        run_lo.update(dict.fromkeys(at, lo))
        until = ex.allowed_until(lo)
        done = [i for i in at if until is not None and stalls[i][1] <= until]
        if done:
            by.update(done)
            for i in done:
                judged_windows[i]["excused"] = True
            excused.append(
                _excused_starvation(
                    [judged_windows[i] for i in done], lo, stalls[done[-1]][1], ex, t0
                )
            )
    starved = [judged_windows[i] for i in starved_at]
    violations: list[dict[str, Any]] = []
    pos = {id(j): i for i, j in enumerate(judged_windows)}
    for run in _runs([judged_windows[i] for i in starved_at if i not in by]):
        rec = _starved_run(run)
        off, con = rec["offered"], rec["consumed"]
        worst = rec["worst"] = min(run, key=lambda j: j["ratio"])
        rec["explanation"] = (
            f"consumers starved from {run[0]['from_s']:g} s to {run[-1]['to_s']:g} s: "
            f"of {off} values acknowledged there, {con} ({100 * con / off:.1f}%) were "
            f"read within {allowance_s:g} s after their window (threshold "
            f"{100 * opts.starvation_ratio:g}%); worst window {worst['from_s']:g}-"
            f"{worst['to_s']:g} s: {worst['consumed']} of {worst['offered']}"
        )
        violations.append(rec)
        if ex:
            first, last = pos[id(run[0])], pos[id(run[-1])]
            lo = run_lo.get(first, stalls[first][0])
            violations[-1]["explanation"] += "; " + ex.why_not(lo, stalls[last][1], t0)
    metric = {
        "window_s": opts.liveness_window_s,
        "lag_allowance_s": round(allowance_s, 3),
        "windows_judged": len(judged_windows),
        "min_ratio": min((j["ratio"] for j in judged_windows), default=None),
        "starved_windows": starved[:MAX_LISTED],
        **(
            {
                "excused_windows": len(by),
                "min_ratio_not_excused": min(
                    (j["ratio"] for i, j in enumerate(judged_windows) if i not in by),
                    default=None,
                ),
            }
            if ex
            else {}
        ),
    }
    return metric, violations, excused


def _index_runs(windows: list[dict[str, Any]], at: list[int]) -> list[list[int]]:
    """The indices `at` of `windows` grouped into runs of time-adjacent windows."""
    out: list[list[int]] = []
    for i in at:
        if out and windows[out[-1][-1]]["to_s"] == windows[i]["from_s"]:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _starved_run(run: list[dict[str, Any]]) -> dict[str, Any]:
    """The fields every record of consecutive starved windows has."""
    off = sum(j["offered"] for j in run)
    con = sum(j["consumed"] for j in run)
    return {
        "type": "starvation",
        "from_s": run[0]["from_s"],
        "to_s": run[-1]["to_s"],
        "windows": len(run),
        "offered": off,
        "consumed": con,
        "ratio": round(con / off, 4),
    }


def _excused_starvation(
    run: list[dict[str, Any]], lo: int, hi: int, ex: Excuser, t0: int
) -> dict[str, Any]:
    """The record of consecutive starved windows a fault excused, overdue over [lo, hi]."""
    eps = ex.covering(lo, hi)
    rec = _starved_run(run)
    off, con = rec["offered"], rec["consumed"]
    rec["stall_from_s"] = round((lo - t0) / NS, 3)
    rec["stall_to_s"] = round((hi - t0) / NS, 3)
    rec["faults"] = [f for e in eps for f in e.fault_ids()]
    rec["explanation"] = (
        f"consumers read {con} of {off} values acknowledged {rec['from_s']:g}-"
        f"{rec['to_s']:g} s in time ({100 * con / off:.1f}%); excused: overdue "
        f"{rec['stall_from_s']:g}-{rec['stall_to_s']:g} s, within what "
        f"{episode_names(eps)} allowed"
    )
    return rec


def _exact(t0: int, *arrays: Any) -> tuple[Any, ...]:
    """The int64 time arrays as they are, or as Python ints when they reach so far from
    t0 (2**62 ns, about 146 years) that int64 arithmetic on them could overflow: slow,
    but only a hand-made history gets there, and its results stay exact."""
    wide = any(
        len(x) and (int(x.max()) - t0 >= 2**62 or int(x.min()) - t0 < -(2**62)) for x in arrays
    )
    return tuple(x.astype(object) if wide else x for x in arrays)


def _runs(windows: list[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    """Consecutive windows grouped (one violation per episode, not per window)."""
    run: list[dict[str, Any]] = []
    for j in windows:
        if run and j["from_s"] != run[-1]["to_s"]:
            yield run
            run = []
        run.append(j)
    if run:
        yield run


def _name_stuck_ops(p: Prepared, logs: Logs, violations: list[dict[str, Any]]) -> None:
    """Give each stuck-partition violation its `ops`: the writer of the stuck value and,
    if it was read at last, the first ok op that read it (found by its completion
    time, so one pass over the ops serves them all)."""
    if not violations:
        return
    # read time -> violations (None is never a key: an op's comp_time may be looked up)
    by_time: dict[int | None, list[dict[str, Any]]] = {}
    for v in violations:
        w = p.writer_of.get(v["key"], {}).get(v["value"])
        v["ops"] = [] if w is None else [p.ops[w].index]
        read_ns = v.pop("_read_ns", None)
        if read_ns is not None:
            by_time.setdefault(read_ns, []).append(v)
    for r in p.ops if by_time else ():
        near = by_time.get(r.comp_time)
        if not near or r.type != "ok" or not r.reads:
            continue
        for k, val, _o, _i in iter_reads(logs, r):
            for v in near:
                if k == v["key"] and val == v["value"] and len(v["ops"]) < 2:
                    v["ops"].append(r.index)
    for v in violations:
        if v["ops"]:
            who = f"written by op {v['ops'][0]}"
            if len(v["ops"]) > 1:
                who += f", first read by op {v['ops'][1]}"
            v["explanation"] += f" ({who})"


def _worst_per_key(kid: Any, gap: Any, mask: Any, nkeys: int) -> list[int]:
    """Per key (in key id order), the index of its largest gap among `mask`, the
    earliest value among equals; keys with nothing in `mask` are left out."""
    idx = np.flatnonzero(mask)
    if not len(idx):
        return []
    top = np.zeros(nkeys, dtype=gap.dtype)
    np.maximum.at(top, kid[idx], gap[idx])
    at_top = idx[gap[idx] == top[kid[idx]]]
    _ids, first = np.unique(kid[at_top], return_index=True)
    return [int(i) for i in at_top[first].tolist()]


def _stuck_record(
    a: Acked, i: int, gap: int, t0: int, opts: CheckOptions, excused: bool
) -> dict[str, Any]:
    k, rt = a.key[i], a.read[i]
    secs = round(gap / NS, 3)
    how = (
        f"first read {secs:g} s later (t={(rt - t0) / NS:.1f} s)"
        if rt != UNSET
        else f"never read by an ok poll ({secs:g} s until the end of the history)"
    )
    return {
        "type": "stuck-partition",
        "key": k,
        "value": a.value[i],
        "offset": a.offset[i],
        "acked_s": round((a.ack[i] - t0) / NS, 3),
        "read_s": None if rt == UNSET else round((rt - t0) / NS, 3),
        "_read_ns": None if rt == UNSET or excused else rt,  # for _name_stuck_ops
        "stuck_s": secs,
        "explanation": (
            f"key {k} {'waited' if excused else 'was stuck'}: value {a.value[i]!r} "
            + ("(offset unknown)" if a.offset[i] is None else f"at offset {a.offset[i]}")
            + " was "
            f"acknowledged at t={(a.ack[i] - t0) / NS:.1f} s and {how}; threshold "
            f"{opts.stuck_s:g} s"
        ),
    }


def stuck_partitions(
    a: Acked,
    t0: int,
    end: int,
    opts: CheckOptions,
    ex: Excuser | None = None,
    att: Attendance | None = None,
    grace_s: float = 1.0,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Per key, the acknowledged value that waited longest for its first ok read:
    (metric, violations, stalls a fault excused).

    With `att` (checker/attended.py) a value is stuck only if it also waited longer
    than `stuck_s` while some consumer had its key assigned: a key nobody was assigned
    to is the workload's choice, not a stall of the system.

    A value waiting longer than `stuck_s` is overdue from its ack plus `stuck_s` until
    its first read (or the history's end); with an excuser (checker/excuse.py) a fault
    episode whose allowance holds that stretch excuses it. A key's violation is its
    worst value not excused; its worst excused value is recorded apart."""
    limit = int(opts.stuck_s * NS)
    grace = int(grace_s * NS)
    ack, read = a.arrays()
    worst: list[int] = []
    bad: list[int] = []
    ok: list[int] = []
    free: list[int] = []  # per key, its worst value not excused
    gaps: Any = ()
    eps: Any = ()
    attended = np.full(len(ack), -1, dtype=np.int64)  # -1: not computed (not needed)
    lonely: set[str] = set()  # keys whose long waits had no consumer assigned
    spans: dict[int, tuple[int, int]] = {}  # value -> its attended stall (from, to)
    if len(ack):
        # keys numbered in order of appearance
        ids = {k: i for i, k in enumerate(dict.fromkeys(a.key))}
        kid = np.array(list(map(ids.__getitem__, a.key)), dtype=np.int64)
        # read before its writer's ack (an info send that timed out late): not stuck
        ack, upto = _exact(t0, ack, np.where(read == UNSET, end, read))
        gaps = np.maximum(upto - ack, 0)
        worst = _worst_per_key(kid, gaps, np.ones(len(gaps), dtype=bool), len(ids))
        over = gaps > limit
        if att is not None and over.any():
            for i in np.flatnonzero(over).tolist():
                got = att.stall(a.key[i], int(ack[i]), int(upto[i]), limit, grace)
                if got is None:
                    lonely.add(a.key[i])
                    over[i] = False
                else:
                    spans[i] = (got[0], got[1])
                    attended[i] = got[2]
        eps = np.full(len(gaps), -1, dtype=np.int64)
        if ex and over.any():
            cand = np.flatnonzero(over)
            lo = ack[cand]
            if lo.dtype != object and int(lo.max()) >= 2**62:  # + limit could overflow
                lo = lo.astype(object)
            lo, hi = lo + limit, upto[cand]
            if spans:
                lo, hi = lo.astype(object), hi.astype(object)
                for n, i in enumerate(cand.tolist()):
                    if i in spans:
                        lo[n], hi[n] = spans[i]
            eps[cand] = ex.which_all(lo, hi)
        bad = _worst_per_key(kid, gaps, over & (eps < 0), len(ids))
        ok = _worst_per_key(kid, gaps, over & (eps >= 0), len(ids))
        free = _worst_per_key(kid, gaps, eps < 0, len(ids)) if ex else worst
    violations: list[dict[str, Any]] = []
    for i in sorted(bad, key=lambda i: -int(gaps[i])):
        v = _stuck_record(a, i, int(gaps[i]), t0, opts, False)
        _attended_note(v, int(attended[i]))
        if ex:
            lo, hi = spans.get(i, (a.ack[i] + limit, a.ack[i] + int(gaps[i])))
            v["explanation"] += "; " + ex.why_not(lo, hi, t0)
        violations.append(v)
    excused: list[dict[str, Any]] = []
    for i in sorted(ok, key=lambda i: -int(gaps[i])):
        assert ex is not None
        lo, hi = spans.get(i, (a.ack[i] + limit, a.ack[i] + int(gaps[i])))
        named = ex.covering(lo, hi)
        v = _stuck_record(a, i, int(gaps[i]), t0, opts, True)
        _attended_note(v, int(attended[i]))
        del v["_read_ns"]
        v["stall_from_s"] = round((lo - t0) / NS, 3)
        v["stall_to_s"] = round((hi - t0) / NS, 3)
        v["faults"] = [f for e in named for f in e.fault_ids()]
        v["explanation"] += (
            f"; excused: overdue {v['stall_from_s']:g}-{v['stall_to_s']:g} s, within what "
            f"{episode_names(named)} allowed"
        )
        excused.append(v)
    metric: dict[str, Any] = {
        "max_unread_s": round(max((int(gaps[i]) for i in worst), default=0) / NS, 3),
        "stuck_keys": len(violations),
        "keys": [
            {k: v for k, v in x.items() if k not in ("type", "_read_ns")}
            for x in violations[:MAX_LISTED]
        ],
    }
    if ex:
        metric["max_not_excused_s"] = round(max((int(gaps[i]) for i in free), default=0) / NS, 3)
        metric["excused_keys"] = len(excused)
    if att is not None:
        metric["unattended_keys"] = sorted(lonely, key=_key_order)
    return metric, violations, excused


def _key_order(k: str) -> tuple[int, Any]:
    return (0, int(k)) if k.lstrip("-").isdigit() else (1, k)


def _attended_note(v: dict[str, Any], attended_ns: int) -> None:
    """How much of a stuck value's wait had a consumer on its key (when it was computed)."""
    if attended_ns >= 0:
        v["attended_s"] = round(attended_ns / NS, 3)
        v["explanation"] += (
            f" ({v['attended_s']:g} s of that wait with a consumer assigned to key {v['key']})"
        )


def recovery(
    p: Prepared, a: Acked, heals: Sequence[Op], opts: CheckOptions
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Time from each heal to the first ok send invoked after it, and to the first ok
    read of a value whose writer was invoked after it. The clock starts at the heal if
    an attempt was in flight then, else at the first attempt after it (for reads: of a
    send and of a poll): a client that was idle is not slow to recover.

    A time is null when nothing of the kind succeeded after the heal. That is a
    violation only when attempts went on failing for at least `recovery_s` after
    the heal (sends: a writer invoked that late; reads: a poll invoked that late
    while post-heal values were acknowledged); otherwise the run simply ended or
    stopped producing (the final heal before the drain) and it is "not measured".
    """
    if not heals:
        return {"heals": 0, "max_send_s": None, "max_read_s": None, "events": []}, []
    t0 = p.first_time or 0
    ok_sends = sorted(
        (r.inv_time, r.comp_time)
        for r in p.ops
        if r.type == "ok" and r.writes and r.comp_time is not None
    )
    send_inv = [x[0] for x in ok_sends]
    send_done = _suffix_min([x[1] for x in ok_sends])
    send_tries = _attempts(r for r in p.ops if r.writes)
    poll_tries = _attempts(r for r in p.ops if r.reads or r.f == "poll")

    last_send_try = max((r.inv_time for r in p.ops if r.writes), default=None)
    last_poll_try = max((r.inv_time for r in p.ops if r.reads or r.f == "poll"), default=None)
    wr = sorted(a.writer_reads)
    wr_inv = [x[0] for x in wr]
    wr_read = _suffix_min([x[1] if x[1] != UNSET else _BIG for x in wr])
    limit = opts.recovery_s
    events: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []
    for op in heals:
        h = op.time
        s0 = _clock_start(send_tries, h)
        r0 = max(s0, _clock_start(poll_tries, h))  # a post-heal value needs a send and a poll
        i = bisect_left(send_inv, h)
        send_s = (send_done[i] - s0) / NS if i < len(send_done) else None
        j = bisect_left(wr_inv, h)
        read_s = (wr_read[j] - r0) / NS if j < len(wr_read) and wr_read[j] != _BIG else None
        post_values = j < len(wr_inv)
        ev: dict[str, Any] = {
            "f": op.f,
            "index": op.index,
            "time_s": round((h - t0) / NS, 3),
            "value": op.value,
            "send_s": None if send_s is None else round(max(send_s, 0.0), 3),
            "read_s": None if read_s is None else round(max(read_s, 0.0), 3),
        }
        slow: list[str] = []
        for what, s, last_try, measurable in (
            ("sends", send_s, last_send_try, True),
            ("reads", read_s, last_poll_try, post_values),
        ):
            if s is not None:
                if s > limit:
                    slow.append(f"{what} took {s:.1f} s to succeed again")
            elif measurable and last_try is not None and (last_try - h) / NS >= limit:
                slow.append(
                    f"{what} never succeeded again (attempts went on for "
                    f"{(last_try - h) / NS:.1f} s)"
                )
            else:
                ev[f"{what[:-1]}_note"] = "not measured: no attempts long enough after the heal"
        events.append(ev)
        if slow:
            violations.append(
                {
                    "type": "slow-recovery",
                    "f": op.f,
                    "index": op.index,
                    "time_s": ev["time_s"],
                    "send_s": ev["send_s"],
                    "read_s": ev["read_s"],
                    "explanation": (
                        f"after {op.f} (op {op.index}) at t={ev['time_s']:.1f} s, "
                        + " and ".join(slow)
                        + f"; threshold {limit:g} s"
                    ),
                }
            )
    sends = [e["send_s"] for e in events if e["send_s"] is not None]
    reads = [e["read_s"] for e in events if e["read_s"] is not None]
    metric = {
        "heals": len(events),
        "bound_s": limit,
        "max_send_s": max(sends, default=None),
        "max_read_s": max(reads, default=None),
        "events": events[:MAX_LISTED],
    }
    return metric, violations


_BIG = 1 << 62


def _attempts(ops: Iterable[OpRec]) -> tuple[list[int], list[int]]:
    """(invoke times, sorted; the latest completion among the ops invoked up to each)."""
    spans = sorted((r.inv_time, _BIG if r.comp_time is None else r.comp_time) for r in ops)
    latest: list[int] = []
    top = -_BIG
    for _inv, comp in spans:
        top = max(top, comp)
        latest.append(top)
    return [x[0] for x in spans], latest


def _clock_start(tries: tuple[list[int], list[int]], h: int) -> int:
    """h if an attempt was in flight at time h, else when the first one after it began
    (h if none did)."""
    invs, latest = tries
    i = bisect_right(invs, h)
    if i and latest[i - 1] > h:
        return h
    return invs[i] if i < len(invs) else h


def _suffix_min(xs: list[int]) -> list[int]:
    out = list(xs)
    for i in range(len(out) - 2, -1, -1):
        if out[i + 1] < out[i]:
            out[i] = out[i + 1]
    return out


# ---------------------------------------------------------------------- entry


def thresholds(opts: CheckOptions) -> dict[str, Any]:
    return {
        "liveness_bad": opts.liveness_bad,
        "window_s": opts.liveness_window_s,
        "starvation_ratio": opts.starvation_ratio,
        "starvation_min_offered": opts.starvation_min_offered,
        "starvation_lag_s": opts.starvation_lag_s,
        "stuck_s": opts.stuck_s,
        "recovery_s": opts.recovery_s,
        "memory_growth_ratio": opts.memory_growth_ratio,
        "memory_growth_min_bytes": opts.memory_growth_min_bytes,
        "throughput_ratio": opts.throughput_ratio,
    }


def liveness(
    p: Prepared,
    logs: Logs,
    nemesis: Sequence[Op],
    opts: CheckOptions,
    judged: JudgedWindow | None = None,
    nodes: int | None = None,
) -> dict[str, Any]:
    """results["metrics"]["liveness"]: each metric, the thresholds, the violations, and
    ``checks`` (one verdict per check, for junit.xml and the report). `judged` narrows
    starvation to the judged window (checker/window.py); None judges the whole history.

    Stalls during a fault, or within `recovery_s` after its heal, are excused
    (checker/excuse.py; `nodes`: the cluster's size, for its failover bound): then
    ``windows`` says which stretches were judged and which excused, and ``excused``
    lists the stalls excused. A history without faults has neither."""
    t0 = p.first_time or 0
    end = p.last_time or t0
    # The copy workload's output keys are read only by the final drain: their values
    # would all look starved and stuck. Consumption is judged on the input keys.
    route = opts.copy.get("route") if opts.copy else None
    outputs = frozenset(map(str, route.values())) if isinstance(route, dict) else frozenset()
    a = acknowledged(p, logs, outputs)
    e2e = e2e_latency(a)
    commit = commit_latency(p)
    allowance = lag_allowance(opts, e2e)
    # a value in flight when a fault struck is its effect: allowances begin one lag
    # allowance (the p99 end-to-end latency, 1 s to one window) before their fault
    ex, faults = excuser(nemesis, end, opts.recovery_s, nodes, allowance)
    starv, v_starv, x_starv = starvation(a, t0, opts, allowance, judged, ex)
    stuck, v_stuck, x_stuck = stuck_partitions(a, t0, end, opts, ex, attendance(p.ops), allowance)
    _name_stuck_ops(p, logs, v_stuck)
    heals = [op for op in nemesis if op.type == "info" and is_heal(op.f)]
    rec, v_rec = recovery(p, a, heals, opts)
    mem, v_mem = memory_growth(nemesis, t0, opts)
    tp, v_tp, x_tp = _throughput(p, a, judged, faults, ex, opts)
    violations = v_starv + v_stuck + v_rec + v_mem + v_tp
    bad = opts.liveness_bad

    def verdict(ok: bool, value: Any, threshold: Any, text: str) -> dict[str, Any]:
        return {
            "ok": ok,
            "bad": bad and not ok,
            "value": value,
            "threshold": threshold,
            "explanation": text,
        }

    checks = {
        "e2e-latency": verdict(
            True,
            e2e["p99"],
            None,
            f"end-to-end (ack to first read) over {e2e['n']} values: p50 {e2e['p50']} ms, "
            f"p99 {e2e['p99']} ms, max {e2e['max']} ms; {e2e['unread']} acknowledged "
            f"values never read",
        ),
        "commit-latency": verdict(
            True,
            commit["p99"],
            None,
            f"ok {commit['f']} latency over {commit['n']} ops: p50 {commit['p50']} ms, "
            f"p99 {commit['p99']} ms, max {commit['max']} ms",
        ),
        "starvation": verdict(
            not v_starv,
            starv.get("min_ratio_not_excused", starv["min_ratio"]),
            opts.starvation_ratio,
            (
                v_starv[0]["explanation"]
                + (f" (+{len(v_starv) - 1} more episodes)" if len(v_starv) > 1 else "")
                if v_starv
                else _starvation_summary(starv, opts.liveness_window_s)
            )
            + _excused_note(x_starv, "starved window runs"),
        ),
        "stuck-partition": verdict(
            not v_stuck,
            stuck.get("max_not_excused_s", stuck["max_unread_s"]),
            opts.stuck_s,
            (
                f"{len(v_stuck)} stuck keys; " + v_stuck[0]["explanation"]
                if v_stuck
                else "longest an acknowledged value waited to be read"
                + (" outside a fault's allowance" if ex else "")
                + f": {stuck.get('max_not_excused_s', stuck['max_unread_s']):g} s"
            )
            + _excused_note(x_stuck, "stuck keys"),
        ),
        "slow-recovery": verdict(
            not v_rec,
            max((x for x in (rec["max_send_s"], rec["max_read_s"]) if x is not None), default=None),
            opts.recovery_s,
            f"{len(v_rec)} of {rec['heals']} heals slow; " + v_rec[0]["explanation"]
            if v_rec
            else f"{rec['heals']} heals; slowest recovery: sends {rec['max_send_s']} s, "
            f"reads {rec['max_read_s']} s",
        ),
        "memory-growth": verdict(not v_mem, *memory_check(mem, v_mem, opts)),
        "throughput-collapse": verdict(
            not v_tp,
            tp.get("min_ratio_not_excused", tp["min_ratio"]),
            opts.throughput_ratio,
            _throughput_text(tp, v_tp) + _excused_note(x_tp, "collapsed window runs"),
        ),
    }
    out = {
        "e2e_latency_ms": e2e,
        "commit_latency_ms": commit,
        "starvation": starv,
        "stuck_partitions": stuck,
        "recovery": rec,
        "memory": mem,
        "throughput_collapse": tp,
        "thresholds": thresholds(opts),
        "violations": violations,
        "checks": checks,
    }
    if faults:  # which stretches were judged, which a fault excused, and what it excused
        w0, w1 = (judged.start_ns, judged.end_ns) if judged is not None else (t0, end)
        out["windows"] = windows(ex, w0, w1, t0, opts.recovery_s)
        out["excused"] = (x_starv + x_stuck + x_tp)[: 3 * MAX_LISTED]
        out["excused_counts"] = {
            "starvation": len(x_starv),
            "stuck-partition": len(x_stuck),
            "throughput-collapse": len(x_tp),
        }
    return out


def _throughput(
    p: Prepared,
    a: Acked,
    judged: JudgedWindow | None,
    faults: Sequence[Fault],
    ex: Excuser,
    opts: CheckOptions,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """checker/throughput.py over the judged window; a bare history (no judged window)
    is judged until the last attempt to write: after it the workload, not the cluster,
    stopped producing."""
    t0 = p.first_time or 0
    if judged is not None:
        lo, hi = judged.start_ns, judged.end_ns
    else:
        lo = t0
        hi = max((r.inv_time for r in p.ops if r.writes), default=t0)
    oks = np.array(
        [r.comp_time for r in p.ops if r.type == "ok" and r.comp_time is not None],
        dtype=np.int64,
    )
    demand = [(r.inv_time, _BIG if r.comp_time is None else r.comp_time) for r in p.ops if r.writes]
    return throughput_collapse(
        a.arrays()[0],
        oks,
        lo,
        hi,
        t0,
        faults,
        ex,
        demand + idle_slots(p.ops),
        window_s=opts.liveness_window_s,
        ratio=opts.throughput_ratio,
        min_reference=opts.starvation_min_offered,
    )


def _throughput_text(tp: dict[str, Any], violations: list[dict[str, Any]]) -> str:
    """The throughput-collapse check's sentence."""
    if violations:
        more = len(violations) - 1
        return violations[0]["explanation"] + (f" (+{more} more stretches)" if more else "")
    if not tp["judged"]:
        return (
            f"not judged: {tp['windows']} full windows of {tp['window_s']:g} s, their median "
            f"{tp['reference']:g} values acknowledged per window (judged from "
            f"{tp['min_reference']})"
        )
    low = tp.get("min_ratio_not_excused", tp["min_ratio"])
    return (
        f"{tp['windows']} windows of {tp['window_s']:g} s judged against the median of "
        f"{tp['reference_windows']} {tp['reference_from']} ({tp['reference']:g} values "
        f"acknowledged per window); lowest "
        + ("not excused " if "min_ratio_not_excused" in tp else "")
        + ("-" if low is None else f"{100 * low:.1f}%")
        + f" (threshold {100 * tp['ratio']:g}%)"
    )


def _excused_note(excused: list[dict[str, Any]], what: str) -> str:
    """' (2 stuck keys excused: ...the first one's explanation)', or '' when none."""
    if not excused:
        return ""
    return f" ({len(excused)} {what} excused by faults; first: {excused[0]['explanation']})"


MAX_VIOLATIONS = 20  # per type, in results.metrics.liveness.violations


def cap_violations(live: dict[str, Any]) -> None:
    """Keep at most MAX_VIOLATIONS of each type in `violations` (a soak with thousands
    of stuck keys would otherwise write them all), counting them in
    `violation_counts`. Call after violations_by_type has taken what it needs."""
    counts: dict[str, int] = {}
    kept = []
    for v in live.get("violations", ()):
        n = counts.get(v["type"], 0)
        counts[v["type"]] = n + 1
        if n < MAX_VIOLATIONS:
            kept.append(v)
    live["violations"] = kept
    live["violation_counts"] = counts


def violations_by_type(live: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Violations grouped by type: the anomalies they become with ``liveness_bad``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for v in live.get("violations", ()):
        out.setdefault(v["type"], []).append(v)
    return out


def _starvation_summary(starv: dict[str, Any], window_s: float) -> str:
    """The starvation check's sentence when nothing starved (no None in the text)."""
    judged = starv["windows_judged"]
    if not judged or starv["min_ratio"] is None:
        return (
            f"no window of {window_s:g} s was judged (each needs enough values offered and "
            "its end, plus the lag allowance, before the last acknowledgement)"
        )
    windows = "window" if judged == 1 else "windows"
    return (
        f"{judged} {windows} of {window_s:g} s judged, lowest consumed/offered "
        f"{starv['min_ratio']} (lag allowance {starv['lag_allowance_s']:g} s)"
    )
