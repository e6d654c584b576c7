"""Night over night (report/trend.py): the regression rule, tolerances, the trend of
stored runs and its junit XML."""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ktrial.report.figures import RunFigures
from ktrial.report.trend import (
    BETTER,
    MISSING,
    OK,
    REGRESSION,
    SHORT,
    NoCheckedRun,
    Tolerances,
    TrendRun,
    UnknownTest,
    build_trend,
    judge,
    load_trend,
    parse_tolerances,
)
from ktrial.report.trendjunit import write_trend_junit
from ktrial.tests.report.trendruns import nightly, results, with_figures, write_run

# ---------------------------------------------------------------------- the rule


def test_a_doubled_latency_regresses_and_one_within_tolerance_does_not() -> None:
    prev = [200.0, 210.0, 190.0, 205.0, 195.0]
    doubled = judge(400.0, prev, worse="higher", tolerance=0.25)
    assert doubled.status == REGRESSION and doubled.baseline == 200.0
    assert doubled.limit == 250.0 and doubled.history == 5
    assert judge(240.0, prev, worse="higher", tolerance=0.25).status == OK
    assert judge(140.0, prev, worse="higher", tolerance=0.25).status == BETTER
    assert judge(400.0, prev, worse="higher", tolerance=1.5).status == OK


def test_throughput_regresses_downwards() -> None:
    prev = [100.0, 102.0, 98.0]
    assert judge(70.0, prev, worse="lower", tolerance=0.25).status == REGRESSION
    assert judge(80.0, prev, worse="lower", tolerance=0.25).status == OK
    assert judge(200.0, prev, worse="lower", tolerance=0.25).status == BETTER


def test_a_count_regresses_on_its_first_occurrence() -> None:
    assert judge(1, [0, 0, 0], worse="higher", tolerance=0.25).status == REGRESSION
    assert judge(0, [0, 0, 0], worse="higher", tolerance=0.25).status == OK
    assert judge(5, [4, 4, 4], worse="higher", tolerance=0.25).status == OK


def test_the_median_ignores_one_bad_night_in_the_baseline() -> None:
    assert judge(210.0, [200.0, 5000.0, 200.0, 190.0], worse="higher", tolerance=0.25).status == OK


def test_the_floor_keeps_tiny_changes_from_regressing() -> None:
    assert judge(3.0, [2.0, 2.0, 2.0], worse="higher", tolerance=0.25, floor=5.0).status == OK
    assert judge(8.0, [2.0, 2.0, 2.0], worse="higher", tolerance=0.25, floor=5.0).status == (
        REGRESSION
    )


def test_short_or_missing_history() -> None:
    assert judge(400.0, [200.0, 200.0], worse="higher", tolerance=0.25).status == SHORT
    # runs that lack the figure do not count towards the history
    assert judge(400.0, [200.0, None, 200.0], worse="higher", tolerance=0.25).status == SHORT
    missing = judge(None, [200.0] * 3, worse="higher", tolerance=0.25)
    assert missing.status == MISSING and missing.baseline == 200.0
    with pytest.raises(ValueError):
        judge(1.0, [1.0] * 3, worse="higher", tolerance=-0.1)


values = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
history = st.lists(values, min_size=3, max_size=8)
worse = st.sampled_from(["higher", "lower"])
tol = st.floats(min_value=0, max_value=3)


@settings(max_examples=300)
@given(history, worse, tol, st.floats(min_value=0, max_value=100))
def test_the_baseline_itself_never_regresses(
    prev: list[float], w: str, t: float, floor: float
) -> None:
    v = judge(statistics.median(prev), prev, worse=w, tolerance=t, floor=floor)  # type: ignore[arg-type]
    assert v.status == OK


@settings(max_examples=300)
@given(values, values, history, worse, tol)
def test_worse_than_a_regression_is_a_regression(
    a: float, b: float, prev: list[float], w: str, t: float
) -> None:
    worse_one, other = (max(a, b), min(a, b)) if w == "higher" else (min(a, b), max(a, b))
    if judge(other, prev, worse=w, tolerance=t).status == REGRESSION:  # type: ignore[arg-type]
        assert judge(worse_one, prev, worse=w, tolerance=t).status == REGRESSION  # type: ignore[arg-type]


@settings(max_examples=300)
@given(values, history, worse, tol, st.randoms(use_true_random=False))
def test_the_order_of_earlier_runs_does_not_matter(
    x: float, prev: list[float], w: str, t: float, rnd: object
) -> None:
    shuffled = list(prev)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    a = judge(x, prev, worse=w, tolerance=t)  # type: ignore[arg-type]
    b = judge(x, shuffled, worse=w, tolerance=t)  # type: ignore[arg-type]
    assert a == b


positive = st.floats(min_value=1e-3, max_value=1e6)


@settings(max_examples=300)
@given(positive, st.lists(positive, min_size=3, max_size=9).filter(lambda xs: len(xs) % 2), tol)
def test_lower_is_worse_is_higher_is_worse_of_the_reciprocal(
    x: float, prev: list[float], t: float
) -> None:
    """A tolerance is a factor either way: throughput halving is judged like latency
    doubling (an odd number of earlier runs: their median is one of them)."""
    down = judge(x, prev, worse="lower", tolerance=t)
    up = judge(1 / x, [1 / p for p in prev], worse="higher", tolerance=t)
    assert down.baseline is not None
    ratio = down.baseline / x
    assume(abs(ratio - (1 + t)) > 1e-9 and abs(ratio - 1 / (1 + t)) > 1e-9)
    assert down.status == up.status


def test_a_throughput_limit_never_goes_below_zero() -> None:
    v = judge(1.0, [2.0, 2.0, 2.0], worse="lower", tolerance=1.5)
    assert v.limit == pytest.approx(0.8) and v.status == OK  # 2 / 2.5
    assert judge(0.5, [2.0, 2.0, 2.0], worse="lower", tolerance=1.0).status == REGRESSION


@settings(max_examples=300)
@given(values, history, worse, tol, st.floats(min_value=1e-3, max_value=1e3))
def test_units_do_not_matter(x: float, prev: list[float], w: str, t: float, c: float) -> None:
    a = judge(x, prev, worse=w, tolerance=t)  # type: ignore[arg-type]
    b = judge(x * c, [p * c for p in prev], worse=w, tolerance=t)  # type: ignore[arg-type]
    # scaling every value changes nothing (away from the edges, where rounding decides)
    base = statistics.median(prev)
    up, down = abs(base) * t, abs(base) * t / (1 + t)
    edges = (base + up, base - down) if w == "higher" else (base - down, base + up)
    assume(all(abs(x - e) > 1e-6 * (1 + abs(x)) for e in edges))  # not on an edge itself
    assert a.status == b.status


@settings(max_examples=200)
@given(st.integers(1, 6), st.data())
def test_only_the_last_n_runs_make_the_baseline(last: int, data: st.DataObject) -> None:
    """build_trend judges the newest against exactly the `last` runs before it: runs
    older than that may be anything."""
    series = data.draw(st.lists(values, min_size=last + 1, max_size=last + 4))
    older = data.draw(st.lists(values, max_size=4))
    from ktrial.report.figures import series_key
    from ktrial.tests.report.trendruns import meta_for

    key = series_key("t", meta_for("t", 1, when=0.0))

    def runs(xs: list[float]) -> list[TrendRun]:
        return [
            TrendRun(Path(f"/s/t/{i:03}"), "", RunFigures("valid", values={"e2e_p99": x}))
            for i, x in enumerate(xs)
        ]

    a = build_trend(runs(series), key, last=last)
    b = build_trend(runs(older + series), key, last=last)
    assert [j.status for j in a.judgements] == [j.status for j in b.judgements]
    window = series[-(last + 1) :]
    expect = judge(window[-1], window[:-1], worse="higher", tolerance=0.25, floor=5.0)
    assert a.judgements[0].status == expect.status


# ---------------------------------------------------------------------- tolerances


def test_tolerances_by_figure_family_and_default() -> None:
    t = parse_tolerances(["0.3", "e2e_p99=0.5", "anomaly=100%", "mem_slope.n1=2"])
    assert t.of("e2e_p99") == 0.5 and t.of("e2e_p50") == 0.3
    assert t.of("anomaly.lost-write") == 1.0 and t.of("mem_slope.n1") == 2.0
    assert t.of("mem_slope.n2") == 0.3
    assert parse_tolerances([]) == Tolerances()


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("e2e_p98=0.5", "no figure 'e2e_p98'"),
        ("fast", "a fraction or a percentage"),
        ("-0.1", "≥ 0"),
        ("nan", "≥ 0"),
        ("e2e_p99=", "a fraction or a percentage"),
    ],
)
def test_a_bad_tolerance_says_what_is_wrong(item: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_tolerances([item])


# ---------------------------------------------------------------------- stored runs


def test_a_doubled_e2e_p99_in_stored_runs_regresses(tmp_path: Path) -> None:
    paths = nightly(tmp_path, "queue", [200.0, 210.0, 190.0, 205.0, 400.0])
    trend = load_trend(tmp_path, "queue")
    assert trend.status == REGRESSION
    assert [j.figure for j in trend.regressions] == ["e2e_p99"]
    assert [r.path for r in trend.runs] == paths
    assert trend.values("e2e_p99") == [200.0, 210.0, 190.0, 205.0, 400.0]
    assert trend.newest.figures.seed == 104
    other = {j.figure: j.status for j in trend.judgements if j.figure != "e2e_p99"}
    assert set(other.values()) == {OK}  # the same history otherwise: nothing else moved
    assert "anomaly.lost-write" not in other  # no run found it bad: not a figure


def test_stored_runs_within_tolerance_pass(tmp_path: Path) -> None:
    nightly(tmp_path, "queue", [200.0, 210.0, 190.0, 205.0, 240.0])
    trend = load_trend(tmp_path, "queue")
    assert trend.status == OK and not trend.regressions


def test_a_new_anomaly_type_regresses(tmp_path: Path) -> None:
    for i in range(4):
        write_run(tmp_path, "queue", i, results())
    write_run(tmp_path, "queue", 4, results(anomaly=True))
    trend = load_trend(tmp_path, "queue")
    assert trend.newest.figures.verdict == "invalid"
    regressed = [j for j in trend.regressions if j.figure == "anomaly.lost-write"]
    assert regressed and regressed[0].baseline == 0
    assert trend.values("anomaly.lost-write")[:4] == [0, 0, 0, 0]


def test_too_few_earlier_runs_is_not_enough_history(tmp_path: Path) -> None:
    nightly(tmp_path, "queue", [200.0, 200.0, 400.0])
    trend = load_trend(tmp_path, "queue")
    assert trend.status == SHORT
    assert {j.status for j in trend.judgements} <= {SHORT, MISSING}


def test_last_limits_the_window(tmp_path: Path) -> None:
    # long ago the p99 was 1000 ms; the last three nights 200 ms: 400 regresses with
    # --last 3 and not against the median of all six
    nightly(tmp_path, "queue", [1000.0, 1000.0, 1000.0, 200.0, 200.0, 200.0, 400.0])
    assert load_trend(tmp_path, "queue", last=3).status == REGRESSION
    assert load_trend(tmp_path, "queue", last=6).status == OK
    assert len(load_trend(tmp_path, "queue", last=3).runs) == 4


def test_runs_of_other_settings_and_unchecked_runs_are_left_out(tmp_path: Path) -> None:
    nightly(tmp_path, "queue", [200.0, 200.0, 200.0])
    write_run(tmp_path, "queue", 3, with_figures(results(), e2e_p99=900.0), profile="unsafe")
    write_run(tmp_path, "queue", 4, with_figures(results(), e2e_p99=400.0))
    write_run(tmp_path, "queue", 5, None)  # still running, or its check crashed
    trend = load_trend(tmp_path, "queue")
    assert trend.values("e2e_p99") == [200.0, 200.0, 200.0, 400.0]
    assert trend.status == REGRESSION
    whys = [x.why for x in trend.left_out]
    assert len(whys) == 2
    assert "profile unsafe (not safe)" in whys[0]
    assert "not checked" in whys[1]


def test_the_newest_run_sets_the_test(tmp_path: Path) -> None:
    nightly(tmp_path, "queue", [200.0, 200.0, 200.0])
    write_run(tmp_path, "queue", 3, results(), faults=("pause",))
    trend = load_trend(tmp_path, "queue")
    assert trend.key.faults == ("pause",) and len(trend.runs) == 1
    assert trend.status == SHORT and len(trend.left_out) == 3


def test_an_unknown_name_lists_the_known_ones(tmp_path: Path) -> None:
    nightly(tmp_path, "queue", [1.0])
    nightly(tmp_path, "copy", [1.0])
    with pytest.raises(UnknownTest) as e:
        load_trend(tmp_path, "qeueu")
    assert e.value.known == ["copy", "queue"]
    write_run(tmp_path, "fresh", 0, None)
    with pytest.raises(NoCheckedRun):
        load_trend(tmp_path, "fresh")


def test_an_unreadable_results_json_is_left_out(tmp_path: Path) -> None:
    paths = nightly(tmp_path, "queue", [200.0, 200.0, 200.0, 200.0])
    (paths[1] / "results.json").write_text("{not json")
    trend = load_trend(tmp_path, "queue")
    assert [x.why for x in trend.left_out] == ["results.json unreadable"]
    assert len(trend.runs) == 3


def test_the_json_view(tmp_path: Path) -> None:
    nightly(tmp_path, "queue", [200.0, 210.0, 190.0, 400.0])
    doc = load_trend(tmp_path, "queue", tolerances=parse_tolerances(["e2e_p50=0.5"])).to_json()
    assert doc["status"] == REGRESSION and doc["regressions"] == ["e2e_p99"]
    assert doc["test"]["name"] == "queue" and doc["test"]["faults"] == ["kill", "partition"]
    assert doc["tolerance"] == {"default": 0.25, "e2e_p50": 0.5}
    [j] = [j for j in doc["judgements"] if j["figure"] == "e2e_p99"]
    assert j["values"] == [200.0, 210.0, 190.0, 400.0] and j["baseline"] == 200.0
    assert j["limit"] == 250.0 and j["change"] == 1.0 and j["unit"] == "ms"
    assert [r["seed"] for r in doc["runs"]] == [100, 101, 102, 103]


# ---------------------------------------------------------------------- junit


def test_junit_fails_each_regressed_figure(tmp_path: Path) -> None:
    nightly(tmp_path, "queue", [200.0, 210.0, 190.0, 205.0, 400.0])
    trend = load_trend(tmp_path, "queue")
    out = tmp_path / "trend.xml"
    write_trend_junit(trend, out)
    xml = junitparser.JUnitXml.fromfile(str(out))
    [suite] = list(xml)
    assert suite.name == "ktrial.trend.queue"
    cases = list(suite)
    assert len(cases) == len(trend.judgements) == suite.tests
    failed = [c.name for c in cases if not c.is_passed and not c.is_skipped]
    assert failed == ["e2e_p99"] and suite.failures == 1
    [case] = [c for c in cases if c.name == "e2e_p99"]
    assert "400 ms against a median of 202 ms over 4 runs" in case.result[0].message
    props = {p.name: p.value for p in suite.properties()}
    assert props["test.name"] == "queue" and props["newest"] == str(trend.newest.path)
    assert ET.parse(out).getroot().get("failures") == "1"


def test_junit_skips_figures_without_enough_history(tmp_path: Path) -> None:
    nightly(tmp_path, "queue", [200.0, 400.0])
    out = tmp_path / "trend.xml"
    write_trend_junit(load_trend(tmp_path, "queue"), out)
    [suite] = list(junitparser.JUnitXml.fromfile(str(out)))
    assert suite.failures == 0 and suite.skipped == suite.tests > 0
