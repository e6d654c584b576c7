"""When each key had a consumer: the time a stuck value really waited on the system.

A value can only be read while some consumer has its key assigned. The queue workload
moves its consumers between keys (reassignments, key rotation), so a key may go
minutes with nobody assigned to it; a value written just before that waits, through
no fault of the system, until a consumer comes back. ``stuck-partition`` therefore
counts a value's wait only while its key was *attended*: assigned (or subscribed) to
at least one process, from that process's assign/subscribe invoke until its next one,
or after its last one until the process is *replaced*. A consumer that stops polling
but stays assigned still attends its keys, so its stall still counts; so does one
blocked in an op (to the op's completion, or to the end of the history when it never
completes).

When a process is replaced. After its last op a process may have ended (the run
stopped, or the workload retired it: a fatal or indeterminate error) or be blocked
outside any op. Either way its slot is taken over by a *successor*, a process that
begins after it (the workload's worker opens fresh clients under a new number); until
the successor's first op the retired consumer's keys are still the workload's to
read, and the cluster is what keeps them waiting: opening clients (a transactional
producer's init, a consumer's first metadata) is no op, so a cluster that refuses new
clients shows as no ops at all. Each process that ended is paired with the earliest
process beginning after it that no earlier one took (the slots are not in the
history; any successor frees a slot the same way); one with none attends to the end
of the history. A replica paused with replication factor 1 looked exactly so: every
consumer retired within 25 s and no successor could open a client for 4.5 minutes.

A history without assign/subscribe ops (every key read by whoever polls) is attended
all the time, as before. Pure; see docs/anomalies.md, "Liveness".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from .prepare import OpRec

_END = 1 << 62


class Attendance:
    """Per key, merged [start, end) intervals with a running total, for covered(k, a, b)."""

    def __init__(self, per_key: dict[str, list[tuple[int, int]]]) -> None:
        self._keys: dict[str, tuple[Any, Any, Any]] = {}
        for k, ivs in per_key.items():
            merged: list[list[int]] = []
            for s, e in sorted(ivs):
                if merged and s <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], e)
                elif e > s:
                    merged.append([s, e])
            starts = np.array([m[0] for m in merged], dtype=np.int64)
            ends = np.array([m[1] for m in merged], dtype=np.int64)
            cum = np.concatenate(([0], np.cumsum(ends - starts)))
            self._keys[k] = (starts, ends, cum)

    def _upto(self, k: str, t: Any) -> Any:
        """Attended time of key k before each time in `t` (an int64 array)."""
        got = self._keys.get(k)
        if got is None:
            return np.zeros(len(t), dtype=np.int64)
        starts, ends, cum = got
        i = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
        j = np.maximum(i - 1, 0)
        inside = np.where(i > 0, np.clip(t - starts[j], 0, ends[j] - starts[j]), 0)
        return cum[j] * (i > 0) + inside

    def stall(
        self, k: str, lo: int, hi: int, limit: int, grace: int
    ) -> tuple[int, int, int] | None:
        """The stall of a value of key k acknowledged at `lo` and first read at `hi`:
        (from, to, attended ns), or None when consumers assigned to k did not wait on
        it for more than `limit`. The wait counts only while k was attended, and not
        the last moments before the read when a consumer had just come back to k
        (attended for at most `grace` before it read the value): that consumer read
        it at once. `from` is when the attended wait passed `limit`; `to` the end of
        the last attended stretch that counts."""
        got = self._keys.get(k)
        if got is None:
            return None
        starts, ends, _ = got
        pieces: list[tuple[int, int]] = []
        for j in range(int(np.searchsorted(ends, lo, side="right")), len(starts)):
            s, e = max(int(starts[j]), lo), min(int(ends[j]), hi)
            if s >= hi:
                break
            if e > s:
                pieces.append((s, e))
        last = pieces[-1] if pieces else (lo, lo)
        # a consumer came back to k (not attended since the ack) and read it at once
        if last[1] >= hi and last[1] - last[0] <= grace and (len(pieces) > 1 or last[0] > lo):
            pieces.pop()
        total = sum(e - s for s, e in pieces)
        if total <= limit:
            return None
        need = limit
        for s, e in pieces:
            if e - s >= need:
                return s + need, pieces[-1][1], total
            need -= e - s
        return pieces[-1][1], pieces[-1][1], total  # unreachable: total > limit

    def covered(self, keys: list[str], lo: Any, hi: Any) -> Any:
        """Attended time of keys[n] within [lo[n], hi[n]] for every n (int64 arrays)."""
        out = np.zeros(len(keys), dtype=np.int64)
        by_key: dict[str, list[int]] = defaultdict(list)
        for n, k in enumerate(keys):
            by_key[k].append(n)
        for k, idx in by_key.items():
            ix = np.array(idx, dtype=np.int64)
            out[ix] = self._upto(k, hi[ix]) - self._upto(k, lo[ix])
        return out


def attendance(ops: Iterable[OpRec]) -> Attendance | None:
    """Who had which keys assigned, and when; None when no op assigns or subscribes."""
    per_process: dict[Any, list[OpRec]] = defaultdict(list)
    any_assign = False
    for r in ops:
        per_process[r.process].append(r)
        any_assign = any_assign or r.f in ("assign", "subscribe")
    if not any_assign:
        return None
    for rs in per_process.values():
        rs.sort(key=lambda r: r.inv_time)
    until = replaced(
        {p: (rs[0].inv_time, _last(rs)) for p, rs in per_process.items() if rs}
    )  # fmt: skip
    per_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, rs in per_process.items():
        keys: tuple[str, ...] = ()
        since = 0
        for r in rs:
            if r.f not in ("assign", "subscribe"):
                continue
            for k in keys:
                per_key[k].append((since, r.inv_time))
            keys = tuple(map(str, r.keys or ())) if r.type != "fail" else ()
            since = r.inv_time
        for k in keys:
            per_key[k].append((since, max(until[p], since)))
    return Attendance(per_key)


def idle_slots(ops: Iterable[OpRec]) -> list[tuple[int, int]]:
    """The stretches in which a process that writes had ended and its successor had not
    begun (until the end of the history when none did), [from, to) in history time:
    the workload wanted to work there and could not open clients (checker/throughput.py
    counts them as demand: an attempt the history cannot show)."""
    per_process: dict[Any, list[OpRec]] = defaultdict(list)
    writers = set()
    for r in ops:
        per_process[r.process].append(r)
        if r.writes:
            writers.add(r.process)
    for rs in per_process.values():
        rs.sort(key=lambda r: r.inv_time)
    ends = {p: _last(rs) for p, rs in per_process.items()}
    until = replaced({p: (rs[0].inv_time, ends[p]) for p, rs in per_process.items()})
    return sorted((ends[p], until[p]) for p in writers if ends[p] < until[p])


def _last(rs: list[OpRec]) -> int:
    """When a process's last op ended: _END while one is still in flight at the end."""
    if any(r.comp_time is None for r in rs[-1:]):
        return _END
    return max((r.comp_time if r.comp_time is not None else r.inv_time) for r in rs)


def replaced(spans: dict[Any, tuple[int, int]]) -> dict[Any, int]:
    """Per process (first invoke, end of its last op): until when it holds its slot, the
    first invoke of its successor, or _END when none (module doc). Processes ending
    earlier take the earlier successors; a successor begins at or after the end."""
    ends = sorted((end, i) for i, (p, (_b, end)) in enumerate(spans.items()) if end < _END)
    begins = sorted(b for b, _e in spans.values())
    procs = list(spans)
    out = dict.fromkeys(spans, _END)
    j = 0
    for end, i in ends:
        while j < len(begins) and begins[j] < end:
            j += 1  # began before this end: no later end can take it either
        if j == len(begins):
            break
        out[procs[i]] = max(begins[j], end)
        j += 1
    return out
