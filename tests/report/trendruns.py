"""Stored runs for the trend tests, written the way `ktrial run` writes them.

Each run is a real run directory (`create_run`) holding a generated valid history
(history.jsonl), a test.json written through TestMeta with the fields a run records
(name, seed, cluster, workload, txn, nemesis) and the results.json the checker makes
of that history. `with_figures` then moves named figures in those results, at the
places the checker writes them, so a test controls the numbers it judges.
"""

from __future__ import annotations

import copy
import functools
import random
from pathlib import Path
from typing import Any

from ktrial.checker import CheckOptions, check
from ktrial.histories.store import create_run, write_json
from ktrial.histories.testmeta import TestMeta
from ktrial.testing.gen import Generated, GenParams, generate, to_jsonl
from ktrial.testing.mutate import lost_write

DAY = 86_400.0
START = 1_796_000_000.0  # the first run's time (epoch seconds)

# where the checker writes each fixed figure in results.json
PATHS: dict[str, tuple[str, ...]] = {
    "txn_per_s": ("metrics", "throughput", "ok_per_s_by_f", "txn"),
    "ops_per_s": ("metrics", "throughput", "ok_data_per_s"),
    "e2e_p50": ("metrics", "liveness", "e2e_latency_ms", "p50"),
    "e2e_p99": ("metrics", "liveness", "e2e_latency_ms", "p99"),
    "commit_p50": ("metrics", "liveness", "commit_latency_ms", "p50"),
    "commit_p99": ("metrics", "liveness", "commit_latency_ms", "p99"),
    "recovery_send": ("metrics", "liveness", "recovery", "max_send_s"),
    "recovery_read": ("metrics", "liveness", "recovery", "max_read_s"),
}


@functools.cache
def _generated(seed: int) -> Generated:
    return generate(GenParams(seed=seed, ops=120))


@functools.cache
def _checked(seed: int, anomaly: bool) -> dict[str, Any]:
    g = _generated(seed)
    if not anomaly:
        return check(g.to_ops(), CheckOptions())
    fault = lost_write(g, random.Random(seed))
    assert fault is not None
    return check(Generated(g.params, fault.ops, g.truth).to_ops(), CheckOptions())


def results(seed: int = 1, *, anomaly: bool = False) -> dict[str, Any]:
    """The checker's results of a generated history (with a lost write: `anomaly`)."""
    return copy.deepcopy(_checked(seed, anomaly))


def with_figures(res: dict[str, Any], **figures: float | None) -> dict[str, Any]:
    """`res` with named fixed figures set (`e2e_p99=400.0`), and `mem_slope_<node>` as a
    node's bytes_per_min in MiB/min."""
    for name, v in figures.items():
        if name.startswith("mem_slope_"):
            node = name.removeprefix("mem_slope_")
            mem = res["metrics"]["liveness"]["memory"]
            mem["nodes"][node] = {
                "samples": 12,
                "processes": 1,
                "bytes_per_min": None if v is None else v * (1 << 20),
                "flagged": False,
            }
            continue
        *parents, leaf = PATHS[name]
        d = res
        for p in parents:
            d = d.setdefault(p, {})
        d[leaf] = v
    return res


def meta_for(
    name: str,
    seed: int,
    *,
    when: float,
    faults: tuple[str, ...] = ("kill", "partition"),
    profile: str = "safe",
    txn: bool = True,
) -> TestMeta:
    return TestMeta(
        ktrial_version="0.1.0",
        name=name,
        seed=seed,
        time_limit=60.0,
        wall_start=when,
        cluster={"kind": "local", "broker": "apache-kafka", "nodes": 3, "profile": profile},
        nemesis={"faults": list(faults), "families": sorted(faults), "schedule": "interval"},
        wall_end=when + 70.0,
        other={"workload": "queue", "txn": txn, "idempotence": True},
    )


def write_run(
    store: Path,
    name: str,
    n: int,
    res: dict[str, Any] | None,
    **test: Any,
) -> Path:
    """The `n`-th nightly run of `name` (n days after START) with these results (None:
    not checked) and test.json settings (see meta_for)."""
    when = START + n * DAY
    rd = create_run(store, name, now=when)
    seed = 100 + n
    to_jsonl(_generated(1).ops, rd.history)
    meta_for(name, seed, when=when, **test).write(rd.test_json)
    if res is not None:
        write_json(rd.results, res)
    return rd.path


def nightly(store: Path, name: str, e2e_p99: list[float], **test: Any) -> list[Path]:
    """One run per night with these e2e p99 latencies (everything else the same)."""
    return [
        write_run(store, name, i, with_figures(results(), e2e_p99=v), **test)
        for i, v in enumerate(e2e_p99)
    ]
