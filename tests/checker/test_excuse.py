"""Faults excuse liveness stalls within a bound (checker/excuse.py and its use by
checker/liveness.py): fault intervals from the nemesis ops, episodes and their
allowances, and the properties the rule must keep — a stall inside one allowance is
never a violation, a stall with no fault near always is, and excusing never makes a
violation that was not one without it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ktrial.checker import CheckOptions
from ktrial.checker.excuse import (
    Excuser,
    Fault,
    cluster_nodes,
    episodes,
    fault_intervals,
    windows,
)
from ktrial.checker.liveness import Acked, starvation, stuck_partitions
from ktrial.histories.model import Op
from ktrial.tests.checker.common import live
from ktrial.tests.histlines import Timeline

NS = 1_000_000_000
OPTS = CheckOptions()  # stuck_s 30, recovery_s 60, window 10 s


def nem(t: float, f: str, value: Any = None, **extra: Any) -> Op:
    return Op(
        index=0, time=round(t * NS), process="nemesis", type="info", f=f, value=value, extra=extra
    )


def fault(
    start: float, end: float, family: str = "partition", nodes: tuple[str, ...] = ()
) -> Fault:
    return Fault(
        f"{family}@{start:g}", family, round(start * NS), round(end * NS), frozenset(nodes)
    )


def ex_of(*faults: Fault, nodes: int | None = None, allowance_s: float = 60.0) -> Excuser:
    return Excuser(episodes(list(faults), allowance_s, nodes))


# ------------------------------------------------------------------ intervals


def test_faults_pair_by_id_then_by_family_and_nodes() -> None:
    ops = [
        nem(1, "kill", {"nodes": ["n1"]}, fault="kill", fault_id="a-1-kill"),
        nem(2, "kill", {"nodes": ["n2"]}, fault="kill", fault_id="a-2-kill"),
        nem(3, "start", {"nodes": ["n2"]}, fault="kill", fault_id="a-2-kill"),
        # an OOM-killed broker restarted by the memory fault: no id, another node
        nem(4, "start", {"nodes": ["n3"], "reason": "oom-killed"}),
        nem(5, "node-stats", {"n1": {"rss_bytes": 1}}),
        nem(6, "start", {"nodes": ["n1"]}, fault="kill", fault_id="a-1-kill"),
        nem(7, "start-partition", {"n1": ["n2"]}),  # another tool: no ids, no nodes
        nem(9, "stop-partition", None),
        nem(10, "toxic-on", {"nodes": ["n3"]}),
        nem(12, "heal", {}),
        nem(13, "pause", ["n2"]),  # never resumed: lasts to the end of the history
    ]
    got = [
        (f.id, f.family, f.start_ns / NS, f.end_ns / NS, f.healed)
        for f in fault_intervals(ops, 20 * NS)
    ]
    assert got == [
        ("a-1-kill", "kill", 1, 6, True),
        ("a-2-kill", "kill", 2, 3, True),
        ("#3", "partition", 7, 9, True),
        ("#4", "toxic", 10, 12, True),
        ("#5", "pause", 13, 20, False),
    ]


def test_a_rolling_restart_is_one_fault_and_its_restarts_do_not_end_it() -> None:
    ops = [
        nem(1, "start-rolling-restart", {}, fault="restart", fault_id="r"),
        nem(2, "restart", {"node": "n1"}, fault="restart", fault_id="r"),
        nem(3, "restarted", {"node": "n1"}, fault="restart", fault_id="r"),
        nem(9, "stop-rolling-restart", {}, fault="restart", fault_id="r"),
    ]
    (f,) = fault_intervals(ops, 20 * NS)
    assert (f.family, f.start_ns, f.end_ns) == ("restart", 1 * NS, 9 * NS)


def test_cluster_nodes_from_test_json() -> None:
    assert cluster_nodes({"cluster": {"nodes": 3}}) == 3
    assert cluster_nodes({"cluster": {"nodes": ["n1", "n2"]}}) == 2
    for meta in (None, {}, {"cluster": {"nodes": True}}, {"cluster": {"nodes": 0}}):
        assert cluster_nodes(meta) is None


# ------------------------------------------------------------------- episodes


def test_overlapping_faults_are_one_episode_and_allowance_follows_the_last_heal() -> None:
    eps = episodes([fault(10, 30), fault(20, 50, "toxic"), fault(200, 210, "kill")], 60, 3)
    assert [(e.start_ns / NS, e.end_ns / NS, e.spans) for e in eps] == [
        (10, 50, ((10 * NS, 110 * NS),)),
        (200, 210, ((200 * NS, 270 * NS),)),
    ]


def test_a_long_minority_outage_must_fail_over_within_the_bound() -> None:
    pause = fault(100, 400, "pause", ("n1",))
    (bounded,) = episodes([pause], 60, 3)
    assert bounded.spans == ((100 * NS, 160 * NS), (400 * NS, 460 * NS))
    assert "fail over within 60 s" in bounded.to_json(0)["why"]
    # a majority down, an unknown cluster size, or a short outage: the whole outage
    for f, nodes in (
        (fault(100, 400, "kill", ("n1", "n2")), 3),
        (pause, None),
        (fault(100, 150, "pause", ("n1",)), 3),
    ):
        (e,) = episodes([f], 60, nodes)
        assert e.spans == ((f.start_ns, f.end_ns + 60 * NS),) and not e.bounded


def test_which_needs_one_stretch_of_one_allowance() -> None:
    ex = ex_of(fault(0, 40), fault(80, 120))  # allowances [0, 100] and [80, 180]
    assert ex.which(10 * NS, 100 * NS) == 0
    assert ex.which(90 * NS, 170 * NS) == 1
    assert ex.which(70 * NS, 130 * NS) is None  # began under the first, outlasted it
    assert ex.which(-5 * NS, 10 * NS) is None  # overdue before any fault
    assert ex.allowed_until(70 * NS) == 100 * NS and ex.allowed_until(200 * NS) is None
    assert "beyond what faults allowed" in ex.why_not(70 * NS, 130 * NS, 0)
    assert "no fault was active" in ex_of(fault(0, 1)).why_not(200 * NS, 300 * NS, 0)


def test_windows_split_the_judged_window() -> None:
    ex = ex_of(fault(20, 30, "kill", ("n1",)))
    w = windows(ex, 10 * NS, 200 * NS, 0, 60.0)
    assert [(j["from_s"], j["to_s"]) for j in w["judged"]] == [(10, 20), (90, 200)]
    (e,) = w["excused"]
    assert (e["from_s"], e["to_s"], e["faults"]) == (20, 90, ["kill@20"])
    assert w["judged_s"] == 120 and w["excused_s"] == 70 and w["allowance_s"] == 60


# ---------------------------------------------------------------- properties


def acked(values: list[tuple[str, float, float | None]]) -> Acked:
    """(key, ack s, first read s or None) per value."""
    a = Acked()
    for i, (k, t, r) in enumerate(values):
        a.key.append(k)
        a.value.append(i)
        a.offset.append(i)
        a.ack.append(round(t * NS))
        a.read.append(-1 if r is None else round(r * NS))
    return a


def stuck_keys(
    a: Acked, end_s: float, ex: Excuser | None
) -> tuple[dict[str, Any], list[Any], list[Any]]:
    return stuck_partitions(a, 0, round(end_s * NS), OPTS, ex)


ms = st.integers(min_value=0, max_value=500_000)  # times in ms: exact in ns


@settings(max_examples=200, deadline=None)
@given(
    start=ms,
    hold=st.integers(0, 100_000),
    ack=st.integers(0, 200_000),
    extra=st.integers(1, 100_000),
)
def test_a_stall_inside_one_allowance_is_never_a_violation(
    start: int, hold: int, ack: int, extra: int
) -> None:
    heal = start + hold
    # overdue from ack + 30 s: [lo, read] inside [start, heal + 60 s]
    lo = max(start, ack + 30_000)
    ack = lo - 30_000
    read = min(lo + extra, heal + 60_000)
    a = acked([("k", ack / 1e3, read / 1e3)])
    _m, bad, excused = stuck_keys(a, read / 1e3 + 1, ex_of(fault(start / 1e3, heal / 1e3)))
    assert bad == []
    if read - ack > 30_000:
        (x,) = excused
        assert x["key"] == "k" and x["faults"] == [f"partition@{start / 1e3:g}"]


@settings(max_examples=200, deadline=None)
@given(ack=ms, wait=st.integers(30_001, 300_000), far=st.integers(1, 1_000_000))
def test_a_stall_with_no_fault_near_is_always_a_violation(ack: int, wait: int, far: int) -> None:
    read = ack + wait
    # a fault whose allowance ended before the value was overdue, and one after it
    near = [fault((read + far) / 1e3, (read + far + 5000) / 1e3)]
    if ack - 100_000 - far >= 0:
        near.append(fault((ack - 100_000 - far) / 1e3, (ack - 99_000 - far) / 1e3))
    a = acked([("k", ack / 1e3, read / 1e3)])
    for ex in (None, ex_of(*near)):
        _m, bad, excused = stuck_keys(a, read / 1e3 + 1, ex)
        assert [v["key"] for v in bad] == ["k"] and excused == []
        assert bad[0]["stuck_s"] == pytest.approx(wait / 1e3, abs=2e-3)


@settings(max_examples=200, deadline=None)
@given(
    start=ms,
    hold=st.integers(0, 100_000),
    into=st.integers(0, 160_000),
    past=st.integers(1, 100_000),
)
def test_a_stall_outlasting_its_allowance_is_always_a_violation(
    start: int, hold: int, into: int, past: int
) -> None:
    heal = start + hold
    lo = start + into % (hold + 60_001)  # overdue while the fault allowed it ...
    read = heal + 60_000 + past  # ... until after its allowance ended
    a = acked([("k", (lo - 30_000) / 1e3, read / 1e3)])
    _m, bad, excused = stuck_keys(a, read / 1e3 + 1, ex_of(fault(start / 1e3, heal / 1e3)))
    assert [v["key"] for v in bad] == ["k"] and excused == []
    assert "beyond what faults allowed" in bad[0]["explanation"]


stall = st.tuples(
    st.sampled_from("abc"), ms, st.one_of(st.none(), st.integers(0, 200_000))
)  # fmt: skip
spans = st.tuples(
    ms, st.integers(0, 120_000), st.sampled_from(["kill", "pause", "toxic"]), st.integers(1, 2)
)


def faults_of(spans: list[tuple[int, int, str, int]], scale: float = 1.0) -> list[Fault]:
    return [
        fault(s * scale / 1e3, (s * scale + h) / 1e3, fam, tuple(f"n{i}" for i in range(n)))
        for s, h, fam, n in spans
    ]


@settings(max_examples=150, deadline=None)
@given(values=st.lists(stall, min_size=1, max_size=40), faults=st.lists(spans, max_size=5))
def test_excusing_never_makes_a_stuck_violation(
    values: list[tuple[str, int, int | None]], faults: list[tuple[int, int, str, int]]
) -> None:
    a = acked([(k, t / 1e3, None if w is None else (t + w) / 1e3) for k, t, w in values])
    end = max(t for _k, t, _w in values) / 1e3 + 250
    ex = ex_of(*faults_of(faults), nodes=3)
    m0, bad0, _x0 = stuck_keys(a, end, None)
    m1, bad1, x1 = stuck_keys(a, end, ex)
    gap0 = {v["key"]: v["stuck_s"] for v in bad0}
    for v in bad1:  # a key stuck with excusing was stuck without, at least as long
        assert v["key"] in gap0 and v["stuck_s"] <= gap0[v["key"]]
    assert {v["key"] for v in bad1} | {x["key"] for x in x1} == set(gap0)
    assert m1.get("max_not_excused_s", m1["max_unread_s"]) <= m0["max_unread_s"]
    assert m1["max_unread_s"] == m0["max_unread_s"]
    if not faults:
        assert bad1 == bad0 and x1 == []


def starving(shares: list[float]) -> Acked:
    """20 values in each 10 s window, the given share of each read 50 ms after its ack
    and the rest never; then one last value 100 s later (so every window is judged)."""
    vals: list[tuple[str, float, float | None]] = []
    for w, share in enumerate(shares):
        for i in range(20):
            t = w * 10 + i * 0.5
            late = i >= round(20 * share)
            vals.append(("k", t, None if late else t + 0.05))
    vals.append(("k", len(shares) * 10 + 100, len(shares) * 10 + 100.05))
    return acked(vals)


@settings(max_examples=150, deadline=None)
@given(
    shares=st.lists(st.sampled_from([1.0, 1.0, 0.5, 0.0]), min_size=1, max_size=12),
    faults=st.lists(spans, max_size=4),
)
def test_excusing_never_makes_a_starved_window(
    shares: list[float], faults: list[tuple[int, int, str, int]]
) -> None:
    a = starving(shares)
    ex = ex_of(*faults_of(faults, 0.25), nodes=3)
    _m0, v0, _x0 = starvation(a, 0, OPTS, 1.0)
    _m1, v1, x1 = starvation(a, 0, OPTS, 1.0, None, ex)

    def covered(vs: list[dict[str, Any]]) -> set[float]:
        return {j * 10.0 for v in vs for j in range(round(v["from_s"] / 10), round(v["to_s"] / 10))}

    assert covered(v1) <= covered(v0)
    assert covered(v1) | covered(x1) == covered(v0)  # each starved window: judged or excused
    assert not covered(v1) & covered(x1)
    if not faults:
        assert v1 == v0 and x1 == []


def test_starvation_that_outlasts_its_fault_is_judged_after_the_allowance() -> None:
    a = starving([1.0] * 3 + [0.0] * 12)  # consumers stop at 30 s for good
    ex = ex_of(fault(29, 40))  # allowance until 100 s
    _m, bad, excused = starvation(a, 0, OPTS, 1.0, None, ex)
    (x,) = excused
    (v,) = bad
    assert (x["from_s"], x["to_s"], x["faults"]) == (30, 90, ["partition@29"])
    assert (v["from_s"], v["to_s"]) == (90, 150)
    assert "beyond what faults allowed" in v["explanation"] and "29.0-100.0 s" in v["explanation"]


# ------------------------------------------------------------- whole checks


def stalled_history(fault_at: float | None) -> Timeline:
    """Key 1 steady; one value of key 2 read 45 s after its ack at 10 s (overdue 40-55 s)."""
    h = Timeline()
    for i in range(700):
        t = i / 10
        h.send(0, t, t + 0.01, 1, 1000 + i, i)
        h.poll(1, t + 0.01, t + 0.06, {"1": [[i, 1000 + i]]})
    h.send(2, 10.0, 10.1, 2, 7, 0)
    h.poll(3, 54.0, 55.1, {"2": [[0, 7]]})
    if fault_at is not None:
        h.nem(fault_at, "kill", {"nodes": ["n1"]})
        h.nem(fault_at + 5, "start", {"nodes": ["n1"]})
    return h


def test_a_key_stalled_by_a_kill_is_excused_and_reported() -> None:
    res = stalled_history(38.0).check({"cluster": {"nodes": 3}}, liveness_bad=True)
    lv = live(res)
    assert res["valid"] is True and lv["violations"] == []
    (x,) = lv["excused"]
    assert x["type"] == "stuck-partition" and x["key"] == "2" and x["faults"] == ["#1"]
    assert "kill n1 (#1)" in x["explanation"] and "overdue 40.1-55.1 s" in x["explanation"]
    assert lv["excused_counts"] == {
        "starvation": 0,
        "stuck-partition": 1,
        "throughput-collapse": 0,
    }
    w = lv["windows"]
    # the kill's allowance begins one lag allowance (1 s here) before it
    assert [(j["from_s"], j["to_s"]) for j in w["judged"]] == [(0, 37)]
    assert w["excused"][0]["faults"] == ["#1"] and w["allowance_s"] == 60
    stuck = lv["checks"]["stuck-partition"]
    assert stuck["ok"] and stuck["value"] < 30 and "1 stuck keys excused" in stuck["explanation"]
    assert lv["recovery"]["bound_s"] == 60


def test_a_stall_begun_before_the_fault_is_still_a_violation() -> None:
    res = stalled_history(45.0).check({"cluster": {"nodes": 3}}, liveness_bad=True)
    (v,) = [v for v in live(res)["violations"] if v["type"] == "stuck-partition"]
    assert v["key"] == "2" and res["valid"] is False
    assert "not excused: overdue 40.1-55.1 s, beyond what faults allowed" in v["explanation"]


def test_a_history_without_faults_keeps_its_results_shape() -> None:
    lv = live(stalled_history(None).check(liveness_bad=True))
    assert not {"windows", "excused", "excused_counts"} & set(lv)
    assert "max_not_excused_s" not in lv["stuck_partitions"]
    assert "excused_windows" not in lv["starvation"]
    (v,) = lv["violations"]
    assert v["type"] == "stuck-partition" and "excused" not in v["explanation"]
