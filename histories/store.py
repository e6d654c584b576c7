"""The run store: `<store>/<test-name>/<YYYYmmddTHHMMSS>/` with a `latest` link per test.

A run directory holds history.jsonl, test.json, results.json, report.html,
plots/, junit.xml and logs/ (docs/history-format.md).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .redact import redact

HISTORY = "history.jsonl"
TEST = "test.json"
RESULTS = "results.json"
REPORT = "report.html"
JUNIT = "junit.xml"


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def history(self) -> Path:
        return self.path / HISTORY

    @property
    def test_json(self) -> Path:
        return self.path / TEST

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def report(self) -> Path:
        return self.path / REPORT

    @property
    def junit(self) -> Path:
        return self.path / JUNIT

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def plots(self) -> Path:
        return self.path / "plots"

    def read_test(self) -> dict[str, Any]:
        return load_json(self.test_json, MAX_TEST_JSON) if self.test_json.exists() else {}

    def write_test(self, meta: dict[str, Any]) -> None:
        write_json(self.test_json, redact(meta))  # no password lands on disk in clear


def create_run(store: str | os.PathLike[str], name: str, now: float | None = None) -> RunDir:
    """Make a fresh run directory and point `<store>/<name>/latest` at it."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now))
    base = Path(store) / name
    base.mkdir(parents=True, exist_ok=True)
    path = base / stamp
    n = 1
    while path.exists():  # two runs in one second
        n += 1
        path = base / f"{stamp}-{n}"
    path.mkdir()
    (path / "logs").mkdir()
    latest = base / "latest"
    tmp = base / f".latest.{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(path.name)
    tmp.replace(latest)
    fsync_dir(base)  # the new run directory and `latest` survive a crash
    return RunDir(path)


def list_runs(store: str | os.PathLike[str]) -> list[RunDir]:
    """Every run directory in the store (those holding a history), oldest first."""
    root = Path(store)
    if not root.is_dir():
        return []
    runs = [
        RunDir(p)
        for test in sorted(root.iterdir())
        if test.is_dir()
        for p in sorted(test.iterdir())
        if p.is_dir() and not p.is_symlink() and (p / HISTORY).exists()
    ]
    runs.sort(key=lambda r: r.path.name)
    return runs


MAX_JSON = 1 << 30  # results.json of the longest soak is a few MiB
MAX_TEST_JSON = 16 << 20  # test.json holds options and a key map: kilobytes


def load_json(path: str | os.PathLike[str], max_bytes: int = MAX_JSON) -> Any:
    """The JSON value in a file (a leading BOM skipped): a regular file of at most
    `max_bytes` bytes (OSError otherwise, see read_regular)."""
    raw = read_regular(path, max_bytes)
    return orjson.loads(raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw)  # a BOM: skipped


def read_regular(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes` bytes.

    A FIFO would block the reader until something writes to it, and a device such as
    /dev/zero never ends: both (and anything else that is not a regular file, followed
    through symbolic links) raise OSError before anything is read, as does a bigger file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO must not block
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(
                errno.EINVAL, "not a regular file (a FIFO, a device or a socket?)", str(path)
            )
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(errno.EFBIG, f"larger than {max_bytes:,} bytes", str(path))
    return data


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write atomically (tmp + rename) so readers never see half a file."""
    write_bytes_atomic(
        path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    )


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a file atomically (tmp + rename); a path that exists and is not a regular
    file (/dev/stdout, a FIFO) is written in place."""
    p = Path(path)
    if p.exists() and not p.is_file():
        p.write_bytes(data)
        return
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # the data first: a crash must not leave an empty file
        tmp.replace(p)
        fsync_dir(p.parent)  # then the rename itself
    finally:
        tmp.unlink(missing_ok=True)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (a file created or renamed in it) durable.

    A file's own fsync does not cover its name: after a crash the directory could
    still lack it. Best effort where directories cannot be opened or synced."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory
    finally:
        os.close(fd)
