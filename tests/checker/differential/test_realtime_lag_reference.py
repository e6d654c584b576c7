"""The realtime-lag metric against its direct definition (Jepsen's realtime-lag, as
docs/anomalies.md states it), computed here by brute force on generated histories.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial.checker.logs import Logs, build_logs
from ktrial.checker.metrics import MAX_CONSUMERS, _read_tops, downsample, realtime_lag
from ktrial.checker.prepare import Prepared, prepare
from ktrial.testing.gen import GenParams, generate, to_ops


def reference(p: Prepared, logs: Logs) -> dict[str, Any]:
    t0 = p.first_time or 0
    known: dict[str, list[tuple[int, int]]] = {}
    for r in p.ops:
        if r.type != "ok" or r.comp_time is None or not (r.reads or r.writes):
            continue
        best: dict[str, int] = {}
        for k, v, o, _i in r.writes:
            kl = logs.keys.get(k)
            d = None if kl is None else kl.pos(o, v)
            if d is not None and d > best.get(k, -1):
                best[k] = d
        for k, d in _read_tops(r.reads).items():
            if d is not None and d > best.get(k, -1):
                best[k] = d
        for k, d in best.items():
            known.setdefault(k, []).append((d, r.comp_time))
    exists: dict[str, list[float]] = {}
    for k, pairs in known.items():
        arr = [float("inf")] * len(logs.keys[k].values)
        for d, t in pairs:
            arr[d] = min(arr[d], t)
        for d in range(len(arr) - 2, -1, -1):
            arr[d] = min(arr[d], arr[d + 1])
        exists[k] = arr
    per_key: dict[str, float] = {}
    per_proc: dict[Any, float] = {}
    worst: dict[str, Any] = {"key": None, "lag_ms": 0.0, "time_s": 0.0, "process": None}
    worst_raw = 0.0  # ties (two keys equally stale) go to the first key, the first poll
    pts: list[tuple[float, float]] = []
    positions: dict[Any, dict[str, int]] = {}
    for r in p.ops:
        if r.f == "crash":
            positions[r.process] = {}
            continue
        if r.type != "ok":
            continue
        if r.f == "assign":
            old = positions.get(r.process, {})
            positions[r.process] = {k: -1 if r.seek else old.get(k, -1) for k in (r.keys or ())}
            continue
        if r.f == "subscribe":
            positions[r.process] = {}
            continue
        if not r.reads and r.f != "poll":
            continue
        mine = positions.setdefault(r.process, {})
        for k, d in _read_tops(r.reads).items():
            if d is not None and d > mine.get(k, -1):
                mine[k] = d
            elif k not in mine:
                mine[k] = -1
        t = r.inv_time
        top = 0.0
        for k, d in mine.items():
            at = exists.get(k)
            lag = 0.0 if at is None or d + 1 >= len(at) else max(0.0, (t - at[d + 1]) / 1e6)
            if lag > per_key.get(k, -1.0):
                per_key[k] = round(lag, 3)
            if lag > per_proc.get(r.process, -1.0):
                per_proc[r.process] = round(lag, 3)
            top = max(top, lag)
            if lag > worst_raw:
                worst_raw = lag
                worst = {"key": k, "lag_ms": round(lag, 3), "time_s": (t - t0) / 1e9}
                worst["process"] = r.process
        pts.append(((t - t0) / 1e9, round(top, 3)))
    stalest = sorted(per_proc.items(), key=lambda pl: -pl[1])[:MAX_CONSUMERS]
    return {
        "worst": worst,
        "per_key": per_key,
        "per_consumer": {str(proc): lag for proc, lag in stalest},
        "over_time": downsample(pts),
    }


def both(params: GenParams) -> tuple[dict[str, Any], dict[str, Any]]:
    p = prepare(to_ops(generate(params).ops))
    logs = build_logs(p)
    return realtime_lag(p, logs), reference(p, logs)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    keys=st.integers(1, 8),
    processes=st.integers(1, 6),
    sub_via=st.sampled_from(["assign", "subscribe"]),
    reseek=st.booleans(),
    omit_invokes=st.booleans(),
    null_offset_p=st.sampled_from([0.0, 0.3]),
    crash_p=st.sampled_from([0.0, 0.05]),
    from_start_p=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_realtime_lag_matches_the_direct_definition(
    seed: int,
    keys: int,
    processes: int,
    sub_via: str,
    reseek: bool,
    omit_invokes: bool,
    null_offset_p: float,
    crash_p: float,
    from_start_p: float,
) -> None:
    got, want = both(
        GenParams(
            seed=seed,
            keys=keys,
            processes=processes,
            ops=80,
            sub_via=sub_via,
            reseek=reseek,
            reassign_p=0.15,
            omit_invokes=omit_invokes,
            null_offset_p=null_offset_p,
            crash_p=crash_p,
            from_start_p=from_start_p,
            poll_weight=2.0,
        )
    )
    assert got == want


@pytest.mark.parametrize("seed", range(3))
def test_realtime_lag_matches_on_a_long_history(seed: int) -> None:
    """Long enough for over_time to be downsampled and for stretches of many polls."""
    got, want = both(GenParams(seed=seed, keys=12, processes=4, ops=3000, reassign_p=0.02))
    assert len(want["over_time"]) > 100 and want["worst"]["lag_ms"] > 0
    assert got == want
