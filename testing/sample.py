"""A small synthetic run directory: for tests, the docs screenshot, and trying reports.

`write_sample_run(path, anomalies=True)` writes history.jsonl, test.json and
results.json shaped exactly like a real run's (docs/history-format.md and docs/anomalies.md): two
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
    # Two transactions that each read the other's write: a genuine G1c (circular visibility).
    xa, xb = 900_001, 900_002
    events.append((25.0, ("op", 4, "invoke", "txn", [["send", "0", xa], ["poll"]])))
    events.append((25.3, ("op", 5, "invoke", "txn", [["send", "1", xb], ["poll"]])))
    events.append(
        (
            25.4,
            ("op", 4, "ok", "txn", [["send", "0", [900, xa]], ["poll", {"1": [[901, xb]]}]], None),
        )
    )
    events.append(
        (
            25.5,
            ("op", 5, "ok", "txn", [["send", "1", [901, xb]], ["poll", {"0": [[900, xa]]}]], None),
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


def _results(anomalies: bool, ops: list[dict[str, Any]]) -> dict[str, Any]:
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
            "stats": {"ops": len(ops), "keys": 3},
        }
    return {
        "valid": False,
        "error_types": ["G0", "G1c", "duplicate", "lost-write"],
        "bad_error_types": ["G1c", "duplicate", "lost-write"],
        "anomalies": _anomalies(ops),
        "metrics": metrics,
        "stats": {"ops": len(ops), "keys": 3},
    }


def _sent(op: dict[str, Any]) -> tuple[str, int, int]:
    _, key, (offset, value) = op["value"][0]
    return str(key), offset, value


def _who(op: dict[str, Any]) -> str:
    return f"op {op['index']} (process {op['process']}, ok {op['f']}, {op['time'] / NS:.3f} s)"


def _anomalies(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Examples that cite real ops of the sample history, worded like the checker's."""
    sends = [o for o in ops if o["f"] == "send" and o["type"] == "ok"]
    polls = [o for o in ops if o["f"] == "poll" and o["type"] == "ok"]

    def first(lo: float, hi: float, process: Any = None) -> dict[str, Any]:
        return next(
            o
            for o in sends
            if lo * NS <= o["time"] < hi * NS and (process is None or o["process"] != process)
        )

    def later_poll(op: dict[str, Any], key: str) -> dict[str, Any]:
        return next(p for p in polls if p["time"] > op["time"] + 2 * NS and key in p["value"][0][1])

    def lost(op: dict[str, Any], note: str = "") -> dict[str, Any]:
        key, off, val = _sent(op)
        reader = later_poll(op, key)
        read_off = reader["value"][0][1][key][0][0]
        return {
            "explanation": f"{_who(op)} sent value {val} to key {key}, which landed at offset "
            f"{off}. No ok op ever read it, although {_who(reader)} read the later offset "
            f"{read_off}: the acknowledged write was lost.{note}",
            "key": key,
            "value": val,
            "offset": off,
            "ops": [op["index"], reader["index"]],
        }

    dup = first(42, 50)
    dk, doff, dval = _sent(dup)
    txa, txb = [o for o in ops if o["f"] == "txn" and o["type"] == "ok"]
    g0a = first(3, 5)
    g0b = first(g0a["time"] / NS, 6, process=g0a["process"])
    return {
        "lost-write": {
            "count": 2,
            "examples": [
                lost(first(12, 18)),
                lost(first(31, 37), f" The producer's log said: {HOSTILE}"),
            ],
        },
        "duplicate": {
            "count": 1,
            "examples": [
                {
                    "explanation": f"Value {dval} of key {dk} sits at 2 offsets "
                    f"({doff}, {doff + 3}); "
                    f"it was sent once, by {_who(dup)}, so it must appear once.",
                    "key": dk,
                    "value": dval,
                    "offsets": [doff, doff + 3],
                    "ops": [dup["index"]],
                }
            ],
        },
        "G1c": {
            "count": 1,
            "examples": [
                {
                    "explanation": "A G1c cycle of 2 ops: each transaction read the other's "
                    "write, so "
                    "neither can have committed first.",
                    "cycle": [txa["index"], txb["index"]],
                    "steps": [
                        f"{_who(txa)} sent value 900001 to key 0 (micro-op 0), "
                        f"and {_who(txb)} read it "
                        "at offset 900 (micro-op 1)",
                        f"{_who(txb)} sent value 900002 to key 1 (micro-op 0), "
                        f"and {_who(txa)} read it "
                        "at offset 901 (micro-op 1)",
                    ],
                    "ops": [txa["index"], txb["index"]],
                }
            ],
        },
        "G0": {
            "count": 3,
            "examples": [
                {
                    "explanation": "A write cycle across keys (normal for Kafka: writes to "
                    "different "
                    "partitions are not ordered).",
                    "cycle": [g0a["index"], g0b["index"]],
                    "steps": [
                        f"{_who(g0a)} wrote key {_sent(g0a)[0]} before {_who(g0b)} (ww)",
                        f"{_who(g0b)} wrote key {_sent(g0b)[0]} before {_who(g0a)} (ww)",
                    ],
                }
            ],
        },
    }


def write_sample_run(path: Path, anomalies: bool = True, seed: int = 7) -> Path:
    """Create `path` as a run directory holding a synthetic history, test.json, results.json."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "logs").mkdir(exist_ok=True)
    ops = _history(seed)
    with (path / "history.jsonl").open("wb") as fh:
        for op in ops:
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
    write_json(path / "results.json", _results(anomalies, ops))
    return path
