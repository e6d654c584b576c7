"""Detection with careful clients: the `unsafe` profile under composite faults.

For each seed, one `ktrial run` of the queue workload with the **default careful
clients** (acks=all, idempotence, transactions) on the `unsafe` profile and one on the
`safe` profile, under the same fault schedule (default: `partition-then-kill`, the
interval schedule). Each run takes the broker lock on its own (`flock` per run), so
other users of the machine's brokers interleave. Prints one JSON line per run and a
markdown table for bench/RESULTS.md.

    .venv/bin/python bench/detection_composite.py --seeds 1,2,3,4,5 --time-limit 120
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import orjson

CAUGHT = ("lost-write", "inconsistent-offsets", "duplicate")


def one(store: Path, profile: str, seed: int, args: argparse.Namespace) -> dict[str, object]:
    name = f"composite-{profile}"
    cmd = [
        "flock",
        args.lock,
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
        "--profile",
        profile,
        "--nemesis",
        args.nemesis,
        *(["--nemesis-interval", str(args.interval)] if args.interval else []),
        *[x for p in args.param for x in ("--nemesis-param", p)],
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    run = (store / name / "latest").resolve()
    path = run / "results.json"
    res = orjson.loads(path.read_bytes()) if path.exists() else {}
    bad = {t: res["anomalies"][t]["count"] for t in res.get("bad_error_types", [])}
    return {
        "profile": profile,
        "seed": seed,
        "rc": proc.returncode,
        "valid": res.get("valid"),
        "bad": bad,
        "caught": sorted(t for t in bad if t in CAUGHT),
        "seconds": round(time.monotonic() - t0),
        "run": str(run),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--time-limit", type=float, default=120)
    ap.add_argument("--nemesis", default="partition-then-kill")
    ap.add_argument("--interval", type=float, default=0, help="0: the fitted default")
    ap.add_argument("--param", action="append", default=[], help="--nemesis-param, repeatable")
    ap.add_argument("--profiles", default="unsafe,safe")
    ap.add_argument("--lock", default="/tmp/ktrial-brokers.lock")
    ap.add_argument("--store", type=Path, default=Path("bench/out/detection-composite"))
    args = ap.parse_args()
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for profile in args.profiles.split(","):
            r = one(args.store, profile, seed, args)
            rows.append(r)
            print(orjson.dumps(r).decode(), flush=True)
    print()
    print("| profile | seed | exit | verdict | bad anomalies (count) | seconds |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        bad = ", ".join(f"{t} ({n})" for t, n in r["bad"].items()) or "-"  # type: ignore[attr-defined]
        print(
            f"| {r['profile']} | {r['seed']} | {r['rc']} | {r['valid']} | {bad} | {r['seconds']} |"
        )


if __name__ == "__main__":
    main()
