"""Ground truth: each key's log (offset -> values) and its dense version order.

The log of a key is built from every poll (ok, info and fail ops: a consumer
reports the log even inside an aborted transaction) and from the acknowledged
offsets of sends of ops that must have committed. Offsets have holes
(transaction markers, aborted records), so positions are compared by *dense
index*: the rank of an offset among the key's non-empty offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .prepare import OpRec, Prepared


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

    def offset_at(self, key: str, d: int) -> int:
        return self.keys[key].offsets[d]


def build_logs(p: Prepared) -> Logs:
    ok_reads = p.ok_reads
    committed = [must_have_committed(r, ok_reads) if r.is_data else False for r in p.ops]
    raw: dict[str, dict[int, Any]] = {}
    at: dict[str, dict[Any, int]] = {}  # key -> value -> first offset seen
    conflicts: dict[tuple[str, int], set[Any]] = {}
    dups: dict[tuple[str, Any], set[int]] = {}

    def add(k: str, o: int, v: Any) -> None:
        lk = raw.get(k)
        if lk is None:
            raw[k] = lk = {}
            at[k] = {}
        cur = lk.get(o, _MISSING)
        if cur is _MISSING:
            lk[o] = v
        elif cur != v:
            conflicts.setdefault((k, o), {cur}).add(v)
        ak = at[k]
        fo = ak.get(v)
        if fo is None:
            ak[v] = o
        elif fo != o:
            dups.setdefault((k, v), {fo}).add(o)

    for r in p.ops:
        if not r.is_data:
            continue
        for k, v, o, _i in r.reads:
            if o is not None:
                add(k, o, v)
        if committed[r.id]:
            for k, v, o, _i in r.writes:
                if o is not None:
                    add(k, o, v)

    keys: dict[str, KeyLog] = {}
    for k, lk in raw.items():
        offs = sorted(lk)
        vals = [lk[o] for o in offs]
        dense = {o: i for i, o in enumerate(offs)}
        first = {}
        for i, v in enumerate(vals):
            if v not in first:
                first[v] = i
        kl = KeyLog(offs, vals, dense, first, first)
        keys[k] = kl
    # Values that also sit at other offsets (conflicting or duplicated) need their
    # true first/last dense positions.
    extra: dict[str, list[tuple[Any, int]]] = {}
    for (k, o), vs in conflicts.items():
        for v in vs:
            extra.setdefault(k, []).append((v, o))
    for (k, v), os_ in dups.items():
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
    return Logs(committed, keys, conflicts, dups)


_MISSING = object()
