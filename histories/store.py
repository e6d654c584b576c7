"""The run store: `<store>/<test-name>/<YYYYmmddTHHMMSS>/` with a `latest` link per test.

A run directory holds history.jsonl, test.json, results.json, report.html,
plots/, junit.xml and logs/ (DESIGN.md section 2).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

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
        return load_json(self.test_json) if self.test_json.exists() else {}

    def write_test(self, meta: dict[str, Any]) -> None:
        write_json(self.test_json, meta)


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


def load_json(path: str | os.PathLike[str]) -> Any:
    raw = Path(path).read_bytes()
    return orjson.loads(raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw)  # a BOM: skipped


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
        tmp.write_bytes(data)
        tmp.replace(p)
    finally:
        tmp.unlink(missing_ok=True)
