"""One streaming pass over a history: pair invokes with completions, keep compact op records.

Everything later analyses reads from :class:`Prepared`; nothing keeps the parsed
``Op`` objects, so a 1,000,000-op history costs one small record per completed op.

Pairing rules (DESIGN.md section 2, and what other tools write):
* a completion pairs with the pending invoke of its process;
* a completion without an invoke (hand-written histories often omit them) counts
  as invoked at its own position and time;
* an invoke that never completes (ktrial crashed, the history was cut) counts as
  ``info``, with its invoke value as what it tried to do;
* nemesis ops are not data ops; they are only counted.

Positions (`inv_pos`, `comp_pos`) are the ordinal of the line in the history; they
give the realtime order even when `time` is missing or coarse.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..histories.model import DATA_FS, NEMESIS, Op, Poll, Send

# A micro-op effect: (key, value, offset or None, micro-op index within the op)
Effect = tuple[str, Any, "int | None", int]

INFINITY = float("inf")


@dataclass(slots=True)
class OpRec:
    """A completed (or never completed) client op, reduced to what analyses need."""

    id: int  # position in Prepared.ops
    index: int  # history `index` of the completion (of the invoke if it never completed)
    process: Any
    type: str  # ok | fail | info
    f: str
    inv_pos: int
    comp_pos: int | None  # None: never completed
    inv_time: int
    comp_time: int | None
    writes: tuple[Effect, ...] = ()
    reads: tuple[Effect, ...] = ()
    rebalanced: frozenset[str] = frozenset()
    keys: tuple[str, ...] | None = None  # assign/subscribe value
    seek: bool = False
    error: Any = None
    inv_index: int | None = None

    @property
    def is_data(self) -> bool:
        return self.f in DATA_FS


@dataclass
class Prepared:
    ops: list[OpRec] = field(default_factory=list)
    n_lines: int = 0
    n_nemesis: int = 0
    first_time: int | None = None
    last_time: int | None = None
    # key -> values read by ok ops
    ok_reads: dict[str, set[Any]] = field(default_factory=dict)
    # key -> value -> id of the op that sent it (first one if several claim it)
    writer_of: dict[str, dict[Any, int]] = field(default_factory=dict)
    has_subscribe: bool = False
    n_read_records: int = 0


def _effects(mops: list[Any]) -> tuple[tuple[Effect, ...], tuple[Effect, ...]]:
    writes: list[Effect] = []
    reads: list[Effect] = []
    for i, m in enumerate(mops):
        if type(m) is Send:
            writes.append((m.key, m.value, m.offset, i))
        elif type(m) is Poll and m.records:
            for k, recs in m.records.items():
                for o, v in recs:
                    reads.append((k, v, o, i))
    return tuple(writes), tuple(reads)


def _rebalanced_keys(log: Any) -> frozenset[str]:
    """`rebalance_log`: a list of events like {"keys": [k, ...]} (Jepsen) or plain keys."""
    if not isinstance(log, list):
        return frozenset()
    out: set[str] = set()
    for ev in log:
        if isinstance(ev, dict):
            ks = ev.get("keys") or ev.get("assigned") or []
            for k in ks if isinstance(ks, list) else []:
                if isinstance(k, (int, str)) and not isinstance(k, bool):
                    out.add(str(k))
        elif isinstance(ev, (int, str)) and not isinstance(ev, bool):
            out.add(str(ev))
    return frozenset(out)


def _merge_writes(completion: tuple[Effect, ...], invoke: tuple[Effect, ...]) -> tuple[Effect, ...]:
    """Sends the invoke announced but the (partial) completion does not list: offset unknown."""
    if not invoke:
        return completion
    seen = {(k, v) for k, v, _o, _i in completion}
    extra = tuple(e for e in invoke if (e[0], e[1]) not in seen)
    return completion + extra if extra else completion


def prepare(ops: Iterable[Op]) -> Prepared:
    """Pair and index the ops of a history in one pass."""
    p = Prepared()
    pending: dict[Any, tuple[int, Op]] = {}  # process -> (position, invoke op)
    recs = p.ops
    ok_reads = p.ok_reads
    writer_of = p.writer_of
    pos = -1
    for pos, op in enumerate(ops):
        t = op.time
        if p.first_time is None:
            p.first_time = t
        p.last_time = t
        process = op.process
        if process == NEMESIS:
            p.n_nemesis += 1
            continue
        typ = op.type
        if typ == "invoke":
            prev = pending.get(process)
            if prev is not None:
                recs.append(_never_completed(len(recs), *prev))
            pending[process] = (pos, op)
            continue
        inv = pending.pop(process, None)
        inv_op: Op | None = None
        if inv is not None:
            if inv[1].f != op.f:
                # Not this completion's invoke: that one never completed.
                recs.append(_never_completed(len(recs), *inv))
            else:
                inv_op = inv[1]
        rec = OpRec(
            id=len(recs),
            index=op.index,
            process=process,
            type=typ,
            f=op.f,
            inv_pos=inv[0] if inv_op is not None and inv is not None else pos,
            comp_pos=pos,
            inv_time=inv_op.time if inv_op is not None else t,
            comp_time=t,
            error=op.error,
            inv_index=inv_op.index if inv_op is not None else None,
        )
        f = op.f
        if f in DATA_FS:
            writes, reads = _effects(op.value)
            if typ != "ok" and inv_op is not None and isinstance(inv_op.value, list):
                writes = _merge_writes(writes, _effects(inv_op.value)[0])
            rec.writes = writes
            rec.reads = reads
            rb = op.extra.get("rebalance_log") if op.extra else None
            if rb:
                rec.rebalanced = _rebalanced_keys(rb)
            rid = rec.id
            for k, v, _o, _i in writes:
                wk = writer_of.get(k)
                if wk is None:
                    writer_of[k] = {v: rid}
                elif v not in wk:
                    wk[v] = rid
            if reads:
                p.n_read_records += len(reads)
                if typ == "ok":
                    for k, v, _o, _i in reads:
                        s = ok_reads.get(k)
                        if s is None:
                            ok_reads[k] = {v}
                        else:
                            s.add(v)
        elif f in ("assign", "subscribe"):
            if f == "subscribe":
                p.has_subscribe = True
            val = op.value if isinstance(op.value, list) else []
            rec.keys = tuple(str(k) for k in val)
            if op.extra:
                rec.seek = bool(
                    op.extra.get("seek_to_beginning") or op.extra.get("seek-to-beginning?")
                )
        recs.append(rec)
    for inv_pos, inv_op in sorted(pending.values(), key=lambda x: x[0]):
        recs.append(_never_completed(len(recs), inv_pos, inv_op))
        if inv_op.f == "subscribe":
            p.has_subscribe = True
    for rec in recs:
        if rec.comp_pos is None and rec.writes:
            for k, v, _o, _i in rec.writes:
                writer_of.setdefault(k, {}).setdefault(v, rec.id)
    p.n_lines = pos + 1
    return p


def _never_completed(rid: int, pos: int, inv: Op) -> OpRec:
    rec = OpRec(
        id=rid,
        index=inv.index,
        process=inv.process,
        type="info",
        f=inv.f,
        inv_pos=pos,
        comp_pos=None,
        inv_time=inv.time,
        comp_time=None,
        error="never-completed",
        inv_index=inv.index,
    )
    if inv.f in DATA_FS and isinstance(inv.value, list):
        rec.writes = _effects(inv.value)[0]
    elif inv.f in ("assign", "subscribe") and isinstance(inv.value, list):
        rec.keys = tuple(str(k) for k in inv.value)
    return rec
