"""The cost of the running safety check (ktrial/watch.py) on a run's throughput.

Runs the same `ktrial run` (local cluster, queue workload, no faults, one seed)
with running checks off (`--check-every 0`) and on (`--check-every S`),
alternating, and prints for each run the ok data ops per second of the main phase,
the number of checks and the wall time they took (test.json's `watch` section).

    flock /tmp/ktrial-brokers.lock .venv/bin/python bench/watch_cost.py \
        --time-limit 120 --every 10 --rounds 2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

DATA_FS = ("send", "poll", "txn")


def main_phase_rate(run: Path) -> tuple[float, int]:
    """(ok data ops per second, ok data ops) before the drain began."""
    meta = orjson.loads((run / "test.json").read_bytes())
    end_s = ((meta.get("drain") or {}).get("started_s")) or meta.get("time_limit")
    n = 0
    first: float | None = None
    for line in (run / "history.jsonl").read_bytes().splitlines():
        op = orjson.loads(line)
        if op.get("process") == "nemesis" or op.get("f") not in DATA_FS:
            continue
        t = op["time"] / 1e9
        if first is None:
            first = t
        if op["type"] == "ok" and t <= end_s:
            n += 1
    span = end_s - (first or 0.0)
    return (n / span if span > 0 else 0.0), n


def one(store: Path, every: float, args: argparse.Namespace) -> dict[str, Any]:
    name = f"every-{every:g}"
    cmd = [
        *(sys.executable, "-m", "ktrial", "run", "--store", str(store), "--name", name),
        *("--seed", str(args.seed), "--time-limit", str(args.time_limit), "--no-live"),
        *("--check-every", str(every), *args.extra),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    run = (store / name / "latest").resolve()
    rate, n = main_phase_rate(run)
    meta = orjson.loads((run / "test.json").read_bytes())
    watch = meta.get("watch") or {}
    return {
        "every": every,
        "rc": proc.returncode,
        "ok_ops": n,
        "ops_s": round(rate, 1),
        "checks": watch.get("checks", 0),
        "check_s": watch.get("check_s", 0.0),
        "seconds": round(time.monotonic() - t0),
        "run": str(run),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=120)
    ap.add_argument("--every", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--store", type=Path, default=Path("bench/out/watch-cost"))
    ap.add_argument("extra", nargs="*", help="more `ktrial run` flags (after --)")
    args = ap.parse_args()
    print("| check every | exit | ok ops | ok ops/s | checks | check time (s) | seconds |")
    print("|---|---|---|---|---|---|---|")
    for _ in range(args.rounds):
        for every in (0.0, args.every):
            r = one(args.store, every, args)
            print(
                f"| {'off' if not every else f'{every:g} s'} | {r['rc']} | {r['ok_ops']} | "
                f"{r['ops_s']} | {r['checks']} | {r['check_s']} | {r['seconds']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
