"""The sweep's point figures and its knee (load/knee.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from ktrial.histories.loadlog import LoadSecond
from ktrial.load.knee import Point, knees, measured, point_figures, table


def sec(t: float, offered: int, consumed: int, e2e: float, cpu: float = 0.1) -> LoadSecond:
    return LoadSecond(
        t=t,
        time=t,
        dt=1.0,
        offered=offered,
        produced=offered,
        consumed=consumed,
        consumers=(consumed,),
        e2e_p99_ms=e2e,
        e2e_hist=((e2e, consumed),) if consumed else (),
        produce_hist=((e2e / 2, offered),),
        cpu_s=cpu,
    )


def test_measured_keeps_the_last_stretch() -> None:
    seconds = [sec(float(t), 100, 100, 10.0) for t in range(1, 62)]  # 60 s and the stop
    kept = measured(seconds, 60.0, 30.0)
    assert [s.t for s in kept] == [float(t) for t in range(31, 61)]


def test_point_figures() -> None:
    """Mutant: figures over the whole point instead of the last 30 s (a slow warm-up
    would count) would report the warm-up's latency."""
    warm = [sec(float(t), 1000, 1000, 900.0) for t in range(1, 31)]
    steady = [sec(float(t), 1000, 1000, 12.0) for t in range(31, 61)]
    p = point_figures(1000.0, 6, measured(warm + steady, 60.0, 30.0), broker_cores=1.4)
    assert not p.behind and p.e2e_p99_ms == 12.0 and p.e2e_p50_ms == 12.0
    assert p.offered_rate == 1000.0 and p.consumed_rate == 1000.0
    assert p.produce_p99_ms == 6.0 and p.client_cores == 0.1 and p.broker_cores == 1.4
    behind = point_figures(2000.0, 6, [sec(float(t), 2000, 1900, 40.0) for t in range(1, 31)])
    assert behind.behind and "95.0%" in behind.why
    slow = point_figures(2000.0, 6, [sec(float(t), 2000, 2000, 6000.0) for t in range(1, 31)])
    assert slow.behind and "e2e p99 6000" in slow.why
    empty = point_figures(2000.0, 6, [])
    assert empty.behind and "no telemetry" in empty.why


def pt(rate: float, behind: bool, parts: int = 6) -> Point:
    return Point(rate=rate, partitions=parts, behind=behind, e2e_p99_ms=10.0)


def test_the_knee_is_the_last_rate_before_the_first_behind_one() -> None:
    ks = knees([pt(4000, False), pt(1000, False), pt(8000, True), pt(2000, False)])
    assert len(ks) == 1 and ks[0].rate == 4000 and ks[0].reached and ks[0].first_behind == 8000
    assert "knee at 4000" in ks[0].text()
    # a dip: a point behind below a point that kept up does not raise the knee
    dip = knees([pt(1000, False), pt(2000, True), pt(4000, False)])
    assert dip[0].rate == 1000
    # never behind: at least the highest rate; behind from the start: none
    assert knees([pt(1000, False), pt(2000, False)])[0].text().endswith("(sweep higher)")
    first = knees([pt(1000, True, parts=3), pt(1000, False, parts=12)])
    assert first[0].partitions == 3 and first[0].rate is None
    assert first[1].rate == 1000 and not first[1].reached


@given(st.lists(st.tuples(st.integers(1, 50), st.booleans()), min_size=1, max_size=12))
def test_knee_matches_a_brute_force_reference(rows: list[tuple[int, bool]]) -> None:
    by_rate = {r * 1000.0: b for r, b in rows}  # one point per rate
    points = [pt(r, b) for r, b in by_rate.items()]
    k = knees(points)[0]
    ok = [r for r in sorted(by_rate) if all(not by_rate[x] for x in by_rate if x <= r)]
    assert k.rate == (max(ok) if ok else None)
    assert k.reached == any(by_rate.values())


def test_table_lines() -> None:
    lines = table([pt(1000, False), Point(2000, 6, behind=True, why="nothing consumed")])
    assert "e2e p99" in lines[0] and len(lines) == 4
    assert lines[3].endswith("BEHIND: nothing consumed")
