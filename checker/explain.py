"""Human wording shared by every analysis: how to name an op, a time, a record.

Every example in results.json carries an "explanation" a reader understands
without the code; these helpers keep the wording uniform (op index, process,
type, f and time always appear the same way).
"""

from __future__ import annotations

from typing import Any

from .prepare import OpRec


def secs(ns: int | None) -> str:
    return "?" if ns is None else f"{ns / 1e9:.3f} s"


def op_name(r: OpRec) -> str:
    """'op 12 (process 3, ok txn, 1.204–1.260 s)'."""
    if r.comp_time is None:
        when = f"invoked at {secs(r.inv_time)}, never completed"
    elif r.comp_pos == r.inv_pos:
        when = f"at {secs(r.comp_time)}"
    else:
        when = f"{secs(r.inv_time)}–{secs(r.comp_time)}"
    return f"op {r.index} (process {r.process}, {r.type} {r.f}, {when})"


def val(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v)


def offset_text(o: int | None) -> str:
    return "an unknown offset" if o is None else f"offset {o}"


def values_text(vs: list[Any], limit: int = 12) -> str:
    shown = ", ".join(val(v) for v in vs[:limit])
    more = f" and {len(vs) - limit} more" if len(vs) > limit else ""
    return shown + more


def mop_text(i: int) -> str:
    return f"micro-op {i}"


def op_ref(r: OpRec) -> dict[str, Any]:
    """Structured description of an op for examples."""
    return {
        "index": r.index,
        "process": r.process,
        "type": r.type,
        "f": r.f,
        "invoke_time_s": None if r.inv_time is None else r.inv_time / 1e9,
        "complete_time_s": None if r.comp_time is None else r.comp_time / 1e9,
    }
