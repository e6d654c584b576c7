"""`ktrial faults export RUN_DIR`: the faults that happened, as a --nemesis-script file.

A script is run by the real nemesis over nodes that record what is done to them; the
history it leaves is exported with the command, and the file read back with the
script reader gives the same faults, on the same nodes, at the same times, for the
same durations. Faults that failed to start are not exported.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ktrial.cli import cli
from ktrial.clusters.base import Unsupported
from ktrial.histories.jsonl import HistoryWriter, iter_history
from ktrial.histories.recorder import Recorder
from ktrial.histories.store import create_run
from ktrial.histories.testmeta import TestMeta
from ktrial.nemesis import Nemesis, ScriptEntry, ScriptSchedule, load_script
from ktrial.nemesis.export import export_faults
from ktrial.nemesis.schedule import format_script, parse_script


class FlagNode:
    """A node whose state is a flag: kill, start, pause and resume act at once."""

    def __init__(self, i: int) -> None:
        self.name, self.node_id = f"n{i}", i
        self.address, self.client_bootstrap, self.cgroup = f"10.0.0.{i}", "x:1", None
        self.pid: int | None = 1000 + i
        self.running, self.paused = True, False
        self.log_paths: list[Path] = []

    def is_running(self) -> bool:
        return self.running

    def kill(self) -> None:
        self.running = False

    def stop(self, timeout: float = 30.0) -> None:
        self.running = False

    def start(self) -> None:
        self.running, self.paused = True, False

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def is_frozen(self) -> bool:
        return self.paused

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        raise Unsupported("no namespace")


class FlagCluster:
    kind = "fake"

    def __init__(self) -> None:
        self.nodes = [FlagNode(i) for i in (1, 2, 3)]

    def unsupported_faults(self) -> dict[str, str]:
        return {}


SCRIPT = """
[[entry]]
at = 0.2
fault = "kill"
targets = ["n2"]
duration = 0.4

[[entry]]
at = 0.3
fault = "pause"
targets = "n1,n3"
duration = 0.5

[[entry]]
at = 0.9
fault = "stop"
targets = ["n3"]
duration = 0.3

[[entry]]
at = 1.0
fault = "kill"
targets = "n9"
duration = 0.2

[[entry]]
at = 1.3
fault = "pause"
targets = ["n2"]
"""


def _run_script(tmp_path: Path) -> Path:
    """Run SCRIPT's schedule with the real nemesis; return the run directory."""
    script = tmp_path / "in.toml"
    script.write_text(SCRIPT)
    rd = create_run(tmp_path / "store", "replay")
    meta = TestMeta(name="replay", seed=5, nemesis={"params": {}, "families": ["kill", "pause"]})
    with HistoryWriter(rd.history) as w:
        rec = Recorder(w)
        rec.nemesis("node-stats", {})  # some time passes before the schedule starts
        nem = Nemesis(FlagCluster(), rec, ["kill", "pause", "stop"], random.Random(1))  # type: ignore[arg-type]
        assert meta.nemesis is not None
        meta.nemesis["schedule_start_s"] = rec.now() / 1e9
        stop = threading.Event()
        t = threading.Thread(target=ScriptSchedule(load_script(script)).run, args=(nem, stop))
        t.start()
        threading.Event().wait(1.6)
        stop.set()
        t.join(10)
    meta.write(rd.test_json)
    return rd.path


def test_export_then_read_back_gives_the_faults_that_happened(tmp_path: Path) -> None:
    run = _run_script(tmp_path)
    out = tmp_path / "out.toml"
    r = CliRunner().invoke(cli, ["faults", "export", str(run), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"4 fault(s) written to {out}" in r.output
    text = out.read_text()
    assert "1 fault(s) failed to start and are not included" in text  # the kill of n9
    assert f"Replay: ktrial run --from {run} --nemesis-script THIS_FILE" in text
    got = load_script(out)
    want = [e for e in load_script(tmp_path / "in.toml") if e.targets != "n9"]
    assert [(e.fault, e.targets) for e in got] == [
        ("kill", ["n2"]),
        ("pause", ["n1", "n3"]),
        ("stop", ["n3"]),
        ("pause", ["n2"]),
    ]
    for g, w in zip(got, want, strict=True):
        assert g.at == pytest.approx(w.at, abs=0.1), (g, w)
        if w.duration is None:  # lasted until the run ended (at 1.6 s) and its heal
            assert g.duration == pytest.approx(1.6 - w.at, abs=0.15), (g, w)
        else:
            assert g.duration == pytest.approx(w.duration, abs=0.1), (g, w)
    # the default output is RUN_DIR/faults.toml
    r = CliRunner().invoke(cli, ["faults", "export", str(run)])
    assert r.exit_code == 0 and (run / "faults.toml").read_text() == text


def test_recorded_parameters_are_exported_over_the_runs_own() -> None:
    from ktrial.histories.jsonl import op_from_json

    def nem(i: int, t: float, f: str, value: Any, fid: str, fam: str) -> Any:
        line = {"index": i, "time": int(t * 1e9), "process": "nemesis", "type": "info"}
        return op_from_json({**line, "f": f, "value": value, "fault": fam, "fault_id": fid}, i)

    ops = [
        nem(
            0,
            12.0,
            "start-partition",
            {"shape": "one-way", "targets": ["n1"], "direction": "out", "grudge": {}},
            "a-1",
            "partition",
        ),
        nem(
            1,
            13.0,
            "toxic-on",
            {
                "toxic": "latency",
                "nodes": ["n1", "n2"],
                "attributes": {"latency": 300, "jitter": 50},
                "stream": "downstream",
                "toxicity": 1.0,
            },
            "a-2",
            "toxic",
        ),
        nem(2, 15.5, "stop-partition", {"shape": "one-way"}, "a-1", "partition"),
        nem(
            3, 16.0, "memory-squeeze", {"nodes": ["n3"], "balloon_bytes": 1 << 20}, "a-3", "memory"
        ),
        nem(4, 17.0, "toxic-off", {}, "a-2", "toxic"),
    ]
    meta = {"schedule_start_s": 10.0, "params": {"memory": {"headroom": 0.5}}}
    ex = export_faults(ops, meta)
    assert ex.entries == [
        ScriptEntry(2.0, "partition", ["n1"], 3.5, {"shape": "one-way", "direction": "out"}),
        ScriptEntry(
            3.0,
            "toxic",
            ["n1", "n2"],
            4.0,
            {
                "kind": "latency",
                "attributes": {"latency": 300, "jitter": 50},
                "stream": "downstream",
                "toxicity": 1.0,
            },
        ),
        ScriptEntry(6.0, "memory", ["n3"], None, {"headroom": 0.5, "balloon_bytes": 1 << 20}),
    ]
    # written and parsed back: the same entries
    assert parse_script(__import__("tomllib").loads(format_script(ex.entries))) == ex.entries


def test_older_histories_without_fault_ids_pair_first_in_first_out(tmp_path: Path) -> None:
    from ktrial.tests.histlines import S, nem, write

    lines = [
        nem("kill", {"nodes": ["n1"]}, 1 * S),
        nem("start", {"nodes": ["n3"], "reason": "oom-killed"}, 2 * S),  # not the kill's end
        nem("start", {"nodes": ["n1"]}, 4 * S),
        nem("pause", {"nodes": ["n2"]}, 5 * S),
    ]
    ex = export_faults(iter_history(write(tmp_path / "h.jsonl", lines)), None)
    assert ex.clock.startswith("the start of the history")
    assert [(e.at, e.fault, e.targets, e.duration) for e in ex.entries] == [
        (1.0, "kill", ["n1"], 3.0),
        (5.0, "pause", ["n2"], None),
    ]


def test_a_directory_without_a_history_is_a_usage_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["faults", "export", str(tmp_path)])
    assert r.exit_code != 0 and "no history.jsonl here" in r.output
