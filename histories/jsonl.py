"""history.jsonl: a streaming, crash-safe writer and a strict, explanatory reader.

Writer: one JSON object per line, flushed as it is written, fsynced at least every
second and at close, so a crash of ktrial loses at most the line being written.

Reader: every malformed line is reported as ``file:line: reason`` (a
:class:`HistoryError`), never as a traceback; a torn last line — what a crash
mid-write leaves — is skipped with a warning.
"""

from __future__ import annotations

import codecs
import math
import os
import threading
import time
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import IO, Any

import orjson

from .fastread import decode_block, decode_line, flat_block, op_block
from .model import (
    ANONYMOUS,
    CLIENT_FS,
    DATA_FS,
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    MAX_OP_BYTES,
    NEMESIS,
    OP_TYPES,
    Flat,
    FormatError,
    Op,
    UnknownFError,
    check_int64,
    norm_key,
    parse_mops,
    short,
    too_deep,
)
from .store import fsync_dir

KNOWN_FIELDS = frozenset({"index", "time", "process", "type", "f", "value", "error"})
_OP_TYPES = frozenset(OP_TYPES)
_CLIENT_FS = frozenset(CLIENT_FS)
# Messages quote at most this much of the input: a reason longer than this keeps its
# start and its end (where the advice is) and says how much was cut.
MAX_REASON = 600


class HistoryError(Exception):
    """Malformed history input, located by file and line."""

    def __init__(self, path: str | os.PathLike[str], line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = clip_reason(reason)
        super().__init__(
            f"{self.path}:{line}: {self.reason}" if line else f"{self.path}: {self.reason}"
        )


def clip_reason(reason: str) -> str:
    """A message cut to about MAX_REASON characters, its start and end kept."""
    if len(reason) <= MAX_REASON:
        return reason
    head, tail = MAX_REASON * 2 // 3, MAX_REASON // 3
    cut = len(reason) - head - tail
    return f"{reason[:head]} … [{cut:,} characters cut] … {reason[-tail:]}"


class HistoryWarning(UserWarning):
    """Something a reader accepted but the user should know (``ktrial check`` prints it)."""


class TornLineWarning(HistoryWarning):
    """The last line of a history was cut short (ktrial or the host crashed mid-write)."""


class AnonymousProcessWarning(HistoryWarning):
    """Ops without a process were read as one anonymous process."""

    def __init__(self, message: str, count: int) -> None:
        super().__init__(message)
        self.count = count


class UnknownFWarning(HistoryWarning):
    """Client ops with an f ktrial does not know were skipped (``--ignore-unknown-f``)."""

    def __init__(self, message: str, counts: dict[str, int]) -> None:
        super().__init__(message)
        self.counts = counts


# ---------------------------------------------------------------------------- reading


class Indexes:
    """The index each line gave so far and its line, to refuse an index used twice.

    Histories number their ops 0, 1, 2, ... on consecutive lines: such a run is kept
    as its bounds plus one mark per stretch of lines with the same line - index, so a
    million-op history costs a few bytes. Indices off that run are kept one by one.
    """

    __slots__ = ("deltas", "hi", "lo", "marks", "others")

    def __init__(self) -> None:
        self.lo = 0
        self.hi = -1  # the run lo..hi; empty until the first op
        self.marks: list[int] = []  # the index each stretch starts at
        self.deltas: list[int] = []  # line - index in that stretch
        self.others: dict[int, int] = {}  # index -> line, off the run

    def add(self, index: int, line: int) -> int | None:
        """Record one op; the line of an earlier op with this index, or None."""
        hi = self.hi
        if index == hi + 1 and hi >= self.lo and index not in self.others:
            self.hi = index
            if line - index != self.deltas[-1]:
                self.marks.append(index)
                self.deltas.append(line - index)
            return None
        if self.lo <= index <= hi:
            return index + self.deltas[bisect_right(self.marks, index) - 1]
        if hi < self.lo:  # the first op starts the run
            self.lo = self.hi = index
            self.marks.append(index)
            self.deltas.append(line - index)
            return None
        seen = self.others.get(index)
        if seen is None:
            self.others[index] = line
        return seen

    def add_block(self, lines: list[Any], first_line: int) -> tuple[int, int, int] | None:
        """Record the decoded lines (fastread's) of consecutive lines from `first_line`;
        (index, earlier line, line) of the first index used twice, or None. A line
        without an index is skipped (its ordinal is no index the file gave)."""
        idx = list(map(_index_of, lines))
        start = self.hi + 1
        if (
            self.hi >= self.lo
            and idx == list(range(start, start + len(idx)))
            and (not self.others or self.others.keys().isdisjoint(idx))
        ):
            self.hi = start + len(idx) - 1
            if first_line - start != self.deltas[-1]:
                self.marks.append(start)
                self.deltas.append(first_line - start)
            return None
        for k, i in enumerate(idx):
            if type(i) is int:
                seen = self.add(i, first_line + k)
                if seen is not None:
                    return i, seen, first_line + k
        return None


_index_of = attrgetter("index")


class Reading:
    """What one read of a history noticed beyond its ops, and how it treats unknown fs:
    ops without a process, client ops with an unknown f (an error, or skipped and
    counted with `ignore_unknown_f`), and indices used twice (an error)."""

    def __init__(self, path: str | os.PathLike[str], ignore_unknown_f: bool = False) -> None:
        self.path = path
        self.ignore_unknown_f = ignore_unknown_f
        self.anonymous = 0
        self.anonymous_line = 0
        self.unknown: Counter[str] = Counter()
        self.unknown_line: dict[str, int] = {}
        self.indexes = Indexes()

    def unknown_f(self, e: UnknownFError, line: int) -> None:
        """A client op with an unknown f: an error, or counted (the caller skips it)."""
        if not self.ignore_unknown_f:
            raise HistoryError(self.path, line, str(e))
        self.unknown[e.f] += 1
        self.unknown_line.setdefault(e.f, line)

    def no_process(self, obj: dict[str, Any], line: int) -> None:
        if obj.get("process") is None:
            self.anonymous += 1
            if not self.anonymous_line:
                self.anonymous_line = line

    def index(self, index: Any, line: int) -> None:
        """The index a line gives (None or fastread's UNSET if it gives none)."""
        if type(index) is int:
            seen = self.indexes.add(index, line)
            if seen is not None:
                self.twice(index, seen, line)

    def block(self, lines: list[Any], first_line: int) -> None:
        """The indices of a block's decoded lines (fastread's), from `first_line` on."""
        dup = self.indexes.add_block(lines, first_line)
        if dup is not None:
            self.twice(*dup)

    def twice(self, index: int, first: int, line: int) -> None:
        raise HistoryError(
            self.path,
            line,
            f"index {index} is used again (line {first} has it too): each op needs its own "
            "index, which explanations use to name it; renumber the ops, or drop every "
            '"index" field to number them by position',
        )

    def done(self) -> None:
        """Warn about what was read leniently (ktrial check prints these)."""
        if self.anonymous:
            warnings.warn(
                AnonymousProcessWarning(
                    f"{self.path}:{self.anonymous_line}: {self.anonymous:,} ops have no "
                    f'process (or null): they are read as one process, "{ANONYMOUS}", as '
                    "Jepsen does; per-process checks (pairing invokes with completions, "
                    "each consumer's order) treat them as one client",
                    self.anonymous,
                ),
                stacklevel=2,
            )
        if self.unknown:
            counts = dict(sorted(self.unknown.items()))
            listed = ", ".join(
                f"{short(f)} x{n:,} (first at line {self.unknown_line[f]})"
                for f, n in counts.items()
            )
            warnings.warn(
                UnknownFWarning(
                    f"{self.path}: skipped {sum(counts.values()):,} client ops whose f "
                    f"ktrial does not know: {listed}; their effects are not checked",
                    counts,
                ),
                stacklevel=2,
            )


def field_name(k: str) -> str:
    """An op field as ktrial spells it: Jepsen's `rebalance-log` (or `:rebalance-log`)
    is `rebalance_log`, `seek-to-beginning?` is `seek_to_beginning`."""
    if k.isidentifier():
        return k
    return k.lstrip(":").rstrip("?!").replace("-", "_")


def op_from_json(obj: Any, fallback_index: int) -> Op:
    """Validate one decoded line and build an Op; raise FormatError with the reason.

    An op without a process (or with null) belongs to the anonymous process; a client
    op with an f ktrial does not know raises :class:`UnknownFError`.
    """
    if type(obj) is not dict:
        raise FormatError(f"an op must be a JSON object, got {type(obj).__name__}")
    typ = obj.get("type")
    if type(typ) is not str or typ not in _OP_TYPES:  # (a list or map is unhashable)
        if isinstance(typ, str) and typ.startswith(":") and typ[1:] in _OP_TYPES:
            typ = typ[1:]
        else:
            raise FormatError(
                f"unknown op type {short(typ)} (expected one of {', '.join(OP_TYPES)})"
            )
    f = obj.get("f")
    if type(f) is not str or not f:
        raise FormatError(f'op has no function: field "f" is {short(f)}')
    if f[0] == ":":
        f = f[1:]
    process: Any = obj.get("process")
    tp = type(process)
    if tp is str:
        if process.startswith(":"):
            process = process[1:]
    elif process is None:  # Jepsen's hand-written histories often have none
        process = ANONYMOUS
    elif tp is not int:
        check_int64(process, '"process"')
        raise FormatError(f'"process" must be an integer or "nemesis", got {short(process)}')
    if process != NEMESIS and f not in _CLIENT_FS:
        raise UnknownFError(f)
    index = obj.get("index")
    if index is None:  # missing or null: the op's ordinal
        index = fallback_index
    elif type(index) is not int:
        check_int64(index, '"index"')
        raise FormatError(f'"index" must be an integer, got {short(index)}')
    t = obj.get("time")
    if t is None:  # missing or null
        t = 0
    elif type(t) is not int:
        if type(t) is not float:
            raise FormatError(f'"time" must be an integer (ns since run start), got {short(t)}')
        if not math.isfinite(t):
            raise FormatError(f'"time" must be a finite number of ns since run start, got {t}')
        check_int64(t, '"time"')
        t = int(t)
    elif not INT64_MIN <= t <= INT64_MAX:
        check_int64(t, '"time"')
    value = obj.get("value")
    if f in DATA_FS and process != NEMESIS:
        value = parse_mops(value)
    else:
        _not_too_deep(value, '"value"')
        if (f == "assign" or f == "subscribe") and isinstance(value, list):
            value = [norm_key(k) for k in value]
    error = obj.get("error")
    _not_too_deep(error, '"error"')
    if obj.keys() <= KNOWN_FIELDS:
        extra = {}
    else:
        extra = {field_name(k): v for k, v in obj.items() if k not in KNOWN_FIELDS}
        for k, v in extra.items():
            _not_too_deep(v, f'"{short(k)}"')
    return Op(index, t, process, typ, f, value, error, extra)


def _not_too_deep(v: Any, what: str) -> None:
    if too_deep(v):
        raise FormatError(
            f"{what} holds lists or maps nested more than {MAX_DEPTH} deep: ktrial reads "
            "free-form fields up to that depth; flatten the value, or write it as a string"
        )


def iter_history(path: str | os.PathLike[str], *, ignore_unknown_f: bool = False) -> Iterator[Op]:
    """Yield the ops of a history.jsonl file, validating each line.

    Raises HistoryError naming the file and line of the first malformed op (a client
    op with an unknown f is one, unless `ignore_unknown_f`: then it is skipped and
    counted in an :class:`UnknownFWarning`). A last line that is not valid JSON and
    not newline-terminated is torn: it is skipped with a TornLineWarning.
    """
    return _read(path, op_block, Reading(path, ignore_unknown_f))


def iter_flat(
    path: str | os.PathLike[str], *, ignore_unknown_f: bool = False
) -> Iterator[Flat | Op]:
    """Like :func:`iter_history`, for the checker: client data ops come as
    :class:`Flat` when they have the common shape (no Op built), the rest as Ops."""
    return _read(path, flat_block, Reading(path, ignore_unknown_f))


# fastread's op_block or flat_block: the ops of a block's decoded lines (the first one's
# fallback index given), or None if any line is unusual.
Convert = Callable[[list[Any], int], list[Any] | None]


BOM = b"\xef\xbb\xbf"
BLOCK = 1 << 16  # bytes per decode call: measured fastest (cache-sized) on 1M-op histories
_SKIPPED: Any = object()  # a client op with an unknown f, skipped (ignore_unknown_f)


def _read(path: str | os.PathLike[str], convert: Convert, reading: Reading) -> Iterator[Any]:
    p = Path(path)
    try:
        fh = p.open("rb")
    except OSError as e:
        raise HistoryError(p, 0, f"cannot open: {e.strerror or e}") from None
    with fh:
        n = 0  # ops read: the index of an op that has none
        lineno = 0  # lines before the current block
        parts: list[bytes] = []  # an unfinished line, in pieces: joined once it ends
        held = 0  # bytes in parts
        first = True
        while True:
            buf = fh.read(BLOCK)
            if not buf:
                break
            if first:
                first = False
                if buf.startswith(BOM):
                    buf = buf[len(BOM) :]  # Windows tools may start UTF-8 text with a BOM
            cut = buf.rfind(b"\n") + 1
            if not cut:
                parts.append(buf)
                held += len(buf)
                if held > MAX_OP_BYTES:
                    _too_long(p, lineno + 1)
                continue
            if parts:
                if held + buf.index(b"\n") > MAX_OP_BYTES:
                    _too_long(p, lineno + 1)
                parts.append(buf[:cut])
                block = b"".join(parts)
            else:
                block = buf[:cut] if cut < len(buf) else buf
            parts = [buf[cut:]] if cut < len(buf) else []
            held = len(buf) - cut
            decoded = decode_block(block)  # one value per line, or None
            out = None if decoded is None else convert(decoded, n)
            if decoded is not None and out is not None:
                reading.block(decoded, lineno + 1)
                n += len(out)
                lineno += len(out)  # decode_block gave one value per line
                yield from out
                continue
            for raw in block.split(b"\n")[:-1]:  # some line is unusual: one at a time
                lineno += 1
                op = _one_line(p, lineno, raw, n, convert, reading)
                if op is not None:
                    n += 1
                    if op is not _SKIPPED:
                        yield op
        if parts:  # no newline at the end: maybe torn by a crash mid-write
            rest = b"".join(parts)
            lineno += 1
            try:
                op = _one_line(p, lineno, rest, n, convert, reading)
            except HistoryError as e:
                if not _is_torn(rest):
                    raise
                warnings.warn(
                    f"{p}:{lineno}: last line is torn (cut short mid-write), skipped: {e.reason}",
                    TornLineWarning,
                    stacklevel=3,
                )
                op = None
            if op is not None and op is not _SKIPPED:
                yield op
    reading.done()


def _too_long(p: Path, lineno: int) -> None:
    raise HistoryError(
        p,
        lineno,
        f"line longer than {MAX_OP_BYTES >> 20} MiB: ktrial reads ops of up to that size "
        "(a poll of a million records is about 20 MiB); is this a history.jsonl file?",
    )


def _one_line(p: Path, lineno: int, raw: bytes, n: int, convert: Convert, reading: Reading) -> Any:
    """The op of one line (None for a blank line, _SKIPPED for a client op with an
    unknown f, when those are skipped): the fast path, else the strict reader."""
    d = decode_line(raw)
    if d is not None:
        out = convert([d], n)
        if out is not None:
            reading.index(d.index, lineno)
            return out[0]
    if not raw.strip():
        return None
    return _parse_line(p, lineno, raw, n, reading)


def _is_torn(raw: bytes) -> bool:
    """Whether a last line without a newline is what a crash mid-write leaves: the
    start of one op's JSON -- text (UTF-8, though maybe cut inside a character) that
    opens an object and is not complete JSON. Binary data (a gzip file, say) and a
    file whose lines end in bare CRs are not. A crash may also leave the file's end
    zero-filled (the size was written, the data not): trailing NULs are torn too."""
    text = raw.rstrip(b"\x00").lstrip(b" \t")
    if not text.strip():
        return True  # only NULs (or blanks)
    if not text.startswith(b"{") or b"\x00" in text or b"\r" in text.rstrip(b"\r"):
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(text, final=False)
        orjson.loads(raw)
    except UnicodeDecodeError:
        return False
    except orjson.JSONDecodeError:
        return True
    return False


def _parse_line(path: Path, lineno: int, raw: bytes, n: int, reading: Reading) -> Any:
    """The strict reader: every line the fast path declines, with the reason if malformed."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if b"\x00" in raw or not _is_text(raw):
            raise HistoryError(
                path, lineno, "not JSON text (binary data); is this a history.jsonl file?"
            ) from None
        raise HistoryError(path, lineno, f"invalid JSON: {e}") from None
    try:
        op = op_from_json(obj, n)
    except UnknownFError as e:
        reading.unknown_f(e, lineno)
        return _SKIPPED
    except FormatError as e:
        raise HistoryError(path, lineno, str(e)) from None
    reading.no_process(obj, lineno)
    reading.index(obj.get("index"), lineno)
    return op


def _is_text(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_history(path: str | os.PathLike[str]) -> list[Op]:
    return list(iter_history(path))


# ---------------------------------------------------------------------------- writing


def encode_line(d: dict[str, Any], path: str | os.PathLike[str] = "history") -> bytes:
    """One history line for the op object `d`, refusing NaN and infinities.

    JSON has no NaN or infinity, and orjson writes them as null, which the reader then
    rejects (a sent value) or misreads (a null time is 0, a null offset unknown): so the
    writer refuses them, with a ValueError naming the field, rather than write a line
    that means something else than the op.
    """
    line = orjson.dumps(d) + b"\n"
    if b"null" in line:  # a NaN or infinity was written as null (or a real null)
        where = _non_finite(d)
        if where is not None:
            raise ValueError(
                f"{path}: op {d.get('index')} (f {d.get('f')!r}) has {where[1]} at {where[0]}: "
                "JSON has no NaN or infinity, and null would change the op's meaning; "
                "record a finite number, or a string"
            )
    return line


def _non_finite(d: Any) -> tuple[str, float] | None:
    """(where, value) of the first NaN or infinity in d, walked without recursion."""
    todo: list[tuple[str, Any]] = [("", d)]
    while todo:
        where, v = todo.pop()
        t = type(v)
        if t is float or isinstance(v, float):
            if not math.isfinite(v):
                return where or "the op", v
        elif t is dict:
            todo.extend((f"{where}.{k}" if where else str(k), x) for k, x in v.items())
        elif t is list or t is tuple or isinstance(v, (list, tuple)):
            todo.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
    return None


class HistoryWriter:
    """Append ops to history.jsonl: flush per line, fsync at least every second and at close.

    Thread-safe: workers and the nemesis share one writer; the writer assigns
    `index` in file order, so indices always match line order.
    """

    def __init__(self, path: str | os.PathLike[str], fsync_interval: float = 1.0) -> None:
        self.path = Path(path)
        self._fh: IO[bytes] = self.path.open("ab")
        fsync_dir(self.path.parent)  # the new file's name survives a crash too
        self._lock = threading.Lock()
        self._next_index = 0
        self._fsync_interval = fsync_interval
        self._last_sync = time.monotonic()
        self._closed = False
        self._dirty = False
        self._stop = threading.Event()
        self._syncer = threading.Thread(target=self._sync_loop, name="history-fsync", daemon=True)
        self._syncer.start()

    def _sync_loop(self) -> None:
        # Guarantees the "fsync at least every second" promise even when ops are sparse.
        while not self._stop.wait(self._fsync_interval):
            if not self._sync_unlocked(only_dirty=True):
                return

    def _sync_unlocked(self, only_dirty: bool) -> bool:
        """fsync without holding the lock every worker's append needs: flush under the
        lock, then fsync a duplicate of the descriptor outside it (close() may run
        meanwhile; the duplicate stays valid). False once the writer is closed."""
        with self._lock:
            if self._closed:
                return False
            if only_dirty and not self._dirty:
                return True
            self._fh.flush()
            self._dirty = False
            fd = os.dup(self._fh.fileno())
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._last_sync = time.monotonic()
        return True

    def append(self, op: Op) -> Op:
        """Write `op` (its index is set here) and return it.

        Raises ValueError, writing nothing, if the op holds a NaN or an infinity (see
        :func:`encode_line`)."""
        with self._lock:
            if self._closed:
                raise ValueError(f"history writer for {self.path} is closed")
            op.index = self._next_index
            self._write(encode_line(op.to_json(), self.path))
        return op

    def write_dict(self, d: dict[str, Any]) -> None:
        """Write a ready-made op object (index is overwritten); ValueError as append."""
        with self._lock:
            self._write(encode_line({**d, "index": self._next_index}, self.path))

    def _write(self, line: bytes) -> None:
        self._next_index += 1
        self._fh.write(line)
        self._fh.flush()
        self._dirty = True

    @property
    def count(self) -> int:
        return self._next_index

    def sync(self) -> None:
        self._sync_unlocked(only_dirty=False)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._closed:
                return
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._closed = True

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
