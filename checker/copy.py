"""Exactly-once checks of the copy workload: eos-duplicate and eos-loss.

The copy workload (workloads/copy.py) writes each input record ``v`` of input key
``k`` to output key ``route[k]`` as ``step * value_modulus + v`` (unique per write
attempt), inside a transaction that also commits the consumed input offset. From the history alone:

* the committed input is every value an ``ok`` send wrote to an input key plus
  every value an ``ok`` op read from an input key (info sends that landed show up
  in reads);
* the output log is every (offset, value) an ``ok`` op read from an output key
  (read_committed, so aborted copies are invisible), plus the acknowledged sends
  of ``ok`` copier transactions (committed, so they are in the log);
* ``eos-duplicate``: an input value that sits at two or more output offsets — it
  was copied twice (a zombie copier, or offsets committed apart from the writes);
* ``eos-loss``: a committed input value with no copy at all in the output log.
  Only meaningful after the drain (copiers caught up, output read back): ``meta``
  may carry ``drain: {"copy_caught_up": false}``, in which case losses are still
  reported, with that caveat in each example.

Pure: a function of the ops and test.json's ``copy`` section.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ..histories.model import FormatError, Op, Poll, Send, parse_mops


def _mops(op: Op) -> list[Send | Poll]:
    v = op.value
    if isinstance(v, list) and v and not isinstance(v[0], (Send, Poll)):
        try:
            return parse_mops(v)
        except FormatError:
            return []
    return list(v) if isinstance(v, list) else []


def copy_section(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The `copy` section of test.json (top level, or under "checker"/"workload")."""
    for d in (meta, meta.get("checker"), meta.get("workload")):
        if isinstance(d, dict) and isinstance(d.get("copy"), dict):
            return d["copy"]
    return None


def validate_copy(sec: dict[str, Any]) -> dict[str, Any]:
    """The copy section if usable, else ValueError saying which field is wrong."""
    route = sec.get("route")
    if not isinstance(route, dict) or not route:
        raise ValueError(
            f'copy section: "route" must map each input key to its output key, got {route!r}'
        )
    for k, v in route.items():
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError(f'copy section: "route" sends key {k!r} to {v!r}, not a key')
    mod = sec.get("value_modulus", 0)
    if isinstance(mod, bool) or not isinstance(mod, int) or mod < 0:
        raise ValueError(
            f'copy section: "value_modulus" must be an integer >= 0 (0: values are copied '
            f"as they are), got {mod!r}"
        )
    return sec


def _writers_text(ops: list[tuple[int, str]]) -> str:
    return ", ".join(f"op {i} ({t})" for i, t in ops)


def check_copy(ops: Iterable[Op], meta: dict[str, Any], max_examples: int = 8) -> dict[str, Any]:
    """Anomalies {type: {"count": n, "examples": [...]}} (empty when exactly-once held)."""
    sec = copy_section(meta)
    if sec is None:
        return {}
    validate_copy(sec)
    route = {str(k): str(v) for k, v in sec["route"].items()}
    in_keys = set(route)
    out_to_in = {v: k for k, v in route.items()}
    mod = int(sec.get("value_modulus", 0))

    def source(ov: Any) -> Any:
        """The input value an output value copies."""
        return ov % mod if mod and isinstance(ov, int) else ov

    drain = meta.get("drain") if isinstance(meta.get("drain"), dict) else {}
    caught_up = drain.get("copy_caught_up", drain.get("caught_up", True)) if drain else True

    committed: dict[tuple[str, Any], int] = {}  # (in key, v) -> index of evidence op
    in_offsets: dict[tuple[str, Any], set[int]] = defaultdict(set)  # where the input sits
    # (out key, input value) -> {output offset: output value}
    out_offsets: dict[tuple[str, Any], dict[int, Any]] = defaultdict(dict)
    # (out key, input value) -> output values committed with no offset known
    out_unplaced: dict[tuple[str, Any], set[Any]] = defaultdict(set)
    out_writers: dict[tuple[str, Any], dict[int, str]] = defaultdict(dict)  # op index -> type
    info_sends: list[tuple[str, Any, int | None, int]] = []  # out key, value, offset, op
    read_out: set[tuple[str, Any]] = set()  # output (key, value)s an ok op read
    for op in ops:
        if not op.is_data or op.type not in ("ok", "info"):
            continue
        for m in _mops(op):
            if isinstance(m, Send):
                if op.type == "info":
                    if m.key in out_to_in:
                        info_sends.append((m.key, m.value, m.offset, op.index))
                    continue
                if m.key in in_keys:
                    committed.setdefault((m.key, m.value), op.index)
                    if m.offset is not None:
                        in_offsets[(m.key, m.value)].add(m.offset)
                elif m.key in out_to_in:
                    src = (m.key, source(m.value))
                    if m.offset is not None:
                        out_offsets[src][m.offset] = m.value
                    else:
                        out_unplaced[src].add(m.value)
                    out_writers[src][op.index] = "ok"
            elif m.records and op.type == "ok":
                for k, recs in m.records.items():
                    for o, v in recs:
                        if k in in_keys:
                            committed.setdefault((k, v), op.index)
                            if o is not None:
                                in_offsets[(k, v)].add(o)
                        elif k in out_to_in:
                            read_out.add((k, v))
                            if o is not None:
                                out_offsets[(k, source(v))][o] = v
                            else:
                                out_unplaced[(k, source(v))].add(v)
    # A zombie's info transaction wrote its copy if an ok op read that output value.
    for k, v, o, idx in info_sends:
        if (k, v) in read_out:
            src = (k, source(v))
            if o is not None:
                out_offsets[src][o] = v
            out_writers[src].setdefault(idx, "info")

    dups: list[dict[str, Any]] = []
    for src in set(out_offsets) | set(out_unplaced):
        ok_, v = src
        offs = out_offsets.get(src, {})
        placed = set(offs.values())
        extra = sorted((x for x in out_unplaced.get(src, ()) if x not in placed), key=str)
        copies = len(offs) + len(extra)
        in_key = out_to_in[ok_]
        inputs = sorted(in_offsets.get((in_key, v), ()))
        if copies <= max(1, len(inputs)):
            continue  # one copy per input record (a duplicated input is `duplicate`'s)
        at = [f"{ov} at offset {o}" for o, ov in sorted(offs.items())]
        at += [f"{ov} at an unknown offset" for ov in extra]
        writers = sorted(out_writers.get(src, {}).items())
        held = (
            f"; the input holds it {len(inputs)} time(s), at offset(s) "
            + ", ".join(map(str, inputs))
            if inputs
            else ""
        )
        dups.append(
            {
                "key": in_key,
                "value": v,
                "input_offsets": inputs,
                "output_key": ok_,
                "offsets": sorted(offs),
                "output_values": [offs[o] for o in sorted(offs)] + extra,
                "writers": [i for i, _t in writers],
                "ops": [i for i, _t in writers],  # as every anomaly type names its ops
                "explanation": f"input value {v} of key {in_key} was copied {copies} times "
                f"into output key {ok_}: {', '.join(at)}{held}; written by "
                f"{_writers_text(writers) or 'ops not in the history'}",
            }
        )
    copied = {(out_to_in[k], v) for k, v in out_offsets} | {
        (out_to_in[k], v) for k, v in out_writers
    }
    losses: list[dict[str, Any]] = []
    for (k, v), idx in sorted(committed.items(), key=lambda x: x[1]):
        if (k, v) not in copied:
            offs_in = sorted(in_offsets.get((k, v), ()))
            where = f" at offset {offs_in[0]}" if offs_in else ""
            ex = {
                "key": k,
                "value": v,
                "offset": offs_in[0] if offs_in else None,
                "output_key": route[k],
                "evidence_op": idx,
                "ops": [idx],
                "explanation": f"input value {v} of key {k}{where} was committed (op {idx}) but "
                f"output key {route[k]} never holds a copy of it",
            }
            if not caught_up:
                ex["caveat"] = "the copiers had not caught up when the drain ended"
            losses.append(ex)

    out: dict[str, Any] = {}
    if dups:
        dups.sort(key=lambda d: (-len(d["output_values"]), str(d["key"]), str(d["value"])))
        out["eos-duplicate"] = {"count": len(dups), "examples": dups[:max_examples]}
    if losses:
        out["eos-loss"] = {"count": len(losses), "examples": losses[:max_examples]}
    return out
