"""history.jsonl: a streaming, crash-safe writer and a strict, explanatory reader.

Writer: one JSON object per line, flushed as it is written, fsynced at least every
second and at close, so a crash of ktrial loses at most the line being written.

Reader: every malformed line is reported as ``file:line: reason`` (a
:class:`HistoryError`), never as a traceback; a torn last line — what a crash
mid-write leaves — is skipped with a warning.
"""

from __future__ import annotations

import codecs
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from .fastread import decode_block, decode_line, flat_block, op_block
from .model import (
    DATA_FS,
    INT64_MAX,
    INT64_MIN,
    NEMESIS,
    OP_TYPES,
    Flat,
    FormatError,
    Op,
    check_int64,
    norm_key,
    parse_mops,
)

KNOWN_FIELDS = frozenset({"index", "time", "process", "type", "f", "value", "error"})
_OP_TYPES = frozenset(OP_TYPES)


class HistoryError(Exception):
    """Malformed history input, located by file and line."""

    def __init__(self, path: str | os.PathLike[str], line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {reason}" if line else f"{self.path}: {reason}")


class TornLineWarning(UserWarning):
    """The last line of a history was cut short (ktrial or the host crashed mid-write)."""


# ---------------------------------------------------------------------------- reading


def field_name(k: str) -> str:
    """An op field as ktrial spells it: Jepsen's `rebalance-log` (or `:rebalance-log`)
    is `rebalance_log`, `seek-to-beginning?` is `seek_to_beginning`."""
    if k.isidentifier():
        return k
    return k.lstrip(":").rstrip("?!").replace("-", "_")


def op_from_json(obj: Any, fallback_index: int) -> Op:
    """Validate one decoded line and build an Op; raise FormatError with the reason."""
    if type(obj) is not dict:
        raise FormatError(f"an op must be a JSON object, got {type(obj).__name__}")
    typ = obj.get("type")
    if typ not in _OP_TYPES:
        if isinstance(typ, str) and typ.startswith(":") and typ[1:] in _OP_TYPES:
            typ = typ[1:]
        else:
            raise FormatError(f"unknown op type {typ!r} (expected one of {', '.join(OP_TYPES)})")
    f = obj.get("f")
    if type(f) is not str or not f:
        raise FormatError(f'op has no function: field "f" is {f!r}')
    if f[0] == ":":
        f = f[1:]
    process: Any = obj.get("process")
    tp = type(process)
    if tp is str:
        if process.startswith(":"):
            process = process[1:]
    elif tp is not int:
        check_int64(process, '"process"')
        raise FormatError(f'"process" must be an integer or "nemesis", got {process!r}')
    index = obj.get("index")
    if index is None:  # missing or null: the op's ordinal
        index = fallback_index
    elif type(index) is not int:
        check_int64(index, '"index"')
        raise FormatError(f'"index" must be an integer, got {index!r}')
    t = obj.get("time")
    if t is None:  # missing or null
        t = 0
    elif type(t) is not int:
        if type(t) is not float:
            raise FormatError(f'"time" must be an integer (ns since run start), got {t!r}')
        check_int64(t, '"time"')
        t = int(t)
    elif not INT64_MIN <= t <= INT64_MAX:
        check_int64(t, '"time"')
    value = obj.get("value")
    if f in DATA_FS and process != NEMESIS:
        value = parse_mops(value)
    elif (f == "assign" or f == "subscribe") and isinstance(value, list):
        value = [norm_key(k) for k in value]
    extra = (
        {}
        if obj.keys() <= KNOWN_FIELDS
        else {field_name(k): v for k, v in obj.items() if k not in KNOWN_FIELDS}
    )
    return Op(index, t, process, typ, f, value, obj.get("error"), extra)


def iter_history(path: str | os.PathLike[str]) -> Iterator[Op]:
    """Yield the ops of a history.jsonl file, validating each line.

    Raises HistoryError naming the file and line of the first malformed op.
    A last line that is not valid JSON and not newline-terminated is torn: it
    is skipped with a TornLineWarning.
    """
    return _read(path, op_block)


def iter_flat(path: str | os.PathLike[str]) -> Iterator[Flat | Op]:
    """Like :func:`iter_history`, for the checker: client data ops come as
    :class:`Flat` when they have the common shape (no Op built), the rest as Ops."""
    return _read(path, flat_block)


# fastread's op_block or flat_block: the ops of a block's decoded lines (the first one's
# fallback index given), or None if any line is unusual.
Convert = Callable[[list[Any], int], list[Any] | None]


BOM = b"\xef\xbb\xbf"
BLOCK = 1 << 16  # bytes per decode call: measured fastest (cache-sized) on 1M-op histories


def _read(path: str | os.PathLike[str], convert: Convert) -> Iterator[Any]:
    p = Path(path)
    try:
        fh = p.open("rb")
    except OSError as e:
        raise HistoryError(p, 0, f"cannot open: {e.strerror or e}") from None
    with fh:
        n = 0  # ops yielded: the index of an op that has none
        lineno = 0  # lines before the current block
        rest = b""
        while True:
            buf = fh.read(BLOCK)
            if not buf:
                break
            if lineno == 0 and not rest and not n and buf.startswith(BOM):
                buf = buf[len(BOM) :]  # Windows tools may start UTF-8 text with a BOM
            if rest:
                buf = rest + buf
            cut = buf.rfind(b"\n") + 1
            rest = buf[cut:]
            if not cut:
                continue
            block = buf[:cut] if rest else buf
            decoded = decode_block(block)  # one value per line, or None
            out = None if decoded is None else convert(decoded, n)
            if out is not None:
                n += len(out)
                lineno += len(out)  # decode_block gave one value per line
                yield from out
                continue
            for raw in block.split(b"\n")[:-1]:  # some line is unusual: one at a time
                lineno += 1
                op = _one_line(p, lineno, raw, n, convert)
                if op is not None:
                    n += 1
                    yield op
        if rest:  # no newline at the end: maybe torn by a crash mid-write
            lineno += 1
            try:
                op = _one_line(p, lineno, rest, n, convert)
            except HistoryError as e:
                if not _is_torn(rest):
                    raise
                warnings.warn(
                    f"{p}:{lineno}: last line is torn (cut short mid-write), skipped: {e.reason}",
                    TornLineWarning,
                    stacklevel=3,
                )
                return
            if op is not None:
                yield op


def _one_line(p: Path, lineno: int, raw: bytes, n: int, convert: Convert) -> Any:
    """The op of one line (None for a blank line): the fast path, else the strict reader."""
    d = decode_line(raw)
    if d is not None:
        out = convert([d], n)
        if out is not None:
            return out[0]
    if not raw.strip():
        return None
    return _parse_line(p, lineno, raw, n)


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


def _parse_line(path: Path, lineno: int, raw: bytes, n: int) -> Op:
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
        return op_from_json(obj, n)
    except FormatError as e:
        raise HistoryError(path, lineno, str(e)) from None


def _is_text(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_history(path: str | os.PathLike[str]) -> list[Op]:
    return list(iter_history(path))


# ---------------------------------------------------------------------------- writing


class HistoryWriter:
    """Append ops to history.jsonl: flush per line, fsync at least every second and at close.

    Thread-safe: workers and the nemesis share one writer; the writer assigns
    `index` in file order, so indices always match line order.
    """

    def __init__(self, path: str | os.PathLike[str], fsync_interval: float = 1.0) -> None:
        self.path = Path(path)
        self._fh: IO[bytes] = self.path.open("ab")
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
            with self._lock:
                if self._closed:
                    return
                if self._dirty:
                    os.fsync(self._fh.fileno())
                    self._dirty = False
                    self._last_sync = time.monotonic()

    def append(self, op: Op) -> Op:
        """Write `op` (its index is set here) and return it."""
        with self._lock:
            if self._closed:
                raise ValueError(f"history writer for {self.path} is closed")
            op.index = self._next_index
            self._next_index += 1
            self._fh.write(orjson.dumps(op.to_json()) + b"\n")
            self._fh.flush()
            self._dirty = True
        return op

    def write_dict(self, d: dict[str, Any]) -> None:
        """Write a ready-made op object (index is overwritten)."""
        with self._lock:
            d = {**d, "index": self._next_index}
            self._next_index += 1
            self._fh.write(orjson.dumps(d) + b"\n")
            self._fh.flush()
            self._dirty = True

    @property
    def count(self) -> int:
        return self._next_index

    def sync(self) -> None:
        with self._lock:
            if not self._closed:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._last_sync = time.monotonic()

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
