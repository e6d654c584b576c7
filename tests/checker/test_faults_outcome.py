"""checker/faults.py: a run whose faults did not happen is not VALID as usual.

test.json says which families the run asked for; the history's nemesis ops say which
started and which failed (`fault-error`). None injected, a family never injected, or
a fault that failed to start turn a VALID verdict into `unknown` with a plain
warning; an INVALID verdict stays INVALID; a run that asked for no faults (or a bare
history) is judged as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktrial.checker import check_file
from ktrial.checker.faults import START_F, outcome, summary
from ktrial.nemesis.export import START_F as EXPORT_START_F
from ktrial.tests.histlines import S, nem, poll_op, send_op, write

CLEAN = [send_op(0, "0", 1, 0), send_op(0, "0", 2, 1), poll_op(1, {"0": [[0, 1], [1, 2]]})]
LOST = [send_op(0, "0", 1, 0), send_op(0, "0", 2, 1), poll_op(1, {"0": [[1, 2]]})]


def _meta(*families: str) -> dict[str, Any]:
    return {"nemesis": {"faults": list(families), "families": list(families)}}


def _check(tmp_path: Path, lines: list[dict[str, Any]], meta: dict[str, Any] | None) -> Any:
    return check_file(write(tmp_path / "history.jsonl", lines), meta=meta)


def test_a_run_without_faults_asked_is_judged_as_before(tmp_path: Path) -> None:
    other_tool = {"nemesis": {"faults": ["partition"]}}  # not ktrial's options: not read
    older_ktrial = {"nemesis": {"faults": ["kill"], "schedule": "interval"}}
    assert _check(tmp_path, CLEAN, older_ktrial)["valid"] == "unknown"
    for meta in (None, {}, _meta(), other_tool):
        res = _check(tmp_path, CLEAN, meta)
        assert res["valid"] is True and "faults" not in res and "warnings" not in res


def test_faults_that_all_happened_leave_the_verdict_alone(tmp_path: Path) -> None:
    lines = [
        nem("start-partition", {"shape": "split"}),
        *CLEAN,
        nem("stop-partition"),
        nem("kill", {"nodes": ["n1"]}),
        nem("start", {"nodes": ["n1"]}),
        nem("start-partition", {"shape": "isolate"}),
    ]
    res = _check(tmp_path, lines, _meta("partition", "kill"))
    assert res["valid"] is True
    f = res["faults"]
    assert f["injected"] == {"partition": 2, "kill": 1} and f["ok"] is True
    assert f["not_injected"] == [] and f["warnings"] == [] and "warnings" not in res
    assert summary(f) == "partition ×2, kill ×1"


def test_no_fault_injected_makes_a_valid_run_unknown(tmp_path: Path) -> None:
    res = _check(tmp_path, CLEAN, _meta("partition", "kill"))
    assert res["valid"] == "unknown"
    assert res["warnings"] == ["asked for faults partition, kill; injected: none"]
    assert res["faults"]["verdict"].startswith("unknown")
    assert summary(res["faults"]) == "none injected; not injected: partition, kill"


def test_a_family_never_injected_makes_it_unknown(tmp_path: Path) -> None:
    lines = [*CLEAN, nem("pause", {"nodes": ["n2"]}), nem("resume", {"nodes": ["n2"]})]
    res = _check(tmp_path, lines, _meta("pause", "memory", "toxic"))
    assert res["valid"] == "unknown"
    assert res["faults"]["not_injected"] == ["memory", "toxic"]
    assert res["warnings"] == [
        "asked for faults pause, memory, toxic; never injected: memory, toxic"
    ]


def test_fault_errors_make_it_unknown_and_are_counted(tmp_path: Path) -> None:
    lines = [
        nem("kill", {"nodes": ["n1"]}, 1 * S),
        nem("start", {"nodes": ["n1"]}, 2 * S),
        *CLEAN,
        nem("fault-error", {"fault": "kill", "error": "no such node n7"}, 3 * S),
        nem("fault-error", {"fault": "kill", "error": "again"}, 4 * S),
        nem("heal", {"stopped": [], "errors": ["n1: start failed"]}, 5 * S),
    ]
    res = _check(tmp_path, lines, _meta("kill"))
    assert res["valid"] == "unknown"
    f = res["faults"]
    assert f["error_count"] == 2 and f["injected"] == {"kill": 1}
    assert f["errors"][0]["error"] == "no such node n7"
    assert res["warnings"][0] == (
        "2 of 3 fault start(s) failed (fault-error ops); first: kill: no such node n7"
    )
    assert res["warnings"][1] == "the heal reported errors: n1: start failed"


def test_an_invalid_run_stays_invalid_whatever_the_faults_did(tmp_path: Path) -> None:
    res = _check(tmp_path, LOST, _meta("partition"))
    assert res["valid"] is False and "lost-write" in res["bad_error_types"]
    assert res["faults"]["ok"] is False and res["warnings"]


def test_a_tagged_start_op_names_its_family() -> None:
    # ktrial's nemesis tags each op with its fault: a graceful kill records `stop`
    from ktrial.histories.jsonl import op_from_json

    ops = [
        op_from_json(
            {
                "index": 0,
                "time": 0,
                "process": "nemesis",
                "type": "info",
                "f": "stop",
                "value": {"nodes": ["n1"]},
                "fault": "stop",
                "fault_id": "a-1-stop",
            },
            0,
        )
    ]
    out = outcome(_meta("stop"), ops)
    assert out is not None and out["injected"] == {"stop": 1} and out["ok"] is True


def test_the_checker_and_the_exporter_agree_on_start_ops() -> None:
    assert START_F == EXPORT_START_F
