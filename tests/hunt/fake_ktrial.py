"""A stand-in for `python -m ktrial run` in the hunt's tests: no broker, the same
run-directory shape (test.json, history.jsonl with nemesis ops, results.json).

A run is INVALID (lost-write, exit 1) when its faults include a kill: a search
trial's ``--nemesis`` list, or a replay's script with a kill entry. ``--dry-run``
exits 0, or 254 for ``--profile bogus`` (a usage error) and for ``--nemesis``
naming ``loss`` (as a cluster without namespaces refuses it). With
``FAKE_KTRIAL_WAIT`` set, a run waits for SIGINT and records itself interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import tomllib
from pathlib import Path


def opt(args: list[str], name: str, default: str | None = None) -> str | None:
    return args[args.index(name) + 1] if name in args else default


def main() -> int:
    args = sys.argv[2:]  # after "run"
    if "--profile" in args and opt(args, "--profile") == "bogus":
        print("Error: Invalid value for '--profile': 'bogus'", file=sys.stderr)
        return 254
    nemesis = (opt(args, "--nemesis", "") or "").split(",")
    if "loss" in nemesis:
        print("Error: Invalid value for --nemesis: loss: shared address", file=sys.stderr)
        return 254
    if "--dry-run" in args:
        print("plan (--dry-run: nothing started, nothing written)")
        return 0
    store, name = Path(opt(args, "--store") or "store"), opt(args, "--name") or "queue"
    run = store / name / time.strftime("%Y%m%dT%H%M%S")
    n = 1
    while run.exists():
        n += 1
        run = store / name / f"{time.strftime('%Y%m%dT%H%M%S')}-{n}"
    (run / "logs").mkdir(parents=True)
    print(f"[ktrial] run directory: {run}  (seed {opt(args, '--seed')})", file=sys.stderr)
    interrupted = False
    if os.environ.get("FAKE_KTRIAL_WAIT"):
        got: list[int] = []
        signal.signal(signal.SIGINT, lambda s, f: got.append(s))
        (run / "started").write_text("")
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        interrupted = bool(got)
    script = opt(args, "--nemesis-script")
    entries = tomllib.loads(Path(script).read_text())["entry"] if script else []
    ops = []
    if "kill" in nemesis:  # a search trial: it kills n2 at 5 s for 4 s and pauses n1
        entries = [
            {"at": 2.0, "fault": "pause", "targets": ["n1"], "duration": 3.0},
            {"at": 5.0, "fault": "kill", "targets": ["n2"], "duration": 4.0},
        ]
    for i, e in enumerate(entries):
        fid = f"x-{i}"
        start_f, end_f = {"kill": ("kill", "start"), "pause": ("pause", "resume")}[e["fault"]]
        t0 = int(e["at"] * 1e9)
        ops.append(
            {
                "time": t0,
                "f": start_f,
                "value": {"nodes": e["targets"]},
                "id": fid,
                "fault": e["fault"],
            }
        )
        ops.append(
            {
                "time": t0 + int(e["duration"] * 1e9),
                "f": end_f,
                "value": {"nodes": e["targets"]},
                "id": fid,
                "fault": e["fault"],
            }
        )
    with (run / "history.jsonl").open("w") as fh:
        for i, op in enumerate(sorted(ops, key=lambda o: o["time"])):
            line = {
                "index": i,
                "time": op["time"],
                "process": "nemesis",
                "type": "info",
                "f": op["f"],
                "value": op["value"],
                "fault": op["fault"],
                "fault_id": op["id"],
            }
            fh.write(json.dumps(line) + "\n")
    killed = any(e["fault"] == "kill" for e in entries)
    meta = {
        "name": name,
        "seed": int(opt(args, "--seed") or 0),
        "interrupted": interrupted,
        "nemesis": {"schedule_start_s": 0.0, "params": {}},
    }
    (run / "test.json").write_text(json.dumps(meta))
    results = {"valid": not killed, "bad_error_types": ["lost-write"] if killed else []}
    (run / "results.json").write_text(json.dumps(results))
    print("verdict: " + ("INVALID" if killed else "VALID"))
    return 1 if killed else 0


if __name__ == "__main__":
    sys.exit(main())
