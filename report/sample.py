"""A small synthetic run directory: for tests, the docs screenshot, and trying reports.

`write_sample_run(path, anomalies=True)` writes history.jsonl, test.json and
results.json shaped exactly like a real run's (DESIGN.md sections 2 and 3): two
producers and two consumers over three keys for a minute, a partition, a kill
and a pause that never ends. With `anomalies`, results.json reports a lost
write, a duplicate, a G1c cycle explained step by step and a benign G0; one op
carries an HTML-looking error so escaping can be checked.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from ..histories.store import write_json

NS = 1_000_000_000
HOSTILE = "<script>alert('x')</script> & \"quoted\""


def _history(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    ops: list[dict[str, Any]] = []
    offsets = {"0": 0, "1": 0, "2": 0}
    value = 0

    def add(t: float, process: Any, typ: str, f: str, v: Any, **extra: Any) -> None:
        ops.append(
            {
                "index": 0,
                "time": int(t * NS),
                "process": process,
                "type": typ,
                "f": f,
                "value": v,
                **extra,
            }
        )

    nemesis = [
        (10.0, "start-partition", {"shape": "majority-minority", "nodes": ["n1"]}),
        (20.0, "stop-partition", None),
        (30.0, "kill", ["n2"]),
        (38.0, "start", ["n2"]),
        (50.0, "pause", ["n3"]),
    ]
    events: list[tuple[float, Any]] = [(t, ("nem", f, v)) for t, f, v in nemesis]
    t = 0.05
    free = [0.0] * 4  # each process runs one op at a time
    while t < 60.0:
        for process in range(4):
            t += rng.uniform(0.004, 0.02)
            if t < free[process]:
                continue
            faulty = 10 <= t < 20 or 30 <= t < 38
            lat = rng.uniform(2, 15) * (rng.uniform(5, 40) if faulty else 1)
            free[process] = t + lat / 1000
            if process < 2:
                key = rng.choice(list(offsets))
                value += 1
                outcome = (
                    "info"
                    if faulty and rng.random() < 0.08
                    else ("fail" if rng.random() < 0.02 else "ok")
                )
                events.append((t, ("op", process, "invoke", "send", [["send", key, value]])))
                done = (
                    [["send", key, [offsets[key], value]]]
                    if outcome == "ok"
                    else [["send", key, value]]
                )
                if outcome == "ok":
                    offsets[key] += 1
                err = (
                    None
                    if outcome == "ok"
                    else ("REQUEST_TIMED_OUT" if outcome == "info" else HOSTILE)
                )
                events.append((t + lat / 1000, ("op", process, outcome, "send", done, err)))
            else:
                key = rng.choice(list(offsets))
                o = max(0, offsets[key] - 1)
                events.append((t, ("op", process, "invoke", "poll", [["poll"]])))
                events.append(
                    (
                        t + lat / 1000,
                        ("op", process, "ok", "poll", [["poll", {key: [[o, o + 1]]}]], None),
                    )
                )
    events.sort(key=lambda e: e[0])
    for t, e in events:
        if e[0] == "nem":
            add(t, "nemesis", "info", e[1], e[2])
        else:
            _, process, typ, f, v, *rest = e
            err = rest[0] if rest else None
            add(t, process, typ, f, v, **({"error": err} if err else {}))
    for i, op in enumerate(ops):
        op["index"] = i
    return ops


def _results(anomalies: bool) -> dict[str, Any]:
    counts = {
        "send": {"ok": 5400, "fail": 110, "info": 60},
        "poll": {"ok": 5500, "fail": 0, "info": 0},
    }
    metrics = {
        "counts": counts,
        "info_causes": {"REQUEST_TIMED_OUT": 60},
        "latency_ms": {
            "send": {"ok": {"count": 5400, "p50": 8.1, "p90": 14.0, "p99": 180.0, "max": 590.0}},
            "poll": {"ok": {"count": 5500, "p50": 7.9, "p90": 13.5, "p99": 170.0, "max": 560.0}},
        },
        "realtime_lag": {
            "worst": {"key": "1", "process": 3, "lag_ms": 8200, "time_s": 36.5},
            "per_key": {"0": 4100, "1": 8200, "2": 3000},
            "over_time": [
                [t, (800 * (t - 10) if 10 <= t < 20 else 1000 * (t - 30) if 30 <= t < 38 else 20)]
                for t in range(0, 61)
            ],
        },
        "unseen": {
            "final": 2 if anomalies else 0,
            "over_time": [
                [t, (3 if 10 <= t < 21 else 2 if t >= 30 and anomalies else 0)]
                for t in range(0, 61)
            ],
        },
    }
    if not anomalies:
        return {
            "valid": True,
            "error_types": [],
            "bad_error_types": [],
            "anomalies": {},
            "metrics": metrics,
            "stats": {"ops": 22000, "keys": 3},
        }
    return {
        "valid": False,
        "error_types": ["G0", "G1c", "duplicate", "lost-write"],
        "bad_error_types": ["G1c", "duplicate", "lost-write"],
        "anomalies": {
            "lost-write": {
                "count": 2,
                "examples": [
                    {
                        "explanation": "Value 1234 of key 1 was acknowledged at offset 312 "
                        "by op 40 "
                        "(process 0), but no ok poll ever read it, although polls read "
                        "offsets up to 350 of key 1.",
                        "key": "1",
                        "value": 1234,
                        "offsets": [312],
                        "ops": [40, 41],
                    },
                    {
                        "explanation": f"A second lost value; error text {HOSTILE}",
                        "key": "2",
                        "value": 1300,
                        "offsets": [330],
                        "ops": [42],
                    },
                ],
            },
            "duplicate": {
                "count": 1,
                "examples": [
                    {
                        "explanation": "Value 77 of key 0 sits at offsets 40 and 41: "
                        "the producer's "
                        "retry was written twice.",
                        "key": "0",
                        "value": 77,
                        "offsets": [40, 41],
                        "ops": [12, 13],
                    }
                ],
            },
            "G1c": {
                "count": 1,
                "examples": [
                    {
                        "explanation": "Two transactions each read the other's write.",
                        "cycle": [20, 24],
                        "steps": [
                            "op 20 (process 1, txn) wrote 55 to key 2, which op 24 read (wr)",
                            "op 24 (process 0, txn) wrote 56 to key 0, which op 20 read (wr)",
                        ],
                        "ops": [20, 24],
                    }
                ],
            },
            "G0": {
                "count": 3,
                "examples": [
                    {
                        "explanation": "Write cycle across keys 0 and 1 (normal for Kafka).",
                        "cycle": [4, 8],
                        "steps": [
                            "op 4 wrote key 0 before op 8 (ww)",
                            "op 8 wrote key 1 before op 4 (ww)",
                        ],
                    }
                ],
            },
        },
        "metrics": metrics,
        "stats": {"ops": 22000, "keys": 3},
    }


def write_sample_run(path: Path, anomalies: bool = True, seed: int = 7) -> Path:
    """Create `path` as a run directory holding a synthetic history, test.json, results.json."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "logs").mkdir(exist_ok=True)
    with (path / "history.jsonl").open("wb") as fh:
        for op in _history(seed):
            fh.write(orjson.dumps(op) + b"\n")
    write_json(
        path / "test.json",
        {
            "name": "sample-queue",
            "ktrial_version": "0.1.0",
            "seed": seed,
            "cluster": {"kind": "local", "nodes": ["n1", "n2", "n3"], "broker_version": "4.1.0"},
            "workload": {"name": "queue", "txn": True, "keys": 3},
            "nemesis": {"faults": ["partition", "kill", "pause"], "interval_s": 10},
            "keys": {"0": ["ktrial-0", 0], "1": ["ktrial-1", 0], "2": ["ktrial-2", 0]},
            "start_wall": "2026-11-29T20:00:00Z",
            "note": HOSTILE,
        },
    )
    write_json(path / "results.json", _results(anomalies))
    return path
