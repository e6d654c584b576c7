"""Summaries of stored runs for `ktrial runs`: cheap to compute for a big store.

Each summary reads results.json and test.json, counts history lines in large
chunks and parses only the history's last line (for the duration), so listing
a store of million-op runs stays quick. The store's index.html (report/index.py),
rewritten after every run, does not even read the histories of checked runs:
results.json already counts their ops and duration (``history=False``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..histories.store import RunDir, list_runs, load_json
from ..histories.testmeta import TestMeta
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
    seed: int | None = None
    # fault family -> activations, from results.json's "faults" section; None when the
    # results do not say (not checked, checked before the section existed, no faults asked)
    faults: dict[str, int] | None = None
    faults_asked: tuple[str, ...] = ()  # families test.json says the run asked for
    faults_ok: bool | None = None  # False: asked faults that did not all happen


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


def _bad_counts(results: Any) -> dict[str, int]:
    bad: dict[str, int] = {}
    if isinstance(results, dict) and isinstance(results.get("anomalies"), dict):
        bad_types = set(results.get("bad_error_types") or [])
        for t, a in results["anomalies"].items():
            if t in bad_types:
                c = a.get("count") if isinstance(a, dict) else None
                bad[t] = c if isinstance(c, int) else 1
    return bad


def _asked(meta: TestMeta) -> tuple[str, ...]:
    """Fault families test.json's nemesis section asked for (`families`, else `faults`)."""
    nem = meta.nemesis or {}
    fams = nem.get("families")
    if not isinstance(fams, list):
        fams = nem.get("faults")
    if not isinstance(fams, list):
        return ()
    return tuple(dict.fromkeys(str(f) for f in fams if isinstance(f, str) and f))


def _faults(results: Any) -> tuple[dict[str, int] | None, bool | None]:
    """(injected family -> count, all asked faults happened) from results.json."""
    section = results.get("faults") if isinstance(results, dict) else None
    if not isinstance(section, dict):
        return None, None
    raw = section.get("injected")
    injected = (
        {str(f): n for f, n in raw.items() if isinstance(n, int)} if isinstance(raw, dict) else {}
    )
    ok = section.get("ok")
    return injected, ok if isinstance(ok, bool) else None


def _number(d: Any, key: str) -> float | None:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def summarize(rd: RunDir, latest: bool = False, *, history: bool = True) -> RunSummary:
    """One run's summary. With `history` False, a checked run's op count and duration
    come from results.json's stats instead of reading history.jsonl (the same numbers,
    without touching a file that may be gigabytes)."""
    results: Any = None
    verdict = "not checked"
    if rd.results.exists():
        try:
            results = load_json(rd.results)
            verdict = verdict_of(results if isinstance(results, dict) else None)
        except (OSError, orjson.JSONDecodeError):
            verdict = "unreadable"
    test: Any = {}
    if rd.test_json.exists():
        try:
            test = load_json(rd.test_json)
        except (OSError, orjson.JSONDecodeError):
            test = {}
    meta = TestMeta.from_json(test if isinstance(test, dict) else {})
    stats = results.get("stats") if isinstance(results, dict) else None
    ops = None if history else _number(stats, "ops")
    duration = None if history else _number(stats, "duration_s")
    if ops is None:
        ops = count_lines(rd.history) if rd.history.exists() else 0
    if duration is None:
        duration = last_time_s(rd.history)
    injected, faults_ok = _faults(results)
    return RunSummary(
        run=rd,
        name=rd.path.parent.name if rd.path.parent.name else str(meta.name),
        date=run_date(rd),
        verdict=verdict,
        bad=_bad_counts(results),
        ops=int(ops),
        duration_s=duration,
        latest=latest,
        seed=meta.seed,
        faults=injected,
        faults_asked=_asked(meta),
        faults_ok=faults_ok,
    )


def summarize_store(
    store: str | os.PathLike[str], name: str | None = None, *, history: bool = True
) -> list[RunSummary]:
    """Every run of the store (or of test `name`), oldest first, `latest` ones marked
    (`history`: see :func:`summarize`)."""
    out = []
    latest: dict[Path, Path | None] = {}
    for rd in list_runs(store):
        test_dir = rd.path.parent
        if name is not None and test_dir.name != name:
            continue
        if test_dir not in latest:
            latest[test_dir] = _latest_target(test_dir)
        out.append(summarize(rd, latest=latest[test_dir] == rd.path.resolve(), history=history))
    return out
