"""The op model of a ktrial history (docs/history-format.md).

An op is one line of `history.jsonl`. Data ops (`send`, `poll`, `txn`) carry a
list of micro-ops as their value; this module turns the loose JSON shapes into
a small set of tuples that every analysis can rely on:

* ``Send(key, value, offset)`` — ``["send", k, v]`` (invoke, or a completion
  whose offset is unknown) or ``["send", k, [offset, v]]`` (completion);
  ``offset`` is ``None`` when unknown.
* ``Poll(records)`` — ``["poll"]`` (invoke: ``records`` is ``None``) or
  ``["poll", {k: [[offset, v], ...]}]`` (completion); keys become strings.

Nothing here does I/O; the JSONL reader and writer live in :mod:`.jsonl`.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field
from operator import itemgetter
from sys import intern as _intern
from typing import Any, NamedTuple

OP_TYPES = ("invoke", "ok", "fail", "info")
DATA_FS = ("send", "poll", "txn")
NEMESIS = "nemesis"
# The nemesis op that begins an activation of each of ktrial's fault families (the
# checker counts injected faults by it; `ktrial faults export` replays from it).
FAULT_START_F: dict[str, str] = {
    "start-partition": "partition",
    "start-loss": "loss",
    "kill": "kill",
    "stop": "stop",
    "pause": "pause",
    "start-rolling-restart": "restart",
    "memory-squeeze": "memory",
    "toxic-on": "toxic",
    "start-control": "control",
    # composite faults (nemesis/composite.py): one start op each, then their step ops
    "start-partition-then-kill": "partition-then-kill",
    "start-kill-during-commit": "kill-during-commit",
    "start-rolling-isr-restart": "rolling-isr-restart",
    "start-isolate-leader-restart-stale": "isolate-leader-restart-stale",
    "start-asymmetric-link": "asymmetric-link",
}
# Every f a client op may have: the data ops, the consumer ops, a client's crash, and
# Jepsen's debug-topic-partitions (read and ignored). Any other f of a client op is
# refused by the readers (or skipped and counted, when asked to), never silently dropped.
CLIENT_FS = (*DATA_FS, "assign", "subscribe", "crash", "debug-topic-partitions")
# The process of ops written without one (or with null): Jepsen reads them as one
# process, nil; ktrial names it so (a history's own "anonymous" process is the same one).
ANONYMOUS = "anonymous"
# Lists and maps in an op's free-form fields (error, a nemesis value, extra fields) may
# nest this deep: far beyond any real op, well within what JSON writers and the report
# can write back (orjson stops at 255 levels).
MAX_DEPTH = 100
# The longest line (JSONL) or op (EDN text) a reader accepts: a poll of a million
# records is about 20 MiB; reading an op takes about ten times its size in memory.
MAX_OP_BYTES = 64 * 1024 * 1024

Key = str
Value = int | str
Offset = int | None


class Send(NamedTuple):
    key: Key
    value: Value
    offset: Offset


class Poll(NamedTuple):
    # key -> [[offset, value], ...] in the order the client returned them (pairs are
    # 2-element lists as decoded from JSON, or tuples when built in code); None for
    # the invoke form ["poll"].
    records: dict[Key, list[Any]] | None


Mop = Send | Poll


class FormatError(ValueError):
    """A value that does not have the shape docs/history-format.md requires."""


class UnknownFError(FormatError):
    """A client op whose f ktrial does not know (`Poll`, `produce`)."""

    def __init__(self, f: str) -> None:
        self.f = f
        super().__init__(
            f"client op with unknown f {short(f)} (ktrial knows {', '.join(CLIENT_FS)}; "
            'nemesis ops, process "nemesis", may have any f): rename it to one of these '
            "if it is one (send, poll and txn carry micro-ops), or pass --ignore-unknown-f "
            "to skip such ops with a warning"
        )


_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 12
_REPR.maxstring = _REPR.maxother = 120
_REPR.maxlong = 60


def short(x: Any) -> str:
    """repr(x) cut to a few hundred characters (reprlib: any size or depth, no recursion
    error), for messages that quote the input."""
    return _REPR.repr(x)


_NESTS = (list, dict)


def too_deep(x: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and dicts nest more than `limit` levels in x (walked without
    recursion, so any depth is safe)."""
    if type(x) not in _NESTS:
        return False
    todo: list[tuple[Any, int]] = [(x, 1)]
    pop, push = todo.pop, todo.append
    while todo:
        v, d = pop()
        if d > limit:
            return True
        for y in v.values() if type(v) is dict else v:
            if type(y) in _NESTS:
                push((y, d + 1))
    return False


@dataclass(slots=True)
class Op:
    """One history op. `value` of data ops is a list of :data:`Mop`."""

    index: int
    time: int
    process: int | str
    type: str
    f: str
    value: Any = None
    error: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_client(self) -> bool:
        return self.process != NEMESIS

    @property
    def is_data(self) -> bool:
        return self.f in DATA_FS and self.process != NEMESIS

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to history.jsonl for this op."""
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": encode_value(self.f, self.value) if self.is_data else self.value,
        }
        if self.error is not None:
            d["error"] = self.error
        if self.extra:
            d.update(self.extra)
        return d


_INT_KEYS: dict[int, str] = {}


def _int_key(k: int) -> str:
    """str(k), shared: a history names a handful of keys millions of times."""
    s = _INT_KEYS.get(k)
    if s is None:
        s = str(k)
        if len(_INT_KEYS) < 65536:
            _INT_KEYS[k] = s
    return s


def norm_key(k: Any) -> Key:
    """Keys may be written as ints or strings; readers normalise them to strings."""
    if isinstance(k, bool) or not isinstance(k, (int, str)):
        check_int64(k, "key")
        raise FormatError(f"key {short(k)} must be an integer or a string")
    return str(k)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _too_big(x: Any) -> bool:
    """An integer beyond 64 bits (JSON parsers hand those over as floats)."""
    if isinstance(x, float):
        return x.is_integer() and not INT64_MIN <= x <= INT64_MAX
    return isinstance(x, int) and not INT64_MIN <= x <= INT64_MAX


def check_int64(x: Any, what: str) -> None:
    """Times, offsets and integer values must fit in 64 bits (Kafka's and numpy's ints)."""
    if _too_big(x):
        raise FormatError(
            f"{what} {short(x)} is an integer beyond 64 bits: ktrial reads times, offsets and "
            "integer values as signed 64-bit integers (write such a value as a string)"
        )


def _norm_value(v: Any, what: str) -> Value:
    check_int64(v, what)
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise FormatError(f"{what} {short(v)} must be an integer or a string")
    return v


def _norm_offset(o: Any, what: str) -> Offset:
    if o is None:
        return None
    check_int64(o, what)
    if isinstance(o, bool) or not isinstance(o, int):
        raise FormatError(f"{what} {short(o)} must be an integer or null")
    # Queen's facade answers -1 for transactional sends: that means "unknown".
    return None if o < 0 else o


_OFFSET_TYPES = frozenset({int, type(None)})
_VALUE_TYPES = frozenset({int, str})
_LIST = frozenset({list})
_TWO = frozenset({2})
_first = itemgetter(0)
_second = itemgetter(1)


class Records(list):  # type: ignore[type-arg]
    """A poll's records of one key, as decoded, with their offsets and values pulled out.

    The reader validates a poll's records in bulk and has the two columns in hand
    anyway; keeping them saves the checker doing it again for millions of records.
    It is an ordinary list of [offset, value] pairs to everyone else.
    """

    __slots__ = ("offsets", "values")
    offsets: list[Any]
    values: list[Any]

    # The fast reader (fastread.py) keeps its pairs as the tuples it decoded, the
    # strict one as lists: equal records compare equal whichever reader made them.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, list):
            return NotImplemented
        return len(self) == len(other) and list(map(tuple, self)) == list(map(tuple, other))

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]


def _fast_records(pairs: list[Any]) -> list[Any] | None:
    """Validate a poll's records with C-level passes; None if any is unusual.

    Polls carry most of a history's bytes (tens of millions of records), so the
    common shape -- lists of two: an int or null offset, an int or string value,
    no negative offset -- is checked in bulk and the decoded lists are kept as they
    are; anything else takes the record-by-record path, which says what is wrong.
    """
    if not pairs:
        return []
    try:
        if set(map(type, pairs)) != _LIST or set(map(len, pairs)) != _TWO:
            return None
    except TypeError:
        return None
    offsets = list(map(_first, pairs))
    otypes = set(map(type, offsets))
    if not otypes <= _OFFSET_TYPES:
        return None
    values = list(map(_second, pairs))
    vtypes = set(map(type, values))
    if not vtypes <= _VALUE_TYPES:
        return None
    if type(None) in otypes:
        if any(o is not None and (o < 0 or o > INT64_MAX) for o in offsets):
            return None
    elif min(offsets) < 0 or max(offsets) > INT64_MAX:
        return None
    if int in vtypes:  # only a reader of arbitrary-size ints (EDN) can exceed 64 bits
        ints = values if str not in vtypes else [v for v in values if type(v) is int]
        if min(ints) < INT64_MIN or max(ints) > INT64_MAX:
            return None
    out = Records(pairs)
    out.offsets = offsets
    out.values = values
    return out


def _record(p: Any, k: Any) -> list[Any]:
    if not isinstance(p, (list, tuple)) or len(p) != 2:
        raise FormatError(f"poll record {short(p)} of key {short(k)} must be [offset, value]")
    return [_norm_offset(p[0], "polled offset"), _norm_value(p[1], "polled value")]


def parse_mop(m: Any) -> Mop:
    """Parse one micro-op from its JSON shape; raise FormatError saying what is wrong."""
    if type(m) is list and len(m) == 3 and m[0] == "send":
        # Fast path for the most common shapes; anything odd takes the slow path.
        k, v = m[1], m[2]
        tk = type(k)
        if tk is str or tk is int:
            k = _int_key(k) if tk is int else _intern(k)
            tv = type(v)
            if tv is str or (tv is int and INT64_MIN <= v <= INT64_MAX):
                return Send(k, v, None)
            if tv is list and len(v) == 2:
                o, x = v
                tx = type(x)
                if (
                    (tx is str or (tx is int and INT64_MIN <= x <= INT64_MAX))
                    and type(o) is int
                    and 0 <= o <= INT64_MAX
                ):
                    return Send(k, x, o)
    if not isinstance(m, list) or not m:
        raise FormatError(f'micro-op {short(m)} must be a non-empty list like ["send", k, v]')
    f = m[0]
    if isinstance(f, str) and f.startswith(":"):
        f = f[1:]
    if f == "send":
        if len(m) != 3:
            raise FormatError(
                f'send micro-op {short(m)} must be ["send", key, value] '
                'or ["send", key, [offset, value]]'
            )
        key = norm_key(m[1])
        v = m[2]
        if isinstance(v, list):
            if len(v) != 2:
                raise FormatError(f"send result {short(v)} must be [offset, value]")
            return Send(key, _norm_value(v[1], "sent value"), _norm_offset(v[0], "offset"))
        return Send(key, _norm_value(v, "sent value"), None)
    if f == "poll":
        if len(m) == 1 or (len(m) == 2 and m[1] is None):
            return Poll(None)
        if len(m) != 2:
            raise FormatError(
                f'poll micro-op {short(m)} must be ["poll"] or '
                '["poll", {key: [[offset, value], ...]}]'
            )
        recs = m[1]
        if not isinstance(recs, dict):
            raise FormatError(
                f"poll result {short(recs)} must be a map of key -> [[offset, value], ...]"
            )
        out: dict[Key, list[Any]] = {}
        for k, pairs in recs.items():
            if not isinstance(pairs, list):
                raise FormatError(
                    f"poll records of key {short(k)} must be a list of [offset, value]"
                )
            lst = _fast_records(pairs)
            if lst is None:
                lst = [_record(p, k) for p in pairs]
            key = _intern(k) if type(k) is str else norm_key(k)
            if key in out:  # the same key spelt twice (1 and "1"): plain list, no columns
                out[key] = [*out[key], *lst]
            else:
                out[key] = lst
        return Poll(out)
    raise FormatError(
        f'micro-op {short(m)}: unknown function {short(m[0])} (expected "send" or "poll")'
    )


def parse_mops(value: Any) -> list[Mop]:
    if value is None:
        return []
    if type(value) is not list:
        raise FormatError(f"value {short(value)} of a data op must be a list of micro-ops")
    out: list[Mop] = []
    append = out.append
    for m in value:
        # Inline fast path for the commonest micro-op, ["send", k, [offset, v]]: a
        # history holds millions of them. Anything else goes through parse_mop.
        if type(m) is list and len(m) == 3 and m[0] == "send":
            k, v = m[1], m[2]
            if type(k) is int and type(v) is list and len(v) == 2:
                o, x = v
                if (
                    type(o) is int
                    and 0 <= o <= INT64_MAX
                    and type(x) is int
                    and INT64_MIN <= x <= INT64_MAX
                ):
                    append(Send(_INT_KEYS.get(k) or _int_key(k), x, o))
                    continue
        append(parse_mop(m))
    return out


def encode_mop(m: Mop) -> list[Any]:
    if isinstance(m, Send):
        if m.offset is None:
            return ["send", m.key, m.value]
        return ["send", m.key, [m.offset, m.value]]
    if m.records is None:
        return ["poll"]
    return ["poll", {k: [[o, v] for o, v in recs] for k, recs in m.records.items()}]


def encode_value(f: str, value: Any) -> Any:
    """Data op values may be given as Mop tuples or already in JSON shape."""
    if not isinstance(value, list):
        return value
    return [encode_mop(m) if isinstance(m, (Send, Poll)) else m for m in value]


# ------------------------------------------------------------- data ops as effects

# A send: (key, value, offset or None, micro-op index within the op)
Effect = tuple[Key, Value, Offset, int]
# A poll's records of one key: (micro-op index, key, offsets, values), never empty.
ReadRun = tuple[int, Key, list[Offset], list[Value]]


class Flat(NamedTuple):
    """A client data op (send, poll, txn) reduced to its effects: what the checker needs.

    The checker's fast reader decodes history lines straight into this shape, so a
    million-op history never builds :class:`Op`, :class:`Send` or :class:`Poll` objects;
    :func:`flatten` gives the same for an :class:`Op`. ``extra`` is ``None`` when the
    line has no field beyond the documented ones.
    """

    index: int  # type: ignore[assignment]  # the op's index, not tuple.index
    time: int
    process: int | str
    type: str
    f: str
    writes: tuple[Effect, ...]
    reads: list[ReadRun]
    error: Any
    extra: dict[str, Any] | None


def flatten(op: Op) -> Flat:
    """The effects of a client data op (its value: a list of :data:`Mop`)."""
    writes: list[Effect] = []
    reads: list[ReadRun] = []
    value = op.value
    for i, m in enumerate(value if isinstance(value, list) else ()):
        if type(m) is Send:
            writes.append((m.key, m.value, m.offset, i))
        elif type(m) is Poll and m.records:
            for k, recs in m.records.items():
                if not recs:
                    continue
                offs = getattr(recs, "offsets", None)
                if offs is None:
                    reads.append((i, k, list(map(_first, recs)), list(map(_second, recs))))
                else:
                    reads.append((i, k, offs, recs.values))  # type: ignore[attr-defined]
    return Flat(
        op.index,
        op.time,
        op.process,
        op.type,
        op.f,
        tuple(writes),
        reads,
        op.error,
        op.extra or None,
    )
