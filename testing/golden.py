"""Golden results of the checker: a fixed set of generated histories and their results.

A refactoring or a speed-up of the checker must not change any verdict, example or
count. This script generates the same histories every time (valid ones of random
shapes from the correct-log model, and each again with every injectable anomaly),
checks each under two option sets and writes the normalized results (timings and
the time-budgeted informational cycle counts removed) one JSON line per history.

    .venv/bin/python -m ktrial.testing.golden write /tmp/golden-before.jsonl
    ... change the checker ...
    .venv/bin/python -m ktrial.testing.golden write /tmp/golden-after.jsonl
    .venv/bin/python -m ktrial.testing.golden compare /tmp/golden-before.jsonl \
        /tmp/golden-after.jsonl

`compare` prints every history whose results differ (the first differing path) and
exits 1 when any does.

The test suite holds the digests of these results (tests/data/golden-results.txt) and
fails when any changes (tests/checker/differential/test_golden.py). A change that
alters results on purpose rewrites them, and says why in its commit:

    .venv/bin/python -m ktrial.testing.golden digests tests/data/golden-results.txt
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path
from typing import Any

import orjson

from ..checker import CheckOptions, check
from ..histories.jsonl import op_from_json
from .gen import GenParams, generate
from .mutate import INJECTORS

OPTION_SETS = {
    "default": CheckOptions(cycle_timeout_s=1e9),
    "no-ww": CheckOptions(ww_deps=False, sub_via="assign", cycle_timeout_s=1e9),
}
# Fields that depend on wall-clock time or on a time budget, not on the history.
DIGEST_COUNT = 70  # valid shapes the test suite's digests cover (each with its faults)
VOLATILE = {"elapsed_s", "check_time_s", "elapsed", "checked_at", "duration_s"}


def _shape(rng: random.Random, seed: int) -> GenParams:
    return GenParams(
        seed=seed,
        keys=rng.randint(1, 4),
        processes=rng.randint(1, 5),
        ops=rng.randint(5, 80),
        txn=rng.random() < 0.7,
        max_mops=rng.randint(1, 4),
        abort_p=rng.choice([0.0, 0.15, 0.5]),
        fail_p=rng.choice([0.0, 0.1, 0.3]),
        info_p=rng.choice([0.0, 0.1, 0.3]),
        crash_p=rng.choice([0.0, 0.05, 0.2]),
        sub_via=rng.choice(["assign", "subscribe"]),
        reassign_p=rng.choice([0.0, 0.1]),
        reseek=rng.random() < 0.3,
        rebalance_p=rng.choice([0.0, 0.2]),
        null_offset_p=rng.choice([0.0, 0.3]),
        omit_invokes=rng.random() < 0.2,
        truncate=rng.random() < 0.2,
        tail_invokes=rng.randint(0, 2),
        int_keys=rng.random() < 0.5,
        nemesis_p=rng.choice([0.0, 0.05]),
    )


def histories(count: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """(name, op dicts) of `count` valid shapes and each one's injected faults."""
    rng = random.Random(20261201)
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for i in range(count):
        g = generate(_shape(rng, i))
        out.append((f"valid-{i}", g.ops))
        for name, inject in INJECTORS.items():
            fault = inject(g, random.Random(i))
            if fault is not None:
                out.append((f"{name}-{i}", fault.ops))
    return out


def _normalize(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _normalize(v) for k, v in sorted(x.items()) if k not in VOLATILE}
    if isinstance(x, list):
        return [_normalize(v) for v in x]
    if isinstance(x, float):
        return round(x, 9)
    return x


def results(ops: list[dict[str, Any]], opts: CheckOptions) -> Any:
    res = check([op_from_json(d, i) for i, d in enumerate(ops)], opts)
    res.pop("metrics", None)  # timings inside; the metrics have their own golden tests
    return _normalize(res)


def write(path: Path, count: int) -> int:
    n = 0
    with open(path, "wb") as fh:
        for name, ops in histories(count):
            row = {"name": name, **{k: results(ops, o) for k, o in OPTION_SETS.items()}}
            fh.write(orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n")
            n += 1
    return n


def digests() -> list[tuple[str, str]]:
    """(history name, sha256 of its normalized results under every option set)."""
    out = []
    for name, ops in histories(DIGEST_COUNT):
        row = {k: results(ops, o) for k, o in OPTION_SETS.items()}
        out.append(
            (name, hashlib.sha256(orjson.dumps(row, option=orjson.OPT_SORT_KEYS)).hexdigest())
        )
    return out


def _first_diff(a: Any, b: Any, path: str = "") -> str:
    if type(a) is not type(b):
        return f"{path}: {a!r:.120} != {b!r:.120}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'after' if k in b else 'before'}"
            if a[k] != b[k]:
                return _first_diff(a[k], b[k], f"{path}.{k}")
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_diff(x, y, f"{path}[{i}]")
    return f"{path}: {a!r:.120} != {b!r:.120}"


def compare(before: Path, after: Path) -> int:
    a = [orjson.loads(line) for line in before.read_bytes().splitlines()]
    b = [orjson.loads(line) for line in after.read_bytes().splitlines()]
    if [r["name"] for r in a] != [r["name"] for r in b]:
        print("the two files hold different histories (other --count or generator)")
        return 1
    bad = 0
    for x, y in zip(a, b, strict=True):
        if x != y:
            bad += 1
            print(f"{x['name']}: {_first_diff(x, y)}")
    print(f"{len(a)} histories x {len(OPTION_SETS)} option sets: {bad} differ")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write the golden results of this tree")
    w.add_argument("out", type=Path)
    w.add_argument("--count", type=int, default=70, help="valid shapes (each with its faults)")
    d = sub.add_parser("digests", help="write the digests the test suite compares with")
    d.add_argument("out", type=Path)
    c = sub.add_parser("compare", help="compare two golden files")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "write":
        n = write(args.out, args.count)
        print(f"{n} histories x {len(OPTION_SETS)} option sets -> {args.out}")
        return 0
    if args.cmd == "digests":
        rows = digests()
        args.out.write_text("".join(f"{n} {h}\n" for n, h in rows))
        print(f"{len(rows)} digests -> {args.out}")
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
