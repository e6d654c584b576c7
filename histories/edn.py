"""Jepsen's ``history.edn``: a small EDN reader and the conversion to ktrial ops.

Jepsen's Kafka test (``jepsen.tests.kafka``, used by jepsen-io/redpanda) stores
its history as EDN, one op per line (``prn`` of each op), e.g.::

    {:type :invoke, :f :send, :value [[:send 3 5]], :time 1234, :process 0, :index 0}
    #jepsen.history.Op{:index 1, :time 1300, :type :ok, :process 0, :f :poll,
                       :value [[:poll {3 [[0 5] [1 6]]}]], :rebalance-log [...]}

The op model is the same as ktrial's (DESIGN.md section 2 borrowed it), so an op
map only has to become JSON-shaped data and go through the JSONL reader's
validation (:func:`.jsonl.op_from_json`); ``ktrial check`` then analyses it like
one of its own histories. The translation:

* keywords become strings without the colon (``:ok`` -> ``"ok"``, ``:nemesis``
  -> ``"nemesis"``), symbols and characters become strings, sets and lists
  become lists, ratios and big decimals become floats, ``N`` integers ints;
* map keys become strings (``{3 [...]}`` -> ``{"3": [...]}``; ktrial normalises
  keys to strings anyway);
* op fields are snake_cased: ``:rebalance-log`` -> ``rebalance_log``,
  ``:seek-to-beginning?`` -> ``seek_to_beginning``, ``:poll-ms`` -> ``poll_ms``;
* tagged literals -- ``#jepsen.history.Op{...}`` records, ``#object[...]``,
  ``#error {...}``, ``#inst "..."`` -- are replaced by the value they tag.

A file holding one vector of op maps (``[{...} {...}]``) is read too, streaming
its elements. Malformed input raises :class:`.jsonl.HistoryError` naming the
file and line, never a traceback.

The reader is written here (about 300 lines, no dependency): it only needs the
EDN that Clojure's printer produces, and it must locate errors by line.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from .jsonl import HistoryError, iter_history, op_from_json
from .model import FormatError, Op, encode_value

__all__ = [
    "EdnError",
    "dump_edn",
    "dump_edn_op",
    "is_edn_history",
    "iter_any_history",
    "iter_edn_forms",
    "iter_edn_history",
    "loads_edn",
    "op_from_edn",
]


class EdnError(ValueError):
    """Malformed EDN at character offset `pos` of the text being read."""

    def __init__(self, reason: str, pos: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pos = pos


class _Incomplete(Exception):
    """The text ended inside a form: the streaming reader needs more lines."""

    def __init__(self, what: str, start: int) -> None:
        super().__init__(what)
        self.what = what
        self.start = start


# ------------------------------------------------------------------------------ reader

_NOTHING: Any = object()  # what `#_ form` reads as: skipped by its container

_WS = re.compile(r"(?:[\s,]+|;[^\n]*)*")
_ATOM = re.compile(r"[^\s,;()\[\]{}\"\\]+")
_STRING = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_INT = re.compile(r"[+-]?\d+N?")
_FLOAT = re.compile(r"[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?M?")
_RATIO = re.compile(r"([+-]?\d+)/(\d+)")
_HEX = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]+)N?")
_RADIX = re.compile(r"([+-]?)(\d{1,2})[rR]([0-9a-zA-Z]+)")
_CHAR = re.compile(
    r"\\(newline|space|tab|return|backspace|formfeed|u[0-9a-fA-F]{4}|o[0-7]{1,3}|.)", re.DOTALL
)
_CHAR_NAMES = {
    "newline": "\n",
    "space": " ",
    "tab": "\t",
    "return": "\r",
    "backspace": "\b",
    "formfeed": "\f",
}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f", "'": "'"}
_CLOSERS = {"]": "vector", ")": "list", "}": "map"}
_SPECIAL_FLOATS = {"Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}


def _skip(s: str, i: int) -> int:
    """Index of the first character at or after `i` that is not whitespace or comment."""
    m = _WS.match(s, i)
    return m.end() if m else i


def _unescape(m: re.Match[str]) -> str:
    e = m.group(1)
    if len(e) == 5:
        return chr(int(e[1:], 16))
    try:
        return _ESCAPES[e]
    except KeyError:
        raise ValueError(e) from None


def _string(s: str, i: int) -> tuple[str, int]:
    m = _STRING.match(s, i)
    if m is None:
        raise _Incomplete("string", i)
    body = m.group(1)
    if "\\" in body:
        try:
            body = _ESCAPE.sub(_unescape, body)
        except ValueError as e:
            raise EdnError(f'unknown escape "\\{e}" in a string', i) from None
    return body, m.end()


def _atom(text: str, i: int) -> Any:
    """A number, nil/true/false, or a symbol (returned as its name)."""
    c = text[0]
    if c.isdigit() or (len(text) > 1 and c in "+-" and text[1].isdigit()):
        if _INT.fullmatch(text):
            return int(text.rstrip("N"))
        if _FLOAT.fullmatch(text):
            return float(text.rstrip("M"))
        m = _RATIO.fullmatch(text)
        if m:
            den = int(m.group(2))
            if den == 0:
                raise EdnError(f"ratio {text} divides by zero", i)
            return int(m.group(1)) / den
        m = _HEX.fullmatch(text)  # #object[... 0x6f1b2c3d ...] identity hashes
        if m:
            return int(m.group(1) + m.group(2), 16)
        m = _RADIX.fullmatch(text)
        if m and 2 <= int(m.group(2)) <= 36:
            try:
                return int(m.group(1) + m.group(3), int(m.group(2)))
            except ValueError:
                pass
        raise EdnError(f"invalid number {text!r}", i)
    if text == "nil":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    return text


def map_key(k: Any) -> str:
    """Map keys become strings: ktrial's keys, and JSON's, are strings."""
    if type(k) is str:
        return k
    if k is None or isinstance(k, (bool, int, float, list, dict)):
        return dump_edn(k)
    return str(k)


def _coll(s: str, i: int, close: str, what: str) -> tuple[list[Any], int]:
    """Read forms up to `close`; `i` is just past the opening delimiter."""
    start = i - 1
    out: list[Any] = []
    n = len(s)
    while True:
        i = _skip(s, i)
        if i >= n:
            raise _Incomplete(what, start)
        c = s[i]
        if c == close:
            return out, i + 1
        if c in _CLOSERS:
            raise EdnError(f"unexpected {c!r} inside a {what}", i)
        v, i = _read(s, i)
        if v is not _NOTHING:
            out.append(v)


def _map(items: list[Any], start: int, ns: str | None = None) -> dict[str, Any]:
    if len(items) % 2:
        raise EdnError("a map needs an even number of forms (key value ...)", start)
    d: dict[str, Any] = {}
    it = iter(items)
    for k in it:
        key = map_key(k)
        if ns is not None and type(k) is str and "/" not in key:
            key = f"{ns}/{key}"
        if key in d:
            raise EdnError(f"map has the key {key!r} twice", start)
        d[key] = next(it)
    return d


def _dispatch(s: str, i: int) -> tuple[Any, int]:
    """`#...`: sets, discards, ##Inf, regexes, namespaced maps and tagged literals."""
    n = len(s)
    if i + 1 >= n:
        raise _Incomplete("# form", i)
    c = s[i + 1]
    if c == "{":
        return _coll(s, i + 2, "}", "set")
    if c == "_":  # discard the next form; in `#_ #_ a b` that is b (a went first)
        v, j = _NOTHING, i + 2
        while v is _NOTHING:
            j = _skip(s, j)
            if j >= n:
                raise _Incomplete("#_ discard", i)
            v, j = _read(s, j)
        return _NOTHING, j
    if c == '"':  # a regex: its backslashes are the pattern's, not escapes
        m = _STRING.match(s, i + 1)
        if m is None:
            raise _Incomplete("regex", i)
        return m.group(1), m.end()
    if c == "#":
        m = _ATOM.match(s, i + 2)
        if m is None or m.group() not in _SPECIAL_FLOATS:
            raise EdnError("## must be followed by Inf, -Inf or NaN", i)
        return _SPECIAL_FLOATS[m.group()], m.end()
    if c == ":":  # #:ns{:a 1} -- a namespaced map
        m = _ATOM.match(s, i + 2)
        if m is None:
            raise EdnError("#: must be followed by a namespace and a map", i)
        j = _skip(s, m.end())
        if j >= n:
            raise _Incomplete("namespaced map", i)
        if s[j] != "{":
            raise EdnError("#:ns must be followed by a map", j)
        items, j = _coll(s, j + 1, "}", "map")
        return _map(items, i, m.group()), j
    m = _ATOM.match(s, i + 1)
    if m is None or not (c.isalpha() or c in "._-"):
        raise EdnError(f"unknown dispatch #{c!r}", i)
    # A tagged literal: #inst "...", #jepsen.history.Op{...}, #object[...]. The tag
    # names a Clojure class or reader we do not have; its value is what matters.
    j = _skip(s, m.end())
    if j >= n:
        raise _Incomplete(f"#{m.group()} literal", i)
    return _read(s, j)


def _read(s: str, i: int) -> tuple[Any, int]:
    """Read one form starting at `i` (no leading whitespace); return it and the end."""
    c = s[i]
    if c == "{":
        items, j = _coll(s, i + 1, "}", "map")
        return _map(items, i), j
    if c == "[":
        return _coll(s, i + 1, "]", "vector")
    if c == ":":
        m = _ATOM.match(s, i + 1)
        if m is None:
            raise EdnError("a keyword needs a name after ':'", i)
        name = m.group()
        return name[1:] if name[0] == ":" else name, m.end()
    if c == '"':
        return _string(s, i)
    if c == "(":
        return _coll(s, i + 1, ")", "list")
    if c == "#":
        return _dispatch(s, i)
    if c == "\\":
        m = _CHAR.match(s, i)
        if m is None:
            raise _Incomplete("character", i)
        ch = m.group(1)
        if len(ch) == 1:
            return ch, m.end()
        if ch in _CHAR_NAMES:
            return _CHAR_NAMES[ch], m.end()
        return chr(int(ch[1:], 16 if ch[0] == "u" else 8)), m.end()
    if c == "^":  # metadata: ^{:tag x} form -- dropped
        j = _skip(s, i + 1)
        if j >= len(s):
            raise _Incomplete("metadata", i)
        _meta, j = _read(s, j)
        j = _skip(s, j)
        if j >= len(s):
            raise _Incomplete("form after metadata", i)
        return _read(s, j)
    if c in _CLOSERS:
        raise EdnError(f"unexpected {c!r} (no {_CLOSERS[c]} is open)", i)
    m = _ATOM.match(s, i)
    if m is None:  # only a lone backslash-free delimiter can get here
        raise EdnError(f"unexpected character {c!r}", i)
    return _atom(m.group(), i), m.end()


def loads_edn(text: str) -> Any:
    """Read the single EDN form in `text` (JSON-shaped result, see the module doc)."""
    i = _skip(text, 0)
    if i >= len(text):
        raise EdnError("no form: the text is empty", 0)
    try:
        v, i = _read_top(text, i)
        while v is _NOTHING:
            i = _skip(text, i)
            if i >= len(text):
                raise EdnError("no form: everything was discarded with #_", i)
            v, i = _read_top(text, i)
    except _Incomplete as e:
        raise EdnError(f"unexpected end of text inside a {e.what}", e.start) from None
    i = _skip(text, i)
    if i < len(text):
        raise EdnError("text after the form", i)
    return v


def _read_top(s: str, i: int) -> tuple[Any, int]:
    try:
        return _read(s, i)
    except RecursionError:
        raise EdnError("forms nested too deeply", i) from None


# ------------------------------------------------------------------------------ streaming

_CHUNK = 1 << 20


class _Lines:
    """Decoded text of a file, handed out in chunks that end at a line end."""

    def __init__(self, fh: IO[bytes], path: Path) -> None:
        self.fh = fh
        self.path = path
        self.line = 1  # line number of the next chunk's first character

    def read(self) -> str:
        raw = b"".join(self.fh.readlines(_CHUNK))
        if b"\x00" in raw:
            ln = self.line + raw.count(b"\n", 0, raw.index(b"\x00"))
            raise HistoryError(self.path, ln, "not EDN text (binary data); is this a history.edn?")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            ln = self.line + raw.count(b"\n", 0, e.start)
            raise HistoryError(self.path, ln, f"not UTF-8 text ({e.reason})") from None
        self.line += raw.count(b"\n")
        return text


def iter_edn_forms(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """Yield (line, form) for each top-level form of an EDN file, streaming.

    A top-level vector is unwrapped: its elements are yielded one by one, so a
    history written as one vector of ops is read without holding it whole.
    Raises HistoryError at the line where the input is malformed.
    """
    p = Path(path)
    try:
        fh = p.open("rb")
    except OSError as e:
        raise HistoryError(p, 0, f"cannot open: {e.strerror or e}") from None
    with fh:
        yield from _forms(_Lines(fh, p), p)


def _forms(src: _Lines, p: Path) -> Iterator[tuple[int, Any]]:
    buf = ""
    i = 0
    # Line number of buf[i], advanced lazily: `mark` is the offset it belongs to.
    line, mark = 1, 0
    vec_line = 0  # line of an open top-level vector, 0 when none is open
    eof = False

    def line_at(j: int) -> int:
        nonlocal line, mark
        line += buf.count("\n", mark, j)
        mark = j
        return line

    while True:
        i = _skip(buf, i)
        if i >= len(buf):
            if eof:
                break
            line_at(i)
            buf, i, mark = src.read(), 0, 0
            eof = not buf
            continue
        c = buf[i]
        if c == "[" and not vec_line:
            vec_line = line_at(i)
            i += 1
            continue
        if c == "]" and vec_line:
            vec_line = 0
            i += 1
            continue
        try:
            v, j = _read_top(buf, i)
        except _Incomplete as e:
            if eof:
                raise HistoryError(
                    p,
                    line_at(e.start),
                    f"the file ends inside a {e.what} that starts here (cut short?)",
                ) from None
            more = src.read()
            eof = not more
            line_at(i)
            buf, i, mark = buf[i:] + more, 0, 0
            continue
        except EdnError as e:
            raise HistoryError(p, line_at(e.pos), f"invalid EDN: {e.reason}") from None
        if v is not _NOTHING:
            yield line_at(i), v
        i = j
    if vec_line:
        raise HistoryError(p, vec_line, "the vector of ops opened here is never closed")


# ------------------------------------------------------------------------------ ops


def field_name(k: str) -> str:
    """Jepsen op field -> ktrial's: :rebalance-log -> rebalance_log, :seek-to-beginning? -> ..."""
    return k.rstrip("?!").replace("-", "_")


def op_from_edn(form: Any, fallback_index: int) -> Op:
    """Build an Op from one Jepsen op map; raise FormatError saying what is wrong."""
    if type(form) is not dict:
        raise FormatError(
            "an op must be an EDN map like {:type :invoke, :f :send, :value [...], ...}, "
            f"got {_kind(form)}"
        )
    return op_from_json({field_name(k): v for k, v in form.items()}, fallback_index)


def _kind(v: Any) -> str:
    if isinstance(v, list):
        return "a vector or list"
    if v is None:
        return "nil"
    return f"{type(v).__name__} {v!r}"


def iter_edn_history(path: str | os.PathLike[str]) -> Iterator[Op]:
    """Yield the ops of a Jepsen history.edn (one op map per line, or a vector of them).

    Raises HistoryError naming the file and the line of the first malformed op.
    """
    for n, (line, form) in enumerate(iter_edn_forms(path)):
        try:
            yield op_from_edn(form, n)
        except FormatError as e:
            raise HistoryError(path, line, str(e)) from None


def is_edn_history(path: str | os.PathLike[str]) -> bool:
    """True for a .edn file, or a file whose text starts like EDN ops (`{:`, `[{`, `#`, `;`).

    JSONL histories start with `{"`; anything unrecognisable goes to the JSONL
    reader, whose errors explain what a history should look like.
    """
    p = Path(path)
    if p.suffix.lower() == ".edn":
        return True
    if p.suffix.lower() in (".jsonl", ".json"):
        return False
    try:
        with p.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n,")
    if head[:1] in (b"#", b";", b"["):
        return True
    return head[:1] == b"{" and head[1:].lstrip()[:1] == b":"


def iter_any_history(path: str | os.PathLike[str]) -> Iterator[Op]:
    """Ops of a ktrial history.jsonl or a Jepsen history.edn, whichever `path` is.

    A directory is looked into for history.jsonl, then history.edn.
    """
    p = Path(path)
    if p.is_dir():
        for name in ("history.jsonl", "history.edn"):
            if (p / name).exists():
                p = p / name
                break
        else:
            raise HistoryError(p, 0, "no history.jsonl or history.edn in this directory")
    return iter_edn_history(p) if is_edn_history(p) else iter_history(p)


# ------------------------------------------------------------------------------ writer

_KEYWORD = re.compile(r"[A-Za-z*!_?<>=.][\w*+!?<>=./-]*")
_EDN_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_TO_JEPSEN = {"seek_to_beginning": "seek-to-beginning?", "end_process": "end-process?"}


def _str(s: str) -> str:
    out = "".join(_EDN_ESCAPES.get(ch, ch) for ch in s)
    return f'"{out}"'


def _key(k: Any) -> str:
    if type(k) is str and _KEYWORD.fullmatch(k) and k not in ("nil", "true", "false"):
        return ":" + k
    return dump_edn(k)


def dump_edn(v: Any, keywords: Iterable[str] = ()) -> str:
    """EDN text of a JSON-shaped value: dict keys that can be keywords are written as such.

    Strings in `keywords` are written as keywords wherever they occur as values.
    """
    kw = frozenset(keywords)
    return _dump(v, kw)


def _dump(v: Any, kw: frozenset[str]) -> str:
    if v is None:
        return "nil"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "##NaN"
        if math.isinf(v):
            return "##Inf" if v > 0 else "##-Inf"
        return repr(v)
    if isinstance(v, str):
        return ":" + v if v in kw else _str(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} {_dump(x, kw)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(_dump(x, kw) for x in v) + "]"
    if isinstance(v, (set, frozenset)):
        return "#{" + " ".join(_dump(x, kw) for x in v) + "}"
    raise TypeError(f"cannot write {type(v).__name__} {v!r} as EDN")


def dump_edn_op(op: Op) -> str:
    """One line of a Jepsen-style history.edn for `op` (no newline)."""
    parts = [
        f":index {op.index}",
        f":time {op.time}",
        f":type :{op.type}",
        f":process {op.process if isinstance(op.process, int) else _key(op.process)}",
        f":f {_key(op.f)}",
    ]
    if op.is_data:
        parts.append(":value " + _dump(encode_value(op.f, op.value), _MOP_FS))
    else:
        parts.append(":value " + _dump(op.value, frozenset()))
    if op.error is not None:
        parts.append(":error " + _dump(op.error, frozenset()))
    for k, v in op.extra.items():
        name = _TO_JEPSEN.get(k, k.replace("_", "-"))
        parts.append(f"{_key(name)} {_dump(v, frozenset())}")
    return "{" + ", ".join(parts) + "}"


_MOP_FS = frozenset({"send", "poll"})
