"""A fast path for reading history.jsonl: typed decoding with msgspec, many lines per call.

Why: validating a 1,000,000-op history in Python cost 3.5-4.5x the bare JSON
parse (a Python check per micro-op and per record). msgspec decodes lines
straight into typed structs and checks the shapes in C; decoding a whole block
of lines in one call (``decode_lines``) costs less than parsing them one by one.

It only ever handles the common, well-formed shape: a line it cannot decode or
convert (anything unusual -- Jepsen keyword spellings, fields beyond the
documented ones, negative offsets, a malformed op) makes the caller read that
block line by line, and such a line with the strict reader in :mod:`.jsonl`,
which also says what is wrong. So both paths give identical ops and the slow
one owns every error message. msgspec is optional: without it nothing here
decodes anything and the strict reader reads every line.

Two conversions of a decoded line: :func:`to_op` gives the :class:`Op` the rest
of ktrial reads; :func:`to_flat` gives the checker a client data op as a
:class:`Flat` (its effects, no Op/Send/Poll objects) and anything else as an Op.
:func:`op_block` and :func:`flat_block` convert a whole decoded block the same way,
all or nothing. Reading a 1,000,000-op history, the conversion cost more than the
decoding, so :func:`flat_block` is one loop with no call per op or micro-op.
"""

from __future__ import annotations

import re
from operator import itemgetter
from sys import intern as _intern
from typing import Annotated, Any

from .model import (
    CLIENT_FS,
    DATA_FS,
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    NEMESIS,
    OP_TYPES,
    Effect,
    Flat,
    Op,
    Poll,
    ReadRun,
    Records,
    Send,
)

try:  # an accelerator only: the strict reader handles everything without it
    import msgspec
except ImportError:  # pragma: no cover - exercised only where msgspec is absent
    msgspec = None  # type: ignore[assignment]

_OP_TYPES = frozenset(OP_TYPES)
_DATA_FS = frozenset(DATA_FS)
_CLIENT_FS = frozenset(CLIENT_FS)
_LISTED_KEYS = frozenset({"assign", "subscribe"})
_first = itemgetter(0)
_second = itemgetter(1)
_tnew = tuple.__new__


class _Unusual(Exception):
    """A line the strict reader must read (it says what is wrong, if anything)."""


class _Keys(dict[int | str, str]):
    """A micro-op's key as the readers spell it -- str(k) of an int, sys.intern of a
    str -- shared: a history names a handful of keys millions of times. `_KEYS[k]`
    costs one dict lookup; an int key beyond 64 bits raises _Unusual (the strict
    reader's JSON parser reads it as a float)."""

    def __missing__(self, k: int | str) -> str:
        if isinstance(k, str):
            s = _intern(k)
        elif INT64_MIN <= k <= INT64_MAX:
            s = str(k)
        else:
            raise _Unusual
        if len(self) < 65536:
            self[k] = s
        return s


_KEYS = _Keys()


if msgspec is not None:
    _UNSET: Any = msgspec.UNSET
    # Integers beyond 64 bits are the strict reader's business (it says why), as is
    # a negative offset in a poll; a send's (Queen's -1 for "unknown") means null.
    _Int = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
    _Offset = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
    _Time = _Int | Annotated[float, msgspec.Meta(gt=INT64_MIN, lt=INT64_MAX)]

    class _SendM(msgspec.Struct, array_like=True, tag="send", gc=False, forbid_unknown_fields=True):
        """["send", key, value] or ["send", key, [offset, value]]."""

        key: int | str
        # not _Int | str | tuple[...]: that union made msgspec 0.19-0.23 crash the
        # garbage collector (segfault); the invoke form's int is range-checked below
        value: int | str | tuple[_Int | None, _Int | str]

    class _PollM(msgspec.Struct, array_like=True, tag="poll", gc=False, forbid_unknown_fields=True):
        """["poll"] or ["poll", {key: [[offset, value], ...]}] (or ["poll", null])."""

        records: dict[str, list[tuple[_Offset | None, _Int | str]]] | None = None

    class _Line(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
        """The documented fields; any other field sends the line to the strict reader,
        which keeps it in Op.extra. `value` holds micro-ops for data ops, keys for
        assign/subscribe, and what nemesis ops write; which one is checked on
        conversion, once `f` and `process` are known.

        The fields are in the order ktrial writes them: msgspec looks each key up
        starting after the field the previous key matched. type, process and index
        are checked on conversion, not here: a line may repeat a field (the last one
        counts, for both readers), and a decoder that refused an earlier spelling,
        such as ":ok", would send the line to the strict reader."""

        index: int | msgspec.UnsetType = msgspec.UNSET
        time: _Time = 0
        process: int | str
        type: str
        f: str
        value: list[_SendM | _PollM | int | str] | dict[str, Any] | str | None = None
        error: Any = None
        node: Any = msgspec.UNSET
        poll_ms: Any = msgspec.UNSET
        rebalance_log: Any = msgspec.UNSET
        seek_to_beginning: Any = msgspec.UNSET

    _decoder = msgspec.json.Decoder(_Line)
    _decode = _decoder.decode
    _decode_lines = _decoder.decode_lines
    _Error: Any = msgspec.MsgspecError
    _STRUCTS: tuple[type, ...] = (_SendM, _PollM)
else:  # pragma: no cover
    _decode = _decode_lines = None
    _Error = Exception
    _STRUCTS = ()


# Two JSON objects with only whitespace between them: never inside one well-formed op
# line outside a string (it would need a comma), so a block holding this may have two
# ops on one line (or ops split by a bare CR), which decode_lines would accept.
_ADJACENT = re.compile(rb"}[ \t\r]*{")


def decode_block(buf: bytes) -> list[Any] | None:
    """The decoded lines of a block of complete lines, or None if any is unusual.

    decode_lines reads whitespace-separated JSON values, not lines: so the block is
    taken only if it gave one value per line (a blank line, or an op spread over
    several lines, gives fewer) and no line can hold two ops (`_ADJACENT`).
    """
    if _decode_lines is None:
        return None
    try:
        out: list[Any] = _decode_lines(buf)
    except (_Error, RecursionError):  # nested too deep: the strict reader says where
        return None
    if len(out) != buf.count(b"\n") or _ADJACENT.search(buf):
        return None
    return out


def decode_line(raw: bytes) -> Any:
    """One decoded line, or None if it is unusual."""
    if _decode is None:
        return None
    try:
        return _decode(raw)
    except (_Error, RecursionError):
        return None


def _send(m: Any) -> tuple[str, Any, int | None]:
    """(key, value, offset) of a decoded send micro-op; a negative offset (Queen's -1)
    is unknown. Raises _Unusual for an int value beyond 64 bits (the strict reader's).
    (:func:`flat_block` has this inline.)"""
    v = m.value
    if type(v) is tuple:
        o = v[0]
        return _KEYS[m.key], v[1], None if o is not None and o < 0 else o
    if type(v) is int and not INT64_MIN <= v <= INT64_MAX:
        raise _Unusual
    return _KEYS[m.key], v, None


def _index_time(d: Any, fallback_index: int) -> tuple[int, int]:
    index = d.index
    t = d.time
    return (fallback_index if index is _UNSET else index), (t if type(t) is int else int(t))


def _header(d: Any) -> bool:
    """type, f and process have the plain spellings (no Jepsen keywords)."""
    f = d.f
    process = d.process
    index = d.index
    return (
        d.type in _OP_TYPES
        and f != ""
        and f[0] != ":"
        and (process[:1] != ":" if type(process) is str else INT64_MIN <= process <= INT64_MAX)
        and (index is _UNSET or INT64_MIN <= index <= INT64_MAX)
    )


def _extra(d: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if d.node is not _UNSET:
        extra["node"] = d.node
    if d.poll_ms is not _UNSET:
        extra["poll_ms"] = d.poll_ms
    if d.rebalance_log is not _UNSET:
        extra["rebalance_log"] = d.rebalance_log
    if d.seek_to_beginning is not _UNSET:
        extra["seek_to_beginning"] = d.seek_to_beginning
    return extra


def _mops(value: list[Any]) -> list[Any] | None:
    """Send/Poll micro-ops of a data op, or None if the value holds anything else."""
    out: list[Any] = []
    append = out.append
    for m in value:
        tm = type(m)
        if tm is _SendM:
            append(_tnew(Send, _send(m)))
        elif tm is _PollM:
            recs = m.records
            if recs is None:
                append(_tnew(Poll, (None,)))
                continue
            out_r: dict[str, list[Any]] = {}
            for rk, pairs in recs.items():
                lst = Records(pairs)  # (offset, value) tuples; Records compare equal to lists
                lst.offsets = list(map(_first, pairs))
                lst.values = list(map(_second, pairs))
                out_r[_intern(rk)] = lst
            append(_tnew(Poll, (out_r,)))
        else:
            return None
    return out


def _big_int(x: Any) -> bool:
    """Whether an int beyond 64 bits, or lists and maps nested more than MAX_DEPTH deep,
    hide in x: the strict reader's JSON parser reads such ints as floats, and it refuses
    such nesting (saying so), so such a line is the strict reader's, to read it alike.
    Walked without recursion: any depth msgspec decodes is safe."""
    t = type(x)
    if t is int:
        return not INT64_MIN <= x <= INT64_MAX
    if t is not list and t is not dict:
        return False
    todo: list[tuple[Any, int]] = [(x, 1)]
    while todo:
        v, depth = todo.pop()
        for y in v.values() if type(v) is dict else v:
            ty = type(y)
            if ty is int:
                if not INT64_MIN <= y <= INT64_MAX:
                    return True
            elif ty is list or ty is dict:
                if depth >= MAX_DEPTH:
                    return True
                todo.append((y, depth + 1))
    return False


def _odd_extra(extra: dict[str, Any]) -> bool:
    """Whether an extra field is the strict reader's (see _big_int)."""
    return any(map(_big_int, extra.values()))


def _plain_value(d: Any) -> tuple[bool, Any]:
    """(usable, value) of a line that is not a client data op: kept as written, with
    assign/subscribe keys as strings; unusable if it decoded into micro-op structs."""
    value = d.value
    if type(value) is dict and _big_int(value):
        return False, None
    if type(value) is list:
        for x in value:
            if isinstance(x, _STRUCTS):
                return False, None
        if _big_int(value):
            return False, None
        if d.f in _LISTED_KEYS:
            value = [str(k) for k in value]
    return True, value


def to_op(d: Any, fallback_index: int) -> Op | None:
    """The Op of a decoded line, or None if it is unusual (use the strict reader)."""
    try:
        return _to_op(d, fallback_index)
    except _Unusual:
        return None


def _to_op(d: Any, fallback_index: int) -> Op | None:
    if not _header(d) or (d.error is not None and _big_int(d.error)):
        return None
    if d.process != NEMESIS and d.f not in _CLIENT_FS:
        return None  # an unknown f: the strict reader refuses it, or counts and skips it
    value: Any = d.value
    if d.f in _DATA_FS and d.process != NEMESIS:
        if value is None:
            value = []
        elif type(value) is not list:
            return None
        elif value:
            value = _mops(value)
            if value is None:
                return None
    else:
        ok, value = _plain_value(d)
        if not ok:
            return None
    index, t = _index_time(d, fallback_index)
    extra = _extra(d)
    if extra and _odd_extra(extra):
        return None
    return Op(index, t, d.process, d.type, d.f, value, d.error, extra)


def fast_op(raw: bytes, fallback_index: int) -> Op | None:
    """The Op of one line when it has the common shape, else None (use the strict reader)."""
    d = decode_line(raw)
    return None if d is None else to_op(d, fallback_index)


def op_block(lines: list[Any], first_index: int) -> list[Op] | None:
    """The Ops of a block's decoded lines (the first one's fallback index given), or
    None if any line is unusual (read the block line by line)."""
    out: list[Op] = []
    append = out.append
    n = first_index
    for d in lines:
        op = to_op(d, n)
        if op is None:
            return None
        append(op)
        n += 1
    return out


def to_flat(d: Any, fallback_index: int) -> Flat | Op | None:
    """A decoded line for the checker: a client data op as a Flat, anything else as an
    Op; None if it is unusual (use the strict reader)."""
    out = flat_block([d], fallback_index)
    return None if out is None else out[0]


def flat_block(lines: list[Any], first_index: int) -> list[Flat | Op] | None:
    """:func:`to_flat` of each of a block's decoded lines (the first one's fallback
    index given), or None if any line is unusual (read the block line by line).

    One loop, no call per client data op or micro-op: this conversion is most of the
    cost of reading a history. It checks what :func:`_to_op` checks for a data op,
    with its value turned into effects instead of Send/Poll micro-ops:
    a send is (key, value, offset or None, micro-op index) -- a negative offset
    (Queen's -1) is unknown -- and each key a poll read records of is (micro-op
    index, key, offsets, values).
    """
    out: list[Flat | Op] = []
    append = out.append
    keys = _KEYS
    n = first_index
    try:
        for d in lines:
            f = d.f
            process = d.process
            if f not in _DATA_FS or process == NEMESIS:  # rare: assign, nemesis ops
                op = _to_op(d, n)
                if op is None:
                    return None
                append(op)
                n += 1
                continue
            # _header's checks (f is send, poll or txn): plain spellings, 64-bit ints
            typ = d.type
            if typ not in _OP_TYPES:
                return None
            if type(process) is str:
                if process[:1] == ":":
                    return None
            elif not INT64_MIN <= process <= INT64_MAX:
                return None
            index = d.index
            if index is _UNSET:
                index = n
            elif not INT64_MIN <= index <= INT64_MAX:
                return None
            error = d.error
            if error is not None and _big_int(error):
                return None
            value = d.value
            reads: list[ReadRun] = []
            if type(value) is list:
                sends: list[Effect] = []
                i = 0  # the micro-op's index in the op
                for m in value:
                    tm = type(m)
                    if tm is _SendM:
                        v = m.value
                        if type(v) is tuple:  # the completion's [offset, value]
                            o, v = v
                            sends.append(
                                (keys[m.key], v, None if o is not None and o < 0 else o, i)
                            )
                        elif type(v) is int and not INT64_MIN <= v <= INT64_MAX:
                            return None  # the strict reader's JSON parser reads a float
                        else:
                            sends.append((keys[m.key], v, None, i))
                    elif tm is _PollM:
                        recs = m.records
                        if recs:
                            for rk, pairs in recs.items():
                                if pairs:  # (offset, value) tuples
                                    offsets = list(map(_first, pairs))
                                    reads.append(
                                        (i, _intern(rk), offsets, list(map(_second, pairs)))
                                    )
                    else:  # a bare int or str: not a micro-op
                        return None
                    i += 1  # noqa: SIM113 (enumerate is slower here)
                writes = tuple(sends)
            elif value is None:
                writes = ()
            else:
                return None
            t = d.time
            extra = None
            if (
                d.node is not _UNSET
                or d.poll_ms is not _UNSET
                or d.rebalance_log is not _UNSET
                or d.seek_to_beginning is not _UNSET
            ):
                extra = _extra(d)
                if _odd_extra(extra):
                    return None
            append(
                _tnew(
                    Flat,
                    (
                        index,
                        t if type(t) is int else int(t),
                        process,
                        typ,
                        f,
                        writes,
                        reads,
                        error,
                        extra,
                    ),
                )
            )
            n += 1
    except _Unusual:  # an int key beyond 64 bits
        return None
    return out
