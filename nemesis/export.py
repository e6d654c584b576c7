"""The faults that happened in a run, as a schedule script (`ktrial faults export`).

Pure: from a history's nemesis ops and test.json's nemesis section to
:class:`~ktrial.nemesis.schedule.ScriptEntry` items, which
:func:`~ktrial.nemesis.schedule.format_script` writes in the format
``--nemesis-script`` reads. Each fault that started becomes one entry:

- ``at``: its start op's time, counted from the moment the run's schedule started
  (test.json ``nemesis.schedule_start_s``; from the history's start when absent);
- ``fault`` and ``targets``: its family and the nodes it hit, as resolved then
  (a controller or a leader is written as the node it was);
- parameters: what the start op recorded (partition shape and direction, loss
  probability, toxic kind, attributes, stream and toxicity, balloon size, control
  action, api, error, count and topic) over the run's own ``--nemesis-param``
  values for that family;
- ``duration``: until its end op (omitted when it never ended: to the end of the run).

Starts and ends are paired by the ``fault_id`` ktrial's nemesis records on each op;
older histories without it are paired first in, first out per family. Faults that
failed to start (``fault-error``) did not happen and are not written. What a replay
draws again: the layout of a ``ring`` or ``bridge`` partition, and a ``split`` that
named no targets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..histories.model import FAULT_START_F, Op
from .composite import COMPOSITES, END_OPS
from .schedule import ScriptEntry

START_F = FAULT_START_F  # the op that begins each fault family
END_F: dict[str, tuple[str, ...]] = {
    "stop-partition": ("partition",),
    "stop-loss": ("loss",),
    "start": ("kill", "stop"),
    "resume": ("pause",),
    "stop-rolling-restart": ("restart",),
    "memory-release": ("memory",),
    "toxic-off": ("toxic",),
    "stop-control": ("control",),
    **END_OPS,
}


@dataclass
class _Open:
    family: str
    start_s: float
    value: Any
    end_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Exported:
    entries: list[ScriptEntry]
    failed: int  # fault-error ops: faults that did not start, not written
    clock: str  # what `at` counts from


def export_faults(ops: Iterable[Op], nemesis_meta: Mapping[str, Any] | None) -> Exported:
    """The faults that happened among `ops` (any ops: only the nemesis's are read)."""
    meta = nemesis_meta or {}
    t0 = meta.get("schedule_start_s")
    clock = "the start of the run's fault schedule"
    if not isinstance(t0, (int, float)) or isinstance(t0, bool):
        t0, clock = 0.0, "the start of the history (test.json has no schedule_start_s)"
    raw = meta.get("params")
    run_params: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    by_id: dict[str, _Open] = {}
    fifo: dict[str, list[_Open]] = {}
    done: list[_Open] = []
    failed = 0
    for op in ops:
        if op.process != "nemesis":
            continue
        t = op.time / 1e9
        if op.f == "fault-error":
            failed += 1
            continue
        fid = op.extra.get("fault_id") if isinstance(op.extra, dict) else None
        if op.f in START_F and (fid is None or fid not in by_id):
            fam = op.extra.get("fault") if isinstance(op.extra, dict) else None
            item = _Open(str(fam or START_F[op.f]), t, op.value)
            done.append(item)
            if fid is not None:
                by_id[str(fid)] = item
            else:
                fifo.setdefault(item.family, []).append(item)
            continue
        if op.f not in END_F:
            continue
        if fid is not None:
            opened = by_id.get(str(fid))
            if opened is not None and opened.family in END_F[op.f] and opened.end_s is None:
                opened.end_s = t
            continue
        if isinstance(op.value, Mapping) and op.value.get("reason"):
            continue  # e.g. the memory fault's restart of an OOM-killed broker
        for fam in END_F[op.f]:
            if fifo.get(fam):
                fifo[fam].pop(0).end_s = t
                break
    entries = [_entry(item, float(t0), run_params.get(item.family)) for item in done]
    return Exported(sorted(entries, key=lambda e: e.at), failed, clock)


def _nodes(value: Any, key: str = "nodes") -> list[str] | None:
    if not isinstance(value, Mapping):
        return None
    nodes = value.get(key)
    if isinstance(nodes, list) and nodes and all(isinstance(n, str) for n in nodes):
        return list(nodes)
    return None


def _entry(item: _Open, t0: float, run_params: Any) -> ScriptEntry:
    v = item.value if isinstance(item.value, Mapping) else {}
    params: dict[str, Any] = {
        k: x for k, x in (run_params or {}).items() if k != "targets" and x is not None
    }
    fam = item.family
    targets: list[str] | None
    if fam in ("partition", "loss"):
        targets = _nodes(v, "targets")
        recorded = {"shape": v.get("shape"), "probability": v.get("probability")}
        if v.get("shape") == "one-way":
            recorded["direction"] = v.get("direction")
    elif fam == "toxic":
        targets = _nodes(v)
        recorded = {
            "kind": v.get("toxic"),
            "attributes": v.get("attributes"),
            "stream": v.get("stream"),
            "toxicity": v.get("toxicity"),
        }
    elif fam == "control":
        targets = _nodes(v)
        recorded = {k: v.get(k) for k in ("action", "api", "error", "count", "topic")}
    elif fam in COMPOSITES:
        # a composite aims at roles again when it is replayed (the leader may have moved)
        targets = None
        recorded = dict(v.get("params") or {}) if isinstance(v.get("params"), Mapping) else {}
    elif fam == "memory":
        targets = _nodes(v)
        recorded = {"balloon_bytes": v.get("balloon_bytes")}
    else:
        targets = _nodes(v)
        recorded = {}
    params.update({k: x for k, x in recorded.items() if x is not None})
    at = max(0.0, round(item.start_s - t0, 3))
    duration = None if item.end_s is None else max(0.001, round(item.end_s - item.start_s, 3))
    return ScriptEntry(at, fam, targets, duration, params)
