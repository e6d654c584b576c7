"""Fault injection into generated histories: one fault in, one anomaly type out.

Each injector takes a valid :class:`~ktrial.testing.gen.Generated` history and
a seeded :class:`random.Random`, and returns a :class:`Fault`: the mutated op
list, the bad anomaly types a correct checker must report (``expect``), the
bad types it may report besides because the fault unavoidably implies them
(``allowed``, each justified where it is built), and the key and values an
explanation of the anomaly must mention. An injector returns ``None`` when the
history offers no place for its fault (e.g. no aborted value to expose).

Two styles are used. Faults that are about the log as everybody saw it
(lost writes, torn transactions, skips, reorders) edit the recorded reads in
place. Faults that would otherwise drag in collateral anomalies (a value at a
second offset, an aborted value exposed, a circular visibility) are appended
after the drain as a few ops by fresh processes writing and reading past the
end of the log, where no other consumer's reads are disturbed.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .gen import Generated

Ops = list[dict[str, Any]]


@dataclass(frozen=True)
class Fault:
    name: str
    ops: Ops
    expect: frozenset[str]  # bad types that must be reported
    allowed: frozenset[str]  # bad types that may be reported besides
    key: str  # the key (string form) an explanation must name
    values: tuple[int, ...]  # an explanation must name at least one of these
    why: str


# ----------------------------------------------------------------------------- helpers


def _data(d: dict[str, Any]) -> bool:
    return d["f"] in ("send", "poll", "txn") and d["process"] != "nemesis"


def _sends(d: dict[str, Any]) -> Iterator[tuple[str, int | None, int]]:
    if not _data(d):
        return
    for m in d["value"] or []:
        if m[0] == "send":
            if isinstance(m[2], list):
                o = m[2][0]
                yield str(m[1]), (None if o is None or o < 0 else o), m[2][1]
            else:
                yield str(m[1]), None, m[2]


def _polls(d: dict[str, Any]) -> Iterator[dict[str, list[list[int]]]]:
    if not _data(d):
        return
    for m in d["value"] or []:
        if m[0] == "poll" and len(m) > 1 and isinstance(m[1], dict):
            yield m[1]


def _reads(d: dict[str, Any]) -> Iterator[tuple[str, int, int]]:
    for recs in _polls(d):
        for k, pairs in recs.items():
            for o, v in pairs:
                yield str(k), o, v


def _rebalanced(d: dict[str, Any]) -> set[str]:
    return {str(k) for e in d.get("rebalance_log") or [] for k in e.get("keys", [])}


def _ok_read_count(ops: Ops) -> dict[int, int]:
    n: dict[int, int] = {}
    for d in ops:
        if d["type"] == "ok":
            for _, _, v in _reads(d):
                n[v] = n.get(v, 0) + 1
    return n


def _writers(ops: Ops) -> dict[int, dict[str, Any]]:
    """value -> the completion that sent it."""
    w: dict[int, dict[str, Any]] = {}
    for d in ops:
        if d["type"] != "invoke":
            for _, _, v in _sends(d):
                w[v] = d
    return w


def _ext(g: Generated, k: str) -> Any:
    return int(k) if g.params.int_keys else k


def _end_offset(g: Generated, ops: Ops, k: str) -> int:
    """An offset past everything of key k that the history or the model knows."""
    m = -1
    for d in ops:
        for kk, o, _ in _reads(d):
            if kk == k:
                m = max(m, o)
        for kk, so, _ in _sends(d):
            if kk == k and so is not None:
                m = max(m, so)
    for kk, ao in g.truth.aborted.values():
        if kk == k:
            m = max(m, ao)
    return m + 3  # leave a gap, as transaction markers do


def _fresh(ops: Ops, n: int) -> list[int]:
    top = max([d["process"] for d in ops if isinstance(d["process"], int)] + [0])
    return [top + 1 + i for i in range(n)]


def _fresh_value(g: Generated, ops: Ops) -> Iterator[int]:
    vals = [v for d in ops for _, _, v in _sends(d)] + [v for d in ops for *_, v in _reads(d)]
    nxt = max([*vals, g.params.value_base]) + 1
    while True:
        yield nxt
        nxt += 1


class _Tail:
    """Appends ops after the end of a history with increasing times and indices."""

    def __init__(self, ops: Ops) -> None:
        self.ops = ops
        self.t = max([d["time"] for d in ops] + [0])

    def add(self, process: int, typ: str, f: str, value: Any, **extra: Any) -> None:
        self.t += 1_000_000
        d = {
            "index": len(self.ops),
            "time": self.t,
            "process": process,
            "type": typ,
            "f": f,
            "value": value,
        }
        d.update(extra)
        self.ops.append(d)

    def op(self, process: int, f: str, inv: Any, ok: Any, **extra: Any) -> None:
        self.add(process, "invoke", f, inv)
        self.add(process, "ok", f, ok, **extra)

    def reader(self, g: Generated, process: int, k: str, recs: list[list[int]]) -> None:
        self.op(process, "assign", [_ext(g, k)], [_ext(g, k)])
        self.op(process, "poll", [["poll"]], [["poll", {k: recs}]])


def _drop_everywhere(ops: Ops, k: str, v: int) -> None:
    for d in ops:
        for recs in _polls(d):
            for kk in list(recs):
                if str(kk) == k:
                    recs[kk] = [r for r in recs[kk] if r[1] != v]
                    if not recs[kk]:
                        del recs[kk]


def _multi_key_txn(d: dict[str, Any]) -> bool:
    return d["f"] == "txn" and len({k for k, _, _ in _sends(d)}) > 1


# ----------------------------------------------------------------------------- injectors


def lost_write(g: Generated, rng: random.Random) -> Fault | None:
    """An acknowledged value vanishes from every read while later values are read."""
    ops = copy.deepcopy(g.ops)
    later = {
        k: {v: i < len(recs) - 1 for i, (_, v) in enumerate(recs)}
        for k, recs in g.truth.log.items()
    }
    cands = [
        (d, k, v)
        for d in ops
        if d["type"] == "ok"
        for k, o, v in _sends(d)
        if o is not None and later.get(k, {}).get(v)
    ]
    if not cands:
        return None
    # Prefer plain sends: losing part of a multi-key transaction is also a torn one.
    plain = [c for c in cands if not _multi_key_txn(c[0])]
    d, k, v = rng.choice(plain or cands)
    _drop_everywhere(ops, k, v)
    allowed = {
        # A lost value is also never read at all.
        "unseen",
        # Its acknowledged offset stays in the log, so readers now jump over it.
        "poll-skip",
        "int-poll-skip",
    }
    if _multi_key_txn(d):
        allowed.add("torn-transaction")
    return Fault(
        "lost-write",
        ops,
        frozenset({"lost-write"}),
        frozenset(allowed),
        k,
        (v,),
        f"value {v} of key {k}, acknowledged by op {d['index']}, dropped from every read",
    )


def unseen(g: Generated, rng: random.Random) -> Fault | None:
    """The last acknowledged value of a key is never read by anyone."""
    ops = copy.deepcopy(g.ops)
    writers = _writers(ops)
    cands = []
    for k, recs in g.truth.log.items():
        if recs:
            v = recs[-1][1]
            w = writers.get(v)
            if w is not None and w["type"] == "ok":
                cands.append((w, k, v))
    if not cands:
        return None
    plain = [c for c in cands if not _multi_key_txn(c[0])]
    d, k, v = rng.choice(plain or cands)
    _drop_everywhere(ops, k, v)
    if not _ok_read_count(ops):
        # Nothing read at all: the checker rightly calls that "unknown", not a loss.
        return None
    allowed = {"torn-transaction"} if _multi_key_txn(d) else set()
    return Fault(
        "unseen",
        ops,
        frozenset({"unseen"}),
        frozenset(allowed),
        k,
        (v,),
        f"last value {v} of key {k} (op {d['index']}) dropped from every read",
    )


def torn_transaction(g: Generated, rng: random.Random) -> Fault | None:
    """A committed transaction stays visible on one key and is lost on another."""
    ops = copy.deepcopy(g.ops)
    last = {k: recs[-1][1] for k, recs in g.truth.log.items() if recs}
    cands = []
    for d in ops:
        if d["type"] != "ok" or not _multi_key_txn(d):
            continue
        sends = list(_sends(d))
        for k in sorted({k for k, _, _ in sends}):
            mine = [v for kk, _, v in sends if kk == k]
            # Some value of the txn on k has a known position, and a value of another
            # op is read after it: losing the txn's values on k is then a lost write.
            known = any(o is not None for kk, o, _ in sends if kk == k)
            if known and last.get(k) not in mine:
                cands.append((d, k, mine))
    if not cands:
        return None
    d, k, lost = rng.choice(cands)
    for v in lost:
        _drop_everywhere(ops, k, v)
    allowed = {
        # Lost values are also never read; their acknowledged offsets stay in the log,
        # so readers now jump over them.
        "unseen",
        "poll-skip",
        "int-poll-skip",
    }
    return Fault(
        "torn-transaction",
        ops,
        frozenset({"torn-transaction", "lost-write"}),
        frozenset(allowed),
        k,
        tuple(lost),
        f"txn op {d['index']} lost on key {k} (values {lost}), visible elsewhere",
    )


def duplicate(g: Generated, rng: random.Random) -> Fault | None:
    """A committed value shows up a second time, at a fresh offset."""
    ops = copy.deepcopy(g.ops)
    cands = [(k, v) for k, recs in g.truth.log.items() for _, v in recs]
    if not cands:
        return None
    k, v = rng.choice(cands)
    (r,) = _fresh(ops, 1)
    _Tail(ops).reader(g, r, k, [[_end_offset(g, ops, k), v]])
    return Fault(
        "duplicate",
        ops,
        frozenset({"duplicate"}),
        frozenset(),
        k,
        (v,),
        f"value {v} of key {k} read again at a second offset by fresh process {r}",
    )


def aborted_read(g: Generated, rng: random.Random) -> Fault | None:
    """An ok read returns a value that only failed (aborted or refused) ops wrote."""
    ops = copy.deepcopy(g.ops)
    failed: dict[int, str] = {}
    other: set[int] = set()
    for d in ops:
        if d["type"] == "fail":
            for k, _, v in _sends(d):
                failed[v] = k
        elif d["type"] in ("ok", "info"):
            other.update(v for _, _, v in _sends(d))
    cands = sorted((v, k) for v, k in failed.items() if v not in other)
    if not cands:
        return None
    v, k = rng.choice(cands)
    (r,) = _fresh(ops, 1)
    _Tail(ops).reader(g, r, k, [[_end_offset(g, ops, k), v]])
    return Fault(
        "G1a",
        ops,
        frozenset({"G1a"}),
        frozenset(),
        k,
        (v,),
        f"aborted value {v} of key {k} read by fresh process {r}",
    )


def _poll_choices(g: Generated, ops: Ops, min_len: int) -> list[tuple[dict[str, Any], Any, str]]:
    """(op, its poll map, key) for ok reads of at least min_len records of one key."""
    out = []
    for d in ops:
        if d["type"] != "ok":
            continue
        for recs in _polls(d):
            for kk, pairs in recs.items():
                if len(pairs) >= min_len and str(kk) not in _rebalanced(d):
                    out.append((d, recs, kk))
    return out


def reorder_within_poll(g: Generated, rng: random.Random) -> Fault | None:
    """Two records of one key come back in the wrong order inside one poll."""
    ops = copy.deepcopy(g.ops)
    cands = _poll_choices(g, ops, 2)
    if not cands:
        return None
    d, recs, kk = rng.choice(cands)
    pairs = recs[kk]
    i = rng.randrange(len(pairs) - 1)
    a, b = pairs[i][1], pairs[i + 1][1]
    pairs[i], pairs[i + 1] = pairs[i + 1], pairs[i]
    allowed = {
        # Reading x+1 before x jumps over x first (a skip inside the poll, or across
        # polls when the swap is at the start), and the next read after x continues
        # at x+2, past the last position read.
        "int-poll-skip",
        "poll-skip",
    }
    if g.params.sub_via == "subscribe":
        allowed.discard("poll-skip")
    return Fault(
        "int-nonmonotonic-poll",
        ops,
        frozenset({"int-nonmonotonic-poll"}),
        frozenset(allowed),
        str(kk),
        (a, b),
        f"op {d['index']} reads {b} before {a} on key {kk}",
    )


def repeat_within_poll(g: Generated, rng: random.Random) -> Fault | None:
    """One poll returns the same record twice in a row."""
    ops = copy.deepcopy(g.ops)
    cands = _poll_choices(g, ops, 1)
    if not cands:
        return None
    d, recs, kk = rng.choice(cands)
    pairs = recs[kk]
    i = rng.randrange(len(pairs))
    pairs.insert(i + 1, list(pairs[i]))
    return Fault(
        "int-nonmonotonic-poll",
        ops,
        frozenset({"int-nonmonotonic-poll"}),
        frozenset(),
        str(kk),
        (pairs[i][1],),
        f"op {d['index']} reads {pairs[i][1]} twice in a row on key {kk}",
    )


Session = tuple[Any, int, str]  # (process, assign/subscribe count, key)


@dataclass
class _Read:
    """One op's reads of one key: its first poll map holding the key, and all records."""

    op: dict[str, Any]
    recs: dict[str, list[list[int]]]  # the first poll map of the op holding the key
    key: Any  # the key as spelled in that map
    records: list[list[int]]  # every record of the key the op read, in order

    @property
    def ok(self) -> bool:
        return bool(self.op["type"] == "ok")


def _consumer_reads(ops: Ops) -> dict[Session, list[_Read]]:
    """Each consumer session's reads of each key, one entry per op, in history order.

    Sequences are cut at the process's assign/subscribe ops; non-ok reads stay in
    them, so two ok neighbours are consecutive reads of one consumer with nothing
    moving it in between.
    """
    seqs: dict[Session, list[_Read]] = {}
    session: dict[Any, int] = {}
    for d in ops:
        p = d["process"]
        if d["f"] in ("assign", "subscribe"):
            session[p] = session.get(p, 0) + 1
            continue
        if d["type"] == "invoke" or not _data(d):
            continue
        mine: dict[str, _Read] = {}
        for recs in _polls(d):
            for kk, pairs in recs.items():
                if not pairs:
                    continue
                r = mine.get(str(kk))
                if r is None:
                    mine[str(kk)] = _Read(d, recs, kk, [list(x) for x in pairs])
                else:
                    r.records.extend(list(x) for x in pairs)
        for k, r in mine.items():
            seqs.setdefault((p, session.get(p, 0), k), []).append(r)
    return seqs


def _ok_pairs(ops: Ops) -> Iterator[tuple[_Read, _Read]]:
    """Consecutive reads of a key by one consumer session, both ok, nothing between."""
    for seq in _consumer_reads(ops).values():
        for a, b in itertools.pairwise(seq):
            if a.ok and b.ok and str(a.key) not in _rebalanced(b.op):
                yield a, b


def _adjacent(g: Generated, key: str, a: _Read, b: _Read) -> bool:
    """b's first record is the committed record right after a's last one."""
    values = [v for _o, v in g.truth.log.get(key, [])]
    last, first = a.records[-1][1], b.records[0][1]
    if last not in values or first not in values:
        return False
    return values.index(first) == values.index(last) + 1


def repeat_reads(g: Generated, rng: random.Random) -> Fault | None:
    """A consumer's poll re-delivers what its previous poll of that key returned."""
    ops = copy.deepcopy(g.ops)
    # Only pairs where b goes on from the record after a's last: otherwise (a rebalance
    # under subscribe moved the consumer on) the re-read records followed by b's first
    # would also be a skip within b, a second anomaly the injection did not mean.
    cands = [(a, b) for a, b in _ok_pairs(ops) if _adjacent(g, str(a.key), a, b)]
    if not cands:
        return None
    a, b = rng.choice(cands)
    again = [list(r) for r in a.records]
    b.recs[b.key] = again + b.recs[b.key]
    return Fault(
        "nonmonotonic-poll",
        ops,
        frozenset({"nonmonotonic-poll"}),
        frozenset(),
        str(a.key),
        (*(r[1] for r in again), b.records[0][1]),
        f"op {b.op['index']} re-reads key {a.key} from {again[0][1]} after op {a.op['index']}",
    )


def int_poll_skip(g: Generated, rng: random.Random) -> Fault | None:
    """A record in the middle of one poll is missing (others read it)."""
    ops = copy.deepcopy(g.ops)
    reads = _ok_read_count(ops)
    cands = [
        (d, recs, kk, i)
        for d, recs, kk in _poll_choices(g, ops, 3)
        for i in range(1, len(recs[kk]) - 1)
        if reads.get(recs[kk][i][1], 0) >= 2
    ]
    if not cands:
        return None
    d, recs, kk, i = rng.choice(cands)
    pairs = recs[kk]
    v = pairs[i][1]
    del pairs[i]
    return Fault(
        "int-poll-skip",
        ops,
        frozenset({"int-poll-skip"}),
        frozenset(),
        str(kk),
        (v, pairs[i - 1][1], pairs[i][1]),
        f"op {d['index']} skips value {v} of key {kk} inside one poll",
    )


def poll_skip(g: Generated, rng: random.Random) -> Fault | None:
    """A consumer's next poll of a key starts one record late (others read it).

    A fault in assign mode; with subscribe a position jump is legal.
    """
    ops = copy.deepcopy(g.ops)
    reads = _ok_read_count(ops)
    cands = [
        (a, b)
        for a, b in _ok_pairs(ops)
        if len(b.recs[b.key]) >= 2 and reads.get(b.recs[b.key][0][1], 0) >= 2
    ]
    if not cands:
        return None
    _a, b = rng.choice(cands)
    pairs = b.recs[b.key]
    v = pairs[0][1]
    del pairs[0]
    return Fault(
        "poll-skip",
        ops,
        frozenset({"poll-skip"}),
        frozenset(),
        str(b.key),
        (v, pairs[0][1]),
        f"op {b.op['index']} starts key {b.key} one past {v}",
    )


def inconsistent_offsets(g: Generated, rng: random.Random) -> Fault | None:
    """A new value is acknowledged and read at an offset that already holds another."""
    ops = copy.deepcopy(g.ops)
    cands = [(k, o, v) for k, recs in g.truth.log.items() for o, v in recs]
    if not cands:
        return None
    k, o, v = rng.choice(cands)
    w, r = _fresh(ops, 2)
    u = next(_fresh_value(g, ops))
    t = _Tail(ops)
    t.op(w, "send", [["send", _ext(g, k), u]], [["send", _ext(g, k), [o, u]]])
    t.reader(g, r, k, [[o, u]])
    return Fault(
        "inconsistent-offsets",
        ops,
        frozenset({"inconsistent-offsets"}),
        frozenset(),
        k,
        (v, u),
        f"offset {o} of key {k} holds {v} and {u}",
    )


def precommitted_read(g: Generated, rng: random.Random) -> Fault | None:
    """A transaction's poll returns the value it sent itself."""
    ops = copy.deepcopy(g.ops)
    k = rng.choice(sorted(g.truth.log) or ["0" if g.params.int_keys else "k0"])
    (p,) = _fresh(ops, 1)
    u = next(_fresh_value(g, ops))
    o = _end_offset(g, ops, k)
    t = _Tail(ops)
    t.op(p, "assign", [_ext(g, k)], [_ext(g, k)])
    t.op(
        p,
        "txn",
        [["send", _ext(g, k), u], ["poll"]],
        [["send", _ext(g, k), [o, u]], ["poll", {k: [[o, u]]}]],
    )
    return Fault(
        "precommitted-read",
        ops,
        frozenset({"precommitted-read"}),
        frozenset(),
        k,
        (u,),
        f"fresh txn of process {p} reads its own send {u} on key {k}",
    )


def nonmonotonic_send(g: Generated, rng: random.Random) -> Fault | None:
    """A producer's second send to a key lands before its first."""
    ops = copy.deepcopy(g.ops)
    k = rng.choice(sorted(g.truth.log) or ["0" if g.params.int_keys else "k0"])
    w, r = _fresh(ops, 2)
    vals = _fresh_value(g, ops)
    u1, u2 = next(vals), next(vals)
    o = _end_offset(g, ops, k)
    t = _Tail(ops)
    t.op(w, "send", [["send", _ext(g, k), u1]], [["send", _ext(g, k), [o + 1, u1]]])
    t.op(w, "send", [["send", _ext(g, k), u2]], [["send", _ext(g, k), [o, u2]]])
    t.reader(g, r, k, [[o, u2], [o + 1, u1]])
    # The realtime edge first-send -> second-send plus the ww edge second -> first is
    # a G0-realtime cycle, which docs/design.md counts as normal, like G0.
    return Fault(
        "nonmonotonic-send",
        ops,
        frozenset({"nonmonotonic-send"}),
        frozenset(),
        k,
        (u1, u2),
        f"process {w} sends {u1} then {u2} to key {k}; {u2} lands first",
    )


def int_nonmonotonic_send(g: Generated, rng: random.Random) -> Fault | None:
    """Inside one op, the later send to a key lands at the earlier offset."""
    ops = copy.deepcopy(g.ops)
    k = rng.choice(sorted(g.truth.log) or ["0" if g.params.int_keys else "k0"])
    w, r = _fresh(ops, 2)
    vals = _fresh_value(g, ops)
    u1, u2 = next(vals), next(vals)
    o = _end_offset(g, ops, k)
    t = _Tail(ops)
    t.op(
        w,
        "send",
        [["send", _ext(g, k), u1], ["send", _ext(g, k), u2]],
        [["send", _ext(g, k), [o + 1, u1]], ["send", _ext(g, k), [o, u2]]],
    )
    t.reader(g, r, k, [[o, u2], [o + 1, u1]])
    return Fault(
        "int-nonmonotonic-send",
        ops,
        frozenset({"int-nonmonotonic-send"}),
        frozenset(),
        k,
        (u1, u2),
        f"op of process {w}: {u2} lands before {u1} on {k}",
    )


def circular_visibility(g: Generated, rng: random.Random) -> Fault | None:
    """Two concurrent transactions each read the other's write: a wr-only G1c cycle."""
    ops = copy.deepcopy(g.ops)
    keys = sorted(g.truth.log) or ["0" if g.params.int_keys else "k0"]
    k1 = rng.choice(keys)
    k2 = rng.choice([k for k in keys if k != k1] or [k1])
    p1, p2 = _fresh(ops, 2)
    vals = _fresh_value(g, ops)
    a, b = next(vals), next(vals)
    o1 = _end_offset(g, ops, k1)
    o2 = _end_offset(g, ops, k2) + (1 if k2 == k1 else 0)
    t = _Tail(ops)
    for p, k in ((p1, k2), (p2, k1)):
        t.op(p, "assign", [_ext(g, k)], [_ext(g, k)])
    t.add(p1, "invoke", "txn", [["send", _ext(g, k1), a], ["poll"]])
    t.add(p2, "invoke", "txn", [["send", _ext(g, k2), b], ["poll"]])
    t.add(p1, "ok", "txn", [["send", _ext(g, k1), [o1, a]], ["poll", {k2: [[o2, b]]}]])
    t.add(p2, "ok", "txn", [["send", _ext(g, k2), [o2, b]], ["poll", {k1: [[o1, a]]}]])
    return Fault(
        "G1c",
        ops,
        frozenset({"G1c"}),
        frozenset(),
        k1,
        (a, b),
        f"txn of {p1} reads {b} from txn of {p2}, which reads {a} from it",
    )


INJECTORS: dict[str, Callable[[Generated, random.Random], Fault | None]] = {
    "lost-write": lost_write,
    "unseen": unseen,
    "torn-transaction": torn_transaction,
    "duplicate": duplicate,
    "G1a": aborted_read,
    "int-nonmonotonic-poll/reorder": reorder_within_poll,
    "int-nonmonotonic-poll/repeat": repeat_within_poll,
    "nonmonotonic-poll": repeat_reads,
    "int-poll-skip": int_poll_skip,
    "poll-skip": poll_skip,
    "inconsistent-offsets": inconsistent_offsets,
    "precommitted-read": precommitted_read,
    "nonmonotonic-send": nonmonotonic_send,
    "int-nonmonotonic-send": int_nonmonotonic_send,
    "G1c": circular_visibility,
}
