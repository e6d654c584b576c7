"""trial.py with faults, over nodes that only record what is done to them (no brokers).

What is pinned: the fault plan said at the start is what the schedule injects; test.json
records the families asked for, when the schedule's clock started, the command line
and the resolved options (secrets masked); a run whose faults all happened is VALID
with a `faults` section; a run whose faults failed to start is `unknown` (exit 2) with
a warning in results.json, a failed `ktrial.faults.injected` case in junit.xml and the
summary `ktrial run` prints.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ktrial.commands.run import _summary
from ktrial.histories.jsonl import read_history
from ktrial.histories.store import load_json
from ktrial.nemesis import NemesisOptions
from ktrial.tests.nemesis.test_export import FlagNode
from ktrial.tests.run.test_trial import FakeCluster, FakeWorkload, _spec
from ktrial.trial import Trial, fault_plan_lines

# fake nodes have no controller to ask for (the admin API would time out)
ONE = {"kill": {"targets": "one"}, "pause": {"targets": "minority"}}


class BrokenNode(FlagNode):
    def kill(self) -> None:
        raise RuntimeError("kill hook exited 1")


class NodesCluster(FakeCluster):
    def __init__(self, node: type[FlagNode] = FlagNode) -> None:
        super().__init__()
        self.nodes = [node(i) for i in (1, 2, 3)]


def _faults_case(suite: ET.Element) -> ET.Element | None:
    """The `ktrial.faults` `injected` case (class names may carry the test and seed)."""
    for case in suite.iter("testcase"):
        if case.get("name") == "injected" and str(case.get("classname")).endswith("faults"):
            return case
    return None


def _trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node: type[FlagNode], **kw: Any
) -> tuple[Any, list[str]]:
    said: list[str] = []
    spec = _spec(tmp_path, time_limit=2.0, **kw)
    trial = Trial(spec, say=said.append, workload=FakeWorkload())
    monkeypatch.setattr(trial, "_make_cluster", lambda nem_opts: NodesCluster(node))
    return trial.execute(), said


def test_faults_that_happened_are_recorded_and_the_run_is_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nem = NemesisOptions(faults=("kill", "pause"), interval=0.25, params=ONE)
    argv = ("run", "--nemesis", "kill,pause", "--producer-config", "sasl.password=hunter2")
    options = {"nemesis_faults": "kill,pause", "producer_config": ["sasl.password=hunter2"]}
    out, said = _trial(tmp_path, monkeypatch, FlagNode, nemesis=nem, argv=argv, cli_options=options)
    assert out.error is None and out.exit_code == 0, (out.error, out.results)
    plan = fault_plan_lines(out_spec := _spec(tmp_path, time_limit=2.0, nemesis=nem), 7, nem)
    assert out_spec.seed == 7 and said[1 : 1 + len(plan)] == plan  # said before anything starts
    assert plan[0].startswith("faults: interval schedule: each fault held 0.25 s")

    history = [op for op in read_history(out.run_dir.history) if op.process == "nemesis"]
    starts = [(op.f, op.value["nodes"]) for op in history if op.f in ("kill", "pause")]
    planned = [ln.split()[2:] for ln in plan[1:] if ln.strip()[0].isdigit()]
    assert [(f, ", ".join(nodes)) for f, nodes in starts] == [
        (p[0], " ".join(p[p.index("on") + 1 :])) for p in planned[: len(starts)]
    ]
    assert all(op.extra.get("fault_id") for op in history if op.f in ("kill", "pause"))

    res = load_json(out.run_dir.results)
    assert res["valid"] is True and res["faults"]["ok"] is True
    assert set(res["faults"]["injected"]) == {"kill", "pause"} and "warnings" not in res
    meta = load_json(out.run_dir.test_json)
    assert meta["nemesis"]["families"] == ["kill", "pause"]
    assert 0 <= meta["nemesis"]["schedule_start_s"] < 1.0
    assert meta["argv"] == [
        "run",
        "--nemesis",
        "kill,pause",
        "--producer-config",
        "sasl.password=***",
    ]
    assert meta["cli_options"] == {
        "nemesis_faults": "kill,pause",
        "producer_config": ["sasl.password=***"],
        "seed": 7,
    }
    assert "argv" not in meta["run"] and "cli_options" not in meta["run"]
    suite = ET.parse(out.run_dir.junit).getroot()
    case = _faults_case(suite)
    assert case is not None and case.find("failure") is None


def test_faults_that_failed_to_start_make_the_run_unknown_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nem = NemesisOptions(faults=("kill",), interval=0.3, params=ONE)
    out, _ = _trial(tmp_path, monkeypatch, BrokenNode, nemesis=nem)
    assert out.error is None and out.exit_code == 2
    res = load_json(out.run_dir.results)
    assert res["valid"] == "unknown" and res["bad_error_types"] == []
    assert res["faults"]["injected"] == {} and res["faults"]["error_count"] >= 1
    assert res["warnings"][0] == "asked for faults kill; injected: none"
    assert (
        "fault start(s) failed (fault-error ops); first: kill: kill hook exited 1"
        in (res["warnings"][1])
    )
    suite = ET.parse(out.run_dir.junit).getroot()
    case = _faults_case(suite)
    failure = case.find("failure") if case is not None else None
    assert failure is not None
    assert failure.get("message") == "asked for faults kill; injected: none"
    assert int(suite.get("failures", "0")) >= 1

    with CliRunner().isolation() as (stdout, _err, _):
        _summary(out)
        shown = stdout.getvalue().decode()
    assert "faults: none injected; not injected: kill;" in shown
    assert "warning: asked for faults kill; injected: none" in shown
    assert "verdict: UNKNOWN (the faults asked for did not all happen)" in shown
