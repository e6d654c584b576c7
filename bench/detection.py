"""Detection, end to end: does ktrial catch a cluster that loses acknowledged writes?

For each seed, run the queue workload twice under the same kill/partition faults:
once on the `unsafe` profile with acks=1 and non-idempotent producers (brokers may
lose or duplicate acknowledged records), once on the `safe` profile with the default
careful clients (must be valid every time). Prints a markdown table for RESULTS.md.

    .venv/bin/python bench/detection.py --seeds 1,2,3,4,5 --time-limit 60
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import orjson

UNSAFE = [
    "--profile",
    "unsafe",
    "--no-txn",
    "--no-idempotence",
    "--acks",
    "1",
    "--producer-config",
    "retries=5",
]
SAFE = ["--profile", "safe", "--no-txn"]


def one(store: Path, name: str, seed: int, extra: list[str], args: argparse.Namespace) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "ktrial",
        "run",
        "--store",
        str(store),
        "--name",
        name,
        "--seed",
        str(seed),
        "--time-limit",
        str(args.time_limit),
        "--no-live",
        "--nemesis",
        args.nemesis,
        "--nemesis-interval",
        str(args.interval),
        *extra,
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    run = (store / name / "latest").resolve()
    res = (
        orjson.loads((run / "results.json").read_bytes()) if (run / "results.json").exists() else {}
    )
    bad = {t: res["anomalies"][t]["count"] for t in res.get("bad_error_types", [])}
    return {
        "seed": seed,
        "rc": proc.returncode,
        "valid": res.get("valid"),
        "bad": bad,
        "seconds": round(time.monotonic() - t0),
        "run": str(run),
        "ok_ops": sum(v.get("ok", 0) for v in res.get("metrics", {}).get("counts", {}).values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--nemesis", default="kill,partition")
    ap.add_argument("--interval", type=float, default=8)
    ap.add_argument("--store", type=Path, default=Path("bench/out/detection"))
    ap.add_argument("--only", choices=["safe", "unsafe"], default=None)
    args = ap.parse_args()
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for label, extra in (("unsafe", UNSAFE), ("safe", SAFE)):
            if args.only and label != args.only:
                continue
            r = one(args.store, f"detect-{label}", seed, extra, args)
            r["profile"] = label
            rows.append(r)
            print(orjson.dumps(r).decode(), flush=True)
    print()
    print("| profile | seed | exit | verdict | bad anomalies (count) | ok ops | seconds |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        bad = ", ".join(f"{t} ({n})" for t, n in r["bad"].items()) or "-"
        print(
            f"| {r['profile']} | {r['seed']} | {r['rc']} | {r['valid']} | {bad} | "
            f"{r['ok_ops']} | {r['seconds']} |"
        )


if __name__ == "__main__":
    main()
