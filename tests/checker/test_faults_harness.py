"""checker/faults.py: a run whose own harness failed (a `harness-error` op, written by
nemesis/harness.py when ktrial's Toxiproxy dies mid-run) is never VALID, and the
liveness violations that follow are not blamed on the system; safety anomalies stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktrial.checker import CheckOptions, check_file
from ktrial.checker.faults import apply_harness
from ktrial.tests.histlines import S, nem, poll_op, send_op, write

CLEAN = [send_op(0, "0", 1, 0), send_op(0, "0", 2, 1), poll_op(1, {"0": [[0, 1], [1, 2]]})]
LOST = [send_op(0, "0", 1, 0), send_op(0, "0", 2, 1), poll_op(1, {"0": [[1, 2]]})]
DIED = {
    "what": "Toxiproxy",
    "pid": 4209,
    "status": -9,
    "error": "ktrial's Toxiproxy (pid 4209) killed by SIGKILL during the run: ...",
}
META = {"nemesis": {"faults": ["toxic"], "families": ["toxic"]}}
TOXIC = [nem("toxic-on", {"nodes": ["n1"]}, 0.5 * S), nem("toxic-off", {"nodes": ["n1"]}, 1 * S)]


def _check(tmp_path: Path, lines: list[Any], **opts: Any) -> Any:
    return check_file(write(tmp_path / "h.jsonl", lines), CheckOptions(**opts), meta=META)


def test_a_clean_run_whose_proxy_died_is_unknown_and_says_so_first(tmp_path: Path) -> None:
    assert _check(tmp_path, [*TOXIC, *CLEAN])["valid"] is True  # the control
    res = _check(tmp_path, [*TOXIC, *CLEAN, nem("harness-error", DIED, 3 * S)])
    assert res["valid"] == "unknown"
    assert res["warnings"][0].startswith("HARNESS FAILURE at t=3 s: ktrial's Toxiproxy")
    assert res["harness_errors"][0]["pid"] == 4209 and res["harness_errors"][0]["time_s"] == 3.0


def test_safety_anomalies_keep_a_run_invalid_whatever_the_harness_did(tmp_path: Path) -> None:
    res = _check(tmp_path, [*TOXIC, *LOST, nem("harness-error", DIED, 3 * S)])
    assert res["valid"] is False and "lost-write" in res["bad_error_types"]
    assert res["warnings"][0].startswith("HARNESS FAILURE")


def test_only_liveness_violations_after_a_harness_failure_make_it_unknown() -> None:
    for bad in (["stuck-partition"], ["starvation", "slow-recovery"]):
        res = apply_harness({"valid": False, "bad_error_types": bad}, [{**DIED, "time_s": 1.0}])
        assert res["valid"] == "unknown", bad
    mixed = {"valid": False, "bad_error_types": ["stuck-partition", "duplicate"]}
    assert apply_harness(mixed, [{**DIED, "time_s": 1.0}])["valid"] is False
    untouched = {"valid": True}
    assert apply_harness(untouched, []) == {"valid": True}
