"""Jepsen's ``history.edn``: a small EDN reader and the conversion to ktrial ops.

Jepsen's Kafka test (``jepsen.tests.kafka``, used by jepsen-io/redpanda) stores
its history as EDN, one op per line (``prn`` of each op), e.g.::

    {:type :invoke, :f :send, :value [[:send 3 5]], :time 1234, :process 0, :index 0}
    #jepsen.history.Op{:index 1, :time 1300, :type :ok, :process 0, :f :poll,
                       :value [[:poll {3 [[0 5] [1 6]]}]], :rebalance-log [...]}

The op model is the same as ktrial's (docs/history-format.md borrowed it), so an op
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

from .jsonl import HistoryError, Reading, field_name, iter_flat, iter_history, op_from_json
from .model import (
    MAX_DEPTH,
    MAX_OP_BYTES,
    FormatError,
    Op,
    UnknownFError,
    encode_value,
    short,
    too_deep,
)

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
    """Malformed EDN at character offset `pos` of the text being read; `line` is its
    line when the streaming reader knows it (0 otherwise)."""

    def __init__(self, reason: str, pos: int, line: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pos = pos
        self.line = line


class _TooBig(EdnError):
    """A form or string longer than the reader accepts (not malformed EDN as such)."""


# ------------------------------------------------------------------------------ reader
#
# One regex splits the text into tokens; an explicit stack builds the values. No
# recursion (any nesting depth up to _MAX_DEPTH), one regex step per token. Text is
# fed in chunks: forms left open at a chunk's end stay on the stack, so no text is
# read twice, except a chunk's last token (it may go on in the next chunk) and an
# unfinished string, which are read again with the next chunk. Every repetition in
# the token regex is possessive: a token that does not match fails in one pass over
# its text, never by trying the ways to split it (which took exponential time on
# `[0 123456789012345678901234567890N]`).

_NOTHING: Any = object()  # what `#_ form` reads as: skipped by its container
_MAX_DEPTH = 1000  # deeper values could not be written out as JSON again anyway

_A = r'[^\s,;()\[\]{}"\\]'  # a character that can continue an atom
_STR = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
# Alternatives in order of frequency in Jepsen histories; each token swallows the
# whitespace after it, so the loop sees about one match per token. Vectors of
# integers and of [int int] pairs (poll records, most of a history) are single
# tokens: Python then handles a poll's records in one step, not four per record.
_PAIRS, _INTS, _NUM, _KW, _OPEN, _CLOSE, _STRING, _HASH, _META, _CHAR, _SYM, _WS, _BAD = range(
    1, 14
)
_TOKEN = re.compile(
    r"(?:"
    r"(\[(?:[\s,]*+\[[\s,]*+-?\d++[\s,]++-?\d++[\s,]*+\])++[\s,]*+\])"  # 1 [[o v] ...]
    r"|(\[[\s,]*+(?:-?\d++[\s,]*+)*+\])"  # 2 [int ...]
    rf"|([+-]?\d{_A}*+)"  # 3 number
    rf"|(:{_A}++)"  # 4 keyword
    r"|([\[{(])"  # 5 open
    r"|([\]})])"  # 6 close
    rf"|({_STR})"  # 7 string
    rf"|(#(?:[{{_]|{_STR}|{_A}*+))"  # 8 dispatch
    r"|(\^)"  # 9 metadata
    r"|(\\(?:newline|space|tab|return|backspace|formfeed|u[0-9a-fA-F]{4}|o[0-7]{1,3}|.))"  # 10
    rf"|({_A}++)"  # 11 symbol, nil, true, false
    r"|((?:[\s,]++|;[^\n]*+)++)"  # 12 whitespace and comments
    r"|(.)"  # 13 anything else: an unterminated string, a lone backslash
    r")[\s,]*+",
    re.DOTALL,
)
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
# Stack frames are [opener, items, start, argument, line]. Collections close with a
# delimiter; prefixes (#_ discard, ^ metadata, #tag, #:ns) complete with the next form(s).
_CLOSE_OF = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_WHAT = {"[": "vector", "(": "list", "{": "map", "#{": "set", "#_": "#_ discard"}
_WHAT.update({"^": "form with metadata", "#:": "namespaced map", "#tag": "tagged literal"})
_TAIL = 16  # a token ending this close to a chunk's end may go on in the next chunk


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
        s = _ESCAPE.sub(_unescape, body)
    except ValueError as e:
        raise EdnError(f'unknown escape "\\{e}" in a string', pos) from None
    if "\\u" in body:
        s = _utf16(s, pos)
    return s


def _utf16(s: str, pos: int) -> str:
    """`s` with UTF-16 surrogate pairs (Java's `\\ud83d\\ude00`) joined into their
    character; a lone surrogate is not Unicode text (JSON cannot hold it)."""
    try:
        return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        raise EdnError("a string holds a lone UTF-16 surrogate (\\uD800-\\uDFFF)", pos) from None


def _int(text: str, pos: int) -> int:
    try:
        return int(text)
    except ValueError:  # only beyond Python's int-from-text limit (4,300 digits)
        raise EdnError(
            f"an integer of {len(text):,} digits: ktrial reads integers of up to 4,300 digits "
            "(times, offsets and values must fit in 64 bits); write it as a string",
            pos,
        ) from None


def _pairs(t: str, pos: int) -> list[Any]:
    """The pairs of a [[o v] ...] token."""
    nums = _INTEGER.findall(t)
    it = map(int, nums)
    try:
        return [[o, x] for o, x in zip(it, it, strict=True)]
    except ValueError:  # beyond 4,300 digits
        _int(max(nums, key=len), pos)
        raise


def _number(text: str, i: int) -> int | float:
    try:
        return _parse_number(text, i)
    except EdnError:
        raise
    except (ValueError, OverflowError):
        raise EdnError(
            f"number {short(text)} is too large to read (ktrial reads integers of up to "
            "4,300 digits); write it as a string",
            i,
        ) from None


def _parse_number(text: str, i: int) -> int | float:
    if _INT.fullmatch(text):
        return int(text.rstrip("N"))
    if _FLOAT.fullmatch(text):
        return float(text.rstrip("M"))
    m = _RATIO.fullmatch(text)
    if m:
        den = int(m.group(2))
        if den == 0:
            raise EdnError(f"ratio {short(text)} divides by zero", i)
        return int(m.group(1)) / den
    m = _HEX.fullmatch(text)  # #object[... 0x6f1b2c3d ...] identity hashes
    if m:
        return int(m.group(1) + m.group(2), 16)
    m = _RADIX.fullmatch(text)
    if m and 2 <= int(m.group(2)) <= 36:
        try:
            return int(m.group(1) + m.group(3), int(m.group(2)))
        except ValueError:
            if len(m.group(3)) > 4000:
                raise
    raise EdnError(f"invalid number {short(text)}", i)


def map_key(k: Any) -> str:
    """Map keys become strings: ktrial's keys, and JSON's, are strings."""
    if type(k) is str:
        return k
    if type(k) is int:
        return str(k)
    if isinstance(k, (list, dict)) and too_deep(k):
        raise EdnError(f"a map key nested more than {MAX_DEPTH} deep", -1)
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
                raise EdnError(f"map has the key {short(k)} twice", start)
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
    raise EdnError(f"unknown dispatch {short(t + s[pos + len(t) : pos + len(t) + 1])}", pos)


class _Scanner:
    """Reads EDN text fed chunk by chunk and hands out each top-level form with its line.

    With `unwrap`, top-level vectors are opened: their elements are handed out one by
    one (a history written as one vector of ops). `max_form` bounds the text of one
    top-level form (or string) in characters, so one huge op cannot take all memory.
    """

    def __init__(self, unwrap: bool, max_form: int | None = None) -> None:
        self.unwrap = unwrap
        self.max_form = max_form
        self.stack: list[list[Any]] = []
        self.in_vec = False  # inside an unwrapped top-level vector
        self.vec_line = 0  # the line where it opened
        self.pending = ""  # text to read again with the next chunk
        self.what = ""  # what the pending text is, if it is an unfinished string
        self.line = 1  # line of the current text's first character
        self.fed = 0  # characters of text before the current text
        self.form_pos = 0  # offset in the current text of the open top-level form
        self.form_line = 0  # its line once the chunk it started in is done (0: not yet)
        self.form_at = 0  # its offset in all the text fed
        self.out: list[tuple[int, Any]] = []  # (line, form) completed by the last token
        self._s = ""
        self._mark = 0  # an offset of the current text whose line is _mark_line
        self._mark_line = 1

    def _line_at(self, pos: int) -> int:
        """The line of offset `pos` of the current text (counted from the last mark)."""
        s, mark = self._s, self._mark
        if pos >= mark:
            self._mark_line += s.count("\n", mark, pos)
        else:
            self._mark_line -= s.count("\n", pos, mark)
        self._mark = pos
        return self._mark_line

    def _frame_line(self, frame: list[Any]) -> int:
        return frame[4] or self._line_at(frame[2])

    def unfinished(self) -> tuple[str, int, int] | None:
        """After the last chunk: (what, line, offset) of a form or string left open."""
        if self.stack:
            frame = self.stack[0]
            return _WHAT[frame[0]], self._frame_line(frame), frame[2]
        if self.pending.strip(" \t\r\n,"):
            pos = len(self._s) - len(self.pending)
            return self.what or "form", self._line_at(pos), pos
        return None

    def feed(self, text: str, final: bool) -> Iterator[tuple[int, Any]]:
        """Read `text` (the next chunk; `final`: the last one, maybe empty); yield
        (line, form) for each top-level form it completes."""
        s = self.pending + text
        self.pending = ""
        self.what = ""
        self._s, self._mark, self._mark_line = s, 0, self.line
        limit = len(s) if final else len(s) - _TAIL
        stop = len(s)  # where the text left for the next chunk starts
        out = self.out
        try:
            for m in _TOKEN.finditer(s):
                if m.end() > limit:  # the token may go on in the next chunk
                    stop = m.start()
                    break
                kind = m.lastindex or _BAD  # never None: every alternative is a group
                if not self.stack:
                    self.form_pos, self.form_line = m.start(), 0
                    self.form_at = self.fed + m.start()
                if (kind == _BAD and m.group(kind) == '"') or (
                    kind == _HASH and m.group(kind) == "#" and s.startswith('"', m.end())
                ):
                    # a string (or regex) that does not end in this text: read it again
                    # with the next chunk (or, after the last, report it unfinished)
                    stop = m.start()
                    self.what = "string" if kind == _BAD else "regex"
                    break
                self._token(m, kind, s)
                if out:
                    yield from out
                    out.clear()
        except EdnError as e:
            if not e.line:
                e.line = self._line_at(e.pos) if e.pos >= 0 else self._form_line()
            raise
        self.pending = s[stop:]
        if final:
            return
        for frame in self.stack:  # their offsets mean nothing in the next text
            if not frame[4]:
                frame[4] = self._line_at(frame[2])
        if self.stack and not self.form_line:
            self.form_line = self._line_at(self.form_pos)
        self.line = self._line_at(stop)
        self.fed += stop
        self._check_size()

    def _form_line(self) -> int:
        return self.form_line or self._line_at(self.form_pos)

    def _check_size(self) -> None:
        big = self.max_form
        if big is None:
            return
        if self.stack and self.fed + len(self.pending) - self.form_at > big:
            raise _TooBig(
                f"a form of more than {big >> 20} MiB of text (it starts here): ktrial reads "
                "ops of up to that size; is this a history.edn file?",
                -1,
                self.form_line,
            )
        if len(self.pending) > big:
            raise _TooBig(
                f"a string or token of more than {big >> 20} MiB (it starts here, and "
                "maybe never ends): ktrial reads ops of up to that size",
                -1,
                self.line,
            )

    def _token(self, m: re.Match[str], kind: int, s: str) -> None:
        """Read one token; a top-level form it completes goes to self.out."""
        stack = self.stack
        t = m.group(kind)
        v: Any
        if kind == _PAIRS:
            v = _pairs(t, m.start())
        elif kind == _INTS:
            v = [_int(x, m.start()) for x in _INTEGER.findall(t)]
            if not stack and self.unwrap and not self.in_vec:  # `[]`: a history with no ops
                line = self._line_at(m.start())
                self.out.extend((line, x) for x in v)
                return
        elif kind == _NUM:
            try:
                v = int(t)
            except ValueError:
                v = _number(t, m.start())
        elif kind == _KW:
            v = t[2:] if t[1] == ":" else t[1:]
        elif kind == _OPEN:
            if not stack and self.unwrap and t == "[" and not self.in_vec:
                self.in_vec, self.vec_line = True, self._line_at(m.start())
                return
            if len(stack) >= _MAX_DEPTH:
                raise EdnError(f"forms nested more than {_MAX_DEPTH} deep", m.start())
            stack.append([t, [], m.start(), None, 0])
            return
        elif kind == _CLOSE:
            if not stack:
                if self.in_vec and t == "]":
                    self.in_vec = False
                    return
                raise EdnError(f"unexpected {t!r}: nothing is open", m.start())
            frame = stack.pop()
            opener, items = frame[0], frame[1]
            if _CLOSE_OF.get(opener) != t:
                raise EdnError(f"unexpected {t!r} inside a {_WHAT[opener]}", m.start())
            if opener == "{":
                try:
                    v = _map(items, frame[2])
                except EdnError as e:
                    e.line = self._frame_line(frame)
                    raise
            else:
                v = items
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
            return
        elif kind == _HASH:
            opener, v = _hash(t, s, m.start())
            if opener is not None:
                stack.append([opener, [], m.start(), v, 0])
                return
        elif kind == _CHAR:
            c = t[1:]
            if len(c) == 1:
                v = c
            elif c in _CHAR_NAMES:
                v = _CHAR_NAMES[c]
            else:
                v = chr(int(c[1:], 16 if c[0] == "u" else 8))
                if 0xD800 <= ord(v) <= 0xDFFF:
                    raise EdnError(f"character {t} is a lone UTF-16 surrogate", m.start())
        elif kind == _META:
            stack.append(["^", [], m.start(), None, 0])
            return
        else:
            raise EdnError(f"unexpected character {t!r}", m.start())
        # Hand the value to the innermost open frame, completing prefixes on the way.
        while stack:
            frame = stack[-1]
            opener = frame[0]
            if opener in _CLOSE_OF:
                if v is not _NOTHING:
                    frame[1].append(v)
                return
            if v is _NOTHING:  # `#_ #_ a b`: the inner discard ate a; b is the outer's
                return
            if opener == "^" and not frame[1]:
                frame[1].append(v)  # the metadata: dropped once its form arrives
                return
            stack.pop()
            if opener == "#_":
                v = _NOTHING
            elif opener == "#:":
                if type(v) is not dict:
                    raise EdnError("#:ns must be followed by a map", -1, self._frame_line(frame))
                ns = frame[3]
                v = {k if "/" in k else f"{ns}/{k}": x for k, x in v.items()}
        if v is not _NOTHING:
            self.out.append((self._form_line(), v))


def loads_edn(text: str) -> Any:
    """Read the single EDN form in `text` (JSON-shaped result, see the module doc)."""
    sc = _Scanner(False)
    forms = list(sc.feed(text, True))
    left = sc.unfinished()
    if left is not None:
        raise EdnError(f"unexpected end of text inside a {left[0]}", left[2])
    if not forms:
        raise EdnError("no form: the text is empty (or all discarded with #_)", 0)
    if len(forms) > 1:
        raise EdnError("text after the form", 0)
    return forms[0][1]


# ------------------------------------------------------------------------------ streaming

_CHUNK = 1 << 20  # bytes read at a time
_LONG_LINE = 16 << 20  # a longer line is cut between two characters (the scanner copes)


class _Lines:
    """Decoded text of a file in chunks: whole lines when they are shorter than
    _LONG_LINE bytes, else cut between two characters."""

    def __init__(self, fh: IO[bytes], path: Path) -> None:
        self.fh = fh
        self.path = path
        self.line = 1  # line number of the next chunk's first character
        self.carry = b""  # bytes after the last line end (or character) of a chunk
        self.first = True

    def read(self, size: int) -> str:
        """The next chunk ("" at the end of the file)."""
        parts = [self.carry] if self.carry else []
        held = len(self.carry)
        data = b""
        while held < _LONG_LINE:
            data = self.fh.read(size)
            if not data:
                break
            parts.append(data)
            held += len(data)
            if b"\n" in data:
                break
            size = max(size, held)  # a long line: read it in geometrically growing steps
        raw = b"".join(parts)
        self.carry = b""
        if data:  # not the end of the file: hold back the bytes after the last line end
            cut = raw.rfind(b"\n") + 1 or _char_start(raw)
            raw, self.carry = raw[:cut], raw[cut:]
        return self._decode(raw)

    def _decode(self, raw: bytes) -> str:
        if b"\x00" in raw:
            ln = self.line + raw.count(b"\n", 0, raw.index(b"\x00"))
            raise HistoryError(self.path, ln, "not EDN text (binary data); is this a history.edn?")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            ln = self.line + raw.count(b"\n", 0, e.start)
            raise HistoryError(self.path, ln, f"not UTF-8 text ({e.reason})") from None
        if self.first:
            self.first = False
            if text.startswith("\ufeff"):
                text = text[1:]  # a byte order mark (Windows tools write one): not EDN
        self.line += raw.count(b"\n")
        return text


def _char_start(raw: bytes) -> int:
    """Where the last UTF-8 character of `raw` starts (a cut there splits none)."""
    i = len(raw) - 1
    while i > 0 and raw[i] & 0xC0 == 0x80:
        i -= 1
    return i


def iter_edn_forms(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """Yield (line, form) for each top-level form of an EDN file, streaming.

    A top-level vector is unwrapped: its elements are yielded one by one, so a
    history written as one vector of ops is read without holding it whole.
    Raises HistoryError at the line where the input is malformed, and for a form of
    more than MAX_OP_BYTES of text.
    """
    p = Path(path)
    try:
        fh = p.open("rb")
    except OSError as e:
        raise HistoryError(p, 0, f"cannot open: {e.strerror or e}") from None
    with fh:
        yield from _forms(_Lines(fh, p), p)


def _forms(src: _Lines, p: Path) -> Iterator[tuple[int, Any]]:
    sc = _Scanner(True, MAX_OP_BYTES)
    try:
        while True:
            text = src.read(max(_CHUNK, len(sc.pending)))  # an unfinished string: grow
            yield from sc.feed(text, not text)
            if not text:
                break
    except _TooBig as e:
        raise HistoryError(p, e.line, e.reason) from None
    except EdnError as e:
        raise HistoryError(p, e.line, f"invalid EDN: {e.reason}") from None
    left = sc.unfinished()
    if left is not None:
        raise HistoryError(
            p, left[1], f"the file ends inside a {left[0]} that starts here (cut short?)"
        )
    if sc.in_vec:
        raise HistoryError(p, sc.vec_line, "the vector of ops opened here is never closed")


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
    return f"{type(v).__name__} {short(v)}"


def iter_edn_history(
    path: str | os.PathLike[str], *, ignore_unknown_f: bool = False
) -> Iterator[Op]:
    """Yield the ops of a Jepsen history.edn (one op map per line, or a vector of them).

    Raises HistoryError naming the file and the line of the first malformed op; client
    ops with an unknown f are errors too, or skipped and counted (`ignore_unknown_f`),
    as by :func:`.jsonl.iter_history`.
    """
    reading = Reading(path, ignore_unknown_f)
    for n, (line, form) in enumerate(iter_edn_forms(path)):
        try:
            op = op_from_edn(form, n)
        except UnknownFError as e:
            reading.unknown_f(e, line)
            continue
        except FormatError as e:
            raise HistoryError(path, line, str(e)) from None
        reading.no_process(form, line)
        reading.index(form.get("index"), line)
        yield op
    reading.done()


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


def iter_any_history(
    path: str | os.PathLike[str], flat: bool = False, *, ignore_unknown_f: bool = False
) -> Iterator[Any]:
    """Ops of a ktrial history.jsonl or a Jepsen history.edn, whichever `path` is.

    A directory is looked into for history.jsonl, then history.edn. With `flat`, a
    JSONL history's client data ops come as :class:`~.model.Flat` (the checker's
    fast path, see :func:`.jsonl.iter_flat`). With `ignore_unknown_f`, client ops with
    an f ktrial does not know are skipped and counted (an UnknownFWarning at the end).
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
        return iter_edn_history(p, ignore_unknown_f=ignore_unknown_f)
    reader = iter_flat if flat else iter_history
    return reader(p, ignore_unknown_f=ignore_unknown_f)


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
