"""A run's key figures (report/figures.py): read from where the checker writes them,
missing when older results lack them, never made up; and which runs are the same test."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from ktrial.histories.testmeta import TestMeta
from ktrial.report.figures import COUNTED, FIXED, run_figures, series_key, spec
from ktrial.tests.report.trendruns import PATHS, meta_for, results, with_figures


def _at(d: Any, path: tuple[str, ...]) -> Any:
    for p in path:
        d = d[p]
    return d


def test_each_fixed_figure_is_the_number_the_checker_wrote() -> None:
    res = results()
    fig = run_figures(res, meta_for("queue", 7, when=0.0))
    for name, path in PATHS.items():
        assert fig.value(name) == _at(res, path), name
    # a generated history has transactions, reads and writes: the main figures exist
    for name in ("txn_per_s", "ops_per_s", "e2e_p50", "e2e_p99", "commit_p50", "commit_p99"):
        assert isinstance(fig.value(name), (int, float)), name
    assert fig.value("recovery_send") is None  # no heal in the history: none measured
    assert fig.verdict == "valid" and fig.seed == 7
    assert fig.duration_s == res["stats"]["duration_s"]


def test_memory_slopes_per_node_in_mib_per_minute() -> None:
    res = with_figures(results(), mem_slope_n1=12.5, mem_slope_n2=-3.0, mem_slope_n3=None)
    fig = run_figures(res, {})
    assert fig.value("mem_slope.n1") == 12.5
    assert fig.value("mem_slope.n2") == -3.0
    assert fig.value("mem_slope.n3") is None  # too few samples for a slope
    assert fig.value("mem_slope.n4") is None  # never sampled


def test_anomaly_counts_by_type_and_zero_for_types_not_found() -> None:
    bad = run_figures(results(anomaly=True), {})
    clean = run_figures(results(), {})
    assert bad.verdict == "invalid" and "lost-write" in bad.bad_types
    assert (
        bad.value("anomaly.lost-write") == results(anomaly=True)["anomalies"]["lost-write"]["count"]
    )
    assert clean.value("anomaly.lost-write") == 0  # results list only the types found
    assert clean.value("violation.stuck-partition") == 0  # violation_counts: {}


def test_older_results_lack_figures_and_they_stay_missing() -> None:
    res = results()
    del res["metrics"]["liveness"]
    del res["metrics"]["throughput"]["ok_per_s_by_f"]
    del res["anomalies"]
    fig = run_figures(res, {})
    for name in ("txn_per_s", "e2e_p99", "commit_p50", "recovery_read"):
        assert fig.value(name) is None, name
    assert fig.value("ops_per_s") == results()["metrics"]["throughput"]["ok_data_per_s"]
    assert fig.value("anomaly.lost-write") is None  # no anomalies section: no count at all
    assert fig.value("violation.stuck-partition") is None
    assert fig.counted == frozenset()


def test_an_unchecked_run_has_no_figures() -> None:
    meta = meta_for("queue", 3, when=100.0)
    fig = run_figures(None, meta)
    assert fig.verdict == "not checked" and fig.values == {} and fig.seed == 3
    assert fig.duration_s == 70.0  # test.json's wall-clock span


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["metrics", "liveness", "throughput", "count", "p99", "nodes", "n1"])
            | st.text(max_size=4),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["metrics", "anomalies", "stats", "valid"]), _json))
def test_any_results_shape_gives_numbers_or_none(res: dict[str, Any]) -> None:
    fig = run_figures(res, {})
    for name, v in fig.values.items():
        assert spec(name) is not None, name
        assert v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)), (name, v)


def test_the_figure_table_is_complete() -> None:
    assert set(PATHS) == set(FIXED)
    assert {"anomaly", "violation"} == set(COUNTED)


# ---------------------------------------------------------------------- same test


def test_seed_time_and_kafka_version_do_not_make_another_test() -> None:
    a = meta_for("queue", 1, when=0.0)
    b = meta_for("queue", 2, when=9e5)
    b.cluster = {**(b.cluster or {}), "broker_versions": ["4.2.0"]}
    assert series_key("queue", a) == series_key("queue", b)
    k = series_key("queue", a)
    assert k.workload == "queue" and k.txn is True and k.cluster == "local"
    assert k.nodes == 3 and k.profile == "safe" and k.faults == ("kill", "partition")


def test_profile_faults_transactions_and_cluster_size_make_another_test() -> None:
    base = series_key("queue", meta_for("queue", 1, when=0.0))
    assert series_key("queue", meta_for("queue", 1, when=0.0, profile="unsafe")) != base
    assert series_key("queue", meta_for("queue", 1, when=0.0, faults=("kill",))) != base
    assert series_key("queue", meta_for("queue", 1, when=0.0, txn=False)) != base
    bigger = meta_for("queue", 1, when=0.0)
    bigger.cluster = {**(bigger.cluster or {}), "nodes": 5}
    assert series_key("queue", bigger) != base
    # the order faults were asked in does not matter
    assert series_key("queue", meta_for("queue", 1, when=0.0, faults=("partition", "kill"))) == base


def test_the_key_of_an_older_or_foreign_test_json() -> None:
    # the sample run's shape: nodes as a list, the workload as a map, only `faults`
    meta = TestMeta.from_json(
        {
            "name": "sample-queue",
            "cluster": {"kind": "local", "nodes": ["n1", "n2", "n3"]},
            "workload": {"name": "queue", "txn": True},
            "nemesis": {"faults": ["pause", "kill"]},
        }
    )
    k = series_key("sample-queue", meta)
    assert (k.workload, k.nodes, k.faults, k.txn) == ("queue", 3, ("kill", "pause"), True)
    assert series_key("x", TestMeta()).describe() == "x · faults none"
