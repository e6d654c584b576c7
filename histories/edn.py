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

from .jsonl import HistoryError, field_name, iter_flat, iter_history, op_from_json
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


# ------------------------------------------------------------------------------ reader
#
# One regex splits the text into tokens; an explicit stack builds the values. No
# recursion (any nesting depth up to _MAX_DEPTH), one regex step per token, and a
# form cut short by the end of the text is reported as incomplete, not as an
# error, so the streaming reader can append the next lines and read it again.

_NOTHING: Any = object()  # what `#_ form` reads as: skipped by its container
_MAX_DEPTH = 1000  # deeper values could not be written out as JSON again anyway

_A = r'[^\s,;()\[\]{}"\\]'  # a character that can continue an atom
_STR = r'"[^"\\]*(?:\\.[^"\\]*)*"'
# Alternatives in order of frequency in Jepsen histories; each token swallows the
# whitespace after it, so the loop sees about one match per token. Vectors of
# integers and of [int int] pairs (poll records, most of a history) are single
# tokens: Python then handles a poll's records in one step, not four per record.
_PAIRS, _INTS, _NUM, _KW, _OPEN, _CLOSE, _STRING, _HASH, _META, _CHAR, _SYM, _WS, _BAD = range(
    1, 14
)
_TOKEN = re.compile(
    r"(?:"
    r"(\[(?:[\s,]*\[[\s,]*-?\d+[\s,]+-?\d+[\s,]*\])+[\s,]*\])"  # 1 [[o v] ...]
    r"|(\[[\s,]*(?:-?\d+[\s,]*)*\])"  # 2 [int ...]
    rf"|([+-]?\d{_A}*)"  # 3 number
    rf"|(:{_A}+)"  # 4 keyword
    r"|([\[{(])"  # 5 open
    r"|([\]})])"  # 6 close
    rf"|({_STR})"  # 7 string
    rf"|(#(?:[{{_]|{_STR}|{_A}*))"  # 8 dispatch
    r"|(\^)"  # 9 metadata
    r"|(\\(?:newline|space|tab|return|backspace|formfeed|u[0-9a-fA-F]{4}|o[0-7]{1,3}|.))"  # 10
    rf"|({_A}+)"  # 11 symbol, nil, true, false
    r"|((?:[\s,]+|;[^\n]*)+)"  # 12 whitespace and comments
    r"|(.)"  # 13 anything else: an unterminated string, a lone backslash
    r")[\s,]*",
    re.DOTALL,
)
_PAIR = re.compile(r"\[[\s,]*(-?\d+)[\s,]+(-?\d+)[\s,]*\]")
_INTEGER = re.compile(r"-?\d+")
_INT = re.compile(r"[+-]?\d+N?")
_FLOAT = re.compile(r"[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?M?")
_RATIO = re.compile(r"([+-]?\d+)/(\d+)")
_HEX = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]+)N?")
_RADIX = re.compile(r"([+-]?)(\d{1,2})[rR]([0-9a-zA-Z]+)")
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
_SPECIAL_FLOATS = {"##Inf": math.inf, "##-Inf": -math.inf, "##NaN": math.nan}
# Stack frames are [opener, items, start]. Collections close with a delimiter;
# prefixes (#_ discard, ^ metadata, #tag, #:ns) complete with the next form(s).
_CLOSE_OF = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_WHAT = {"[": "vector", "(": "list", "{": "map", "#{": "set", "#_": "#_ discard"}
_WHAT.update({"^": "form with metadata", "#:": "namespaced map", "#tag": "tagged literal"})


def _unescape(m: re.Match[str]) -> str:
    e = m.group(1)
    if len(e) == 5:
        return chr(int(e[1:], 16))
    try:
        return _ESCAPES[e]
    except KeyError:
        raise ValueError(e) from None


def _string(body: str, pos: int) -> str:
    try:
        return _ESCAPE.sub(_unescape, body)
    except ValueError as e:
        raise EdnError(f'unknown escape "\\{e}" in a string', pos) from None


def _number(text: str, i: int) -> int | float:
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


def map_key(k: Any) -> str:
    """Map keys become strings: ktrial's keys, and JSON's, are strings."""
    if type(k) is str:
        return k
    if type(k) is int:
        return str(k)
    if k is None or isinstance(k, (bool, int, float, list, dict)):
        return dump_edn(k)
    return str(k)


def _map(items: list[Any], start: int) -> dict[str, Any]:
    if len(items) % 2:
        raise EdnError("a map needs an even number of forms (key value ...)", start)
    keys = items[0::2]
    if not all(type(k) is str for k in keys):
        keys = [map_key(k) for k in keys]
    d = dict(zip(keys, items[1::2], strict=True))
    if len(d) != len(keys):
        seen: set[str] = set()
        for k in keys:
            if k in seen:
                raise EdnError(f"map has the key {k!r} twice", start)
            seen.add(k)
    return d


def _hash(t: str, s: str, pos: int) -> tuple[str | None, Any]:
    """A `#` token: (frame opener to push, None) or (None, value)."""
    if t == "#{" or t == "#_":
        return t, None
    c = t[1:2]
    if c == '"':  # a regex: its backslashes are the pattern's, not escapes
        return None, t[2:-1]
    if c == "#":
        if t in _SPECIAL_FLOATS:
            return None, _SPECIAL_FLOATS[t]
        raise EdnError("## must be followed by Inf, -Inf or NaN", pos)
    if c == ":" and len(t) > 2:
        return "#:", t[2:]
    if c.isalpha():
        # A tagged literal: #inst "...", #jepsen.history.Op{...}, #object[...]. The
        # tag names a Clojure class or reader we do not have; its value is what matters.
        return "#tag", None
    raise EdnError(f"unknown dispatch {t + s[pos + len(t) : pos + len(t) + 1]!r}", pos)


class _Scan:
    """What one pass over a text found: complete top-level forms and where it stopped."""

    __slots__ = ("forms", "in_vec", "rest", "vec_pos", "what")

    def __init__(self) -> None:
        self.forms: list[tuple[int, Any]] = []  # (offset, value)
        self.rest: int | None = None  # offset of a form the text ends inside
        self.what = ""  # what kind of form that is
        self.in_vec = False  # inside an unwrapped top-level vector at the end
        self.vec_pos: int | None = None  # offset where such a vector was opened


def _scan(s: str, unwrap: bool, in_vec: bool) -> _Scan:
    """Read every top-level form of `s`; with `unwrap`, top-level vectors are opened."""
    res = _Scan()
    out = res.forms
    stack: list[list[Any]] = []
    start = -1  # offset of the top-level form being read
    v: Any
    for m in _TOKEN.finditer(s):
        kind = m.lastindex or _BAD  # never None: every alternative is a group
        t = m.group(kind)
        if not stack:
            start = m.start()
        if kind == _PAIRS:
            v = [[int(o), int(x)] for o, x in _PAIR.findall(t)]
        elif kind == _INTS:
            v = [int(x) for x in _INTEGER.findall(t)]
            if not stack and unwrap and not in_vec:  # `[]`: a history with no ops
                out.extend((start, x) for x in v)
                continue
        elif kind == _NUM:
            try:
                v = int(t)
            except ValueError:
                v = _number(t, m.start())
        elif kind == _KW:
            v = t[2:] if t[1] == ":" else t[1:]
        elif kind == _OPEN:
            if not stack and unwrap and t == "[" and not in_vec:
                in_vec, res.vec_pos = True, m.start()
                continue
            if len(stack) >= _MAX_DEPTH:
                raise EdnError(f"forms nested more than {_MAX_DEPTH} deep", m.start())
            stack.append([t, [], m.start()])
            continue
        elif kind == _CLOSE:
            if not stack:
                if in_vec and t == "]":
                    in_vec = False
                    continue
                raise EdnError(f"unexpected {t!r}: nothing is open", m.start())
            frame = stack.pop()
            opener, items = frame[0], frame[1]
            if _CLOSE_OF.get(opener) != t:
                raise EdnError(f"unexpected {t!r} inside a {_WHAT[opener]}", m.start())
            v = _map(items, frame[2]) if opener == "{" else items
        elif kind == _STRING:
            v = t[1:-1]
            if "\\" in v:
                v = _string(v, m.start())
        elif kind == _SYM:
            if t == "nil":
                v = None
            elif t == "true":
                v = True
            elif t == "false":
                v = False
            elif t[0] == ":":
                raise EdnError("a keyword needs a name after ':'", m.start())
            else:
                v = t
        elif kind == _WS:
            continue
        elif kind == _HASH:
            pos = m.start()
            if t == "#" and s.startswith('"', pos + 1):  # a regex that does not end here
                res.rest, res.what = start, (_WHAT[stack[0][0]] if stack else "regex")
                res.in_vec = in_vec
                return res
            opener, v = _hash(t, s, pos)
            if opener is not None:
                stack.append([opener, [], pos, v])
                continue
        elif kind == _CHAR:
            c = t[1:]
            if len(c) == 1:
                v = c
            elif c in _CHAR_NAMES:
                v = _CHAR_NAMES[c]
            else:
                v = chr(int(c[1:], 16 if c[0] == "u" else 8))
        elif kind == _META:
            stack.append(["^", [], m.start()])
            continue
        elif t == '"':  # a string that does not end in this text
            res.rest, res.what = start, (_WHAT[stack[0][0]] if stack else "string")
            res.in_vec = in_vec
            return res
        else:
            raise EdnError(f"unexpected character {t!r}", m.start())
        # Hand the value to the innermost open frame, completing prefixes on the way.
        while stack:
            frame = stack[-1]
            opener = frame[0]
            if opener in _CLOSE_OF:
                if v is not _NOTHING:
                    frame[1].append(v)
                break
            if v is _NOTHING:  # `#_ #_ a b`: the inner discard ate a; b is the outer's
                break
            if opener == "^" and not frame[1]:
                frame[1].append(v)  # the metadata: dropped once its form arrives
                break
            stack.pop()
            if opener == "#_":
                v = _NOTHING
            elif opener == "#:":
                if type(v) is not dict:
                    raise EdnError("#:ns must be followed by a map", frame[2])
                ns = frame[3]
                v = {k if "/" in k else f"{ns}/{k}": x for k, x in v.items()}
        else:
            if v is not _NOTHING:
                out.append((start, v))
    if stack:
        res.rest, res.what = stack[0][2], _WHAT[stack[0][0]]
    res.in_vec = in_vec
    return res


def loads_edn(text: str) -> Any:
    """Read the single EDN form in `text` (JSON-shaped result, see the module doc)."""
    res = _scan(text, False, False)
    if res.rest is not None:
        raise EdnError(f"unexpected end of text inside a {res.what}", res.rest)
    if not res.forms:
        raise EdnError("no form: the text is empty (or all discarded with #_)", 0)
    if len(res.forms) > 1:
        raise EdnError("text after the form", res.forms[1][0])
    return res.forms[0][1]


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
        if self.line == 1 and text.startswith("\ufeff"):
            text = text[1:]  # a byte order mark (Windows tools write one): not EDN
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
    base = 1  # line number of buf[0]
    in_vec = False
    vec_line = 0
    what = ""
    while True:
        more = src.read()
        if not more:
            break
        buf += more
        try:
            res = _scan(buf, True, in_vec)
        except EdnError as e:
            raise HistoryError(
                p, base + buf.count("\n", 0, e.pos), f"invalid EDN: {e.reason}"
            ) from None
        if res.vec_pos is not None:
            vec_line = base + buf.count("\n", 0, res.vec_pos)
        line, mark = base, 0
        for pos, v in res.forms:
            line += buf.count("\n", mark, pos)
            mark = pos
            yield line, v
        in_vec = res.in_vec
        if res.rest is None:
            base += buf.count("\n")
            buf = ""
        else:
            # Keep the unfinished form; it is read again with the next lines.
            base += buf.count("\n", 0, res.rest)
            buf = buf[res.rest :]
            what = res.what
    if buf:
        raise HistoryError(p, base, f"the file ends inside a {what} that starts here (cut short?)")
    if in_vec:
        raise HistoryError(p, vec_line, "the vector of ops opened here is never closed")


# ------------------------------------------------------------------------------ ops


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


def iter_any_history(path: str | os.PathLike[str], flat: bool = False) -> Iterator[Any]:
    """Ops of a ktrial history.jsonl or a Jepsen history.edn, whichever `path` is.

    A directory is looked into for history.jsonl, then history.edn. With `flat`, a
    JSONL history's client data ops come as :class:`~.model.Flat` (the checker's
    fast path, see :func:`.jsonl.iter_flat`).
    """
    p = Path(path)
    if p.is_dir():
        for name in ("history.jsonl", "history.edn"):
            if (p / name).is_file():
                p = p / name
                break
        else:
            raise HistoryError(p, 0, "a directory holding no history.jsonl or history.edn file")
    if is_edn_history(p):
        return iter_edn_history(p)
    return iter_flat(p) if flat else iter_history(p)


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
