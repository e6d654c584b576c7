"""One streaming pass over a history: pair invokes with completions, index as we go.

Everything later analyses read comes from :class:`Prepared`; parsed ``Op``
objects are dropped as soon as they are folded in. Polls carry most of a
history (tens of millions of records for a 1,000,000-op run), so a poll's
records are folded into the key's log here and kept per op only as compact
offsets (a ``range`` or an ``array``), plus their values when the log cannot
give them back (null offsets, or values that disagreed with the log).

Pairing rules (docs/history-format.md, and what other tools write):
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

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import lt, ne
from typing import Any

from ..histories.model import DATA_FS, NEMESIS, Effect, Flat, Op, ReadRun, flatten

# A poll's records of one key: (key, where, micro-op index, values or None, extra).
# While streaming, `where` holds offsets (a range when consecutive, else an array('q'),
# or a list with null offsets) and `extra` whether they increase; logs.build_logs turns
# `where` into dense positions (a range, an array or a list with None) and `extra` into
# the offsets list when some were null. Values are kept only when the key's log
# cannot give them back (null offsets, or values that disagreed with the log).
Chunk = tuple[str, Any, int, "list[Any] | None", Any]

_MISSING = object()
_RANK = {"fail": 0, "info": 1, "ok": 2}  # who wrote a value sent by several ops
# the empty key set, shared (`frozenset()` is a new 216-byte object each time)
NO_KEYS: frozenset[str] = frozenset()


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
    reads: tuple[Chunk, ...] = ()
    rebalanced: frozenset[str] = NO_KEYS
    keys: tuple[str, ...] | None = None  # assign/subscribe value
    seek: bool = False
    error: Any = None

    @property
    def is_data(self) -> bool:
        return self.f in DATA_FS


@dataclass
class Prepared:
    ops: list[OpRec] = field(default_factory=list)
    n_lines: int = 0
    n_nemesis: int = 0
    # earliest and latest `time` of any op: times may be out of order (other tools'
    # histories), so these bound every op's time, not just the first and last line's
    first_time: int | None = None
    last_time: int | None = None
    # key -> values read by ok ops
    ok_reads: dict[str, set[Any]] = field(default_factory=dict)
    # key -> the furthest offset an ok op read
    ok_top: dict[str, int] = field(default_factory=dict)
    # key -> value -> id of the op that sent it (the first one if several claim it,
    # but never a failed op when another sent it too: a failed op wrote nothing)
    writer_of: dict[str, dict[Any, int]] = field(default_factory=dict)
    has_subscribe: bool = False
    n_read_records: int = 0
    # --- the logs as polls (and ok sends) reported them
    raw: dict[str, dict[int, Any]] = field(default_factory=dict)  # key -> offset -> 1st value
    at: dict[str, dict[Any, int]] = field(default_factory=dict)  # key -> value -> 1st offset
    conflicts: dict[tuple[str, int], set[Any]] = field(default_factory=dict)
    dups: dict[tuple[str, Any], set[int]] = field(default_factory=dict)
    # --- streaming analyses
    precommitted: list[tuple[int, str, Any, Any, int, int]] = field(default_factory=list)
    unseen_points: list[tuple[int, int]] = field(default_factory=list)  # (time, count)
    unseen_count: int = 0

    def add_record(self, k: str, o: int, v: Any) -> bool:
        """Fold one (offset, value) into key k's log; False if it disagreed with it."""
        lk = self.raw.get(k)
        if lk is None:
            self.raw[k] = lk = {}
            self.at[k] = {}
        ok = True
        cur = lk.get(o, _MISSING)
        if cur is _MISSING:
            lk[o] = v
        elif cur != v:
            self.conflicts.setdefault((k, o), {cur}).add(v)
            ok = False
        ak = self.at[k]
        fo = ak.get(v)
        if fo is None:
            ak[v] = o
        elif fo != o:
            self.dups.setdefault((k, v), {fo}).add(o)
        return ok

    def add_records(self, k: str, offs: list[int], vals: list[Any]) -> bool:
        """Fold a run of records (no null offset) into key k's log; False if any disagreed.

        Most records a poll returns are already in the log (sends and earlier polls
        put them there): those are compared in one C-level pass, and only the rest
        are folded in one by one, exactly as :meth:`add_record` would.
        """
        lk = self.raw.get(k)
        if lk is None:
            self.raw[k] = lk = {}
            self.at[k] = {}
        got = list(map(lk.get, offs))
        if got == vals:
            return True
        # A record agreeing with the log adds nothing: its offset and value were
        # indexed (conflicts, duplicates) when it was first folded in.
        differs = list(map(ne, got, vals))
        ok = True
        ak = self.at[k]
        for o, v in zip(compress(offs, differs), compress(vals, differs), strict=True):
            cur = lk.get(o, _MISSING)
            if cur is _MISSING:
                lk[o] = v
            elif cur != v:
                self.conflicts.setdefault((k, o), {cur}).add(v)
                ok = False
            fo = ak.get(v)
            if fo is None:
                ak[v] = o
            elif fo != o:
                self.dups.setdefault((k, v), {fo}).add(o)
        return ok


def _rebalanced_keys(log: Any) -> frozenset[str]:
    """`rebalance_log`: a list of events like {"keys": [k, ...]} (Jepsen) or plain keys."""
    if not isinstance(log, list):
        return NO_KEYS
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


class _Folder:
    """Folds ops into a Prepared as they stream by."""

    def __init__(self, p: Prepared) -> None:
        self.p = p
        self.pending_unseen: dict[str, set[Any]] = {}  # ok-sent values not yet read

    def reads(
        self, rid: int, typ: str, writes: tuple[Effect, ...], runs: list[ReadRun]
    ) -> tuple[Chunk, ...]:
        """Fold op `rid`'s polled records into the logs; its chunks (see Chunk)."""
        p = self.p
        raw = p.raw
        ok_top = p.ok_top
        ok_reads = p.ok_reads
        ok = typ == "ok"
        # key -> values this op sent to it (for precommitted reads)
        sent: dict[str, set[Any]] | None = None
        if writes:
            sent = {}
            for kk, v, _o, _i in writes:
                sv = sent.get(kk)
                if sv is None:
                    sent[kk] = {v}
                else:
                    sv.add(v)
        out: list[Chunk] = []
        n_records = 0
        for i, k, offs, vals in runs:
            n = len(offs)
            n_records += n
            if ok:
                # values an ok op read: into ok_reads, and out of the pending unseen set
                s = ok_reads.get(k)
                if s is None:
                    ok_reads[k] = s = set()
                n0 = len(s)
                s.update(vals)
                if len(s) != n0:
                    self._seen(k, vals)
            if sent is not None:
                mine = sent.get(k)
                if mine is not None and not mine.isdisjoint(vals):
                    self._precommitted(rid, writes, mine, k, offs, vals, i)
            keep = None
            if None in offs:
                keep = vals
                for o, v in zip(offs, vals, strict=True):
                    if o is not None:
                        p.add_record(k, o, v)
                        if ok and o > ok_top.get(k, -1):
                            ok_top[k] = o
                inc = False
                compact: Any = offs
            else:
                known: list[int] = offs  # type: ignore[assignment]  # no null offset
                # most records are already in the log: compare them in one C-level pass
                lk = raw.get(k)
                if (lk is None or list(map(lk.get, known)) != vals) and not p.add_records(
                    k, known, vals
                ):
                    keep = vals
                first, last = known[0], known[-1]
                inc = n == 1 or all(map(lt, known, islice(known, 1, None)))
                if ok:
                    top = last if inc else max(known)
                    if top > ok_top.get(k, -1):
                        ok_top[k] = top
                if inc and last - first == n - 1:
                    compact = range(first, last + 1)
                else:
                    compact = array("q", known)
            out.append((k, compact, i, keep, inc))
        p.n_read_records += n_records
        return tuple(out)

    def _precommitted(
        self,
        rid: int,
        writes: tuple[Effect, ...],
        mine: set[Any],
        k: str,
        offs: list[Any],
        vals: list[Any],
        i: int,
    ) -> None:
        """Records read by the op that sent them (k's values it sent are `mine`)."""
        for o, v in zip(offs, vals, strict=True):
            if v in mine:
                j = next(jj for kk, vv, _oo, jj in writes if kk == k and vv == v)
                self.p.precommitted.append((rid, k, v, o, i, j))

    def _seen(self, k: str, vals: list[Any]) -> None:
        """Values first read by an ok op: out of the pending unseen set."""
        pend = self.pending_unseen.get(k)
        if pend:
            hit = pend.intersection(vals)
            if hit:
                pend -= hit
                self.p.unseen_count -= len(hit)

    def sent_ok(self, writes: tuple[Effect, ...]) -> None:
        p = self.p
        for k, v, _o, _i in writes:
            if v in p.ok_reads.get(k, ()):
                continue
            s = self.pending_unseen.setdefault(k, set())
            if v not in s:
                s.add(v)
                p.unseen_count += 1


def prepare(ops: Iterable[Op | Flat]) -> Prepared:
    """Pair and index the ops of a history in one pass.

    Client data ops may come as :class:`Flat` (the checker's reader gives them so) or
    as :class:`Op`; everything else as Op.
    """
    p = Prepared()
    fold = _Folder(p)
    pending: dict[Any, tuple[int, Op | Flat]] = {}  # process -> (position, invoke op)
    out = p.ops
    writer_of = p.writer_of
    add_record = p.add_record
    unseen_points = p.unseen_points
    fold_reads = fold.reads
    sent_ok = fold.sent_ok
    pos = -1
    tmin = tmax = None
    for pos, op in enumerate(ops):
        t = op.time
        if tmin is None:
            tmin = tmax = t
        elif t < tmin:
            tmin = t
        elif t > tmax:  # type: ignore[operator]
            tmax = t
        if type(op) is not Flat:
            if op.process == NEMESIS:  # type: ignore[union-attr]
                p.n_nemesis += 1
                continue
            if op.f in DATA_FS:
                op = flatten(op)  # type: ignore[arg-type]
        process = op.process
        typ = op.type
        if typ == "invoke":
            prev = pending.get(process)
            if prev is not None:
                out.append(_never_completed(len(out), *prev))
            pending[process] = (pos, op)
            continue
        f = op.f
        inv = pending.pop(process, None)
        inv_op: Op | Flat | None = None
        if inv is not None:
            if inv[1].f != f:
                out.append(_never_completed(len(out), *inv))  # not this completion's invoke
                inv = None
            else:
                inv_op = inv[1]
        rid = len(out)
        inv_pos = inv[0] if inv is not None else pos
        inv_time = inv_op.time if inv_op is not None else t
        if type(op) is Flat:
            writes = op.writes
            if typ != "ok" and inv_op is not None:
                writes = _merge_writes(writes, inv_op.writes)  # type: ignore[union-attr]
            rebalanced = NO_KEYS
            extra = op.extra
            if extra:
                rb = extra.get("rebalance_log")
                if rb:
                    rebalanced = _rebalanced_keys(rb)
            for k, v, o, _i in writes:
                wk = writer_of.get(k)
                if wk is None:
                    writer_of[k] = {v: rid}
                elif v not in wk:
                    wk[v] = rid
                elif wk[v] != rid and _RANK[typ] > _RANK[out[wk[v]].type]:
                    # a failed op wrote nothing and an info one maybe not: a value sent
                    # again by a surer op (a retry) is that op's -- ok before info before fail
                    wk[v] = rid
                if typ == "ok" and o is not None:
                    add_record(k, o, v)
            runs = op.reads
            chunks = fold_reads(rid, typ, writes, runs) if runs else ()
            rec = OpRec(
                rid,
                op.index,
                process,
                typ,
                f,
                inv_pos,
                pos,
                inv_time,
                t,
                writes,
                chunks,
                rebalanced,
                None,
                False,
                op.error,
            )
            if typ == "ok":
                if writes:
                    sent_ok(writes)
                if writes or chunks:
                    unseen_points.append((t, p.unseen_count))
        else:
            rec = OpRec(rid, op.index, process, typ, f, inv_pos, pos, inv_time, t, error=op.error)
            if f in ("assign", "subscribe"):
                _consumer_op(p, rec, op, inv_op)  # type: ignore[arg-type]  # Ops: not data ops
        out.append(rec)
    for inv_pos, inv_op in sorted(pending.values(), key=lambda x: x[0]):
        out.append(_never_completed(len(out), inv_pos, inv_op))
        if inv_op.f == "subscribe":
            p.has_subscribe = True
    for rec in out:
        if rec.comp_pos is None and rec.writes:
            for k, v, _o, _i in rec.writes:
                wk = writer_of.setdefault(k, {})
                w = wk.get(v)
                if w is None or out[w].type == "fail":
                    wk[v] = rec.id
    p.n_lines = pos + 1
    p.first_time, p.last_time = tmin, tmax
    return p


def _consumer_op(p: Prepared, rec: OpRec, op: Op, inv: Op | None) -> None:
    """An assign/subscribe op: the keys it names, and whether it seeks to the start
    (said on the completion, as ktrial and Jepsen write it, or only on the invoke)."""
    if op.f == "subscribe":
        p.has_subscribe = True
    val = op.value if isinstance(op.value, list) else []
    rec.keys = tuple(str(k) for k in val)
    rec.seek = _seeks(op) or (inv is not None and _seeks(inv))


def _seeks(op: Op) -> bool:
    x = op.extra
    return bool(x) and bool(x.get("seek_to_beginning") or x.get("seek-to-beginning?"))


def _never_completed(rid: int, pos: int, inv: Op | Flat) -> OpRec:
    rec = OpRec(rid, inv.index, inv.process, "info", inv.f, pos, None, inv.time, None)
    rec.error = "never-completed"
    if type(inv) is Flat:
        rec.writes = inv.writes
    elif inv.f in ("assign", "subscribe") and isinstance(inv.value, list):  # type: ignore[union-attr]
        rec.keys = tuple(str(k) for k in inv.value)  # type: ignore[union-attr]
        rec.seek = _seeks(inv)  # type: ignore[arg-type]
    return rec
