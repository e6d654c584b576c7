"""The floor of checking in CPython: C-level passes over every polled record.

Whatever a pure-Python checker does per op, it must at least touch every record a
poll returned a few times: fold it into the key's log (compare with what the log
holds), add its value to the values ok ops read, check the offsets increase, and
keep the offsets compactly. Each of those is one C-level pass (``map``, ``set.update``,
``array``), with no Python bytecode per record. This script times each pass alone
over the records of a history, plus decoding the file with msgspec, so the sum is a
lower bound of what the checker can cost with its data in Python objects.

Usage (from the repository root; bench_check.py writes the history):

    .venv/bin/python bench/record_floor.py bench/out/history-1000000-1.jsonl
"""

from __future__ import annotations

import argparse
import gc
import time
from array import array
from collections.abc import Callable
from itertools import islice
from operator import lt
from typing import Any

import msgspec
from ktrial.histories.jsonl import iter_flat
from ktrial.histories.model import Flat

Run = tuple[int, str, list[Any], list[Any]]


def decode_seconds(path: str) -> float:
    """CPU seconds to decode every line with msgspec in 64 KiB blocks (no ops built)."""
    dec = msgspec.json.Decoder()
    t = time.process_time()
    with open(path, "rb") as fh:
        rest = b""
        while buf := fh.read(1 << 16):
            buf = rest + buf
            cut = buf.rfind(b"\n") + 1
            rest = buf[cut:]
            dec.decode_lines(buf[:cut])
    return time.process_time() - t


def passes(runs: list[Run], logs: dict[str, dict[int, Any]]) -> dict[str, Callable[[Run], Any]]:
    return {
        "find null offsets": lambda r: None in r[2],
        "compare with the log": lambda r: list(map(logs[r[1]].get, r[2])) != r[3],
        "offsets increase": lambda r: all(map(lt, r[2], islice(r[2], 1, None))),
        "offsets as array('q')": lambda r: array("q", r[2]),
        "values into a set": lambda r: set().update(r[3]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history")
    args = ap.parse_args()
    gc.disable()  # as the checker runs
    decode = decode_seconds(args.history)
    runs: list[Run] = [r for op in iter_flat(args.history) if type(op) is Flat for r in op.reads]
    logs: dict[str, dict[int, Any]] = {}
    for _i, k, offs, vals in runs:
        log = logs.setdefault(k, {})
        for o, v in zip(offs, vals, strict=True):
            log.setdefault(o, v)
    records = sum(len(r[2]) for r in runs)
    print(f"{len(runs):,} runs of polled records, {records:,} records")
    print(f"{decode:7.2f} s  msgspec decode of the file")
    total = decode
    for label, fn in passes(runs, logs).items():
        t = time.process_time()
        for r in runs:
            fn(r)
        s = time.process_time() - t
        total += s
        print(f"{s:7.2f} s  {label} ({1e9 * s / records:.0f} ns/record)")
    print(f"{total:7.2f} s  floor: decode + these passes, before any per-op work")


if __name__ == "__main__":
    main()
