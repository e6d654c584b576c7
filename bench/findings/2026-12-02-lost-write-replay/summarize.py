"""The table of the lost-write replays, from the run directories replay.sh made.

    .venv/bin/python bench/findings/2026-12-02-lost-write-replay/summarize.py [STORE]
    (default bench/out/lost-write-replay)

One row per run (every run, oldest first) with its schedule and driver (the test name
`<schedule>[-tv1]-<driver>`), the verdict, the anomalies that make it invalid with their
counts (the others, legal under the run's model, counted apart), when the first txn op
was ok and the first fault began, ok/fail/info of the txn ops, what each loss needed
(see `precursors`), the transaction protocol of the brokers and the one the client said
it used (only the Java worker says), and the load average replay.log noted when the run
began; then per schedule and driver: runs, invalid runs, runs with a lost write.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def loads(log: Path) -> dict[str, list[tuple[str, str]]]:
    """test name -> (start time as a run directory's name, load averages) per start."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    if log.exists():
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 9 and parts[1] == "start":
                stamp = parts[0].replace("-", "").replace(":", "").rstrip("Z")
                out[parts[2]].append((stamp, " ".join(parts[6:9])))
    return out


def load_at(starts: list[tuple[str, str]], run: str) -> str:
    """The load noted at the last start of the test before its run directory was made."""
    before = [load for stamp, load in starts if stamp <= run]
    return before[-1] if before else "not noted"


def precursors(history: Path) -> tuple[int, int]:
    """What each loss needed, counted in the history: (sends of ok ops the client reported
    delivered without an offset: librdkafka's inferred deliveries, which lose the write in
    session 10's way when the record was never stored; failed txn ops with an
    unacknowledged send, not refused by the client before sending, whose process went on
    to another op: the abort after which librdkafka reused a sequence number in session
    3's way)."""
    offsetless = 0
    unsure: set[Any] = set()  # processes whose last op was a failed txn with an unacked send
    kept = 0
    with history.open() as f:
        for line in f:
            op = json.loads(line)
            proc = op.get("process")
            if op.get("type") == "invoke":
                if proc in unsure:
                    kept += 1
                    unsure.discard(proc)
                continue
            sends = [
                m
                for m in op.get("value") or []
                if isinstance(m, list) and len(m) == 3 and m[0] == "send"
            ]
            if op.get("type") == "ok":
                offsetless += sum(
                    1 for m in sends if isinstance(m[2], list) and m[2] and m[2][0] in (None, -1)
                )
            elif (
                op.get("type") == "fail"
                and op.get("f") == "txn"
                and not (isinstance(op.get("error"), dict) and op["error"].get("refused"))
                and any(not isinstance(m[2], list) for m in sends)
            ):
                unsure.add(proc)
    return offsetless, kept


def timeline(history: Path) -> tuple[float | None, float | None]:
    """(first ok txn, first fault) in seconds of history time: a client whose first ok
    op came after the first fault began did not meet that fault working."""
    first_ok: float | None = None
    first_fault: float | None = None
    with history.open() as f:
        for line in f:
            op = json.loads(line)
            t = op.get("time", 0) / 1e9
            if first_fault is None and op.get("process") == "nemesis" and op.get("fault"):
                first_fault = t
            if first_ok is None and op.get("type") == "ok" and op.get("f") == "txn":
                first_ok = t
    return first_ok, first_fault


def met(line: tuple[float | None, float | None]) -> bool:
    """Did the client work before the first fault?"""
    return line[0] is not None and line[1] is not None and line[0] < line[1]


def row(run: Path) -> dict[str, Any]:
    r = json.loads((run / "results.json").read_text())
    t = json.loads((run / "test.json").read_text())
    anomalies = r.get("anomalies") or {}
    bad = set(r.get("bad_error_types") or [])

    def count(v: Any) -> Any:
        return v.get("count", "?") if isinstance(v, dict) else v

    txn = (r.get("metrics", {}).get("counts") or {}).get("txn", {})
    clients = (t.get("workload_results") or {}).get("clients") or {}
    protocols = sorted(
        {c["txn_protocol"] for c in clients.values() if isinstance(c, dict) and "txn_protocol" in c}
    )
    brokers = ((t.get("cluster") or {}).get("transactions") or {}).get("protocol") or "?"
    return {
        "run": run.name,
        "valid": r.get("valid"),
        "bad": [f"{k}×{count(v)}" for k, v in anomalies.items() if k in bad],
        "other": [f"{k}×{count(v)}" for k, v in anomalies.items() if k not in bad],
        "txn": f"{txn.get('ok', 0)}/{txn.get('fail', 0)}/{txn.get('info', 0)}",
        "protocol": f"{brokers} / {','.join(protocols) or '-'}",
        "lost": "lost-write" in bad,
        "precursors": precursors(run / "history.jsonl"),
        "timeline": timeline(run / "history.jsonl"),
    }


def main(argv: list[str]) -> int:
    store = Path(argv[1]) if len(argv) > 1 else Path("bench/out/lost-write-replay")
    if not store.is_dir():
        print(f"no such store: {store}", file=sys.stderr)
        return 2
    load = loads(store / "replay.log")
    rows: list[tuple[str, dict[str, Any]]] = []
    for test in sorted(p for p in store.iterdir() if p.is_dir()):
        runs = sorted(p for p in test.glob("2*") if (p / "results.json").exists())
        for run in runs:
            try:
                r = row(run)
            except (OSError, ValueError, AttributeError) as e:
                print(
                    f"skipping {run}: unreadable results.json or test.json ({e})", file=sys.stderr
                )
                continue
            r["load"] = load_at(load.get(test.name, []), run.name)
            rows.append((test.name, r))
    rows.sort(key=lambda x: x[1]["run"])
    cols = [
        "schedule", "driver", "run", "verdict", "invalid by", "other anomalies",
        "first ok txn / first fault s", "txn ok/fail/info", "ok sends without offset",
        "unsure aborts, producer kept", "txn protocol: brokers / client", "load avg at start",
    ]  # fmt: skip
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for name, r in rows:
        sched, _, driver = name.rpartition("-")
        verdict = {True: "VALID", False: "INVALID"}.get(r["valid"], "unknown")
        cells = [
            sched, driver, r["run"], verdict, ", ".join(r["bad"]) or "-",
            ", ".join(r["other"]) or "-",
            " / ".join("-" if t is None else f"{t:.1f}" for t in r["timeline"]), r["txn"],
            r["precursors"][0], r["precursors"][1], r["protocol"], r["load"],
        ]  # fmt: skip
        print("| " + " | ".join(str(c) for c in cells) + " |")
        t = totals[name]
        t[0] += 1
        t[1] += r["valid"] is False
        t[2] += r["lost"]
        t[3] += met(r["timeline"])
    print()
    print("| schedule | driver | runs | working before the first fault | invalid | lost write |")
    print("|---|---|---|---|---|---|")
    for name, (n, bad, lost, warm) in sorted(totals.items()):
        sched, _, driver = name.rpartition("-")
        print(f"| {sched} | {driver} | {n} | {warm} | {bad} | {lost} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
