"""junit.xml: one testcase per anomaly check, failures for bad types, liveness cases."""

import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest
from ktrial.histories.store import write_json
from ktrial.report import write_junit
from ktrial.report.junit import build_junit
from ktrial.report.meanings import KNOWN_TYPES
from ktrial.testing.sample import write_sample_run


def cases(root: ET.Element | None) -> dict[str, ET.Element]:
    assert root is not None  # ElementTree.getroot() is Optional to mypy
    return {c.get("name", ""): c for c in root.iter("testcase")}


@pytest.fixture(scope="module")
def invalid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ET.Element]:
    run = write_sample_run(tmp_path_factory.mktemp("s") / "t" / "20261129T200000")
    path = write_junit(run)
    assert path == run / "junit.xml"
    return run, ET.parse(path).getroot()


def test_suite_counts_match_testcases(invalid: tuple[Path, ET.Element]) -> None:
    _, root = invalid
    suite = root.find("testsuite")
    # named by test and run (a CI matrix's jobs must not collide)
    assert suite is not None and suite.get("name") == "ktrial.sample-queue.20261129T200000"
    all_cases = suite.findall("testcase")
    assert suite.get("tests") == str(len(all_cases))
    fails = [c.get("name", "") for c in all_cases if c.find("failure") is not None]
    assert suite.get("failures") == str(len(fails)) == root.get("failures")
    assert sorted(fails) == ["G1c", "duplicate", "lost-write"]
    skipped = [c.get("name", "") for c in all_cases if c.find("skipped") is not None]
    assert suite.get("skipped") == str(len(skipped))
    assert sorted(skipped) == ["eos-duplicate", "eos-loss"]  # a queue run


def test_suite_time_and_timestamp(tmp_path: Path) -> None:
    # the suite's time is the check's; the testsuites element's the run's (here the
    # history's span: test.json has no wall_end)
    test = {"wall_start": 1_795_000_000.5}
    results = {"valid": True, "stats": {"duration_s": 61.25, "check_time_s": 0.75}}
    root = build_junit(results, test, tmp_path / "r.html").getroot()
    assert root is not None
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("time") == "0.750" and suite.get("timestamp") == "2026-11-18T11:06:40"
    assert root.get("time") == "61.250"


def test_every_known_type_is_a_testcase(invalid: tuple[Path, ET.Element]) -> None:
    _, root = invalid
    names = [
        c.get("name")
        for c in root.iter("testcase")
        if c.get("classname") == "ktrial.sample-queue.seed7.anomalies"
    ]
    assert names == list(KNOWN_TYPES)


def test_failure_has_count_explanation_and_report_path(invalid: tuple[Path, ET.Element]) -> None:
    run, root = invalid
    fail = cases(root)["lost-write"].find("failure")
    assert fail is not None
    assert fail.get("message", "").startswith("2 lost-write: ")
    text = fail.text or ""
    results = orjson.loads((run / "results.json").read_bytes())
    for ex in results["anomalies"]["lost-write"]["examples"]:
        assert f"- {ex['explanation']}" in text
    assert "Report: report.html" in text  # relative to junit.xml: survives an upload
    assert "<script>" in text  # kept as text; the XML layer escapes it


def test_benign_types_pass_with_a_note(invalid: tuple[Path, ET.Element]) -> None:
    _, root = invalid
    g0 = cases(root)["G0"]
    assert g0.find("failure") is None and g0.find("skipped") is None
    out = g0.find("system-out")
    assert out is not None and (out.text or "").startswith("found 3, not bad")


def test_liveness_cases(invalid: tuple[Path, ET.Element]) -> None:
    _, root = invalid
    c = cases(root)
    for name in ("progress.send", "progress.poll", "realtime-lag", "latency-p99.send"):
        assert c[name].get("classname") == "ktrial.sample-queue.seed7.liveness"
        assert c[name].find("failure") is None
    assert "8200 ms" in (c["realtime-lag"].findtext("system-out") or "")


def test_thresholds_fail_liveness(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "t" / "r", anomalies=False)
    root = ET.parse(
        write_junit(run, thresholds={"max_realtime_lag_ms": 5000, "max_p99_ms": 175})
    ).getroot()
    c = cases(root)
    assert c["realtime-lag"].find("failure") is not None
    assert c["latency-p99.send"].find("failure") is not None  # 180 ms
    assert c["latency-p99.poll"].find("failure") is None  # 170 ms
    assert root.get("failures") == "2"


def test_no_progress_fails(tmp_path: Path) -> None:
    results = {
        "valid": "unknown",
        "anomalies": {},
        "metrics": {"counts": {"send": {"ok": 0, "fail": 3, "info": 9}}},
    }
    root = build_junit(results, {}, tmp_path / "report.html").getroot()
    c = cases(root)
    assert (
        c["progress.send"].find("failure").get("message")  # type: ignore[union-attr]
        == "no send op succeeded (12 attempted)"
    )
    # unknown verdict: the anomaly checks that found nothing are skipped, not passed
    assert c["lost-write"].find("skipped") is not None


def test_checker_liveness_verdicts_are_used(tmp_path: Path) -> None:
    results = {
        "valid": True,
        "metrics": {
            "liveness": {
                "starvation": {"ok": False, "explanation": "consumed 80% of offered in 30 s"},
                "recovery": {"ok": True, "value": 4.2, "threshold": 30},
            }
        },
    }
    c = cases(build_junit(results, {}, tmp_path / "r.html").getroot())
    assert c["starvation"].find("failure").get("message") == "consumed 80% of offered in 30 s"  # type: ignore[union-attr]
    assert c["recovery"].find("failure") is None


def test_no_results_is_an_error(tmp_path: Path) -> None:
    run = tmp_path / "t" / "r"
    run.mkdir(parents=True)
    root = ET.parse(write_junit(run)).getroot()
    assert root.get("errors") == "1" and root.get("tests") == "1"


def test_copy_workload_runs_eos_checks(tmp_path: Path) -> None:
    run = tmp_path / "t" / "r"
    run.mkdir(parents=True)
    write_json(run / "test.json", {"workload": "copy"})
    results = {
        "valid": False,
        "bad_error_types": ["eos-loss"],
        "anomalies": {"eos-loss": {"count": 4, "examples": []}},
    }
    c = cases(ET.parse(write_junit(run, results)).getroot())
    assert c["eos-loss"].find("failure") is not None
    assert c["eos-duplicate"].find("skipped") is None and c["eos-duplicate"].find("failure") is None


def _live_results(bad: bool) -> dict[str, object]:
    checks = {
        "e2e-latency": {"ok": True, "bad": False, "value": 12.5, "threshold": None,
                        "explanation": "p99 12.5 ms"},
        "stuck-partition": {"ok": False, "bad": bad, "value": 45.0, "threshold": 30.0,
                            "explanation": "key 3 was stuck: value 7 at offset 2 for 45 s"},
    }  # fmt: skip
    anomalies = (
        {"stuck-partition": {"count": 1, "examples": [{"explanation": "key 3 was stuck"}]}}
        if bad
        else {}
    )
    return {
        "valid": not bad,
        "error_types": sorted(anomalies),
        "bad_error_types": sorted(anomalies),
        "anomalies": anomalies,
        "metrics": {"liveness": {"checks": checks, "thresholds": {"liveness_bad": bad},
                                 "violations": []}},
    }  # fmt: skip


def test_liveness_checks_pass_unless_judged_bad(tmp_path: Path) -> None:
    c = cases(build_junit(_live_results(bad=False), {}, tmp_path / "r.html").getroot())
    stuck = c["stuck-partition"]
    assert stuck.get("classname") == "ktrial.unnamed.noseed.liveness"
    assert stuck.find("failure") is None
    assert (stuck.findtext("system-out") or "").startswith("not judged (checked without")
    assert "offset 2" in (stuck.findtext("system-out") or "")
    assert c["e2e-latency"].findtext("system-out") == "p99 12.5 ms"
    assert "thresholds" not in c and "violations" not in c  # not checks


def test_liveness_bad_fails_one_liveness_case(tmp_path: Path) -> None:
    root = build_junit(_live_results(bad=True), {}, tmp_path / "r.html").getroot()
    assert root is not None
    named = [c for c in root.iter("testcase") if c.get("name") == "stuck-partition"]
    assert len(named) == 1  # not repeated as an anomalies case
    fail = named[0].find("failure")
    assert fail is not None and "value 7 at offset 2" in fail.get("message", "")
    assert root.get("failures") == "1"


def test_liveness_type_lists_agree() -> None:
    from ktrial.checker.liveness import VIOLATION_TYPES
    from ktrial.report.meanings import LIVENESS_MEANINGS, LIVENESS_TYPES

    assert LIVENESS_TYPES == VIOLATION_TYPES
    assert set(LIVENESS_TYPES) <= set(LIVENESS_MEANINGS)
