"""Nemesis bookkeeping, heal_all and schedules, on a cluster of real processes.

The nodes are `sleep` processes: kill, pause, resume and start act on them with real
signals, so the fault/heal logic and the history it writes are exercised for real;
namespace and cgroup faults must refuse such a cluster with a clear reason.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import click
import pytest
from click.testing import CliRunner
from ktrial.clusters.base import Cluster, Unsupported, node_fault_limits
from ktrial.commands.nemesis_flags import (
    nemesis_options,
    options_from_kwargs,
    parse_faults_flag,
    parse_params_flag,
)
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.nemesis import (
    IntervalSchedule,
    Nemesis,
    ScheduleThread,
    ScriptSchedule,
    StablePeriodSchedule,
    load_script,
)
from ktrial.nemesis.clean import clean_processes
from ktrial.nemesis.memory import ENV_MARK as BALLOON_MARK
from ktrial.nemesis.process import process_state
from ktrial.nemesis.schedule import parse_script
from ktrial.tests.processes import confine_clean

# plain processes have no controller to ask for: draw targets without the admin API
ONE = {"kill": {"targets": "one"}, "pause": {"targets": "one"}}
RANDOM = {"kill": {"targets": "random"}, "pause": {"targets": "minority"}}


class ProcNode:
    """A node that is just a `sleep` process (no namespace, no cgroup)."""

    def __init__(self, index: int) -> None:
        self.name, self.node_id = f"n{index}", index
        self.address, self.client_bootstrap, self.cgroup = "127.0.0.1", "127.0.0.1:1", None
        self.log_paths: list[Path] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.is_running() and self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        assert not self.is_running()
        self.proc = subprocess.Popen(["sleep", "600"])

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc and self.is_running():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc and self.is_running():
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        raise Unsupported(f"{self.name} is a plain process: no namespace")


class ProcCluster:
    """What the nemesis asks of a cluster (not all of the Cluster protocol: passed as
    cast(Cluster, ...))."""

    kind = "local"

    def __init__(self, n: int = 3) -> None:
        self.nodes = [ProcNode(i) for i in range(1, n + 1)]
        self.bootstrap_servers = "127.0.0.1:1"

    def node(self, name: str) -> ProcNode:
        return next(n for n in self.nodes if n.name == name)

    def unsupported_faults(self) -> dict[str, str]:
        return node_fault_limits(self.nodes)

    def teardown(self) -> None:
        for n in self.nodes:
            n.kill()


@pytest.fixture
def cluster() -> Iterator[ProcCluster]:
    c = ProcCluster()
    yield c
    c.teardown()


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Recorder]:
    w = HistoryWriter(tmp_path / "history.jsonl")
    yield Recorder(w)
    w.close()


def nemesis_ops(tmp_path: Path) -> list[tuple[str, object]]:
    return [
        (op.f, op.value)
        for op in read_history(tmp_path / "history.jsonl")
        if op.process == "nemesis"
    ]


def all_up(cluster: ProcCluster) -> bool:
    return all(n.is_running() and process_state(n.pid) != "T" for n in cluster.nodes)


def test_faults_are_recorded_and_heal_all_brings_everything_back(
    cluster: ProcCluster, recorder: Recorder, tmp_path: Path
) -> None:
    nem = Nemesis(cast(Cluster, cluster), recorder, ["kill", "pause"], random.Random(1))
    nem.start("kill", ["n1"])
    nem.start("pause", ["n2", "n3"])
    assert not cluster.node("n1").is_running()
    assert process_state(cluster.node("n2").pid) == "T"
    assert set(recorder.snapshot()[2]) == {f.id for f in nem.active()}
    nem.heal_all()
    nem.heal_all()  # idempotent: records nothing the second time
    assert all_up(cluster) and nem.active() == [] and recorder.snapshot()[2] == {}
    fs = [f for f, _ in nemesis_ops(tmp_path)]
    assert fs == ["kill", "pause", "resume", "start", "heal"]
    assert dict(nemesis_ops(tmp_path))["kill"] == {"nodes": ["n1"], "signal": "SIGKILL"}


def test_a_closed_nemesis_heals_and_starts_nothing_more(
    cluster: ProcCluster, recorder: Recorder, tmp_path: Path
) -> None:
    nem = Nemesis(cast(Cluster, cluster), recorder, ["pause"], random.Random(1))
    nem.start("pause", ["n1"])
    nem.close()
    assert all_up(cluster)
    with pytest.raises(RuntimeError, match="closed"):
        nem.start("pause", ["n2"])
    assert all_up(cluster) and [f for f, _ in nemesis_ops(tmp_path)] == ["pause", "resume", "heal"]


def test_namespace_and_cgroup_faults_refuse_a_cluster_without_them(
    cluster: ProcCluster, recorder: Recorder
) -> None:
    nem = Nemesis(cast(Cluster, cluster), recorder, ["partition", "memory", "toxic", "kill"])
    assert set(nem.unsupported()) == {"partition", "memory", "toxic"}
    with pytest.raises(Unsupported, match="no-netns"):
        nem.check_supported()
    with pytest.raises(Unsupported, match="own address"):
        nem.start("partition", ["n1"], shape="isolate")
    with pytest.raises(Unsupported, match="no memory cgroup"):
        nem.start("memory", ["n1"])
    assert nem.active() == []


def test_interval_schedule_alternates_faults_and_heals_at_the_end(
    cluster: ProcCluster, recorder: Recorder, tmp_path: Path
) -> None:
    nem = Nemesis(cast(Cluster, cluster), recorder, ["kill", "pause"], random.Random(5), params=ONE)
    stop = threading.Event()
    t = threading.Thread(target=IntervalSchedule(["kill", "pause"], 0.15).run, args=(nem, stop))
    t.start()
    time.sleep(1.2)
    stop.set()
    t.join(10)
    assert all_up(cluster) and nem.active() == []
    fs = [f for f, _ in nemesis_ops(tmp_path) if f != "heal"]
    pairs = {"kill": "start", "pause": "resume"}
    assert len(fs) >= 4
    for i in range(0, len(fs) - 1, 2):  # each fault is healed before the next starts
        assert pairs[fs[i]] == fs[i + 1]


def test_the_seed_fixes_the_fault_sequence(cluster: ProcCluster, tmp_path: Path) -> None:
    def first_faults(seed: int, name: str) -> list[object]:
        w = HistoryWriter(tmp_path / name)
        nem = Nemesis(
            cast(Cluster, cluster),
            Recorder(w),
            ["kill", "pause"],
            random.Random(seed),
            params=RANDOM,
        )
        for _ in range(4):
            nem.stop(nem.start_random(nem.choice(nem.faults)))
        w.close()
        return [(op.f, op.value) for op in read_history(tmp_path / name)]

    assert first_faults(11, "a.jsonl") == first_faults(11, "b.jsonl")


def test_script_schedule_runs_entries_at_their_times(
    cluster: ProcCluster, recorder: Recorder, tmp_path: Path
) -> None:
    script = tmp_path / "s.toml"
    script.write_text(
        '[[entry]]\nat = 0\nfault = "kill"\ntargets = "n1"\nduration = 0.4\n\n'
        '[[entry]]\nat = 0.1\nfault = "pause"\ntargets = ["n2"]\nduration = 0.1\n'
    )
    nem = Nemesis(cast(Cluster, cluster), recorder, [], random.Random(0))
    ScriptSchedule(load_script(script)).run(nem, threading.Event())
    assert [f for f, _ in nemesis_ops(tmp_path)] == ["kill", "pause", "resume", "start"]
    assert all_up(cluster)


def test_stable_periods_mix_faults_and_end_healed(
    cluster: ProcCluster, recorder: Recorder, tmp_path: Path
) -> None:
    nem = Nemesis(cast(Cluster, cluster), recorder, ["kill", "pause"], random.Random(2), params=ONE)
    stop = threading.Event()
    sched = StablePeriodSchedule(["kill", "pause"], period=0.2, quiet_p=0.0, max_mix=2)
    t = threading.Thread(target=sched.run, args=(nem, stop))
    t.start()
    time.sleep(1.0)
    stop.set()
    t.join(10)
    assert all_up(cluster) and nem.active() == []
    assert {"kill", "pause"} & {f for f, _ in nemesis_ops(tmp_path)}


def test_script_errors_name_the_entry() -> None:
    with pytest.raises(ValueError, match="entry 2: missing 'fault'"):
        parse_script({"entry": [{"at": 1, "fault": "kill"}, {"at": 2}]}, "x.toml")
    with pytest.raises(ValueError, match="unknown fault 'nuke'"):
        parse_script({"entry": [{"at": 1, "fault": "nuke"}]})
    with pytest.raises(ValueError, match="takes no parameter"):
        parse_script({"entry": [{"at": 1, "fault": "kill", "shape": "ring"}]})
    [e] = parse_script({"entry": [{"at": 1, "fault": "partition", "shape": "ring", "duration": 3}]})
    assert e.params == {"shape": "ring"} and e.duration == 3.0


def test_cli_options() -> None:
    assert parse_faults_flag("kill, pause,,kill") == ("kill", "pause")
    assert "restart" not in parse_faults_flag("all") and "memory" in parse_faults_flag("all")
    with pytest.raises(click.BadParameter, match="nuke"):
        parse_faults_flag("kill,nuke")
    assert parse_params_flag(["memory.balloon_bytes=1024", "toxic.kind=latency"]) == {
        "memory": {"balloon_bytes": 1024},
        "toxic": {"kind": "latency"},
    }
    with pytest.raises(click.BadParameter, match="accepts"):
        parse_params_flag(["kill.probability=0.1"])

    seen: dict[str, Any] = {}

    @click.command()
    @nemesis_options
    def cmd(**kw: object) -> None:
        seen["opts"] = options_from_kwargs(kw)  # type: ignore[arg-type]
        seen["rest"] = kw

    r = CliRunner().invoke(
        cmd,
        [
            "--nemesis",
            "kill,toxic",
            "--nemesis-interval",
            "3",
            "--nemesis-param",
            "toxic.kind=slicer",
        ],
    )
    assert r.exit_code == 0, r.output
    opts = seen["opts"]
    assert opts.faults == ("kill", "toxic") and opts.interval == 3.0 and opts.needs_toxiproxy
    assert opts.params == {"toxic": {"kind": "slicer"}} and seen["rest"] == {}
    assert isinstance(opts.make_schedule(), IntervalSchedule)


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="needs stress-ng")
def test_clean_kills_balloons_of_dead_runs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    import os

    # a real stress-ng: clean kills only processes that are what the mark says they are
    balloon = ["stress-ng", "--sleep", "1", "--timeout", "60", "--quiet"]
    orphan = subprocess.Popen(balloon, env={**os.environ, BALLOON_MARK: str(dead.pid)})
    mine = subprocess.Popen(balloon, env={**os.environ, BALLOON_MARK: str(os.getpid())})
    try:
        time.sleep(0.2)
        removed = clean_processes(BALLOON_MARK, "stress-ng balloon", all=False)
        assert any(str(orphan.pid) in r for r in removed)
        assert orphan.wait(5) == -signal.SIGKILL
        assert mine.poll() is None
        # all=True kills live runs' balloons too: only this test's may be in reach
        confine_clean(monkeypatch, pids={orphan.pid, mine.pid})
        clean_processes(BALLOON_MARK, "stress-ng balloon", all=True)
        assert mine.wait(5) == -signal.SIGKILL
    finally:
        for p in (orphan, mine):
            if p.poll() is None:
                p.kill()


def test_rolling_restart_restarts_each_node_and_stops_early_when_told(
    cluster: ProcCluster, recorder: Recorder, tmp_path: Path
) -> None:
    nem = Nemesis(cast(Cluster, cluster), recorder, ["restart"], random.Random(0))
    before = [n.pid for n in cluster.nodes]
    fault = nem.start("restart", "all", settle=0, wait=0.1)
    nem.stop(fault)
    assert all(a != b for a, b in zip(before, [n.pid for n in cluster.nodes], strict=True))
    fs = [f for f, _ in nemesis_ops(tmp_path)]
    assert fs == ["start-rolling-restart"] + ["restart", "restarted"] * 3 + ["stop-rolling-restart"]

    # a long settle is cut short by the end of the schedule: the rest are skipped
    sched = IntervalSchedule(["restart"], interval=30, quiet=0.1)
    nem.params["restart"] = {"settle": 30, "wait": 0.1}
    thread = ScheduleThread(sched, nem).start()
    deadline = time.monotonic() + 20  # the schedule is quiet 0.1 s, then restarts n1
    while time.monotonic() < deadline:
        if len([f for f, _ in nemesis_ops(tmp_path) if f == "restarted"]) >= 3 + 1:
            break
        time.sleep(0.05)
    t0 = time.monotonic()
    thread.close(timeout=20)
    assert time.monotonic() - t0 < 15 and all_up(cluster) and nem.active() == []
    restarts = [v for f, v in nemesis_ops(tmp_path) if f == "restarted"]
    assert len(restarts) == 3 + 1
