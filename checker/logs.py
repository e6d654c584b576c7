"""Ground truth: each key's log (offset -> values) and its dense version order.

The log of a key is built from every poll (ok, info and fail ops: a consumer
reports the log even inside an aborted transaction) and from the acknowledged
offsets of sends of ops that must have committed (prepare.py folds polls and ok
sends in as it streams; committed info ops are added here, once every ok read is
known). Offsets have holes (transaction markers, aborted records), so positions
are compared by *dense index*: the rank of an offset among the key's non-empty
offsets.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from ..histories.model import DATA_FS
from .prepare import Chunk, OpRec, Prepared


def must_have_committed(rec: OpRec, ok_reads: dict[str, set[Any]]) -> bool:
    """Ok ops committed; info ops did if an ok op read any value they sent."""
    if rec.type == "ok":
        return True
    if rec.type != "info":
        return False
    for k, v, _o, _i in rec.writes:
        s = ok_reads.get(k)
        if s is not None and v in s:
            return True
    return False


@dataclass
class KeyLog:
    """One key's log. `values[d]` is the (first) value at dense index d, `offsets[d]` its offset."""

    offsets: list[int] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    dense: dict[int, int] = field(default_factory=dict)  # offset -> dense index
    first: dict[Any, int] = field(default_factory=dict)  # value -> dense index of first offset
    last: dict[Any, int] = field(default_factory=dict)  # value -> dense index of last offset

    def pos(self, offset: int | None, value: Any) -> int | None:
        """Dense position of a record: by its reported offset, else by where its value sits."""
        if offset is not None:
            d = self.dense.get(offset)
            if d is not None:
                return d
        return self.first.get(value)


@dataclass
class Logs:
    committed: list[bool]
    keys: dict[str, KeyLog]
    # (key, offset) -> distinct values seen there, only where there are two or more
    conflicts: dict[tuple[str, int], set[Any]]
    # (key, value) -> distinct offsets it sits at, only where there are two or more
    dups: dict[tuple[str, Any], set[int]]

    def pos(self, key: str, offset: int | None, value: Any) -> int | None:
        kl = self.keys.get(key)
        return None if kl is None else kl.pos(offset, value)


def build_logs(p: Prepared) -> Logs:
    ok_reads = p.ok_reads
    committed = [False] * len(p.ops)
    for r in p.ops:
        typ = r.type
        if typ == "ok":
            committed[r.id] = r.f in DATA_FS  # r.is_data
        elif typ == "info" and r.writes and must_have_committed(r, ok_reads):
            committed[r.id] = True
            for k, v, o, _i in r.writes:
                if o is not None:
                    p.add_record(k, o, v)
    keys: dict[str, KeyLog] = {}
    for k, lk in p.raw.items():
        offs = sorted(lk)
        vals = list(map(lk.__getitem__, offs))
        dense = dict(zip(offs, count()))
        first: dict[Any, int] = {}
        deque(map(first.setdefault, vals, count()), maxlen=0)  # each value's first index
        keys[k] = KeyLog(offs, vals, dense, first, first)
    # Values that also sit at other offsets (conflicting or duplicated) need their
    # true first/last dense positions.
    extra: dict[str, list[tuple[Any, int]]] = {}
    for (k, o), vs in p.conflicts.items():
        for v in vs:
            extra.setdefault(k, []).append((v, o))
    for (k, v), os_ in p.dups.items():
        for o in os_:
            extra.setdefault(k, []).append((v, o))
    for k, pairs in extra.items():
        kl = keys[k]
        if kl.last is kl.first:
            kl.last = dict(kl.first)
        for v, o in pairs:
            d = kl.dense[o]
            if v not in kl.first or d < kl.first[v]:
                kl.first[v] = d
            if v not in kl.last or d > kl.last[v]:
                kl.last[v] = d
    _finalize(keys, p)
    p.raw = {}  # the KeyLogs hold it all now
    p.at = {}
    return Logs(committed, keys, p.conflicts, p.dups)


def _finalize(keys: dict[str, KeyLog], p: Prepared) -> None:
    """Turn every chunk's offsets into dense positions (see prepare.Chunk)."""
    dense_of = {k: kl.dense for k, kl in keys.items()}
    for r in p.ops:
        if not r.reads:
            continue
        out = []
        for k, where, i, vals, inc in r.reads:
            offs_kept = None
            if type(where) is range:  # consecutive increasing offsets
                dense = dense_of[k]
                a = dense[where.start]
                n = len(where)
                if dense[where.stop - 1] - a == n - 1:
                    ps: Any = range(a, a + n)
                else:
                    ps = array("q", map(dense.__getitem__, where))
            elif type(where) is list:  # null offsets: place those records by value
                kl = keys.get(k)
                offs_kept = where
                ps = (
                    [None] * len(where)
                    if kl is None
                    else [kl.pos(o, v) for o, v in zip(where, vals, strict=True)]  # type: ignore[arg-type]
                )
            else:
                dense = dense_of[k]
                a = dense[where[0]]
                n = len(where)
                if inc and dense[where[-1]] - a == n - 1:
                    ps = range(a, a + n)
                else:
                    ps = array("q", map(dense.__getitem__, where))
            out.append((k, ps, i, vals, offs_kept))
        r.reads = tuple(out)


def chunk_values(logs: Logs, c: Chunk) -> list[Any]:
    """The values of a chunk's records (from the log when they were not kept)."""
    if c[3] is not None:
        return c[3]
    values = logs.keys[c[0]].values
    return [values[d] for d in c[1]]


def chunk_offsets(logs: Logs, c: Chunk) -> list[Any]:
    if c[4] is not None:
        return c[4]  # type: ignore[no-any-return]
    offsets = logs.keys[c[0]].offsets
    return [offsets[d] for d in c[1]]


def iter_reads(logs: Logs, r: OpRec) -> Iterator[tuple[str, Any, Any, int]]:
    """(key, value, offset, micro-op index) of each record an op read, in order (slow path)."""
    for c in r.reads:
        for o, v in zip(chunk_offsets(logs, c), chunk_values(logs, c), strict=True):
            yield c[0], v, o, c[2]


def read_positions(logs: Logs, r: OpRec) -> dict[str, list[Any]]:
    """key -> the position runs (one per chunk) of the records op r read, in read order."""
    out: dict[str, list[Any]] = {}
    for c in r.reads:
        lst = out.get(c[0])
        if lst is None:
            out[c[0]] = [c[1]]
        else:
            lst.append(c[1])
    return out


def run_first_last_max(runs: list[Any]) -> tuple[int | None, int | None, int | None]:
    """(first, last, max) known position over a key's runs."""
    first = last = top = None
    for ps in runs:
        if type(ps) is range:
            if first is None:
                first = ps[0]
            last = ps[-1]
            if top is None or ps[-1] > top:
                top = ps[-1]
            continue
        known = [d for d in ps if d is not None] if None in ps else ps
        if not known:
            continue
        if first is None:
            first = ps[0] if ps[0] is not None else None
            if first is None:
                first = known[0]
        last = known[-1]
        m = max(known)
        if top is None or m > top:
            top = m
    return first, last, top


def runs_consecutive(runs: list[Any]) -> bool:
    """True when a key's runs are one strictly consecutive sequence (no skip, no going back)."""
    prev_last = None
    for ps in runs:
        if type(ps) is not range:
            return False
        if prev_last is not None and ps[0] != prev_last + 1:
            return False
        prev_last = ps[-1]
    return True
