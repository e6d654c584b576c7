"""Order anomalies: do consumers and producers move through each key's log in order?

Positions are dense indices (rank among the key's non-empty offsets), so a gap
left by a transaction marker or aborted records is never a skip. A record's
position comes from the offset it was reported with, else from where its value
sits in the log; records whose position is unknown are not judged.
"""

from __future__ import annotations

import itertools
from typing import Any

from .explain import op_name, val, values_text
from .logs import (
    Logs,
    chunk_values,
    iter_reads,
    read_positions,
    run_first_last_max,
    runs_consecutive,
)
from .prepare import OpRec, Prepared

Example = dict[str, Any]


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


def _skipped(logs: Logs, k: str, lo: int, hi: int) -> list[Any]:
    """Values at dense positions lo..hi-1 of key k."""
    return logs.keys[k].values[lo:hi]


def _off(logs: Logs, k: str, d: int) -> int:
    return logs.keys[k].offsets[d]


def internal(p: Prepared, logs: Logs, limit: int) -> dict[str, list[Example]]:
    """int-poll-skip, int-nonmonotonic-poll, int-send-skip, int-nonmonotonic-send."""
    res: dict[str, list[Example]] = {
        "int-poll-skip": [],
        "int-nonmonotonic-poll": [],
        "int-send-skip": [],
        "int-nonmonotonic-send": [],
    }
    for r in p.ops:
        if r.reads:
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
        if len(r.writes) > 1 and logs.committed[r.id]:
            for k, lst in _positions(logs, r.writes).items():
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
        o1, o2 = _off(logs, k, d1), _off(logs, k, d2)
        ex: Example = {
            "key": k,
            "values": [v1, v2],
            "offsets": [o1, o2],
            "delta": delta,
            "ops": [r.index],
        }
        if delta > 1:
            sk = _skipped(logs, k, d1 + 1, d2)
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


def _by_process(p: Prepared) -> dict[Any, list[OpRec]]:
    """Each process's ops in completion order (never-completed ops at their invocation)."""
    out: dict[Any, list[OpRec]] = {}
    ops = p.ops
    if any(r.comp_pos is None for r in ops):
        ops = sorted(ops, key=lambda r: r.inv_pos if r.comp_pos is None else r.comp_pos)
    for r in ops:
        lst = out.get(r.process)
        if lst is None:
            out[r.process] = [r]
        else:
            lst.append(r)
    return out


def polls(p: Prepared, logs: Logs, limit: int) -> dict[str, list[Example]]:
    """poll-skip and nonmonotonic-poll: each consumer's successive ok reads of a key.

    State per process and key: `lo`, the position of the last record an ok op read,
    and `hi` >= lo, the furthest position a failed or indeterminate op read since.
    After such an op the driver rewinds to where it began reading (DESIGN.md 4), but
    another driver may not: the next ok read may start anywhere in lo+1 .. hi+1.
    It is a skip beyond hi+1 and nonmonotonic at or before lo. Assign keeps the
    state of keys still assigned (a seek to the beginning forgets all), subscribe
    keeps those still named, a crash forgets the process, rebalanced keys (its
    rebalance_log) are forgotten for the op that reports them.
    """
    skips: list[Example] = []
    nonmono: list[Example] = []
    ops = p.ops
    for _proc, rs in _by_process(p).items():
        state: dict[
            str, tuple[int, int, int, int | None]
        ] = {}  # key -> (lo, hi, op id, failed op id)
        for r in rs:
            f = r.f
            if f in ("assign", "subscribe"):
                if r.type == "fail":
                    continue
                if r.seek or r.keys is None:
                    state = {}
                else:
                    ks = set(r.keys)
                    state = {k: s for k, s in state.items() if k in ks}
                continue
            if f == "crash":
                state = {}
                continue
            for k in r.rebalanced:  # reassigned during this op, whatever its outcome
                state.pop(k, None)
            if not r.reads:
                continue
            pos = read_positions(logs, r)
            if r.type != "ok":
                for k, runs in pos.items():
                    s = state.get(k)
                    if s is None:
                        continue
                    _f, _l, top = run_first_last_max(runs)
                    if top is not None and top > s[1]:  # the op that read furthest
                        state[k] = (s[0], top, s[2], r.id)
                continue
            for k, runs in pos.items():
                s = state.get(k)
                if k in r.rebalanced:
                    s = None
                d1, dl, _top = run_first_last_max(runs)
                if s is not None and d1 is not None:
                    lo, hi, last_id, failed_id = s
                    if d1 <= lo or d1 > hi + 1:
                        prev = ops[last_id]
                        v1, i1 = _first_placed(logs, r, k)
                        ex = _poll_example(
                            logs,
                            k,
                            prev,
                            r,
                            lo,
                            hi,
                            d1,
                            v1,
                            i1,
                            failed_id,
                            p,
                            len(skips) < limit * 4 if d1 > lo else len(nonmono) < limit * 4,
                        )
                        (nonmono if d1 <= lo else skips).append(ex)
                if dl is not None:
                    state[k] = (dl, dl, r.id, None)
                else:
                    state.pop(k, None)
    return {"poll-skip": skips, "nonmonotonic-poll": nonmono}


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
    prev: OpRec,
    r: OpRec,
    lo: int,
    hi: int,
    d1: int,
    v1: Any,
    i1: int,
    failed_id: int | None,
    p: Prepared,
    explain: bool,
) -> Example:
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
    note = ""
    if failed_id is not None:
        ex["ops"] = [prev.index, r.index, p.ops[failed_id].index]  # the pair, then it
        note = (
            f" (In between, {op_name(p.ops[failed_id])} read up to offset "
            f"{kl.offsets[hi]} and did not succeed.)"
        )
    if d1 > lo:
        sk = kl.values[hi + 1 : d1]
        ex["skipped"] = sk[:32]
        if explain:
            ex["explanation"] = (
                f"Process {r.process}'s {op_name(prev)} last read value {val(pv)} of key {k} at "
                f"offset {po}; its next ok read, {op_name(r)}, began at value {val(v1)}, offset "
                f"{o1} (micro-op {i1}), jumping over {len(sk)} record(s) it never read: "
                f"{values_text(sk)}.{note}"
            )
    elif explain:
        how = "the same record again" if delta == 0 else f"{-delta} record(s) back"
        ex["explanation"] = (
            f"Process {r.process}'s {op_name(prev)} last read value {val(pv)} of key {k} at "
            f"offset {po}; its next ok read, {op_name(r)}, began at value {val(v1)}, offset {o1} "
            f"(micro-op {i1}): {how}, although the consumer was neither reassigned nor "
            f"rewound.{note}"
        )
    return ex


def sends(p: Prepared, logs: Logs, limit: int) -> list[Example]:
    """nonmonotonic-send: a producer's next send to a key lands at or before its previous one."""
    out: list[Example] = []
    ops = p.ops
    for _proc, rs in _by_process(p).items():
        state: dict[str, tuple[int, int, Any]] = {}  # key -> (position, op id, value)
        for r in rs:
            if r.f == "crash":
                state = {}
                continue
            if not r.writes or r.type == "fail":
                continue
            if r.type == "info" and not logs.committed[r.id]:
                continue
            for k, lst in _positions(logs, r.writes).items():
                known = [(d, v, i) for d, v, _o, i in lst if d is not None]
                if not known:
                    continue
                d1, v1, i1 = known[0]
                s = state.get(k)
                if s is not None and d1 <= s[0]:
                    prev = ops[s[1]]
                    kl = logs.keys[k]
                    ex: Example = {
                        "key": k,
                        "values": [s[2], v1],
                        "offsets": [kl.offsets[s[0]], kl.offsets[d1]],
                        "delta": d1 - s[0],
                        "ops": [prev.index, r.index],
                        "process": r.process,
                    }
                    if len(out) < limit * 4:
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
                    out.append(ex)
                # the next op is compared with this one's last send, wherever it
                # landed (Jepsen's rule): a pair is always two consecutive sends
                dl, vl, _il = known[-1]
                state[k] = (dl, r.id, vl)
    return out
