"""checker/throughput.py: a cluster that stops accepting work fails a soak.

Starvation and stuck keys judge values that were written; a broker paused with
replication factor 1 wrote none for 4.5 minutes and passed both. The rule counts the
values acknowledged per window against the run's own reference (the median of its
fault-free windows, else of all), within what faults allow."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from ktrial.checker import CheckOptions
from ktrial.checker.excuse import Excuser, Fault, episodes
from ktrial.checker.throughput import throughput_collapse
from ktrial.tests.checker.common import live
from ktrial.tests.histlines import Timeline

NS = 1_000_000_000
END = 1 << 62


def acks(per_window: list[int], window_s: float = 10.0) -> Any:
    """Ack times: per_window[i] values spread over window i (from t=0)."""
    out = []
    for i, n in enumerate(per_window):
        out += [round((i + (j + 0.5) / n) * window_s * NS) for j in range(n)]
    return np.array(out, dtype=np.int64)


def judge(
    per_window: list[int],
    faults: tuple[Fault, ...] = (),
    nodes: int | None = 3,
    demand: list[tuple[int, int]] | None = None,
    ratio: float = 0.1,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The rule over len(per_window) windows of 10 s from t=0, faults excused with a
    60 s allowance (1 s lead), writers busy all along unless `demand` says otherwise."""
    a = acks(per_window)
    end = len(per_window) * 10 * NS
    ex = Excuser(episodes(faults, 60.0, nodes, 1.0))
    return throughput_collapse(
        a,
        a,
        0,
        end,
        0,
        faults,
        ex,
        [(0, end)] if demand is None else demand,
        window_s=10.0,
        ratio=ratio,
        min_reference=20,
    )


def pause(start: float, end: float, node: str = "n1") -> Fault:
    return Fault(f"pause-{node}", "pause", round(start * NS), round(end * NS), frozenset({node}))


def test_a_steady_run_is_judged_and_passes() -> None:
    metric, viol, excused = judge([100, 90, 110, 100, 95])
    assert viol == [] and excused == []
    assert metric["judged"] and metric["reference"] == 100
    assert metric["reference_from"] == "fault-free windows" and metric["windows"] == 5
    assert metric["min_ratio"] == 0.9


def test_a_collapse_with_no_fault_is_a_violation_naming_window_and_figures() -> None:
    _m, (v,), _x = judge([100, 100, 100, 3, 0, 100, 100])
    assert v["type"] == "throughput-collapse"
    assert (v["from_s"], v["to_s"], v["windows"], v["values"]) == (30, 50, 2, 3)
    assert v["reference"] == 100 and v["worst"]["values"] == 0
    text = v["explanation"]
    assert "collapsed from 30 s to 50 s" in text and "median of 100 per window" in text
    assert "threshold 10%: 10" in text and "excused" not in text  # no fault in the run


def test_a_collapse_longer_than_half_the_run_is_judged_against_its_fault_free_time() -> None:
    """The rf1 shape: 3 good windows, then a pause of one of 3 brokers to the end and
    nothing acknowledged. The run's plain median is 0; its fault-free median is not."""
    per = [150, 170, 160] + [0] * 27
    _m, viol, excused = judge(per, (pause(30.0, 300.0),))
    (v,) = viol
    # the pause took out a minority: it excuses only 60 s from its start (and 1 s before)
    assert (v["from_s"], v["to_s"]) == (90, 300) and v["nodes"] == ["n1"]
    assert "pause n1 (pause-n1) 30.0-300.0 s" in v["explanation"]
    assert "over its 3 fault-free windows" in v["explanation"]
    (x,) = excused
    assert (x["from_s"], x["to_s"]) == (30, 90) and x["faults"] == ["pause-n1"]


def test_a_collapse_within_a_faults_allowance_is_excused() -> None:
    metric, viol, (x,) = judge([100] * 4 + [0, 0] + [100] * 6, (pause(40.0, 55.0),))
    assert viol == [] and metric["excused_windows"] == 2
    assert "excused: within what pause n1 (pause-n1) allowed" in x["explanation"]
    # a majority outage is not bounded by the failover rule: all of it plus 60 s
    _m, viol, _x = judge([100] * 3 + [0] * 12 + [100] * 3, (pause(30.0, 150.0, "n1,n2"),), 1)
    assert viol == []


def test_without_fault_free_windows_the_median_of_all_is_the_reference() -> None:
    faults = tuple(pause(t, t + 5.0, f"n{t:.0f}") for t in range(0, 100, 10))
    metric, viol, _x = judge([100, 0, 100, 100, 120, 100, 90, 100, 100, 100], faults)
    assert metric["reference_from"] == "judged windows" and metric["reference"] == 100
    assert viol == []  # the empty window lay inside its fault's allowance


def test_idle_windows_are_neither_judged_nor_the_reference() -> None:
    """No write in flight and no writer waiting for a successor: the workload was idle."""
    per = [100, 100, 100, 0, 0, 0, 100, 100]
    demand = [(0, 30 * NS), (60 * NS, 80 * NS)]
    metric, viol, _x = judge(per, demand=demand)
    assert viol == [] and metric["windows"] == 5 and metric["idle_windows"] == 3
    assert metric["reference"] == 100
    # the same windows with a writer waiting all along collapse
    _m, (v,), _x = judge(per)
    assert (v["from_s"], v["to_s"]) == (30, 60)


def test_a_fault_free_collapse_over_half_the_run_is_beyond_the_median() -> None:
    """The rule's stated limit (docs/anomalies.md): the reference is a median, so with
    no fault to set the collapse apart, over half the run collapsed is the run's norm."""
    metric, viol, _x = judge([100, 100, 0, 0, 0])
    assert viol == [] and metric["reference"] == 0 and not metric["judged"]


def test_a_slow_run_is_not_judged() -> None:
    metric, viol, _x = judge([10, 0, 10, 12])
    assert viol == [] and not metric["judged"] and metric["min_ratio"] is None


runs = st.lists(st.integers(0, 300), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(per=runs, ratio=st.sampled_from([0.05, 0.1, 0.3]))
def test_the_violations_are_exactly_the_low_windows_when_no_fault_is_near(
    per: list[int], ratio: float
) -> None:
    metric, viol, excused = judge(per, ratio=ratio)
    assert excused == []
    ref = float(np.median(per))
    assert metric["reference"] == round(ref, 1)
    flagged = {w for v in viol for w in range(int(v["from_s"]) // 10, int(v["to_s"]) // 10)}
    if ref < 20:
        assert not viol and not metric["judged"]
    else:
        assert flagged == {i for i, n in enumerate(per) if n < ratio * ref}
        for v in viol:
            assert v["values"] < ratio * ref * v["windows"]


@settings(max_examples=60, deadline=None)
@given(
    per=runs,
    spans=st.lists(st.tuples(st.integers(0, 290), st.integers(1, 200)), max_size=4),
    nodes=st.sampled_from([1, 3, None]),
)
def test_excusing_never_makes_a_violation(
    per: list[int], spans: list[tuple[int, int]], nodes: int | None
) -> None:
    """Faults only take windows out of the violations (the reference may come from the
    fault-free windows, so both are judged against the same one here)."""
    faults = tuple(pause(a, a + d, f"n{i}") for i, (a, d) in enumerate(spans))
    with_f, viol, excused = judge(per, faults, nodes)
    bare = throughput_collapse(
        acks(per), acks(per), 0, len(per) * 10 * NS, 0, faults, None,
        [(0, len(per) * 10 * NS)], window_s=10.0, ratio=0.1, min_reference=20,
    )  # fmt: skip
    assert bare[0]["reference"] == with_f["reference"]

    def windows(vs: list[dict[str, Any]]) -> set[int]:
        return {w for v in vs for w in range(int(v["from_s"]) // 10, int(v["to_s"]) // 10)}

    assert windows(viol) <= windows(bare[1])
    assert windows(viol) | windows(excused) == windows(bare[1])
    assert not windows(viol) & windows(excused)


def test_a_paused_cluster_fails_the_soak_and_names_the_node() -> None:
    """A whole history: 20 values/s from 16 writers for 30 s, broker n1 (of 3) paused at
    30 s; every op then times out by 40 s and no successor process ever begins (it
    cannot open a client): nothing is written until the drain at 300 s."""
    h = Timeline()
    meta = {"ktrial_version": "test", "cluster": {"nodes": 3}, "drain": {"started_s": 300.0}}
    h.pair(20, 0.0, 0.01, "assign", [0, 1, 2, 3], [0, 1, 2, 3])
    for i in range(600):
        t = 1 + i / 20
        h.send(i % 16, t, t + 0.02, str(i % 4), i, i // 4)
        h.poll(20, t + 0.02, t + 0.04, {str(i % 4): [[i // 4, i]]})
    for p in range(16):  # the last sends hang and time out
        h.send(p, 31.0, 40.0, str(p % 4), 10_000 + p, None, "fail")
    h.send(0, 30.8, 30.85, "0", 9_999, 150)  # acknowledged as n1 froze: read by the drain
    h.poll(20, 31.0, 40.0, {}, "fail")
    h.nem(31.0, "pause", {"nodes": ["n1"]})
    h.nem(299.0, "resume", {"nodes": ["n1"]})
    h.drain(99, 300.0, {"0": [[150, 9_999]]})
    res = h.check(meta, liveness_bad=True)
    assert "throughput-collapse" in res["bad_error_types"]
    (v1,) = res["anomalies"]["throughput-collapse"]["examples"]
    assert v1["from_s"] >= 90 and v1["to_s"] <= 300 and v1["nodes"] == ["n1"]
    assert "0 values acknowledged" in v1["explanation"]
    assert "pause n1" in v1["explanation"]
    checks = live(res)["checks"]["throughput-collapse"]
    assert checks["bad"] and checks["value"] == 0 and checks["threshold"] == 0.1
    # reported, not bad, without --liveness-bad
    res = h.check(meta)
    assert res["valid"] is True, res["bad_error_types"]
    assert live(res)["checks"]["throughput-collapse"]["ok"] is False


def test_the_ratio_is_an_option() -> None:
    assert CheckOptions(throughput_ratio=0.5).throughput_ratio == 0.5
    for bad in (0.0, 1.5, -1.0):
        try:
            CheckOptions(throughput_ratio=bad)
        except ValueError as e:
            assert "throughput_ratio" in str(e)
        else:
            raise AssertionError(f"throughput_ratio={bad} accepted")
