"""The judged window (checker/window.py): warm-up and drain left out of liveness (issue 14 B).

The worst realtime lag of a real 66 s run was 63 s: the drain consumer re-reading from
offset 0; and the first window starved while clients were still starting. The judged
window leaves both out, from test.json's metadata; a bare history (no test.json) is
judged whole, exactly as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from ktrial.checker.window import (
    NS,
    JudgedWindow,
    drain_start_in_history,
    judged_window,
    warmup_s,
)
from ktrial.tests.histlines import Timeline, warming_up_consumer

KTRIAL = {"ktrial_version": "0.1.0"}


# ------------------------------------------------------------------ the pure function


def test_without_metadata_the_whole_history_is_judged() -> None:
    for meta in (None, {}, {"name": "from-another-tool"}):
        w = judged_window(meta, 5 * NS, 70 * NS, first_fault_ns=6 * NS, drain_start_ns=60 * NS)
        assert w == JudgedWindow(5 * NS, 70 * NS, "") and not w.excluded


def test_a_ktrial_run_leaves_out_one_window_of_warm_up() -> None:
    w = judged_window(KTRIAL, 0, 66 * NS)
    assert (w.start_ns, w.end_ns) == (10 * NS, 66 * NS)
    assert "warm-up, the first 10.0 s (before any fault)" in w.why
    # the liveness window sets its length
    assert judged_window(KTRIAL, 0, 66 * NS, window_s=4.0).start_ns == 4 * NS


def test_the_warm_up_never_hides_a_fault() -> None:
    w = judged_window(KTRIAL, NS, 66 * NS, first_fault_ns=7 * NS)
    assert w.start_ns == 7 * NS and "first 6.0 s (until the first fault)" in w.why
    # a fault after the warm-up changes nothing
    assert judged_window(KTRIAL, 0, 66 * NS, first_fault_ns=30 * NS).start_ns == 10 * NS


def test_a_run_shorter_than_its_warm_up_is_judged_whole() -> None:
    w = judged_window(KTRIAL, 0, 8 * NS)
    assert (w.start_ns, w.end_ns, w.why) == (0, 8 * NS, "")


@pytest.mark.parametrize(
    "meta,expected",
    [
        ({"liveness_warmup_s": 0}, 0.0),
        ({**KTRIAL, "liveness_warmup_s": 0}, 0.0),  # turned off
        ({"liveness_warmup_s": 3}, 3.0),  # set explicitly: any tool's test.json
        ({"checker": {"liveness_warmup_s": 2.5}}, 2.5),
        ({"liveness_warmup_s": "soon"}, 0.0),  # not a number: ignored
        ({**KTRIAL, "liveness_warmup_s": float("nan")}, 10.0),
        (KTRIAL, 10.0),
        ({}, 0.0),
    ],
)
def test_warm_up_setting(meta: dict[str, Any], expected: float) -> None:
    assert warmup_s(meta, 10.0) == expected


def test_the_drain_start_recorded_in_test_json_ends_the_window() -> None:
    meta = {**KTRIAL, "drain": {"caught_up": True, "started_s": 58.5}}
    w = judged_window(meta, 0, 66 * NS)
    assert (w.start_ns, w.end_ns) == (10 * NS, int(58.5 * NS))
    assert "the drain, from 58.5 s" in w.why
    assert w.to_json(0) == {"from_s": 10.0, "to_s": 58.5, "why": w.why}


@pytest.mark.parametrize("started", [80.0, -1.0, "58", None, float("inf")])
def test_a_drain_start_outside_the_history_or_not_a_number_is_ignored(started: Any) -> None:
    w = judged_window({"drain": {"started_s": started}}, 0, 66 * NS)
    assert w == JudgedWindow(0, 66 * NS, "")


def test_the_history_finds_the_drain_only_when_test_json_says_one_ran() -> None:
    found = 50 * NS
    older = {**KTRIAL, "drain": {"caught_up": True}}  # written before started_s
    assert judged_window(older, 0, 66 * NS, drain_start_ns=found).end_ns == found
    assert judged_window(KTRIAL, 0, 66 * NS, drain_start_ns=found).end_ns == 66 * NS
    # started_s, when there, wins
    given = {**KTRIAL, "drain": {"started_s": 55.0}}
    assert judged_window(given, 0, 66 * NS, drain_start_ns=found).end_ns == 55 * NS


def test_drain_start_in_history() -> None:
    # (process, invoke time, is a seek-to-beginning assign)
    run = [(0, 1, False), (1, 2, True), (0, 40, False), (1, 41, False)]
    assert drain_start_in_history(run) is None  # a mid-run reseek is no drain
    drain = [*run, (7, 50, True), (7, 51, False), (8, 52, True)]
    assert drain_start_in_history(drain) == 50
    # an older process still invoking after it: not the tail
    assert drain_start_in_history([*drain, (0, 53, False)]) is None
    assert drain_start_in_history([]) is None


# ------------------------------------------------------------------ in the checker


def _run(drain_at: float = 45.0, fault_at: float | None = None) -> Timeline:
    """A producer sending one value a second; a consumer that starts reading only at 12 s
    (warm-up), then trails by one value (0.3 s stale); a drain re-reading everything from
    offset 0 at `drain_at`, ten records a poll (about 35 s stale after its first)."""
    tl = warming_up_consumer()
    if fault_at is not None:
        tl.nem(fault_at, "kill", {"nodes": ["n2"]})
        tl.nem(fault_at + 1, "start", {"nodes": ["n2"]})
    tl.pair(2, drain_at, drain_at + 0.1, "assign", [0], [0], seek_to_beginning=True)
    for j in range(4):
        at = drain_at + 0.2 + j
        tl.poll(2, at, at + 0.1, {"0": [[o, o] for o in range(10 * j, 10 * j + 10)]})
    return tl


def test_realtime_lag_worst_leaves_out_the_drain() -> None:
    tl = _run()
    bare = tl.check(None, starvation_min_offered=5, starvation_lag_s=1.0)["metrics"]
    assert bare["realtime_lag"]["worst"]["process"] == 2  # the drain
    assert bare["realtime_lag"]["worst"]["lag_ms"] > 30_000
    assert "judged_window" not in bare and "worst_any_poll" not in bare["realtime_lag"]

    meta = {**KTRIAL, "drain": {"caught_up": True, "started_s": 45.0}}
    m = tl.check(meta, starvation_min_offered=5, starvation_lag_s=1.0)["metrics"]
    lag = m["realtime_lag"]
    assert lag["worst"]["process"] == 1 and 0 < lag["worst"]["lag_ms"] < 1_000
    assert lag["worst_any_poll"] == bare["realtime_lag"]["worst"]
    assert "2" not in lag["per_consumer"] and max(lag["per_key"].values()) < 1_000
    assert len(lag["over_time"]) == len(bare["realtime_lag"]["over_time"])  # every poll
    assert m["judged_window"]["to_s"] == 45.0 and "drain" in m["judged_window"]["why"]


def test_starvation_leaves_out_the_warm_up() -> None:
    tl = _run()
    opts = {"starvation_min_offered": 5, "starvation_lag_s": 1.0}
    bare = tl.check(None, **opts)["metrics"]["liveness"]
    assert bare["checks"]["starvation"]["ok"] is False
    assert bare["starvation"]["starved_windows"][0]["from_s"] == 0.0

    live = tl.check({**KTRIAL, "drain": {"started_s": 45.0}}, **opts)["metrics"]["liveness"]
    assert live["checks"]["starvation"]["ok"] is True
    assert live["starvation"]["windows_judged"] >= 2 and live["starvation"]["min_ratio"] == 1.0


def test_a_fault_during_the_warm_up_is_judged_from_its_start() -> None:
    tl = _run(fault_at=4.0)
    m = tl.check({**KTRIAL, "drain": {"started_s": 45.0}}, starvation_min_offered=3)["metrics"]
    assert m["judged_window"]["from_s"] == 4.0
    assert "until the first fault" in m["judged_window"]["why"]


def test_an_older_run_without_drain_start_finds_it_in_the_history() -> None:
    m = _run(drain_at=47.0).check({**KTRIAL, "drain": {"caught_up": True}})["metrics"]
    assert m["judged_window"]["to_s"] == 47.0
    assert m["realtime_lag"]["worst"]["process"] == 1
