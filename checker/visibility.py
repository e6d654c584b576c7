"""What the log holds versus what was acknowledged and read.

inconsistent-offsets, duplicate, lost-write, unseen, G1a, precommitted-read and
ktrial's torn-transaction. Each function returns a list of examples (dicts with
an "explanation"), in no particular order; results.py ranks and trims them.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import filterfalse, islice
from operator import itemgetter
from typing import Any

from .explain import offset_text, op_name, val, values_text
from .logs import KeyLog, Logs, iter_reads
from .prepare import OpRec, Prepared

Example = dict[str, Any]
_second = itemgetter(1)
_EMPTY: frozenset[Any] = frozenset()
COMMITTED_NOTE = " (its op must have committed: another of its values was read)"


def _sort_values(vs: Any) -> list[Any]:
    try:
        return sorted(vs)
    except TypeError:
        return sorted(vs, key=repr)


def _ops_touching(
    p: Prepared, logs: Logs, key: str, pairs: set[tuple[Any, Any]]
) -> Iterator[tuple[OpRec, str, Any, Any]]:
    """Ops that wrote or read one of the (offset, value) pairs of `key` (for examples only)."""
    for r in p.ops:
        for k, v, o, _i in r.writes:
            if k == key and (o, v) in pairs:
                yield r, "sent", o, v
        for k, v, o, _i in iter_reads(logs, r):
            if k == key and (o, v) in pairs:
                yield r, "read", o, v


def inconsistent_offsets(p: Prepared, logs: Logs, limit: int) -> list[Example]:
    out: list[Example] = []
    items = sorted(logs.conflicts.items(), key=lambda kv: (-len(kv[1]), kv[0][0], kv[0][1]))
    for n, ((k, o), vs) in enumerate(items):
        values = _sort_values(vs)
        ex: Example = {"key": k, "offset": o, "values": values}
        if n < limit:
            who: list[str] = []
            ops: list[int] = []
            for r, verb, _o, v in _ops_touching(p, logs, k, {(o, v) for v in vs}):
                if len(who) < 6:
                    who.append(f"{op_name(r)} {verb} {val(v)}")
                ops.append(r.index)
            ex["ops"] = sorted(set(ops))
            ex["explanation"] = (
                f"Key {k} holds {len(values)} different values at offset {o}: "
                f"{values_text(values)}. One offset of a partition holds exactly one record, "
                f"so clients disagree about the log: " + "; ".join(who) + "."
            )
        out.append(ex)
    return out


def duplicates(p: Prepared, logs: Logs, limit: int) -> list[Example]:
    out: list[Example] = []
    items = sorted(logs.dups.items(), key=lambda kv: (-len(kv[1]), kv[0][0], repr(kv[0][1])))
    for n, ((k, v), offs) in enumerate(items):
        offsets = sorted(offs)
        ex: Example = {"key": k, "value": v, "offsets": offsets, "count": len(offsets)}
        if n < limit:
            w = p.writer_of.get(k, {}).get(v)
            writer = f"It was sent by {op_name(p.ops[w])}. " if w is not None else ""
            who: list[str] = []
            ops = [] if w is None else [p.ops[w].index]
            for r, verb, o, _v in _ops_touching(p, logs, k, {(o, v) for o in offs}):
                if len(who) < 6:
                    who.append(f"{op_name(r)} {verb} it at offset {o}")
                ops.append(r.index)
            ex["ops"] = sorted(set(ops))
            ex["explanation"] = (
                f"Value {val(v)} of key {k} sits at {len(offsets)} offsets "
                f"({', '.join(map(str, offsets))}); each value is sent once, so it must appear "
                f"once. {writer}" + "; ".join(who) + "."
            )
        out.append(ex)
    return out


def _find_ok_reader(p: Prepared, logs: Logs, key: str, value: Any) -> OpRec | None:
    for r in p.ops:
        if r.type == "ok":
            for k, v, _o, _i in iter_reads(logs, r):
                if k == key and v == value:
                    return r
    return None


def lost_writes(p: Prepared, logs: Logs, limit: int) -> list[Example]:
    """Committed values never read by ok ops though ok ops read past their position.

    With offsets: the bound of a key is the furthest (dense) position of a value an
    ok op read; every value whose last position is at or below it must have been
    read by some ok op. Without offsets (e.g. Queen's -1 for transactional sends)
    the order comes from real time: a value acknowledged before another value's
    writer was even invoked lies before it in the log.
    """
    out: list[Example] = []
    ops = p.ops
    explained_keys: dict[str, OpRec | None] = {}
    for k in sorted(p.ok_reads):
        reads = p.ok_reads[k]
        kl = logs.keys.get(k)
        writers = p.writer_of.get(k, {})
        # --- by log position
        if kl is not None:
            bound, vmax = _furthest_read(k, kl, reads, logs.conflicts)
            # where ok ops actually read: a duplicate read at a later offset counts
            top = kl.dense.get(p.ok_top.get(k, -1))
            if top is not None and top > bound:
                bound, vmax = top, kl.values[top]
            if bound >= 0:
                cand = set(filterfalse(reads.__contains__, islice(kl.values, bound + 1)))
                for (ck, co), vs in logs.conflicts.items():
                    if ck == k and kl.dense[co] <= bound:
                        cand |= vs
                cand -= reads
                for v in _sort_values(cand):
                    if kl.last.get(v, 0) > bound:
                        continue
                    w = writers.get(v)
                    if w is None or not logs.committed[w]:
                        continue
                    wr = p.ops[w]
                    d = kl.first[v]
                    o = kl.offsets[d]
                    ex: Example = {
                        "key": k,
                        "value": v,
                        "offset": o,
                        "max_read_offset": kl.offsets[bound],
                        "max_read_value": vmax,
                        "writer": wr.index,
                        "ops": [wr.index],
                    }
                    if len(out) < limit * 4:
                        if k not in explained_keys:
                            explained_keys[k] = _find_ok_reader(p, logs, k, vmax)
                        mr = explained_keys[k]
                        ex["explanation"] = (
                            f"{op_name(wr)} sent value {val(v)} to key {k}, which landed at "
                            f"offset {o}{'' if wr.type == 'ok' else COMMITTED_NOTE}"
                            f". No ok op ever read it, although "
                            + (f"{op_name(mr)}" if mr else "an ok op")
                            + f" read value {val(vmax)} at "
                            + ("that same offset" if d == bound else "the later offset")
                            + f" {kl.offsets[bound]}: "
                            f"consumers read past it, so the acknowledged write was lost."
                        )
                        if mr is not None:
                            ex["max_reader"] = mr.index
                            ex["ops"] = [wr.index, mr.index]
                    out.append(ex)
        # --- by real time, for values whose offset nobody knows
        unplaced = writers.keys() - reads
        if kl is not None:
            unplaced -= kl.first.keys()
        if not any(
            ops[writers[v]].type == "ok" and ops[writers[v]].comp_pos is not None for v in unplaced
        ):
            continue  # none can be judged (the loop below skips each): the search is spared
        latest: tuple[int, Any, int] | None = None  # (invoke pos of writer, value, writer id)
        for v in reads:
            w = writers.get(v)
            if w is not None:
                ip = ops[w].inv_pos
                if latest is None or ip > latest[0]:
                    latest = (ip, v, w)
        if latest is None:
            continue
        for v in _sort_values(unplaced):
            w = writers[v]
            wr = p.ops[w]
            if wr.type != "ok" or wr.comp_pos is None or wr.comp_pos >= latest[0]:
                continue
            later = p.ops[latest[2]]
            ex = {
                "key": k,
                "value": v,
                "offset": None,
                "max_read_value": latest[1],
                "writer": wr.index,
                "ops": [wr.index, later.index],
            }
            if len(out) < limit * 4:
                ex["explanation"] = (
                    f"{op_name(wr)} sent value {val(v)} to key {k} at an unknown offset and was "
                    f"acknowledged before {op_name(later)} was invoked to send value "
                    f"{val(latest[1])} to the same key, so {val(v)} lies earlier in the log. "
                    f"Ok ops read {val(latest[1])} but no ok op ever read {val(v)}: it was lost."
                )
            out.append(ex)
    return out


def _furthest_read(
    k: str, kl: KeyLog, reads: set[Any], conflicts: dict[tuple[str, int], set[Any]]
) -> tuple[int, Any]:
    """(bound, value): the furthest first (dense) position of a value of `reads`, and
    the first value in the set's order that first sits there; (-1, None) if none does."""
    if not any(ck == k for ck, _o in conflicts):
        # One value per position: the answer is the highest position whose value was
        # read and first sits there. Walked down from the end of the log, it is near.
        values, first = kl.values, kl.first
        for d in range(len(values) - 1, -1, -1):
            v = values[d]
            if v in reads and first[v] == d:
                return d, v
        return -1, None
    bound = -1
    vmax: Any = None
    for v in reads:
        fd = kl.first.get(v)
        if fd is not None and fd > bound:
            bound, vmax = fd, v
    return bound, vmax


def unseen(p: Prepared, limit: int) -> list[Example]:
    """Per key: values sent by ok ops that no ok op ever read."""
    per_key: dict[str, list[tuple[Any, int, int | None]]] = {}
    ok_reads = p.ok_reads
    for r in p.ops:
        if r.type != "ok":
            continue
        for k, v, o, _i in r.writes:
            if v not in ok_reads.get(k, _EMPTY):
                per_key.setdefault(k, []).append((v, r.id, o))
    out: list[Example] = []
    for k in sorted(per_key, key=lambda k: -len(per_key[k])):
        items = per_key[k]
        values = _sort_values({v for v, _w, _o in items})
        acked: dict[Any, int | None] = {}
        for v, _w, o in items:
            if acked.get(v) is None:
                acked[v] = o
        v0, w0, o0 = items[0]
        out.append(
            {
                "key": k,
                "count": len(values),
                "values": values[:32],
                "offsets": [acked[v] for v in values[:32]],  # acknowledged (None: unknown)
                "ops": sorted({p.ops[w].index for _v, w, _o in items})[:32],
                "explanation": (
                    f"{len(values)} value(s) sent to key {k} by ok ops were never read by any "
                    f"ok op: {values_text(values)}. For example {op_name(p.ops[w0])} sent "
                    f"{val(v0)}, acknowledged at {offset_text(o0)}. If the run ended with a "
                    f"complete drain these writes are lost; otherwise consumers were still "
                    f"behind."
                ),
            }
        )
    return out


def g1a(p: Prepared, logs: Logs, limit: int) -> list[Example]:
    """Ok ops that read a value only a failed (aborted) op wrote."""
    failed: dict[str, set[Any]] = {}
    writer_of = p.writer_of
    for r in p.ops:
        if r.type == "fail":
            for k, v, _o, _i in r.writes:
                if writer_of[k].get(v) == r.id:
                    failed.setdefault(k, set()).add(v)
    bad = {k: vs & p.ok_reads[k] for k, vs in failed.items() if k in p.ok_reads}
    bad = {k: vs for k, vs in bad.items() if vs}
    out: list[Example] = []
    if not bad:
        return out
    for r in p.ops:
        if r.type != "ok" or not any(c[0] in bad for c in r.reads):
            continue
        for k, v, o, i in iter_reads(logs, r):
            if v not in bad.get(k, _EMPTY):
                continue
            wr = p.ops[p.writer_of[k][v]]
            ex: Example = {
                "key": k,
                "value": v,
                "offset": o,
                "writer": wr.index,
                "reader": r.index,
                "ops": [wr.index, r.index],
            }
            if len(out) < limit * 4:
                ex["explanation"] = (
                    f"{op_name(r)} read value {val(v)} of key {k} at {offset_text(o)} "
                    f"(micro-op {i}), but the only op that sent it, {op_name(wr)}, failed: "
                    + (
                        "its transaction aborted, so a read_committed consumer must never see it."
                        if wr.f == "txn"
                        else "the send certainly did not take effect, so no consumer may see it."
                    )
                )
            out.append(ex)
    return out


def precommitted_reads(p: Prepared, limit: int) -> list[Example]:
    """An op whose polls returned a value the same op sent (before it could have committed)."""
    out: list[Example] = []
    for rid, k, v, o, i, j in p.precommitted:
        r = p.ops[rid]
        ex: Example = {"key": k, "value": v, "offset": o, "ops": [r.index]}
        if len(out) < limit * 4:
            ex["explanation"] = (
                f"{op_name(r)} sent value {val(v)} to key {k} (micro-op {j}) and its own "
                f"poll (micro-op {i}) returned that value at {offset_text(o)}. A transaction's "
                f"records are invisible to read_committed consumers until it commits, which "
                f"is after the op's polls."
            )
        out.append(ex)
    return out


def torn_transactions(p: Prepared, logs: Logs, lost: list[Example], limit: int) -> list[Example]:
    """Committed ops whose values are visible on some keys and lost on others."""
    lost_by_writer: dict[int, list[Example]] = {}
    for ex in lost:
        w = p.writer_of[ex["key"]][ex["value"]]
        lost_by_writer.setdefault(w, []).append(ex)
    out: list[Example] = []
    for w, lost_ex in sorted(lost_by_writer.items()):
        r = p.ops[w]
        if r.f != "txn":
            continue  # separate sends are not atomic; only transactions can be torn
        seen = [(k, v, o) for k, v, o, _i in r.writes if v in p.ok_reads.get(k, ())]
        seen_keys = {k for k, _v, _o in seen}
        lost_keys = {ex["key"] for ex in lost_ex}
        if not seen or not any(a != b for a in seen_keys for b in lost_keys):
            continue
        ex = {
            "ops": [r.index],
            "visible": [[k, v] for k, v, _o in seen],
            "lost": [[e["key"], e["value"]] for e in lost_ex],
            "keys_visible": sorted(seen_keys),
            "keys_lost": sorted(lost_keys),
        }
        if len(out) < limit:  # the details cost a scan of the history each
            ex.update(_torn_details(p, logs, r, seen, lost_ex))
        out.append(ex)
    return out


def _torn_details(
    p: Prepared, logs: Logs, r: OpRec, seen: list[tuple[str, Any, Any]], lost_ex: list[Example]
) -> Example:
    """Where a torn transaction's values sit, who read the visible ones, and what was
    read past the lost ones: the explanation of one torn-transaction example."""
    visible_at: list[Example] = []
    for k, v, o in seen[:6]:
        kl = logs.keys.get(k)
        d = kl.first.get(v) if kl is not None else None
        off = kl.offsets[d] if o is None and kl is not None and d is not None else o
        rd = _find_ok_reader(p, logs, k, v)
        visible_at.append({"key": k, "value": v, "offset": off, "reader": rd and rd.index})
    lost_at: list[Example] = [
        {
            "key": e["key"],
            "value": e["value"],
            "offset": e.get("offset"),
            "max_read_offset": e.get("max_read_offset"),
            "max_read_value": e.get("max_read_value"),
            "max_reader": e.get("max_reader"),
        }
        for e in lost_ex[:6]
    ]
    ops = [r.index]
    for a in visible_at:
        if a["reader"] is not None and a["reader"] not in ops:
            ops.append(a["reader"])
    for b in lost_at:
        if b["max_reader"] is not None and b["max_reader"] not in ops:
            ops.append(b["max_reader"])

    def at(o: Any) -> str:
        return "" if o is None else f" at offset {o}"

    seen_txt = "; ".join(
        f"{val(a['value'])} on key {a['key']}{at(a['offset'])}"
        + ("" if a["reader"] is None else f" (read by op {a['reader']})")
        for a in visible_at
    )

    def past(b: Example) -> str:
        if b["max_read_value"] is None:
            return ""
        who = "an ok op" if b["max_reader"] is None else f"op {b['max_reader']}"
        past_it = f"{val(b['max_read_value'])}{at(b['max_read_offset'])}"
        return f", though {who} read value {past_it} past it"

    lost_txt = "; ".join(
        f"{val(b['value'])} on key {b['key']}{at(b['offset'])}{past(b)}" for b in lost_at
    )
    return {
        "ops": ops,
        "visible_at": visible_at,
        "lost_at": lost_at,
        "explanation": (
            f"{op_name(r)} committed a transaction, but only part of it is visible. "
            f"Consumers read {seen_txt}. Never read: {lost_txt}. "
            f"A committed transaction is all or nothing: it was applied only in part."
        ),
    }
