"""The running safety check (watch.py): what a prefix may report, and when checks run.

* a prefix of a correct history -- cut anywhere, its last line torn -- reports
  nothing (the watcher never cries wolf), whatever the generator's shape;
* a prefix of a history with an injected fault reports only types the whole history
  reports too, and the watched type itself once the prefix holds the fault;
* the two tables place every type of the checker's catalogue exactly once;
* scheduling: the interval, the back-off after slow checks, news only once, the stop
  request, the journal and the live view's line; and the child process end to end.
"""

from __future__ import annotations

import random
import re
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial import watch
from ktrial.checker import catalogue, check
from ktrial.testing.gen import GenParams, generate, to_ops
from ktrial.testing.mutate import INJECTORS
from ktrial.watch import (
    MAX_SHARE,
    UNWATCHED,
    WATCHED,
    CheckReport,
    ChildCheck,
    Finding,
    Watcher,
    check_prefix,
    findings,
    news,
    next_wait,
)

SETTINGS = settings(
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

shapes = st.builds(
    GenParams,
    seed=st.integers(0, 2**32 - 1),
    keys=st.integers(1, 4),
    processes=st.integers(1, 5),
    ops=st.integers(5, 80),
    txn=st.booleans(),
    abort_p=st.sampled_from([0.0, 0.15, 0.5]),
    fail_p=st.sampled_from([0.0, 0.1, 0.3]),
    info_p=st.sampled_from([0.0, 0.1, 0.3]),
    crash_p=st.sampled_from([0.0, 0.05, 0.2]),
    sub_via=st.sampled_from(["assign", "subscribe"]),
    reassign_p=st.sampled_from([0.0, 0.1]),
    reseek=st.booleans(),
    rebalance_p=st.sampled_from([0.0, 0.2]),
    null_offset_p=st.sampled_from([0.0, 0.3]),
    omit_invokes=st.booleans(),
    int_keys=st.booleans(),
    nemesis_p=st.sampled_from([0.0, 0.05]),
)


def write_prefix(path: Path, ops: list[dict[str, Any]], n: int, torn: int) -> Path:
    """The first `n` ops as history.jsonl lines, then `torn` bytes of the next one (a
    line being written when the check read the file)."""
    lines = [orjson.dumps(d) + b"\n" for d in ops]
    data = b"".join(lines[:n])
    if n < len(lines) and torn:
        data += lines[n][: min(torn, len(lines[n]) - 2)]
    path.write_bytes(data)
    return path


def test_every_catalogue_type_is_placed_once_with_a_reason() -> None:
    names = {t.name for t in catalogue.CATALOGUE}
    assert set(WATCHED) | set(UNWATCHED) == names
    assert not set(WATCHED) & set(UNWATCHED)
    assert all(len(why) > 10 for why in (*WATCHED.values(), *UNWATCHED.values()))
    # what only the end of a run decides is never watched
    assert {"lost-write", "unseen", "torn-transaction", "eos-loss"} <= set(UNWATCHED)
    assert not set(WATCHED) & catalogue.NEVER_BAD


@SETTINGS
@given(params=shapes, cut=st.floats(0, 1), torn=st.integers(0, 40))
def test_a_prefix_of_a_correct_history_reports_nothing(
    tmp_path_factory: pytest.TempPathFactory, params: GenParams, cut: float, torn: int
) -> None:
    ops = generate(params).ops
    n = int(cut * len(ops))
    path = write_prefix(tmp_path_factory.mktemp("p") / "history.jsonl", ops, n, torn)
    report = check_prefix(path, None)
    assert report.error is None
    assert report.found == {}, [f.line() for f in report.found.values()]


@SETTINGS
@given(
    params=shapes,
    name=st.sampled_from(sorted(INJECTORS)),
    seed=st.integers(0, 2**16),
    cuts=st.lists(st.floats(0, 1), min_size=1, max_size=4),
)
def test_a_prefix_reports_only_what_the_whole_history_reports(
    tmp_path_factory: pytest.TempPathFactory,
    params: GenParams,
    name: str,
    seed: int,
    cuts: list[float],
) -> None:
    fault = INJECTORS[name](generate(params), random.Random(seed))
    if fault is None:
        return
    whole = check(to_ops(fault.ops))
    final = set(whole["bad_error_types"])
    assert set(findings(whole)) == final & set(WATCHED)
    d = tmp_path_factory.mktemp("p")
    for cut in [*cuts, 1.0]:
        n = int(cut * len(fault.ops))
        report = check_prefix(write_prefix(d / "history.jsonl", fault.ops, n, 7), None)
        assert set(report.found) <= final, (name, n, [f.line() for f in report.found.values()])
        if n == len(fault.ops):  # the whole history: each watched type it holds is found
            assert set(report.found) == final & set(WATCHED)


def test_findings_keep_bad_watched_types_with_their_first_example() -> None:
    results = {
        "bad_error_types": ["duplicate", "lost-write", "poll-skip"],
        "anomalies": {
            "duplicate": {
                "count": 2,
                "examples": [
                    {"key": 3, "ops": [12, 40], "explanation": "value 17 at offsets 3 and 13"},
                    {"key": 4, "ops": [1], "explanation": "other"},
                ],
            },
            "lost-write": {"count": 9, "examples": [{"key": 1, "explanation": "gone"}]},
            "poll-skip": {"count": 1, "examples": [{"key": "k", "offsets": [0, 2]}]},
            "int-send-skip": {"count": 5, "examples": [{}]},  # not bad: not a finding
        },
    }
    got = findings(results)
    assert sorted(got) == ["duplicate", "poll-skip"]  # lost-write is left to the drain
    dup = got["duplicate"]
    assert dup == Finding("duplicate", 2, "3", (12, 40), "value 17 at offsets 3 and 13")
    assert dup.line() == "duplicate ×2 (key 3; ops 12, 40): value 17 at offsets 3 and 13"
    assert got["poll-skip"].line() == "poll-skip ×1 (key k): offsets [0, 2]"
    assert Finding.from_json(orjson.loads(orjson.dumps(dup.to_json()))) == dup


def test_news_are_new_types_and_grown_counts_only() -> None:
    a, b = Finding("duplicate", 2), Finding("G1a", 1)
    assert news({}, {"duplicate": a, "G1a": b}) == [b, a]
    assert news({"duplicate": 2, "G1a": 1}, {"duplicate": a, "G1a": b}) == []
    assert news({"duplicate": 1}, {"duplicate": a}) == [a]


def test_the_interval_backs_off_so_checking_stays_a_small_share() -> None:
    assert next_wait(60, 0.5) == 60  # cheap checks: the interval asked for
    assert next_wait(60, 30) == pytest.approx(270)  # 30 s of every 300 s
    for took in (0.1, 5.0, 40.0, 600.0):
        wait = next_wait(10, took)
        assert took / (took + wait) <= MAX_SHARE + 1e-9
        assert wait >= 10


class Script:
    """A runner that returns prepared reports, one per check, and counts calls."""

    def __init__(self, *reports: CheckReport) -> None:
        self.reports = list(reports)
        self.calls = 0
        self.called = threading.Event()

    def __call__(self) -> CheckReport:
        self.calls += 1
        self.called.set()
        return self.reports.pop(0) if self.reports else CheckReport(ops=1)


DUP = Finding("duplicate", 1, "3", (12, 40), "value 17 at offsets 3 and 13")


def test_a_new_anomaly_is_said_journalled_and_shown_once(tmp_path: Path) -> None:
    said: list[str] = []
    journal = tmp_path / "watch.jsonl"
    grown = Finding("duplicate", 3, "3", (12, 40), "value 17 at offsets 3 and 13")
    script = Script(
        CheckReport(ops=10, took_s=0.2),
        CheckReport(ops=20, took_s=0.3, found={"duplicate": DUP}),
        CheckReport(ops=30, took_s=0.3, found={"duplicate": DUP}),
        CheckReport(ops=40, took_s=0.4, found={"duplicate": grown}),
    )
    clock = iter([10.0, 20.0, 30.0, 40.0])
    w = Watcher(script, 5, say=said.append, journal=journal, clock=lambda: next(clock))
    assert w.status() == ("safety check every 5 s: none yet", False)
    assert w.check_once() == []
    assert w.status() == (
        "safety check at 10 s: no anomaly in 10 ops (0.2 s; next in 5 s)",
        False,
    )
    assert w.check_once() == [DUP]
    assert w.check_once() == []  # the same finding is not said twice
    assert w.check_once() == [grown]
    assert said == [
        "anomaly while running (at 20 s): duplicate ×1 (key 3; ops 12, 40): "
        "value 17 at offsets 3 and 13",
        "anomaly while running (at 40 s): duplicate now ×3",
    ]
    assert w.status() == ("ANOMALY while running: duplicate ×3", True)
    assert not w.stop_requested.is_set()  # not asked to stop
    lines = [orjson.loads(x) for x in journal.read_bytes().splitlines()]
    assert [x["at_s"] for x in lines] == [10.0, 20.0, 30.0, 40.0]
    assert [x["new"] for x in lines] == [[], ["duplicate"], [], ["duplicate"]]
    assert lines[1]["found"][0]["ops"] == [12, 40] and lines[1]["ops"] == 20
    summary = w.summary()
    assert summary["checks"] == 4 and summary["check_s"] == pytest.approx(1.2)
    assert summary["found"]["duplicate"]["count"] == 3
    assert summary["found"]["duplicate"]["first_seen_s"] == 20.0


def test_stop_on_anomaly_requests_the_stop_at_the_first_finding() -> None:
    said: list[str] = []
    w = Watcher(
        Script(CheckReport(ops=5), CheckReport(ops=9, found={"duplicate": DUP})),
        5,
        stop_on_anomaly=True,
        say=said.append,
        clock=lambda: 1.0,
    )
    w.check_once()
    assert not w.stop_requested.is_set()
    w.check_once()
    assert w.stop_requested.is_set()
    assert said[-1] == "stopping the run early (--stop-on-anomaly): healing, draining, checking"
    assert w.status() == (
        "ANOMALY while running: duplicate ×1 (stopping: --stop-on-anomaly)",
        True,
    )


def test_a_failed_check_is_said_once_and_checking_goes_on() -> None:
    said: list[str] = []
    w = Watcher(
        Script(CheckReport(error="boom"), CheckReport(error="boom"), CheckReport(ops=3)),
        5,
        say=said.append,
        clock=lambda: 2.0,
    )
    for _ in range(3):
        w.check_once()
    assert said == ["running check failed (boom); will try again"]
    assert w.errors == 2 and w.status()[0].startswith("safety check at 2 s: no anomaly in 3 ops")


def test_the_thread_checks_on_its_interval_and_backs_off_after_a_slow_check() -> None:
    script = Script(CheckReport(ops=1, took_s=0.9))  # 0.9 s: the next wait is 8.1 s
    w = Watcher(script, 0.05, clock=lambda: 0.0).start()
    try:
        assert script.called.wait(5)
        time.sleep(0.5)
        assert script.calls == 1  # backed off: not every 0.05 s
        assert w.wait_s == pytest.approx(8.1)
    finally:
        w.close()
    assert w._thread is None


def test_the_thread_checks_again_and_again_while_checks_are_cheap() -> None:
    script = Script()
    w = Watcher(script, 0.02, clock=lambda: 0.0).start()
    deadline = time.monotonic() + 10
    while script.calls < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    w.close()
    assert script.calls >= 3
    n = script.calls
    time.sleep(0.1)
    assert script.calls == n  # closed: no more checks


def test_an_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Watcher(Script(), 0)


def _history_with_a_duplicate(path: Path) -> None:
    lines = [
        {"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]]},
        {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]]},
        {"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]]},
        {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [1, 1]]]},
        {"process": 1, "type": "invoke", "f": "send", "value": [["send", 0, 2]]},
    ]
    data = b"".join(
        orjson.dumps({"index": i, "time": i * 1000, **d}) + b"\n" for i, d in enumerate(lines)
    )
    path.write_bytes(data + b'{"index": 5, "time": 5000, "process": 1, "ty')  # torn


def test_the_child_checks_a_growing_file_and_reports_one_json_line(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    _history_with_a_duplicate(history)
    report = ChildCheck(history, tmp_path / "test.json")()
    assert report.error is None, report.error
    assert report.ops == 5 and report.took_s > 0
    assert list(report.found) == ["duplicate"]
    assert report.found["duplicate"].key == "0"


def test_the_child_reports_a_broken_history_as_an_error(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_bytes(b'{"process": 0, "type": "ok"}\n{"f": 3}\n')
    report = ChildCheck(history, tmp_path / "test.json")()
    assert report.error is not None and "history.jsonl:1" in report.error
    assert report.found == {}


def test_a_cancelled_child_is_killed_and_none_starts_after(tmp_path: Path) -> None:
    child = ChildCheck(tmp_path / "h.jsonl", tmp_path / "t.json")
    child.argv = ["sleep", "60"]  # a check that would take a minute
    got: list[CheckReport] = []
    t = threading.Thread(target=lambda: got.append(child()))
    t0 = time.monotonic()
    t.start()
    while child._proc is None:
        time.sleep(0.01)
    child.cancel()
    t.join(10)
    assert time.monotonic() - t0 < 10 and got and got[0].error == "cancelled"
    assert child._proc.returncode is not None
    assert child() == CheckReport(error="cancelled")


def test_main_prints_one_report_line(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    history = tmp_path / "history.jsonl"
    _history_with_a_duplicate(history)
    assert watch.main([str(history)]) == 0
    out = orjson.loads(capsysbinary.readouterr().out)
    assert out["ops"] == 5 and [f["type"] for f in out["found"]] == ["duplicate"]
    assert watch.main([]) == 254


def test_the_doc_lists_exactly_the_watched_types() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "anomalies.md").read_text()
    section = doc.split("## Checks while a run goes", 1)[1].split("\n## ", 1)[0]
    rows = [ln.split("|")[1] for ln in section.splitlines() if ln.startswith("| `")]
    listed = {t for row in rows for t in re.findall(r"`([^`]+)`", row)}
    assert listed == set(WATCHED)
