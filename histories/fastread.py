"""A fast path for reading history.jsonl lines: typed decoding with msgspec.

Why: validating a 1,000,000-op history in Python cost 3.5-4.5x the bare JSON
parse (a Python check per micro-op and per record). msgspec decodes a line
straight into typed structs and checks the shapes in C, faster than orjson
builds the equivalent dicts and lists.

It only ever handles the common, well-formed shape: a line it cannot decode
(anything unusual -- Jepsen keyword spellings, fields beyond the documented
ones, negative offsets, a malformed op) returns None, and the caller reads
that line with the strict reader in :mod:`.jsonl`, which also says what is
wrong. So both paths give identical ops and the slow one owns every error
message. msgspec is optional: without it :func:`fast_op` always returns None.
"""

from __future__ import annotations

from operator import itemgetter
from sys import intern as _intern
from typing import Any

from .model import DATA_FS, NEMESIS, OP_TYPES, Op, Poll, Records, Send

try:  # an accelerator only: the strict reader handles everything without it
    import msgspec
except ImportError:  # pragma: no cover - exercised only where msgspec is absent
    msgspec = None  # type: ignore[assignment]

_OP_TYPES = frozenset(OP_TYPES)
_first = itemgetter(0)
_second = itemgetter(1)
_INT_KEYS: dict[int, str] = {}
_tnew = tuple.__new__


def _int_key(k: int) -> str:
    """str(k), shared: a history names a handful of keys millions of times."""
    s = _INT_KEYS.get(k)
    if s is None:
        s = str(k)
        if len(_INT_KEYS) < 65536:
            _INT_KEYS[k] = s
    return s


if msgspec is not None:
    _UNSET: Any = msgspec.UNSET

    class _SendM(msgspec.Struct, array_like=True, tag="send", gc=False):
        """["send", key, value] or ["send", key, [offset, value]]."""

        key: int | str
        value: int | str | tuple[int | None, int | str]

    class _PollM(msgspec.Struct, array_like=True, tag="poll", gc=False):
        """["poll"] or ["poll", {key: [[offset, value], ...]}] (or ["poll", null])."""

        records: dict[str, list[tuple[int | None, int | str]]] | None = None

    class _Line(msgspec.Struct, forbid_unknown_fields=True, gc=False):
        """The documented fields; any other field sends the line to the strict reader,
        which keeps it in Op.extra."""

        type: str
        f: str
        process: int | str
        index: int | msgspec.UnsetType = msgspec.UNSET
        time: int | float = 0
        value: list[_SendM | _PollM] | None = None
        error: Any = None
        node: Any = msgspec.UNSET
        poll_ms: Any = msgspec.UNSET
        rebalance_log: Any = msgspec.UNSET
        seek_to_beginning: Any = msgspec.UNSET

    _decode = msgspec.json.Decoder(_Line).decode
    _Error: Any = msgspec.MsgspecError
else:  # pragma: no cover
    _decode = None
    _Error = Exception


def _records(pairs: list[tuple[Any, Any]]) -> list[Any] | None:
    """A poll's records of one key with their offset/value columns; None if an offset < 0."""
    if not pairs:
        return []
    offsets = list(map(_first, pairs))
    if None in offsets:
        if any(o is not None and o < 0 for o in offsets):
            return None
    elif min(offsets) < 0:
        return None
    out = Records(pairs)  # (offset, value) tuples; Records compare equal to lists
    out.offsets = offsets
    out.values = list(map(_second, pairs))
    return out


def _mops(value: list[Any]) -> list[Any] | None:
    out: list[Any] = []
    append = out.append
    for m in value:
        if type(m) is _SendM:
            k: Any = m.key
            k = _INT_KEYS.get(k) or _int_key(k) if type(k) is int else _intern(k)
            v = m.value
            if type(v) is tuple:
                o = v[0]
                if o is not None and o < 0:
                    return None  # Queen's -1: the strict reader maps it to null
                append(_tnew(Send, (k, v[1], o)))  # Send(k, value, offset), minus __new__
            else:
                append(_tnew(Send, (k, v, None)))
        else:
            recs = m.records
            if recs is None:
                append(_tnew(Poll, (None,)))
                continue
            out_r: dict[str, list[Any]] = {}
            for rk, pairs in recs.items():
                lst = _records(pairs)
                if lst is None:
                    return None
                out_r[_intern(rk)] = lst
            append(_tnew(Poll, (out_r,)))
    return out


def fast_op(raw: bytes, fallback_index: int) -> Op | None:
    """The Op of one line when it has the common shape, else None (use the strict reader)."""
    if _decode is None:
        return None
    try:
        d = _decode(raw)
    except _Error:
        return None
    typ = d.type
    f = d.f
    process = d.process
    if typ not in _OP_TYPES or not f or f[0] == ":":
        return None
    if type(process) is str and process[:1] == ":":
        return None
    value: Any = d.value
    if f in DATA_FS and process != NEMESIS:
        if value is None:
            value = []
        elif value:
            value = _mops(value)
            if value is None:
                return None
    elif value:  # decoded as micro-ops, but this op's value is to be kept as written
        return None
    index: Any = d.index
    if index is _UNSET:
        index = fallback_index
    t = d.time
    if type(t) is not int:
        t = int(t)
    extra: dict[str, Any] = {}
    if d.node is not _UNSET:
        extra["node"] = d.node
    if d.poll_ms is not _UNSET:
        extra["poll_ms"] = d.poll_ms
    if d.rebalance_log is not _UNSET:
        extra["rebalance_log"] = d.rebalance_log
    if d.seek_to_beginning is not _UNSET:
        extra["seek_to_beginning"] = d.seek_to_beginning
    return Op(index, t, process, typ, f, value, d.error, extra)
