"""Benchmark: the liveness analysis alone (checker/liveness.py, fault excusing included)
on a history with faults, for A/B comparisons of two checkouts.

    .venv/bin/python bench/bench_liveness.py                      # generate + measure
    PYTHONPATH=/tmp/a .venv/bin/python bench/bench_liveness.py --label a
    PYTHONPATH=/tmp/b .venv/bin/python bench/bench_liveness.py --label b

The history (about 90,000 lines, 32 keys, some 660 nemesis ops starting and ending
faults) comes from the correct-log model (ktrial.testing.gen) and is written once to
bench/out/. The history is read and prepared once; `liveness()` is then timed alone,
best CPU time of --repeat runs, so the reading and the other analyses do not drown a
change in it.
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path
from typing import Any

import orjson
from ktrial.checker import CheckOptions, liveness
from ktrial.checker.logs import build_logs
from ktrial.checker.prepare import prepare
from ktrial.histories.jsonl import iter_history
from ktrial.histories.model import NEMESIS
from ktrial.testing.gen import GenParams, generate

OUT = Path(__file__).resolve().parent / "out"


def history(ops: int, seed: int) -> Path:
    path = OUT / f"liveness-{ops}-{seed}.jsonl"
    if not path.exists():
        OUT.mkdir(exist_ok=True)
        g = generate(
            GenParams(
                seed=seed, keys=32, processes=16, ops=ops, txn=True, nemesis_p=0.003, info_p=0.05
            )
        )
        with open(path, "wb") as fh:
            for d in g.ops:
                fh.write(orjson.dumps(d) + b"\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=42_000, help="main-phase data ops to generate")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--label", default="liveness")
    args = ap.parse_args()
    path = history(args.ops, args.seed)
    gc.disable()
    ops = list(iter_history(path))
    nemesis = [op for op in ops if op.process == NEMESIS]
    p = prepare(iter(ops))
    logs = build_logs(p)
    best = float("inf")
    live: dict[str, Any] = {}
    for _ in range(args.repeat):
        t = time.process_time()
        live = liveness.liveness(p, logs, nemesis, CheckOptions())
        best = min(best, time.process_time() - t)
    print(
        f"{args.label}: {len(ops):,} lines, {len(nemesis)} nemesis ops: liveness() best of "
        f"{args.repeat} {best:.3f} s CPU; {len(live['violations'])} violations, excused "
        f"{live.get('excused_counts')}"
    )


if __name__ == "__main__":
    main()
