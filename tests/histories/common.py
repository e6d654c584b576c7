"""Helpers shared by the history-reader tests of several files (history lines are in
tests/histlines.py).

The strict-only reading mode (every JSONL line through histories/jsonl.py's strict
reader, as where msgspec is absent), the comparison of all four JSONL readers, results
without timing (`core`) or reduced to the verdict, and a corpus of generated histories,
some with one injected fault, that the differential tests rewrite in other spellings.
"""

from __future__ import annotations

import contextlib
import json
import random
import warnings
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from ktrial.histories import jsonl
from ktrial.histories.jsonl import HistoryError, iter_flat, iter_history
from ktrial.histories.model import Flat, Op, flatten
from ktrial.testing.gen import GenParams, generate
from ktrial.testing.mutate import INJECTORS
from ktrial.tests.histlines import Line


@contextlib.contextmanager
def strict_only() -> Iterator[None]:
    """Read as ktrial does without msgspec: every line through the strict reader."""
    saved = jsonl.decode_block, jsonl.decode_line
    jsonl.decode_block = lambda buf: None  # type: ignore[assignment]
    jsonl.decode_line = lambda raw: None  # type: ignore[assignment]
    try:
        yield
    finally:
        jsonl.decode_block, jsonl.decode_line = saved


def norm(o: Op | Flat) -> tuple[Any, ...]:
    """A reader's op in a comparable form (data ops as their effects)."""
    if isinstance(o, Op):
        if not o.is_data:
            return ("op", json.dumps(o.to_json(), sort_keys=True, default=repr))
        o = flatten(o)
    reads = [(i, k, list(offs), list(vals)) for i, k, offs, vals in o.reads]
    return (
        "data",
        o.index,
        o.time,
        o.process,
        o.type,
        o.f,
        tuple(o.writes),
        reads,
        json.dumps(o.error, sort_keys=True, default=repr),
        json.dumps(o.extra or {}, sort_keys=True, default=repr),
    )


Outcome = tuple[str, Any, list[str]]


def read_with(reader: Callable[[Path], Iterator[Any]], path: Path) -> Outcome:
    """("ok", ops, warnings) or ("err", message, warnings); a crash is a test failure."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got: Any = [norm(o) for o in reader(path)]
            kind = "ok"
        except HistoryError as e:
            got, kind = str(e), "err"
    return kind, got, [str(w.message) for w in caught]


def all_readers(path: Path) -> dict[str, Outcome]:
    out = {"block": read_with(iter_history, path), "block-flat": read_with(iter_flat, path)}
    with strict_only():
        out["strict"] = read_with(iter_history, path)
        out["strict-flat"] = read_with(iter_flat, path)
    return out


def assert_readers_agree(path: Path) -> Outcome:
    got = all_readers(path)
    first = got["strict"]
    for name, res in got.items():
        assert res == first, f"{name} reader differs from the strict reader:\n{res}\n{first}"
    return first


def core(res: dict[str, Any]) -> dict[str, Any]:
    """results.json minus what depends on the machine (timing) and what only `ktrial
    check` writes (its "input" section: what reading let pass, with warnings)."""
    res = json.loads(json.dumps(res, default=repr))
    res["stats"].pop("check_time_s", None)
    res.pop("input", None)
    return res


def verdict(res: dict[str, Any]) -> tuple[Any, ...]:
    return (
        res["valid"],
        sorted(res["error_types"]),
        sorted(res["bad_error_types"]),
        {k: v["count"] for k, v in res["anomalies"].items()},
    )


def dump_lines(lines: list[str], sep: str = "\n") -> bytes:
    return "".join(ln + sep for ln in lines).encode()


@lru_cache(maxsize=1)
def corpus() -> list[tuple[str, list[Line]]]:
    """Correct-log histories (assign and subscribe, null offsets, info/crash, invoke-less,
    cut short) and a few with one injected fault each."""
    out: list[tuple[str, list[Line]]] = []
    for seed in range(4):
        g = generate(
            GenParams(
                seed=seed,
                ops=30,
                null_offset_p=0.2,
                info_p=0.1,
                crash_p=0.05,
                sub_via=("assign", "subscribe")[seed % 2],
                omit_invokes=seed == 2,
                truncate=seed == 3,
                tail_invokes=seed % 2,
                nemesis_p=0.03,
            )
        )
        out.append((f"clean-{seed}", g.ops))
        names = sorted(INJECTORS)
        for name in names[seed::4][:2]:
            fault = INJECTORS[name](g, random.Random(seed))
            if fault is not None:
                out.append((f"{name.replace('/', '-')}-{seed}", fault.ops))
    return out


# One ok send and the poll that read it, as compact JSONL lines; a nemesis op in
# Jepsen's keyword spelling; both ops as a history's text.
S0 = '{"index":0,"time":0,"process":0,"type":"ok","f":"send","value":[["send",1,[0,1]]]}'
P1 = '{"index":1,"time":1,"process":1,"type":"ok","f":"poll","value":[["poll",{"1":[[0,1]]}]]}'
KW = '{"index":2,"time":2,"process":":nemesis","type":":info","f":":kill","value":null}'
GOOD_TEXT = S0 + "\n" + P1 + "\n"


def line_of(**kw: Any) -> str:
    """One JSONL line: an ok send of process 0 unless `kw` says otherwise."""
    return json.dumps({"process": 0, "type": "ok", "f": "send", **kw})
