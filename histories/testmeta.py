"""test.json as one typed record: what a run was, written by the trial, read by everyone else.

The trial (trial.py) fills a :class:`TestMeta` in two steps (before the first op,
and again once the run is over) and writes it with :meth:`TestMeta.write`; the
checker's options, the JUnit report and `ktrial trace` read a run's test.json
through :meth:`TestMeta.read` / :meth:`TestMeta.from_json`.

The file keeps its flat shape: the fields below at the top level, in this order,
with the workload's own fragment (what its ``setup()`` returned: ``workload``,
``keys``, ``topics``, client configs, ``sub_via``, ...) after ``cluster``. Keys
this record does not name (that fragment, a hand-written ``slo`` table, a
converted Jepsen test map) are kept in ``other`` and written back unchanged.

Older runs spelled two keys differently: ``time_limit_s`` (now ``time_limit``) and
``wall_clock_start``, a local time with offset such as ``2026-05-09T07:29:33+0000``
(now ``wall_start``, epoch seconds). Both spellings load; only the new one is
written. A field of the wrong type (a hand-edited ``"seed": "x"``) is not trusted:
it stays in ``other`` as it was and the field reads as None.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .redact import redact
from .store import load_json, write_json

# Sections of test.json a checker setting may also sit in (besides the top level).
SETTING_SECTIONS = ("workload", "options", "checker")
# Old spelling -> the one written now.
RENAMED = {"time_limit_s": "time_limit", "wall_clock_start": "wall_start"}
# Fields written before the workload's fragment; the rest come after it.
_HEAD = ("ktrial_version", "name", "seed", "time_limit", "wall_start", "cluster")


@dataclass
class TestMeta:
    """The record behind test.json. Every field is optional: None is not written."""

    __test__ = False  # not a pytest test class, whatever its name says

    ktrial_version: str | None = None
    name: str | None = None
    seed: int | None = None
    time_limit: float | None = None  # seconds of the main phase
    wall_start: float | None = None  # epoch seconds when the run began
    cluster: dict[str, Any] | None = None  # the cluster's metadata(): kind, versions, ...
    nemesis: dict[str, Any] | None = None  # NemesisOptions.to_json()
    run: dict[str, Any] | None = None  # the run's settings (TrialSpec), for the record
    argv: list[str] | None = None  # the command line of `ktrial run`, as typed (secrets masked)
    # every option of `ktrial run` as resolved (flags, --config, defaults; the run's seed):
    # what `ktrial run --from RUN_DIR` repeats
    cli_options: dict[str, Any] | None = None
    history_wall_start: float | None = None  # epoch seconds of history time 0
    drain: dict[str, Any] | None = None  # what the workload's drain() returned
    workload_results: dict[str, Any] | None = None  # a measuring workload's table
    # the safety checks while the run went (ktrial/watch.py): settings, checks, findings,
    # and ``stopped_early`` when --stop-on-anomaly ended the main phase
    watch: dict[str, Any] | None = None
    # the checker settings the run asked for (``liveness_bad``, ``soak``): the final check,
    # `ktrial check RUN` and `ktrial report --recheck` all read them from here
    checker: dict[str, Any] | None = None
    # the background load of `--load` (load/generator.py): its settings, topic, program
    # and exit status; its telemetry is load.jsonl beside the history
    load: dict[str, Any] | None = None
    interrupted: bool | None = None
    wall_end: float | None = None  # epoch seconds when the run's phases ended
    other: dict[str, Any] = field(default_factory=dict)  # every key not named above

    # ------------------------------------------------------------------ files

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> TestMeta:
        """Load a test.json; a missing file is an empty record (a bare history). Unreadable
        JSON or a file not holding an object raises ValueError (without the path)."""
        p = Path(path)
        if not p.exists():
            return cls()
        data = load_json(p)
        if not isinstance(data, dict):
            raise ValueError(f"it must hold a JSON object, not {type(data).__name__}")
        return cls.from_json(data)

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write test.json with secrets (passwords, keys, tokens) masked: see redact."""
        write_json(path, redact(self.to_json()))

    # ------------------------------------------------------------------ dicts

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TestMeta:
        """The record of a test.json object, old spellings included."""
        other = dict(data or {})
        for old, new in RENAMED.items():
            if old in other and new not in other:
                other[new] = other.pop(old)
        if isinstance(other.get("wall_start"), str):
            stamp = _epoch(other["wall_start"])
            if stamp is not None:
                other["wall_start"] = stamp
        kw: dict[str, Any] = {}
        for f in fields(cls):
            if f.name != "other" and f.name in other and _fits(f.name, other[f.name]):
                kw[f.name] = other.pop(f.name)
        return cls(**kw, other=other)

    def to_json(self) -> dict[str, Any]:
        """The test.json object: named fields in their order, the others after `cluster`."""
        named = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "other" and getattr(self, f.name) is not None
        }
        out = {k: named.pop(k) for k in _HEAD if k in named}
        out.update({k: v for k, v in self.other.items() if k not in named})
        out.update(named)
        return out

    # ------------------------------------------------------------------ readers

    def setting(self, name: str) -> Any:
        """A setting by name (``sub_via`` or ``sub-via``): the top level first, then the
        workload, options and checker sections; None when nowhere."""
        top = self.to_json()
        for d in (top, *(top.get(s) for s in SETTING_SECTIONS)):
            if isinstance(d, dict):
                for k in (name, name.replace("_", "-")):
                    if k in d:
                        return d[k]
        return None

    @property
    def workload_name(self) -> str | None:
        """The workload's name: ``workload`` as ktrial writes it ("queue"), or the name
        or kind of a ``workload`` map (converted Jepsen tests)."""
        w = self.other.get("workload")
        if isinstance(w, dict):
            w = w.get("name") or w.get("kind")
        return str(w) if w else None

    @property
    def topics(self) -> dict[str, Any]:
        """The workload's topics -> partition count ({} when absent)."""
        topics = self.other.get("topics")
        return topics if isinstance(topics, dict) else {}

    @property
    def keys(self) -> dict[str, Any]:
        """The workload's key -> {topic, partition} map ({} when absent)."""
        keys = self.other.get("keys")
        return keys if isinstance(keys, dict) else {}

    @property
    def broker_versions(self) -> list[Any]:
        """Broker versions the cluster reported ([] when unknown)."""
        versions = (self.cluster or {}).get("broker_versions")
        return list(versions) if isinstance(versions, list) else []

    @property
    def slo(self) -> dict[str, Any]:
        """The optional "slo" table of liveness thresholds for the JUnit report."""
        slo = self.other.get("slo")
        return slo if isinstance(slo, dict) else {}


_NUMBERS = ("time_limit", "wall_start", "history_wall_start", "wall_end")
_DICTS = (
    "cluster",
    "nemesis",
    "run",
    "drain",
    "workload_results",
    "cli_options",
    "watch",
    "checker",
    "load",
)


def _fits(name: str, value: Any) -> bool:
    """Whether a loaded value has the field's type (else it stays in `other`)."""
    if name in _NUMBERS:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name in _DICTS:
        return isinstance(value, dict)
    if name == "seed":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "interrupted":
        return isinstance(value, bool)
    if name == "argv":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, str)  # ktrial_version, name


def _epoch(text: str) -> float | None:
    """'2026-05-09T07:29:33+0000' (or any ISO 8601 time) -> epoch seconds; None if not one.
    A time without an offset is taken as UTC."""
    for parse in (lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%S%z"), datetime.fromisoformat):
        try:
            t = parse(text)
        except ValueError:
            continue
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        return t.timestamp()
    return None
