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


def check_copy(ops: Iterable[Op], meta: dict[str, Any], max_examples: int = 8) -> dict[str, Any]:
    """Anomalies {type: {"count": n, "examples": [...]}} (empty when exactly-once held)."""
    sec = copy_section(meta)
    if sec is None:
        return {}
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
    # (out key, input value) -> {output offset: output value}
    out_offsets: dict[tuple[str, Any], dict[int, Any]] = defaultdict(dict)
    out_writers: dict[tuple[str, Any], set[int]] = defaultdict(set)
    for op in ops:
        if op.type != "ok" or not op.is_data:
            continue
        for m in _mops(op):
            if isinstance(m, Send):
                if m.key in in_keys:
                    committed.setdefault((m.key, m.value), op.index)
                elif m.key in out_to_in:
                    if m.offset is not None:
                        out_offsets[(m.key, source(m.value))][m.offset] = m.value
                    out_writers[(m.key, source(m.value))].add(op.index)
            elif m.records:
                for k, recs in m.records.items():
                    for o, v in recs:
                        if k in in_keys:
                            committed.setdefault((k, v), op.index)
                        elif k in out_to_in and o is not None:
                            out_offsets[(k, source(v))][o] = v

    dups: list[dict[str, Any]] = []
    for (ok_, v), offs in out_offsets.items():
        if len(offs) > 1:
            in_key = out_to_in[ok_]
            at = ", ".join(f"{ov} at offset {o}" for o, ov in sorted(offs.items()))
            dups.append(
                {
                    "key": in_key,
                    "value": v,
                    "output_key": ok_,
                    "offsets": sorted(offs),
                    "output_values": [offs[o] for o in sorted(offs)],
                    "writers": sorted(out_writers.get((ok_, v), set())),
                    "explanation": f"input value {v} of key {in_key} was copied {len(offs)} times "
                    f"into output key {ok_}: {at}",
                }
            )
    copied = {(out_to_in[k], v) for k, v in out_offsets} | {
        (out_to_in[k], v) for k, v in out_writers
    }
    losses: list[dict[str, Any]] = []
    for (k, v), idx in sorted(committed.items(), key=lambda x: x[1]):
        if (k, v) not in copied:
            ex = {
                "key": k,
                "value": v,
                "output_key": route[k],
                "evidence_op": idx,
                "explanation": f"input value {v} of key {k} was committed (op {idx}) but output "
                f"key {route[k]} never holds a copy of it",
            }
            if not caught_up:
                ex["caveat"] = "the copiers had not caught up when the drain ended"
            losses.append(ex)

    out: dict[str, Any] = {}
    if dups:
        dups.sort(key=lambda d: (-len(d["offsets"]), str(d["key"]), str(d["value"])))
        out["eos-duplicate"] = {"count": len(dups), "examples": dups[:max_examples]}
    if losses:
        out["eos-loss"] = {"count": len(losses), "examples": losses[:max_examples]}
    return out
