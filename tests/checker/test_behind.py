"""Behind: the background load's liveness check (checker/behind.py, docs/load.md)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from ktrial.checker.behind import judge, verdict, windows
from ktrial.histories.loadlog import LoadLog, LoadSecond
from ktrial.tests.histlines import poll_op, run, send_op, types


def sec(
    t: float,
    offered: int = 1000,
    consumed: int | None = None,
    e2e_ms: float = 20.0,
    consumers: tuple[int, ...] | None = None,
    dt: float = 1.0,
) -> LoadSecond:
    c = offered if consumed is None else consumed
    per = consumers if consumers is not None else (c - c // 2, c // 2)
    return LoadSecond(
        t=t,
        time=1000.0 + t,
        dt=dt,
        offered=offered,
        produced=offered,
        consumed=c,
        consumers=per,
        e2e_p99_ms=e2e_ms,
        e2e_hist=((e2e_ms, c),) if c else (),
    )


def log_of(*seconds: LoadSecond) -> LoadLog:
    return LoadLog(start={"type": "start", "time": 1000.0}, seconds=list(seconds))


def steady(n: int, **kw: float) -> list[LoadSecond]:
    return [sec(float(t), **kw) for t in range(1, n + 1)]  # type: ignore[arg-type]


def test_a_load_that_keeps_up_is_not_behind() -> None:
    metric, viol, exc = judge(log_of(*steady(30)), 10.0)
    assert metric["windows_judged"] == 3 and metric["behind_windows"] == 0
    assert not viol and not exc
    assert metric["min_ratio"] == 1.0 and metric["max_e2e_p99_ms"] == 20.0
    v = verdict(metric, viol, exc, bad=True)
    assert v["ok"] and not v["bad"] and v["value"] == 1.0 and v["threshold"] == 0.97


def test_consumption_under_97_percent_in_a_window_is_behind() -> None:
    """Mutant: judging the whole run's totals instead of each window would pass this."""
    seconds = steady(10) + [sec(float(t), consumed=900) for t in range(11, 21)] + steady(40)[20:]
    metric, viol, _ = judge(log_of(*seconds), 10.0)
    assert len(viol) == 1
    v = viol[0]
    assert v["type"] == "behind" and v["from_s"] == 10.0 and v["to_s"] == 20.0
    assert v["offered"] == 10_000 and v["consumed"] == 9_000 and v["ratio"] == 0.9
    assert "90.0%" in v["explanation"]
    assert metric["min_ratio"] == 0.9


def test_exactly_97_percent_is_not_behind() -> None:
    """Mutant: `<=` instead of `<` would call this window behind."""
    metric, viol, _ = judge(log_of(*[sec(float(t), consumed=970) for t in range(1, 11)]), 10.0)
    assert not viol and metric["min_ratio"] == 0.97


def test_an_e2e_p99_over_five_seconds_is_behind_even_when_all_is_consumed() -> None:
    slow = [sec(float(t), e2e_ms=5200.0) for t in range(11, 21)]
    _, viol, _ = judge(log_of(*steady(10), *slow), 10.0)
    assert len(viol) == 1 and viol[0]["e2e_p99_ms"] == 5200.0
    assert "e2e p99 5200 ms" in viol[0]["explanation"]


def test_the_window_p99_is_the_merged_histograms_not_the_worst_second() -> None:
    """One slow second among nine fast ones: the window's p99 is the merged
    histogram's (the slow second holds 10% of the messages: p99 is slow)... and one
    slow second holding under 1% of them does not make the window behind."""
    few = LoadSecond(
        t=5.0,
        time=1005.0,
        dt=1.0,
        offered=5,
        produced=5,
        consumed=5,
        consumers=(5,),
        e2e_p99_ms=9000.0,
        e2e_hist=((9000.0, 5),),
    )
    seconds = [sec(float(t), consumers=(1000,)) for t in range(1, 11) if t != 5] + [few]
    seconds.sort(key=lambda s: s.t)
    _, viol, _ = judge(log_of(*seconds), 10.0)
    assert not viol  # 5 slow messages of 9,005: under 1%


def test_consecutive_behind_windows_are_one_episode_and_idle_consumers_named() -> None:
    starved = [sec(float(t), consumed=500, consumers=(500, 0)) for t in range(11, 31)]
    _, viol, _ = judge(log_of(*steady(10), *starved, *steady(40)[30:]), 10.0)
    assert len(viol) == 1 and viol[0]["windows"] == 2
    assert viol[0]["idle_consumers"] == [1]
    assert "consumers 1 read nothing" in viol[0]["explanation"]


def test_a_fault_excuses_a_behind_window_that_overlaps_it() -> None:
    seconds = steady(10) + [sec(float(t), consumed=100) for t in range(11, 21)] + steady(30)[20:]
    metric, viol, exc = judge(log_of(*seconds), 10.0, excused_spans=[(12.0, 15.0, "kill n1")])
    assert not viol and len(exc) == 1 and exc[0]["excused_by"] == "kill n1"
    assert metric["excused_windows"] == 1 and metric["min_ratio_not_excused"] == 1.0
    v = verdict(metric, viol, exc, bad=True)
    assert v["ok"] and "excused by faults" in v["explanation"]
    # the same span on the history's clock, with the load starting 100 s into the history
    _, viol2, exc2 = judge(
        log_of(*seconds), 10.0, excused_spans=[(12.0, 15.0, "kill n1")], offset_s=100.0
    )
    assert len(viol2) == 1 and not exc2 and viol2[0]["from_s"] == 110.0


def test_a_short_last_window_and_empty_windows_are_not_judged() -> None:
    tail = [sec(31.0, consumed=0), sec(32.0, consumed=0)]  # cut by the stop
    metric, viol, _ = judge(log_of(*steady(30), *tail), 10.0)
    assert metric["windows_judged"] == 3 and not viol
    metric, viol, _ = judge(log_of(*[sec(float(t), offered=0) for t in range(1, 11)]), 10.0)
    assert metric["windows_judged"] == 0 and not viol
    assert "no 10 s window" in verdict(metric, viol, [], False)["explanation"]


@given(
    st.lists(
        st.tuples(st.integers(1, 2000), st.integers(0, 2000), st.floats(0.5, 9000.0)),
        min_size=10,
        max_size=60,
    ),
    st.sampled_from([5.0, 10.0, 30.0]),
)
def test_behind_iff_some_judged_window_breaks_a_rule(
    rows: list[tuple[int, int, float]], window_s: float
) -> None:
    """Reference: recompute every window by brute force from the seconds."""
    seconds = [
        sec(float(i + 1), offered=o, consumed=min(c, o), e2e_ms=e)
        for i, (o, c, e) in enumerate(rows)
    ]
    metric, viol, _ = judge(log_of(*seconds), window_s)
    bad = 0
    judged = 0
    for w in windows(seconds, window_s):
        if w.covered_s < window_s / 2 or w.offered <= 0:
            continue
        judged += 1
        members = [s for s in seconds if int((s.t - s.dt) // window_s) == w.index]
        off = sum(s.offered for s in members)
        con = sum(s.consumed for s in members)
        # p99 of the window from the raw (value, count) pairs
        pairs = sorted((s.e2e_p99_ms or 0.0, s.consumed) for s in members if s.consumed)
        total = sum(n for _v, n in pairs)
        p99 = None
        if total:
            import math

            rank, seen = max(1, math.ceil(0.99 * total)), 0
            for v, n in pairs:
                seen += n
                if seen >= rank:
                    p99 = v
                    break
        if con / off < 0.97 or (p99 is not None and p99 > 5000.0):
            bad += 1
    assert metric["windows_judged"] == judged
    assert metric["behind_windows"] == bad
    assert bool(viol) == (bad > 0)


def test_check_file_judges_the_load_jsonl_beside_the_history(tmp_path: Path) -> None:
    """End to end through check_file: a load.jsonl next to history.jsonl is read; with
    liveness_bad a behind episode is a bad anomaly type (the run is invalid)."""
    lines = [send_op(0, "k", 1, 0), poll_op(1, {"k": [[0, 1]]})]
    seconds = steady(10) + [sec(float(t), consumed=100) for t in range(11, 21)]
    (tmp_path / "load.jsonl").write_text(
        json.dumps({"type": "start", "time": 1000.0, "config": {"rate": 1000}})
        + "\n"
        + "".join(
            json.dumps(
                {
                    "type": "second",
                    "t": s.t,
                    "time": s.time,
                    "dt": s.dt,
                    "offered": s.offered,
                    "produced": s.produced,
                    "consumed": s.consumed,
                    "consumers": list(s.consumers),
                    "e2e_p99_ms": s.e2e_p99_ms,
                    "e2e_hist": [list(p) for p in s.e2e_hist],
                }
            )
            + "\n"
            for s in seconds
        )
    )
    res = run(tmp_path, lines)
    live = res["metrics"]["liveness"]
    assert live["checks"]["behind"]["ok"] is False
    assert live["load"]["behind_windows"] == 1
    assert "behind" not in types(res)[1]  # reported, not judged, by default
    res_bad = run(tmp_path, lines, liveness_bad=True)
    assert "behind" in types(res_bad)[1] and res_bad["valid"] is False
    (tmp_path / "load.jsonl").write_text("{broken\n{}\n")
    warned = run(tmp_path, lines)
    assert "behind" not in warned["metrics"]["liveness"]["checks"]
    assert any("load.jsonl:1: not JSON" in w for w in warned["warnings"])
    (tmp_path / "load.jsonl").unlink()
    assert "behind" not in run(tmp_path, lines)["metrics"]["liveness"]["checks"]


def test_per_consumer_progress_names_a_starved_consumer() -> None:
    """Overload at 2x the knee: consumer 1 stops reading after 20 s while consumer 0 goes
    on; the metric shows each consumer's progress, not only the totals."""
    seconds = [sec(float(t), consumers=(500, 500)) for t in range(1, 21)] + [
        sec(float(t), consumed=600, consumers=(600, 0)) for t in range(21, 41)
    ]
    final = {"type": "final", "consumers": [22000, 10000]}
    log = LoadLog(start={"type": "start", "time": 1000.0}, seconds=seconds, final=final)
    metric, _viol, _exc = judge(log, 10.0)
    assert metric["per_consumer"] == [22000, 10000]  # the generator's final totals
    c0, c1 = metric["consumers"]
    assert c0 == {
        "consumer": 0,
        "read": 22000,
        "share": 0.6875,
        "min_window_read": 5000,  # 10 seconds of 500 in each of its first two windows
        "idle_windows": 0,
    }
    assert c1["read"] == 10000 and c1["idle_windows"] == 2 and c1["min_window_read"] == 0
    assert metric["under_ratio_windows"] == 2  # 600 of 1000 offered: under 97%


def test_consumer_progress_without_a_final_line_sums_the_seconds() -> None:
    from ktrial.checker.behind import consumer_progress

    metric, _v, _e = judge(log_of(*steady(20, offered=1000)), 10.0)
    assert metric["per_consumer"] == [10000, 10000]
    assert [c["idle_windows"] for c in metric["consumers"]] == [0, 0]
    assert consumer_progress([], []) == []
    # a window where nobody read does not count as anyone starving
    quiet = windows([sec(1.0, consumed=0, consumers=(0, 0))], 10.0)
    assert consumer_progress(quiet, [0, 0])[0]["idle_windows"] == 0
    assert consumer_progress(quiet, [0, 0])[0]["share"] is None


def test_the_loads_warm_up_window_is_not_judged() -> None:
    """A cold start (fresh partitions, the JIT) behind in the first window: not judged
    with the run's warm-up of one window, judged (and behind) without it."""
    seconds = [sec(float(t), consumed=800) for t in range(1, 11)] + steady(30)[10:]
    metric, viol, _ = judge(log_of(*seconds), 10.0, warmup_s=10.0)
    assert not viol and metric["windows_judged"] == 2 and metric["warmup_s"] == 10.0
    metric0, viol0, _ = judge(log_of(*seconds), 10.0)
    assert len(viol0) == 1 and viol0[0]["from_s"] == 0.0 and metric0["windows_judged"] == 3
    # a load no longer than its warm-up: the warm-up is not applied (nothing else to judge)
    short, viol1, _ = judge(log_of(*seconds[:12]), 10.0, warmup_s=10.0)
    assert short["warmup_s"] == 0.0 and short["windows_judged"] == 1 and len(viol1) == 1


def test_check_file_leaves_out_the_loads_warm_up_in_a_ktrial_run(tmp_path: Path) -> None:
    from ktrial.checker.check import check_file
    from ktrial.checker.options import CheckOptions

    """Through check_file: a run ktrial made (its test.json) leaves the load's first window
    out, as the other liveness checks leave out the warm-up; a bare history judges it."""
    lines = [send_op(0, "k", 1, 0), poll_op(1, {"k": [[0, 1]]})]
    seconds = [sec(float(t), consumed=500) for t in range(1, 11)] + steady(30)[10:]
    body = "".join(
        json.dumps(
            {
                "type": "second",
                "t": s.t,
                "time": s.time,
                "offered": s.offered,
                "produced": s.produced,
                "consumed": s.consumed,
            }
        )
        + "\n"
        for s in seconds
    )
    (tmp_path / "load.jsonl").write_text(
        json.dumps({"type": "start", "time": 1000.0}) + "\n" + body
    )
    bare = run(tmp_path, lines)["metrics"]["liveness"]
    assert bare["checks"]["behind"]["ok"] is False and bare["load"]["warmup_s"] == 0.0
    meta = {"ktrial_version": "0", "history_wall_start": 990.0}  # test.json of a ktrial run
    made = check_file(tmp_path / "history.jsonl", CheckOptions(), meta)["metrics"]["liveness"]
    assert made["checks"]["behind"]["ok"] is True and made["load"]["warmup_s"] == 10.0
    assert made["load"]["windows_judged"] == 2
