"""junit.xml: the CI dashboard's view of a run.

One testcase per anomaly check — every type in ktrial's catalogue, so a
dashboard's history shows the same tests run after run — plus liveness
testcases when the checker computed the metrics they need.

Names, so the jobs of a CI matrix never collide: the suite is
``ktrial.<test>.<run>`` and each case's class ``ktrial.<test>.seed<seed>.<kind>``
(kind: ``anomalies``, ``liveness``, ``faults``; cases are built with
``ktrial.<kind>`` and qualified last), each part reduced to letters, digits, ``_``
and ``-`` (a dot would add a package level in Jenkins). The suite carries
``<properties>`` (seed, profile, nemesis, system and Kafka version, transaction
protocol, client driver and its version, workload, run directory...; read through
TestMeta from the redacted test.json) and a ``<system-out>`` with the report's path
relative to the junit file (the path in every failure is that one too), so the link
survives an artifact upload. Times:
the suite's ``time`` is the check's (results' ``stats.check_time_s``; the cases are
judged together in that time and each says 0); the ``testsuites`` element's is the
run's wall-clock duration (test.json's ``wall_end - wall_start``, else the span of
the history).

Outcome rules (why these):
* a type in ``bad_error_types`` → ``<failure>`` with the count, the meaning, the
  first explanations and the path of report.html: that is a real bug to look at;
* a type found but not bad in this configuration (G0, int-send-skip, poll-skip
  under subscribe…) → passes, with the count in ``<system-out>``: the check ran
  and what it found is normal for Kafka, so "skipped" would be a lie and
  "failed" a false alarm;
* ``eos-*`` on a run that is not the ``copy`` workload → ``<skipped>``: that check
  did not run at all; likewise every check that found nothing when the verdict
  is unknown (the checker could not decide, e.g. no reads at all);
* a liveness check with nothing to measure (the report's "not measured": no value
  read, no fault healed, no op of that kind attempted) → ``<skipped>`` saying why,
  never a pass; a check over its threshold on a run checked without
  ``liveness_bad`` passes with a note (faults legitimately slow a run down).

XML 1.0 cannot carry most control characters, not even as character references,
and a CI parser rejects the whole file over one: as the last step every text and
attribute is cleaned, such a character written as a visible escape (``\\x01``),
and overlong texts cut (report.html and results.json keep everything).
"""

from __future__ import annotations

import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ..histories.redact import redact
from ..histories.store import MAX_TEST_JSON, RunDir, load_json
from ..histories.testmeta import TestMeta
from .livetext import liveness_detail, measured
from .meanings import KNOWN_TYPES, LIVENESS_TYPES, meaning
from .runfacts import (
    driver_name,
    driver_version,
    system_text,
    transaction_level,
    transaction_protocol,
)
from .verdict import verdict_of

EOS_TYPES = frozenset({"eos-duplicate", "eos-loss"})
DATA_FS = ("send", "poll", "txn")
MAX_EXPLANATIONS = 3
MAX_ATTR = 1_000  # characters of an attribute (a failure's message)
MAX_TEXT = 20_000  # characters of a text block
# What XML 1.0 may not contain at all: C0 controls but tab, newline and carriage
# return; lone surrogates; U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NAME_PART = re.compile(r"[^A-Za-z0-9_-]+")


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


def _fault_case(suite: ET.Element, results: dict[str, Any], report_path: Path) -> None:
    """``ktrial.faults.injected``: present when the run asked for faults; failed when
    they did not all happen (none injected, a family never injected, a fault-error),
    the reason the verdict is unknown (checker/faults.py)."""
    section = results.get("faults")
    if not isinstance(section, dict):
        return
    case = _case(suite, "ktrial.faults", "injected")
    raw = section.get("injected")
    injected: dict[str, Any] = raw if isinstance(raw, dict) else {}
    done = ", ".join(f"{f} x{n}" for f, n in injected.items()) or "none"
    asked = ", ".join(str(f) for f in section.get("asked") or [])
    if section.get("ok") is False:
        warnings = [str(w) for w in section.get("warnings") or []]
        ET.SubElement(
            case,
            "failure",
            type="faults-not-injected",
            message=warnings[0] if warnings else f"asked for {asked}; injected {done}",
        ).text = "\n".join(
            [
                *warnings,
                f"asked for: {asked}; injected: {done}",
                "The history says nothing about the faults that did not happen: the "
                "verdict is unknown.",
                f"Report: {report_path}",
            ]
        )
    else:
        ET.SubElement(case, "system-out").text = f"asked for: {asked}; injected: {done}"


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
            if not total:
                ET.SubElement(case, "skipped", message=f"not measured: no {f} op was attempted")
            elif not ok:
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
        elif worst is None:
            ET.SubElement(case, "skipped", message="not measured: no realtime lag was recorded")
        else:
            ET.SubElement(case, "system-out").text = f"worst realtime lag: {worst:.0f} ms"
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
            elif not measured(item):
                why = liveness_detail(str(name), own) or "not measured"
                ET.SubElement(case, "skipped", message=why)
            else:
                ET.SubElement(case, "system-out").text = text


def _part(x: object, fallback: str) -> str:
    """One dotted part of a suite or class name: letters, digits, `_` and `-` only."""
    text = _NAME_PART.sub("_", str(x)).strip("_") if x not in (None, "") else ""
    return text[:100] or fallback


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def xml_safe(text: str, limit: int = MAX_TEXT) -> str:
    """`text` as XML 1.0 can carry it: cut to `limit` characters, then every character
    XML forbids written as a visible escape (``\\x01``, ``\\ud800``)."""
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit:,} more characters: see the report)"
    return _NOT_XML.sub(_visible, text)


def _clean(root: ET.Element) -> None:
    """Make every attribute and text of the tree XML 1.0 (see xml_safe)."""
    for el in root.iter():
        for k, v in list(el.attrib.items()):
            el.set(k, xml_safe(v, MAX_ATTR))
        if el.text:
            el.text = xml_safe(el.text)


def _qualify(suite: ET.Element, prefix: str) -> None:
    """`ktrial.<kind>` class names -> `<prefix>.<kind>` (the test and seed in them)."""
    for case in suite.iter("testcase"):
        cls = case.get("classname", "")
        if cls.startswith("ktrial."):
            case.set("classname", f"{prefix}.{cls.removeprefix('ktrial.')}")
        elif cls == "ktrial":
            case.set("classname", prefix)


def _plain(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ", ".join(_plain(x) for x in v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _seconds(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def nemesis_of(test: TestMeta) -> str | None:
    """The faults asked for and their schedule, in one line (None: not recorded)."""
    nem = test.nemesis
    if nem is None:
        return None
    fams = nem.get("families")
    if not isinstance(fams, list) or not fams:
        fams = nem.get("faults")
    text = _plain(fams) if isinstance(fams, list) and fams else "none"
    schedule = [
        f"{k} {_plain(nem[k])}"
        for k in ("schedule", "interval", "period")
        if nem.get(k) not in (None, "", [])
    ]
    return f"{text} ({', '.join(schedule)})" if text != "none" and schedule else text


def run_duration_s(test: TestMeta, results: dict[str, Any] | None) -> float | None:
    """Wall-clock seconds of the run (test.json), else the history's span (results)."""
    start, end = test.wall_start, test.wall_end
    if start is not None and end is not None and end >= start:
        return end - start
    stats = (results or {}).get("stats")
    return _seconds(stats.get("duration_s")) if isinstance(stats, dict) else None


def check_time_s(results: dict[str, Any] | None) -> float | None:
    stats = (results or {}).get("stats")
    return _seconds(stats.get("check_time_s")) if isinstance(stats, dict) else None


def properties(
    test: TestMeta,
    results: dict[str, Any] | None,
    report_path: Path,
    run_dir: Path | None = None,
    history: Path | None = None,
) -> list[tuple[str, str]]:
    """(name, value) of the suite's <properties>, in a fixed order; unknown ones left out.
    `test` should come from the redacted test.json (write_junit does that)."""
    cluster = test.cluster or {}
    run = test.run or {}
    versions = test.broker_versions or run.get("kafka_version")
    duration, checked = run_duration_s(test, results), check_time_s(results)
    rows = [
        ("test", test.name),
        ("seed", test.seed),
        ("workload", test.workload_name),
        ("driver", driver_name(test)),
        ("driver.version", driver_version(test)),
        ("cluster", cluster.get("kind") or run.get("cluster")),
        ("system", system_text(test)),
        ("broker", cluster.get("broker")),
        ("kafka.version", versions),
        ("transaction.protocol", transaction_protocol(test)),
        ("transaction.version", transaction_level(test)),
        ("profile", cluster.get("profile") or run.get("profile")),
        ("nemesis", nemesis_of(test)),
        ("time_limit_s", test.time_limit),
        ("ktrial.version", test.ktrial_version),
        ("verdict", verdict_of(results)),
        ("run_duration_s", None if duration is None else f"{duration:.3f}"),
        ("check_time_s", None if checked is None else f"{checked:.3f}"),
        ("run.dir", run_dir),
        ("history", history),
        ("report", report_path),
    ]
    return [(k, _plain(v)) for k, v in rows if v not in (None, "", [], {})]


def build_junit(
    results: dict[str, Any] | None,
    test: TestMeta | dict[str, Any],
    report_path: Path,
    thresholds: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    run: str | None = None,
    run_dir: Path | None = None,
    history: Path | None = None,
) -> ET.ElementTree:
    """The junit ElementTree for one run's results (None: no results → one error case).

    `report_path` is the path failures and <system-out> show (write_junit makes it
    relative to the junit file); `name` and `run` name the suite (default: test.json's
    name, no run part); `run_dir` and `history` are recorded as properties."""
    if not isinstance(test, TestMeta):
        test = TestMeta.from_json(test)
    test_part = _part(name or test.name, "unnamed")
    suite_name = ".".join(["ktrial", test_part] + ([_part(run, "run")] if run else []))
    seed = f"seed{test.seed}" if test.seed is not None else "noseed"
    suites = ET.Element("testsuites", name="ktrial")
    suite = ET.SubElement(suites, "testsuite", name=suite_name)
    props = ET.SubElement(suite, "properties")
    for key, value in properties(test, results, report_path, run_dir, history):
        ET.SubElement(props, "property", name=key, value=value)
    if results is None:
        case = _case(suite, "ktrial", "check")
        ET.SubElement(case, "error", message="no results.json: the history was not checked")
    else:
        _anomaly_cases(suite, results, test, report_path)
        _fault_case(suite, results, report_path)
        metrics = results.get("metrics")
        if isinstance(metrics, dict):
            _liveness_cases(suite, metrics, {**test.slo, **(thresholds or {})}, report_path)
    _qualify(suite, f"ktrial.{test_part}.{seed}")
    cases = suite.findall("testcase")
    n_fail = sum(1 for c in cases if c.find("failure") is not None)
    n_err = sum(1 for c in cases if c.find("error") is not None)
    n_skip = sum(1 for c in cases if c.find("skipped") is not None)
    for el in (suites, suite):
        el.set("tests", str(len(cases)))
        el.set("failures", str(n_fail))
        el.set("errors", str(n_err))
        el.set("skipped", str(n_skip))
    checked = check_time_s(results)
    if checked is not None:
        suite.set("time", f"{checked:.3f}")
    duration = run_duration_s(test, results)
    if duration is not None:
        suites.set("time", f"{duration:.3f}")
    if test.wall_start is not None:  # epoch seconds (an ISO time in test.json is converted)
        suite.set("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(test.wall_start)))
    ET.SubElement(suite, "system-out").text = "\n".join(
        [
            f"Report: {report_path} (relative to this junit.xml)",
            *([f"Run directory: {run_dir}"] if run_dir is not None else []),
            *([f"History: {history}"] if history is not None else []),
        ]
    )
    _clean(suites)
    ET.indent(suites)
    return ET.ElementTree(suites)


def _read_test(path: Path) -> dict[str, Any]:
    """test.json redacted; {} when missing or unreadable (junit.xml is still written:
    the report says what is wrong with the file)."""
    try:
        test = load_json(path, MAX_TEST_JSON) if path.exists() else {}
    except (OSError, ValueError):
        return {}
    return redact(test) if isinstance(test, dict) else {}


def write_junit(
    run_dir: Path,
    results: dict[str, Any] | None = None,
    thresholds: dict[str, Any] | None = None,
    *,
    test_json: Path | None = None,
    name: str | None = None,
    run: str | None = None,
    history: Path | None = None,
) -> Path:
    """Write junit.xml into `run_dir` (results default to its results.json); return the path.

    `thresholds` (also read from test.json's "slo" table) may set
    ``max_realtime_lag_ms`` and ``max_p99_ms``; without them those liveness cases
    only report their values. `test_json` defaults to the run's. The suite is named
    by test.json's name (else `name`, else the parent folder's) and `run` (else the run
    directory's name); `history`, a history outside `run_dir`, is recorded as a property.
    """
    rd = RunDir(Path(run_dir))
    if results is None and rd.results.exists():
        loaded = load_json(rd.results)
        results = loaded if isinstance(loaded, dict) else None
    meta = TestMeta.from_json(_read_test(test_json or rd.test_json))
    report = Path(os.path.relpath(rd.report, rd.junit.parent))
    tree = build_junit(
        results,
        meta,
        report,
        thresholds,
        name=meta.name or name or rd.path.resolve().parent.name,
        run=run or rd.path.resolve().name,
        run_dir=rd.path.resolve(),
        history=None if history is None else history.resolve(),
    )
    tmp = rd.path / f".junit.xml.{os.getpid()}.tmp"
    try:
        tree.write(tmp, encoding="utf-8", xml_declaration=True)
        tmp.replace(rd.junit)
    finally:
        tmp.unlink(missing_ok=True)
    return rd.junit
