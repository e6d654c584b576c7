"""Trials as subprocesses (hunt/runner.py), against a stand-in for `ktrial run`
(tests/hunt/fake_ktrial.py): the command line, the run directory found, the verdict
read, a replay's script written, the recorded faults read back, and Ctrl-C passed on
to the running trial."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from ktrial.hunt.runner import (
    Interrupts,
    SubprocessRunner,
    TrialRequest,
    recorded_faults,
    run_command,
)
from ktrial.nemesis.schedule import ScriptEntry, load_script

FAKE = [sys.executable, str(Path(__file__).with_name("fake_ktrial.py"))]
RUN_ARGS = ("--profile", "unsafe", "--acks", "1")


def runner(tmp_path: Path, interrupts: Interrupts | None = None) -> SubprocessRunner:
    return SubprocessRunner(tmp_path, RUN_ARGS, 20.0, interrupts or Interrupts(), FAKE)


def test_run_command_passes_the_flags_through_then_the_trials_own() -> None:
    assert run_command(RUN_ARGS, 7, 20.0, ["--nemesis", "kill"]) == [
        *RUN_ARGS,
        "--seed",
        "7",
        "--time-limit",
        "20",
        "--nemesis",
        "kill",
    ]


def test_a_search_trial_and_its_recorded_faults(tmp_path: Path) -> None:
    res = runner(tmp_path)(TrialRequest(1, "search", 11, ("--nemesis", "kill,pause")))
    assert res.exit_code == 1 and res.verdict == "INVALID" and res.bad == ("lost-write",)
    assert res.run_dir is not None and Path(res.run_dir).parent == tmp_path / "runs" / "search"
    assert res.log_path is not None
    log = Path(res.log_path).read_text()
    assert "--profile unsafe --acks 1 --seed 11 --time-limit 20 --nemesis kill,pause" in log
    assert "--no-live" in log and "verdict: INVALID" in log
    got = recorded_faults(res)
    assert [(e.fault, e.targets, e.at, e.duration) for e in got] == [
        ("pause", ["n1"], 2.0, 3.0),
        ("kill", ["n2"], 5.0, 4.0),
    ]


def test_a_replay_writes_its_script_and_the_empty_one_runs_without_faults(
    tmp_path: Path,
) -> None:
    r = runner(tmp_path)
    kill = ScriptEntry(5.0, "kill", ["n2"], 4.0)
    res = r(TrialRequest(2, "replay", 11, (), (kill,), "keep the kill"))
    assert res.script_path is not None and load_script(res.script_path) == [kill]
    assert res.verdict == "INVALID"
    empty = r(TrialRequest(3, "replay", 11, (), ()))
    assert empty.script_path is None and empty.verdict == "VALID"
    assert "--nemesis" not in Path(empty.log_path or "").read_text().split("\n")[0]
    # two trials of one phase: each finds its own run directory
    assert res.run_dir != empty.run_dir


def test_a_trial_that_cannot_run_says_why(tmp_path: Path) -> None:
    r = SubprocessRunner(tmp_path, ("--profile", "bogus"), 20.0, Interrupts(), FAKE)
    res = r(TrialRequest(1, "search", 1, ("--nemesis", "kill")))
    assert res.exit_code == 254 and res.run_dir is None and res.valid is None
    assert res.error is not None and "bogus" in res.error


def test_ctrl_c_is_passed_on_to_the_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial runs in a session of its own (the terminal's Ctrl-C reaches the hunt
    only); the hunt's handler sends it SIGINT and the trial ends as interrupted."""
    monkeypatch.setenv("FAKE_KTRIAL_WAIT", "1")
    interrupts = Interrupts()
    r = runner(tmp_path, interrupts)
    out: list = []  # type: ignore[type-arg]
    t = threading.Thread(target=lambda: out.append(r(TrialRequest(1, "search", 1, ()))))
    t.start()
    deadline = time.monotonic() + 20
    while not list((tmp_path / "runs").rglob("started")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert interrupts.child is not None
    interrupts.handler(signal.SIGINT, None)
    t.join(20)
    (res,) = out
    assert interrupts.count == 1 and res.interrupted and res.exit_code == 0
    assert interrupts.child is None
