"""What `ktrial runs --trend` costs on a store of soak runs: is a figures cache needed?

Builds (once, under --dir) a store of `--runs` runs of one test whose results.json
is a real run's (`--from`, default: a generated history checked here) padded to
`--mib` MiB the way a long soak's grows (one recovery event per heal, realtime lag
per key), then times, best of `--repeat`:

- `load`: orjson of one results.json (what every judged run costs);
- `figures`: run_figures on the loaded dict;
- `trend`: load_trend(store, name, last=N) end to end, for N = 5 and N = all runs.

Usage (from the repository root):

    .venv/bin/python bench/bench_trend.py                    # 30 runs of 4 MiB
    .venv/bin/python bench/bench_trend.py --runs 365 --mib 8
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from ktrial.checker import CheckOptions, check
from ktrial.histories.store import create_run, load_json, write_json
from ktrial.histories.testmeta import TestMeta
from ktrial.report.figures import run_figures
from ktrial.report.trend import load_trend
from ktrial.testing.gen import GenParams, generate, to_jsonl

DAY = 86_400.0


def base_results(path: str | None) -> dict[str, Any]:
    if path:
        data = load_json(path)
        assert isinstance(data, dict)
        return data
    return check(generate(GenParams(seed=1, ops=2_000)).to_ops(), CheckOptions())


def padded(res: dict[str, Any], mib: float) -> dict[str, Any]:
    """`res` grown to about `mib` MiB with heals' recovery events and per-key lag."""
    out = copy.deepcopy(res)
    live = out.setdefault("metrics", {}).setdefault("liveness", {})
    rec = live.setdefault("recovery", {"heals": 0, "max_send_s": 1.0, "max_read_s": 1.0})
    lag = out["metrics"].setdefault("realtime_lag", {}).setdefault("per_key", {})
    event = {
        "f": "stop-partition",
        "index": 123_456,
        "time_s": 1234.5,
        "value": {"nodes": ["n1", "n2"], "shape": "majority-minority"},
        "send_s": 2.5,
        "read_s": 3.1,
    }
    events = rec.setdefault("events", [])
    size0 = len(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    for i in range(1000):  # measure what 1,000 heals weigh, then add as many as fit
        events.append({**event, "index": i})
        lag[str(i)] = 1234.5
    per = (len(orjson.dumps(out, option=orjson.OPT_INDENT_2)) - size0) / 1000
    for i in range(1000, int((mib * (1 << 20) - size0) / per)):
        events.append({**event, "index": i})
        lag[str(i)] = 1234.5
    rec["heals"] = len(events)
    return out


def build(root: Path, runs: int, res: dict[str, Any]) -> None:
    for n in range(runs):
        when = 1_796_000_000.0 + n * DAY
        rd = create_run(root, "soak", now=when)
        to_jsonl([], rd.history)
        TestMeta(
            name="soak",
            seed=n,
            wall_start=when,
            wall_end=when + 3600,
            cluster={"kind": "local", "nodes": 3, "profile": "safe"},
            nemesis={"families": ["kill", "partition"]},
            other={"workload": "queue", "txn": True},
        ).write(rd.test_json)
        write_json(rd.results, res)


def best(repeat: int, fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--mib", type=float, default=4.0)
    ap.add_argument("--from", dest="source", help="a results.json to pad (default: generated)")
    ap.add_argument("--dir", type=Path, help="where to build the store (default: a temp dir)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-trend-"))
    res = padded(base_results(args.source), args.mib)
    if not (root / "soak").is_dir():
        build(root, args.runs, res)
    one = next(p for p in sorted((root / "soak").iterdir()) if (p / "results.json").is_file())
    size = os.path.getsize(one / "results.json")
    print(f"store {root}: {args.runs} runs, results.json {size / (1 << 20):.1f} MiB each")
    print(f"load avg {os.getloadavg()[0]:.2f}; best of {args.repeat}")
    loaded = load_json(one / "results.json")
    rows = {
        "load one results.json": best(args.repeat, lambda: load_json(one / "results.json")),
        "run_figures of it": best(args.repeat, lambda: run_figures(loaded, {})),
        "trend --last 5": best(args.repeat, lambda: load_trend(root, "soak", last=5)),
        f"trend --last {args.runs}": best(
            args.repeat, lambda: load_trend(root, "soak", last=args.runs)
        ),
    }
    for what, s in rows.items():
        print(f"{what:>24}: {s * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
