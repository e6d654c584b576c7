"""Order anomalies: do consumers and producers move through each key's log in order?

Positions are dense indices (rank among the key's non-empty offsets), so a gap
left by a transaction marker or aborted records is never a skip. A record's
position comes from the offset it was reported with, else from where its value
sits in the log; records whose position is unknown are not judged.
"""

from __future__ import annotations

import itertools
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from .explain import op_name, val, values_text
from .logs import (
    KeyLog,
    Logs,
    chunk_values,
    iter_reads,
    read_positions,
    run_first_last_max,
    runs_consecutive,
)
from .prepare import Chunk, OpRec, Prepared

Example = dict[str, Any]
_key = itemgetter(0)
_process = attrgetter("process")
_T = TypeVar("_T")


def _positions(
    logs: Logs, effects: tuple[Any, ...]
) -> dict[str, list[tuple[int | None, Any, Any, int]]]:
    """key -> [(dense position, value, offset, micro-op index), ...] in op order."""
    out: dict[str, list[tuple[int | None, Any, Any, int]]] = {}
    keys = logs.keys
    for k, v, o, i in effects:
        kl = keys.get(k)
        d = None if kl is None else kl.pos(o, v)
        lst = out.get(k)
        if lst is None:
            out[k] = [(d, v, o, i)]
        else:
            lst.append((d, v, o, i))
    return out


def _reads_consecutive(reads: tuple[Chunk, ...]) -> bool:
    """True when each key's runs in `reads` are one strictly consecutive sequence
    (runs_consecutive of every key of read_positions), so `internal` finds nothing."""
    one_run_each = len(set(map(_key, reads))) == len(reads)
    nxt: dict[str, int] = {}  # key -> the position its next run must start at
    for c in reads:
        ps = c[1]
        if type(ps) is not range:
            return False
        if one_run_each:
            continue
        k = c[0]
        n = nxt.get(k)
        if n is not None and ps[0] != n:
            return False
        nxt[k] = ps[-1] + 1
    return True


def _placed(keys: dict[str, KeyLog], k: str, v: Any, o: int | None) -> int | None:
    """Dense position of a send to key k (Logs.pos without the method lookups)."""
    kl = keys.get(k)
    if kl is None:
        return None
    d = None if o is None else kl.dense.get(o)
    return kl.first.get(v) if d is None else d


def _sends_in_order(keys: dict[str, KeyLog], writes: tuple[Any, ...]) -> bool:
    """True when `_pairs` finds nothing in any key of these sends: each placed send of
    a key directly follows the key's previous placed one, or lands anywhere after it
    when an unplaced send of the key came in between (the positions are _positions')."""
    if len(set(map(_key, writes))) == len(writes):
        return True  # no key is sent twice: no pair to judge
    # key -> the position its next placed send must take (the last one's + 1), negated
    # once an unplaced send came since (then any position at or past it will do)
    nxt: dict[str, int] = {}
    for k, v, o, _i in writes:
        d = _placed(keys, k, v, o)
        n = nxt.get(k)
        if d is None:
            if n is not None and n > 0:
                nxt[k] = -n
            continue
        if n is not None and (d != n if n > 0 else d < -n):
            return False
        nxt[k] = d + 1
    return True


def internal(p: Prepared, logs: Logs, limit: int) -> dict[str, list[Example]]:
    """int-poll-skip, int-nonmonotonic-poll, int-send-skip, int-nonmonotonic-send."""
    res: dict[str, list[Example]] = {
        "int-poll-skip": [],
        "int-nonmonotonic-poll": [],
        "int-send-skip": [],
        "int-nonmonotonic-send": [],
    }
    committed = logs.committed
    keys = logs.keys
    for r in p.ops:
        # most ops read consecutive runs and send in order: those are let through
        # by a cheap check, the rest are judged pair by pair
        if r.reads and not _reads_consecutive(r.reads):
            for k, runs in read_positions(logs, r).items():
                if k in r.rebalanced or runs_consecutive(runs):
                    continue
                ps = [d for run in runs for d in run]
                if len(ps) < 2:
                    continue
                lst = [
                    (d, v, o, i)
                    for d, (_k, v, o, i) in zip(
                        ps, (e for e in iter_reads(logs, r) if e[0] == k), strict=True
                    )
                ]
                _pairs(
                    logs,
                    r,
                    k,
                    lst,
                    "poll",
                    res["int-poll-skip"],
                    res["int-nonmonotonic-poll"],
                    limit,
                )
        # a failed (or never committed) op's records were aborted: where its sends
        # went says nothing about order (a retry may put the same values elsewhere)
        writes = r.writes
        if len(writes) > 1 and committed[r.id] and not _sends_in_order(keys, writes):
            for k, lst in _positions(logs, writes).items():
                if len(lst) < 2:
                    continue
                _pairs(
                    logs,
                    r,
                    k,
                    lst,
                    "send",
                    res["int-send-skip"],
                    res["int-nonmonotonic-send"],
                    limit,
                )
    return res


def _pairs(
    logs: Logs,
    r: OpRec,
    k: str,
    lst: list[tuple[int | None, Any, Any, int]],
    kind: str,
    skips: list[Example],
    nonmono: list[Example],
    limit: int,
) -> None:
    verb = "read" if kind == "poll" else "sent"
    # Each placed record against the previous placed one: a record with no known
    # position (never read, null offset) in between cannot hide one that goes back,
    # but it may be what fills a gap, so a skip across it is not claimed.
    placed = [(j, x) for j, x in enumerate(lst) if x[0] is not None]
    for (j1, (d1, v1, _o1, i1)), (j2, (d2, v2, _o2, i2)) in itertools.pairwise(placed):
        assert d1 is not None and d2 is not None
        delta = d2 - d1
        if delta == 1 or (delta > 1 and j2 - j1 > 1):  # a skip across an unplaced record
            continue
        kl = logs.keys[k]
        o1, o2 = kl.offsets[d1], kl.offsets[d2]
        ex: Example = {
            "key": k,
            "values": [v1, v2],
            "offsets": [o1, o2],
            "delta": delta,
            "ops": [r.index],
        }
        if delta > 1:
            sk = kl.values[d1 + 1 : d2]  # the values between them
            ex["skipped"] = sk[:32]
            if len(skips) < limit * 4:
                if kind == "poll":
                    what = (
                        f"but the log holds {len(sk)} record(s) between them "
                        f"({values_text(sk)}): the op's consumer skipped them within one op."
                    )
                else:
                    what = (
                        f"and {len(sk)} record(s) of other producers ({values_text(sk)}) "
                        f"landed between them; this interleaving is normal for Kafka."
                    )
                ex["explanation"] = (
                    f"{op_name(r)} {verb} value {val(v1)} of key {k} at offset {o1} "
                    f"(micro-op {i1}) then {val(v2)} at offset {o2} (micro-op {i2}), {what}"
                )
            skips.append(ex)
        else:
            if len(nonmono) < limit * 4:
                how = "the same position again" if delta == 0 else f"{-delta} position(s) earlier"
                ex["explanation"] = (
                    f"{op_name(r)} {verb} value {val(v1)} of key {k} at offset {o1} "
                    f"(micro-op {i1}) and then {val(v2)} at offset {o2} (micro-op {i2}), "
                    f"{how} in the log: within one op, {'reads' if kind == 'poll' else 'sends'} "
                    f"of a key must move strictly forward."
                )
            nonmono.append(ex)


def _completion_order(p: Prepared) -> list[OpRec]:
    """The ops in completion order (never-completed ops at their invocation)."""
    ops = p.ops
    if any(r.comp_pos is None for r in ops):
        return sorted(ops, key=lambda r: r.inv_pos if r.comp_pos is None else r.comp_pos)
    return ops


def _process_major(walk: list[OpRec], found: list[tuple[Any, _T]]) -> list[_T]:
    """The items found along `walk`, each tagged with its op's process, regrouped
    process by process (processes in the order they first appear in the walk, each
    one's items in walk order): the order a walk over each process's ops in turn
    would have found them in.

    (polls and sends walk the ops once, in order, with a state per process: walking
    them process by process instead reads memory out of order, at twice the cost.)
    """
    if len({proc for proc, _x in found}) > 1:
        rank = {proc: i for i, proc in enumerate(dict.fromkeys(map(_process, walk)))}
        found = sorted(found, key=lambda f: rank[f[0]])  # stable
    return [x for _proc, x in found]


def polls(
    p: Prepared, logs: Logs, limit: int, consumer_rewinds: bool = True
) -> dict[str, list[Example]]:
    """poll-skip and nonmonotonic-poll: each consumer's successive reads of a key.

    State per process and key: `lo`, the position of the last record an ok op read.
    With `consumer_rewinds` (Jepsen's rule, the default) every read of the key, ok,
    failed or indeterminate, must begin at lo+1: a failed or indeterminate op does not
    move the consumer, because the client rewinds to where that op began reading
    (workloads/rewind.py), so its reads are judged against lo and leave lo as it was.
    Without it (clients known not to rewind), a failed or indeterminate op is not
    judged; `hi` >= lo is the furthest position such an op read since, and the next
    ok read may begin anywhere in lo+1 .. hi+1.

    Either way a read beginning past the allowed start is a skip and one beginning at
    or before lo is nonmonotonic. Assign keeps the state of keys still assigned (a
    seek to the beginning forgets all), subscribe keeps those still named, a crash
    forgets the process, rebalanced keys (its rebalance_log) are forgotten for the op
    that reports them.
    """
    ops = p.ops
    walk = _completion_order(p)
    # process -> key -> (lo, hi, op id, id of the last failed/info op that read it since)
    states: dict[Any, dict[str, tuple[int, int, int, int | None]]] = {}
    # (process, (key, op id of lo, op, lo, hi, first position read, failed op id))
    found: list[tuple[Any, tuple[str, int, OpRec, int, int, int, int | None]]] = []
    for r in walk:
        f = r.f
        if f in ("assign", "subscribe"):
            if r.type == "fail":
                continue
            if r.seek or r.keys is None:
                states[r.process] = {}
            else:
                ks = set(r.keys)
                kept = states.get(r.process, {})
                states[r.process] = {k: s for k, s in kept.items() if k in ks}
            continue
        if f == "crash":
            states[r.process] = {}
            continue
        reads = r.reads
        if not reads and not r.rebalanced:
            continue
        state = states.get(r.process)
        if state is None:
            state = states[r.process] = {}
        if r.rebalanced:
            for k in r.rebalanced:  # reassigned during this op, whatever its outcome
                state.pop(k, None)
        if not reads:
            continue
        if r.type != "ok":
            if state:  # else there is no position to judge or extend
                if consumer_rewinds:
                    _judge_unfinished(r, state, found)
                else:
                    _extend_unfinished(r, state)
            continue
        rid = r.id
        rebalanced = r.rebalanced
        for k, (d1, dl, _top) in _spans(reads).items():
            if dl is None:  # no record of k placed (nor d1): forget where it was
                state.pop(k, None)
                continue
            assert d1 is not None
            s = state.get(k)
            if s is not None and (d1 <= s[0] or d1 > s[1] + 1) and k not in rebalanced:
                lo, hi, last_id, failed_id = s
                found.append((r.process, (k, last_id, r, lo, hi, d1, failed_id)))
            state[k] = (dl, dl, rid, None)
    skips: list[Example] = []
    nonmono: list[Example] = []
    for k, last_id, r, lo, hi, d1, failed_id in _process_major(walk, found):
        lst = skips if d1 > lo else nonmono
        v1, i1 = _first_placed(logs, r, k)
        failed = None if failed_id is None else ops[failed_id]
        lst.append(
            _poll_example(
                logs,
                k,
                (ops[last_id], r, failed),
                (lo, hi, d1),
                (v1, i1),
                consumer_rewinds,
                len(lst) < limit * 4,
            )
        )
    return {"poll-skip": skips, "nonmonotonic-poll": nonmono}


def _judge_unfinished(
    r: OpRec,
    state: dict[str, tuple[int, int, int, int | None]],
    found: list[tuple[Any, tuple[str, int, OpRec, int, int, int, int | None]]],
) -> None:
    """Jepsen's rule for a failed or indeterminate op r: each key it read at a known
    position must begin right after the consumer's last ok read of it (lo); the op is
    noted as the last unfinished reader of the key, and lo stays where it was."""
    rid = r.id
    for k, (d1, _l, _top) in _spans(r.reads).items():
        s = state.get(k)
        if s is None or d1 is None:
            continue
        lo, hi, last_id, failed_id = s
        if d1 <= lo or d1 > lo + 1:
            found.append((r.process, (k, last_id, r, lo, hi, d1, failed_id)))
        state[k] = (lo, hi, last_id, rid)


def _extend_unfinished(r: OpRec, state: dict[str, tuple[int, int, int, int | None]]) -> None:
    """The relaxed rule (clients that may not rewind) for a failed or indeterminate op
    r: not judged; where it read furthest widens where the next ok read may begin."""
    for k, (_f, _l, top) in _spans(r.reads).items():
        s = state.get(k)
        if s is None:
            continue
        if top is not None and top > s[1]:  # the op that read furthest
            state[k] = (s[0], top, s[2], r.id)


def _spans(reads: tuple[Chunk, ...]) -> dict[str, tuple[int | None, int | None, int | None]]:
    """key -> (first, last, max) known position among the records of `reads`, keys in
    the order first read: run_first_last_max of each key's runs, without the lists."""
    out: dict[str, tuple[int | None, int | None, int | None]] = {}
    for c in reads:
        k = c[0]
        ps = c[1]
        f: int | None
        last: int | None
        top: int | None
        if type(ps) is range:
            f = ps[0]
            last = top = ps[-1]
        else:
            f, last, top = run_first_last_max([ps])
        s = out.get(k)
        if s is None or s[0] is None:  # the key's first run, or the first with a known position
            out[k] = (f, last, top)
        elif f is not None:
            assert top is not None and s[2] is not None
            out[k] = (s[0], last, top if top > s[2] else s[2])
    return out


def _first_placed(logs: Logs, r: OpRec, k: str) -> tuple[Any, int]:
    """(value, micro-op index) of the first record of key k that op r read at a known
    position (records with a null offset whose value is nowhere in the log come first
    in the chunk but are not where the read began)."""
    for c in r.reads:
        if c[0] != k:
            continue
        for d, v in zip(c[1], chunk_values(logs, c), strict=True):
            if d is not None:
                return v, c[2]
    raise AssertionError(f"no placed record of key {k} in op {r.index}")  # caller checked


def _poll_example(
    logs: Logs,
    k: str,
    trio: tuple[OpRec, OpRec, OpRec | None],
    where: tuple[int, int, int],
    first: tuple[Any, int],
    consumer_rewinds: bool,
    explain: bool,
) -> Example:
    """The example of op r's read of key k beginning at position d1 (value v1, micro-op
    i1), after the consumer's last ok read `prev` ended at lo. `failed` is the last
    failed or indeterminate op that read k since (with the relaxed rule: the one that
    read furthest, up to hi)."""
    prev, r, failed = trio
    lo, hi, d1 = where
    v1, i1 = first
    kl = logs.keys[k]
    pv, po = kl.values[lo], kl.offsets[lo]
    o1 = kl.offsets[d1]
    delta = d1 - lo
    ex: Example = {
        "key": k,
        "values": [pv, v1],
        "offsets": [po, o1],
        "delta": delta,
        "ops": [prev.index, r.index],
        "process": r.process,
    }
    if failed is not None:
        ex["ops"] = [prev.index, r.index, failed.index]  # the pair, then it
    if d1 > lo:
        sk = kl.values[hi + 1 : d1]
        ex["skipped"] = sk[:32]
    if not explain:
        return ex
    if consumer_rewinds:
        ex["explanation"] = _strict_text(logs, k, prev, r, failed, lo, d1, v1, i1)
        return ex
    note = ""
    if failed is not None:
        note = (
            f" (In between, {op_name(failed)} read up to offset "
            f"{kl.offsets[hi]} and did not succeed.)"
        )
    head = (
        f"Process {r.process}'s {op_name(prev)} last read value {val(pv)} of key {k} at "
        f"offset {po}; its next ok read, {op_name(r)}, began at value {val(v1)}, offset {o1} "
        f"(micro-op {i1})"
    )
    if d1 > lo:
        ex["explanation"] = (
            f"{head}, jumping over {len(sk)} record(s) it never read: {values_text(sk)}.{note}"
        )
    else:
        how = "the same record again" if delta == 0 else f"{-delta} record(s) back"
        ex["explanation"] = (
            f"{head}: {how}, although the consumer was neither reassigned nor rewound.{note}"
        )
    return ex


def _outcome(r: OpRec) -> str:
    return {"fail": "failed", "info": "ended indeterminate"}.get(r.type, "succeeded")


def _strict_text(
    logs: Logs,
    k: str,
    prev: OpRec,
    r: OpRec,
    failed: OpRec | None,
    lo: int,
    d1: int,
    v1: Any,
    i1: int,
) -> str:
    """Explanation under Jepsen's rule: every read of k by the consumer, whatever its
    op's outcome, must begin right after its last ok read (position lo)."""
    kl = logs.keys[k]
    pv, po, o1 = kl.values[lo], kl.offsets[lo], kl.offsets[d1]
    want = kl.offsets[lo + 1] if lo + 1 < len(kl.offsets) else None
    if r.type == "ok":
        which = f"next ok read, {op_name(r)},"
    else:
        # "next": no op of the process read the key in between; "later": one did, and
        # it did not succeed (it is named below)
        when = "next" if failed is None else "later"
        which = f"{when} read of the key, {op_name(r)}, which {_outcome(r)},"
    text = (
        f"Process {r.process}'s {op_name(prev)} last read value {val(pv)} of key {k} at "
        f"offset {po}; its {which} began at value {val(v1)}, offset {o1} (micro-op {i1})"
    )
    if d1 > lo:
        sk = kl.values[lo + 1 : d1]
        unread = "it never read" if failed is None else "no ok read of this consumer returned"
        text += f", jumping over {len(sk)} record(s) {unread}: {values_text(sk)}."
    else:
        how = "the same record again" if d1 == lo else f"{lo - d1} record(s) back"
        text += f": {how}, although the consumer was neither reassigned nor rewound."
    if failed is not None:
        fs = _spans(failed.reads).get(k)
        assert fs is not None and fs[0] is not None and fs[1] is not None
        f_first, f_last = kl.offsets[fs[0]], kl.offsets[fs[1]]
        read = f"offset {f_first}" if f_first == f_last else f"offsets {f_first}-{f_last}"
        text += (
            f" In between, {op_name(failed)} read {read} of key {k} and {_outcome(failed)}; "
            f"such an op does not move the consumer (the client seeks back to where it "
            f"began reading)"
            + (
                f", so the next read had to begin at offset {want}, right after the last ok read."
                if want is not None
                else "."
            )
        )
        if d1 > lo and d1 == fs[1] + 1:
            text += (
                f" This read began right after that op's, at offset {o1}: the client did "
                f"not rewind."
            )
    elif r.type != "ok":
        text += (
            " A failed or indeterminate op's reads must also begin right after the "
            "consumer's last ok read."
        )
    if d1 > lo and (failed is not None or r.type != "ok"):
        text += (
            " (Histories of a client known not to rewind after an abort are checked "
            "with --no-consumer-rewinds.)"
        )
    return text


def _send_ends(keys: dict[str, KeyLog], writes: tuple[Any, ...]) -> dict[str, list[Any] | None]:
    """key -> [position, value, micro-op index] of the op's first placed send to the key
    followed by [position, value] of its last placed one (positions as _positions gives
    them), or None when no send to the key is placed; keys in the order first sent to."""
    out: dict[str, list[Any] | None] = {}
    for k, v, o, i in writes:
        d = _placed(keys, k, v, o)
        e = out.get(k)
        if d is None:
            if k not in out:
                out[k] = None
        elif e is None:
            out[k] = [d, v, i, d, v]
        else:
            e[3] = d
            e[4] = v
    return out


def sends(p: Prepared, logs: Logs, limit: int) -> list[Example]:
    """nonmonotonic-send: a producer's next send to a key lands at or before its previous one."""
    keys = logs.keys
    committed = logs.committed
    walk = _completion_order(p)
    # process -> key -> (position, op id, value) of its last send
    states: dict[Any, dict[str, tuple[int, int, Any]]] = {}
    # (process, (op, key, the previous send's state, position, value, micro-op index))
    found: list[tuple[Any, tuple[OpRec, str, tuple[int, int, Any], int, Any, int]]] = []
    for r in walk:
        if r.f == "crash":
            states[r.process] = {}
            continue
        writes = r.writes
        if not writes or r.type == "fail":
            continue
        if r.type == "info" and not committed[r.id]:
            continue
        state = states.get(r.process)
        if state is None:
            state = states[r.process] = {}
        rid = r.id
        if len(set(map(_key, writes))) == len(writes):
            # each key sent to once (most ops): its first send is its last
            for k, v, o, i in writes:
                kl = keys.get(k)
                if kl is None:
                    continue
                d = None if o is None else kl.dense.get(o)  # KeyLog.pos, inlined
                if d is None:
                    d = kl.first.get(v)
                    if d is None:
                        continue
                s = state.get(k)
                if s is not None and d <= s[0]:
                    found.append((r.process, (r, k, s, d, v, i)))
                state[k] = (d, rid, v)
            continue
        for k, ends in _send_ends(keys, writes).items():
            if ends is None:
                continue
            d1, v1, i1, dl, vl = ends
            s = state.get(k)
            if s is not None and d1 <= s[0]:
                found.append((r.process, (r, k, s, d1, v1, i1)))
            # the next op is compared with this one's last send, wherever it
            # landed (Jepsen's rule): a pair is always two consecutive sends
            state[k] = (dl, rid, vl)
    return [
        _send_example(p, logs, r, k, s, d1, v1, i1, n < limit * 4)
        for n, (r, k, s, d1, v1, i1) in enumerate(_process_major(walk, found))
    ]


def _send_example(
    p: Prepared,
    logs: Logs,
    r: OpRec,
    k: str,
    s: tuple[int, int, Any],
    d1: int,
    v1: Any,
    i1: int,
    explain: bool,
) -> Example:
    """Op r's first send to key k, v1 at position d1 (micro-op i1), landed at or before
    s, the (position, op id, value) of the process's previous send to k."""
    prev = p.ops[s[1]]
    kl = logs.keys[k]
    ex: Example = {
        "key": k,
        "values": [s[2], v1],
        "offsets": [kl.offsets[s[0]], kl.offsets[d1]],
        "delta": d1 - s[0],
        "ops": [prev.index, r.index],
        "process": r.process,
    }
    if explain:
        ex["explanation"] = (
            f"Process {r.process}'s {op_name(prev)} sent value {val(s[2])} to key "
            f"{k}, which landed at offset {kl.offsets[s[0]]}; its next send to "
            f"that key, value {val(v1)} in {op_name(r)} (micro-op {i1}), landed "
            + (
                f"at that same offset {kl.offsets[d1]}"
                if d1 == s[0]
                else f"at offset {kl.offsets[d1]}, before it"
            )
            + ". One producer's records must land in the order it sent them."
        )
    return ex
