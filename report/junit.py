"""junit.xml: the CI dashboard's view of a run.

One testcase per anomaly check — every type in ktrial's catalogue, so a
dashboard's history shows the same tests run after run — plus liveness
testcases when the checker computed the metrics they need.

Outcome rules (why these):
* a type in ``bad_error_types`` → ``<failure>`` with the count, the meaning, the
  first explanations and the path of report.html: that is a real bug to look at;
* a type found but not bad in this configuration (G0, int-send-skip, poll-skip
  under subscribe…) → passes, with the count in ``<system-out>``: the check ran
  and what it found is normal for Kafka, so "skipped" would be a lie and
  "failed" a false alarm;
* ``eos-*`` on a run that is not the ``copy`` workload → ``<skipped>``: that check
  did not run at all; likewise every check that found nothing when the verdict
  is unknown (the checker could not decide, e.g. no reads at all).
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ..histories.redact import redact
from ..histories.store import RunDir, load_json
from ..histories.testmeta import TestMeta
from .meanings import KNOWN_TYPES, LIVENESS_TYPES, meaning

EOS_TYPES = frozenset({"eos-duplicate", "eos-loss"})
DATA_FS = ("send", "poll", "txn")
MAX_EXPLANATIONS = 3


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")


def _anomaly_cases(
    suite: ET.Element, results: dict[str, Any], test: TestMeta, report_path: Path
) -> None:
    anomalies = results.get("anomalies")
    anomalies = anomalies if isinstance(anomalies, dict) else {}
    bad = set(results.get("bad_error_types") or [])
    unknown = results.get("valid") not in (True, False)
    workload = test.workload_name
    # Liveness violations (anomalies under liveness_bad) get their own ktrial.liveness case.
    types = list(KNOWN_TYPES) + sorted(
        t for t in anomalies if t not in KNOWN_TYPES and t not in LIVENESS_TYPES
    )
    for t in types:
        case = _case(suite, "ktrial.anomalies", t)
        a = anomalies.get(t)
        count = a.get("count", 0) if isinstance(a, dict) else (1 if a else 0)
        found = bool(a) and count != 0
        if found and t in bad:
            fail = ET.SubElement(case, "failure", type=t, message=f"{count} {t}: {meaning(t)}")
            lines = [f"{count} {t} anomalies.", meaning(t)]
            examples = a.get("examples") if isinstance(a, dict) else None
            for ex in (examples if isinstance(examples, list) else [])[:MAX_EXPLANATIONS]:
                if isinstance(ex, dict) and ex.get("explanation"):
                    lines.append(f"- {ex['explanation']}")
            lines.append(f"Report: {report_path}")
            fail.text = "\n".join(lines)
        elif found:
            out = ET.SubElement(case, "system-out")
            out.text = f"found {count}, not bad in this configuration: {meaning(t)}"
        elif t in EOS_TYPES and workload is not None and workload != "copy":
            ET.SubElement(
                case,
                "skipped",
                message=f"exactly-once checks run only for the copy workload "
                f"(this run: {workload})",
            )
        elif unknown:
            ET.SubElement(case, "skipped", message="the checker could not decide (verdict unknown)")


def _liveness_cases(
    suite: ET.Element, metrics: dict[str, Any], thresholds: dict[str, Any], report_path: Path
) -> None:
    counts = metrics.get("counts")
    if isinstance(counts, dict):
        for f in sorted(counts):
            c = counts[f]
            if f not in DATA_FS or not isinstance(c, dict):
                continue
            ok = c.get("ok", 0) or 0
            total = sum(
                v for v in (c.get("ok"), c.get("fail"), c.get("info")) if isinstance(v, int)
            )
            case = _case(suite, "ktrial.liveness", f"progress.{f}")
            if total and not ok:
                ET.SubElement(
                    case,
                    "failure",
                    type="no-progress",
                    message=f"no {f} op succeeded ({total} attempted)",
                ).text = (
                    f"Every {f} op failed or timed out, so the run tested nothing about it. "
                    f"Report: {report_path}"
                )
            else:
                ET.SubElement(case, "system-out").text = f"{ok} of {total} {f} ops ok"
    lag = metrics.get("realtime_lag")
    if isinstance(lag, dict):
        per_key = lag.get("per_key")
        worst = (
            max((v for v in per_key.values() if isinstance(v, (int, float))), default=None)
            if isinstance(per_key, dict)
            else None
        )
        case = _case(suite, "ktrial.liveness", "realtime-lag")
        limit = thresholds.get("max_realtime_lag_ms")
        if worst is not None and isinstance(limit, (int, float)) and worst > limit:
            ET.SubElement(
                case,
                "failure",
                type="realtime-lag",
                message=f"worst realtime lag {worst:.0f} ms > {limit} ms",
            ).text = (
                f"A consumer was {worst:.0f} ms behind the latest acknowledged write. "
                f"Report: {report_path}"
            )
        else:
            ET.SubElement(case, "system-out").text = (
                f"worst realtime lag: {worst:.0f} ms" if worst is not None else "no lag recorded"
            )
    lat = metrics.get("latency_ms")
    limit = thresholds.get("max_p99_ms")
    if isinstance(lat, dict):
        for f in sorted(lat):
            q = lat[f].get("ok") if isinstance(lat[f], dict) else None
            if not isinstance(q, dict) or not isinstance(q.get("p99"), (int, float)):
                continue
            case = _case(suite, "ktrial.liveness", f"latency-p99.{f}")
            p99 = q["p99"]
            if isinstance(limit, (int, float)) and p99 > limit:
                ET.SubElement(
                    case,
                    "failure",
                    type="latency",
                    message=f"{f} p99 latency {p99:.0f} ms > {limit} ms",
                ).text = f"Report: {report_path}"
            else:
                ET.SubElement(case, "system-out").text = f"{f} ok p99 {p99:.1f} ms"
    # Liveness checks the checker judged itself: results["metrics"]["liveness"]["checks"]
    # (name -> {ok, bad, value, threshold, explanation}); older results put them at the
    # top level of "liveness". A check that is not ok fails only when it is bad
    # (checked with liveness_bad): faults legitimately slow a run down, so otherwise
    # the case passes and says what it saw.
    own = metrics.get("liveness")
    if isinstance(own, dict):
        nested = own.get("checks")
        items: dict[str, Any] = nested if isinstance(nested, dict) else own
        for name in items:
            item = items[name]
            if not isinstance(item, dict) or "ok" not in item:
                continue
            case = _case(suite, "ktrial.liveness", str(name))
            text = str(
                item.get("explanation")
                or f"value {item.get('value')}, threshold {item.get('threshold')}"
            )
            if item.get("ok") is False and item.get("bad", True):
                ET.SubElement(
                    case, "failure", type=str(name), message=text
                ).text = f"{text}\n{meaning(str(name))}\nReport: {report_path}"
            elif item.get("ok") is False:
                ET.SubElement(
                    case, "system-out"
                ).text = f"not judged (checked without liveness_bad): {text}"
            else:
                ET.SubElement(case, "system-out").text = text


def build_junit(
    results: dict[str, Any] | None,
    test: TestMeta | dict[str, Any],
    report_path: Path,
    thresholds: dict[str, Any] | None = None,
) -> ET.ElementTree:
    """The junit ElementTree for one run's results (None: no results → one error case)."""
    if not isinstance(test, TestMeta):
        test = TestMeta.from_json(test)
    suites = ET.Element("testsuites", name="ktrial")
    suite = ET.SubElement(suites, "testsuite", name="ktrial")
    if results is None:
        case = _case(suite, "ktrial", "check")
        ET.SubElement(case, "error", message="no results.json: the history was not checked")
    else:
        _anomaly_cases(suite, results, test, report_path)
        metrics = results.get("metrics")
        if isinstance(metrics, dict):
            _liveness_cases(suite, metrics, {**test.slo, **(thresholds or {})}, report_path)
    cases = suite.findall("testcase")
    n_fail = sum(1 for c in cases if c.find("failure") is not None)
    n_err = sum(1 for c in cases if c.find("error") is not None)
    n_skip = sum(1 for c in cases if c.find("skipped") is not None)
    for el in (suites, suite):
        el.set("tests", str(len(cases)))
        el.set("failures", str(n_fail))
        el.set("errors", str(n_err))
    suite.set("skipped", str(n_skip))
    stats = (results or {}).get("stats")
    duration = stats.get("duration_s") if isinstance(stats, dict) else None
    if isinstance(duration, (int, float)):
        suite.set("time", f"{duration:.3f}")
    if test.wall_start is not None:  # epoch seconds (an ISO time in test.json is converted)
        suite.set("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(test.wall_start)))
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(
    run_dir: Path, results: dict[str, Any] | None = None, thresholds: dict[str, Any] | None = None
) -> Path:
    """Write junit.xml into `run_dir` (results default to its results.json); return the path.

    `thresholds` (also read from test.json's "slo" table) may set
    ``max_realtime_lag_ms`` and ``max_p99_ms``; without them those liveness cases
    only report their values.
    """
    rd = RunDir(Path(run_dir))
    if results is None and rd.results.exists():
        loaded = load_json(rd.results)
        results = loaded if isinstance(loaded, dict) else None
    test = load_json(rd.test_json) if rd.test_json.exists() else {}
    meta = TestMeta.from_json(redact(test) if isinstance(test, dict) else {})
    tree = build_junit(results, meta, rd.report.resolve(), thresholds)
    tmp = rd.path / ".junit.xml.tmp"
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(rd.junit)
    return rd.junit
