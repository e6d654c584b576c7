"""Summaries of stored runs for `ktrial runs`: cheap to compute for a big store.

Each summary reads results.json and test.json, counts history lines in large
chunks and parses only the history's last line (for the duration), so listing
a store of million-op runs stays quick.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..histories.store import RunDir, list_runs, load_json
from .verdict import verdict_of

CHUNK = 1 << 20


@dataclass(frozen=True)
class RunSummary:
    run: RunDir
    name: str
    date: str
    verdict: str  # valid / invalid / unknown / not checked / unreadable
    bad: dict[str, int] = field(default_factory=dict)  # bad anomaly type -> count
    ops: int = 0
    duration_s: float | None = None
    latest: bool = False


def count_lines(path: Path) -> int:
    n = 0
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            n += chunk.count(b"\n")
    return n


def last_time_s(path: Path) -> float | None:
    """`time` of the last complete op in a history (in seconds), or None."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            fh.seek(max(0, size - 65536))
            tail = fh.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            t = orjson.loads(line).get("time")
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if isinstance(t, (int, float)):
            return t / 1e9
    return None


def run_date(rd: RunDir) -> str:
    stamp = rd.path.name.split("-")[0]
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.strptime(stamp, "%Y%m%dT%H%M%S"))
    except ValueError:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rd.path.stat().st_mtime))


def _latest_target(test_dir: Path) -> Path | None:
    link = test_dir / "latest"
    if not link.is_symlink() and not link.exists():
        return None
    try:
        return link.resolve()
    except OSError:
        return None


def summarize(rd: RunDir, latest: bool = False) -> RunSummary:
    results: Any = None
    verdict = "not checked"
    if rd.results.exists():
        try:
            results = load_json(rd.results)
            verdict = verdict_of(results if isinstance(results, dict) else None)
        except (OSError, orjson.JSONDecodeError):
            verdict = "unreadable"
    bad: dict[str, int] = {}
    if isinstance(results, dict) and isinstance(results.get("anomalies"), dict):
        bad_types = set(results.get("bad_error_types") or [])
        for t, a in results["anomalies"].items():
            if t in bad_types:
                c = a.get("count") if isinstance(a, dict) else None
                bad[t] = c if isinstance(c, int) else 1
    test: Any = {}
    if rd.test_json.exists():
        try:
            test = load_json(rd.test_json)
        except (OSError, orjson.JSONDecodeError):
            test = {}
    name = test.get("name") if isinstance(test, dict) else None
    return RunSummary(
        run=rd,
        name=rd.path.parent.name if rd.path.parent.name else str(name),
        date=run_date(rd),
        verdict=verdict,
        bad=bad,
        ops=count_lines(rd.history) if rd.history.exists() else 0,
        duration_s=last_time_s(rd.history),
        latest=latest,
    )


def summarize_store(store: str | os.PathLike[str], name: str | None = None) -> list[RunSummary]:
    """Every run of the store (or of test `name`), oldest first, `latest` ones marked."""
    out = []
    latest: dict[Path, Path | None] = {}
    for rd in list_runs(store):
        test_dir = rd.path.parent
        if name is not None and test_dir.name != name:
            continue
        if test_dir not in latest:
            latest[test_dir] = _latest_target(test_dir)
        out.append(summarize(rd, latest=latest[test_dir] == rd.path.resolve()))
    return out
