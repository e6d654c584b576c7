"""Memory helpers: parsing cgroup/vmstat/PSI files, the squeeze target, and a real v1/v2
cgroup beneath our own with a real stress-ng balloon in it."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from ktrial.clusters.base import Cluster
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.nemesis import cgroups
from ktrial.nemesis.base import Context
from ktrial.nemesis.memory import (
    MemoryFault,
    MiB,
    balloon_pids,
    squeeze_target,
    start_balloon,
    stop_balloon,
)


def test_parse_kv_and_reclaim_counters() -> None:
    vm = cgroups.parse_kv(
        "allocstall_dma 1\nallocstall_normal 2\nallocstall_movable 3\npgscan_direct 10\n"
        "pgscan_direct_throttle 99\npgsteal_direct 7\nbogus line here\n"
    )
    assert cgroups.reclaim_counters(vm) == {
        "allocstall": 6,
        "pgscan_direct": 10,
        "pgsteal_direct": 7,
    }


def test_parse_psi() -> None:
    psi = cgroups.parse_psi(
        "some avg10=1.50 avg60=0.00 avg300=0.00 total=1234\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=56\n"
    )
    assert psi["some"]["avg10"] == 1.5 and psi["full"]["total"] == 56


def test_squeeze_target_never_below_the_oom_floor_unless_asked() -> None:
    anon, file = 400 * MiB, 200 * MiB
    assert squeeze_target(anon, file) == anon + 50 * MiB
    assert squeeze_target(100 * MiB, 0) == 100 * MiB + 32 * MiB
    floor = int(anon * 1.05) + 16 * MiB
    assert squeeze_target(anon, file, limit_bytes=100 * MiB) == floor
    assert squeeze_target(anon, file, limit_bytes=100 * MiB, allow_oom=True) == 100 * MiB
    assert squeeze_target(anon, file) % 4096 == 0


def own_memory_cgroup() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
        if ctrls == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            return Path("/sys/fs/cgroup") / path.lstrip("/")
    return None


@pytest.fixture
def scratch_cgroup() -> Iterator[cgroups.MemoryCgroup]:
    own = own_memory_cgroup()
    if os.geteuid() != 0 or own is None or not own.is_dir() or not shutil.which("stress-ng"):
        pytest.skip("needs root, a memory cgroup and stress-ng")
    d = own / f"ktrial-test-{os.getpid()}"
    try:
        d.mkdir()
    except OSError as e:
        pytest.skip(f"cannot create a cgroup under {own}: {e}")
    cg = cgroups.MemoryCgroup(d)
    try:
        yield cg
    finally:
        for pid in cg.pids():
            os.kill(pid, 9)
        for _ in range(50):
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_balloon_lives_in_the_cgroup_hits_the_limit_and_is_removed(
    scratch_cgroup: cgroups.MemoryCgroup,
) -> None:
    cg = scratch_cgroup
    assert cg.limit() is None
    cg.set_limit(64 * MiB)
    assert cg.limit() == 64 * MiB
    before = cg.failcnt()
    proc = start_balloon(cg, 96 * MiB)  # more than the limit: charges fail, OOM follows
    deadline = time.monotonic() + 10
    while cg.failcnt() == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cg.failcnt() > before
    assert cg.usage() <= 64 * MiB
    stop_balloon(proc, cg)
    assert balloon_pids(cg) == []
    cg.set_limit(None)
    assert cg.limit() is None
    kills = cg.oom_kills()
    assert kills is None or kills >= 0


class SleepNode:
    """A node whose "broker" is a real `sleep` in the scratch cgroup (the collaborator the
    memory fault acts through: pid, cgroup, is_running, start)."""

    def __init__(self, cg: cgroups.MemoryCgroup) -> None:
        self.name, self.cg, self.cgroup = "n1", cg, str(cg.path)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.start()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.proc = subprocess.Popen(["sleep", "300"])
        self.cg.add_pid(self.proc.pid)
        self.starts += 1

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def test_a_broker_dead_at_release_is_restarted_by_an_op_of_the_memory_fault(
    scratch_cgroup: cgroups.MemoryCgroup, tmp_path: Path
) -> None:
    """The restart of a broker that died in the window (an OOM kill) is the memory fault's
    own `start` op, tagged with its family and id: a reader pairing ops must not take it
    for the end of a kill of that node (a CI run showed an untagged one next to a kill)."""
    node = SleepNode(scratch_cgroup)
    cluster = SimpleNamespace(nodes=[node], kind="local")
    writer = HistoryWriter(tmp_path / "history.jsonl")
    ctx = Context(cast(Cluster, cluster), Recorder(writer), random.Random(1))
    try:
        fault = MemoryFault(ctx, sample_interval=0.1)
        fault.start(["n1"])
        node.kill()  # as the kernel's OOM killer would
        fault.stop()
    finally:
        node.kill()
        writer.close()
    assert node.starts == 2
    ops = [op for op in read_history(tmp_path / "history.jsonl") if op.process == "nemesis"]
    assert [op.f for op in ops] == ["memory-squeeze", "memory-release", "start"]
    assert {(op.extra.get("fault"), op.extra.get("fault_id")) for op in ops} == {
        ("memory", fault.id)
    }
    assert ops[1].value["restarted"] == ["n1"]
    assert ops[2].value == {"nodes": ["n1"], "reason": "oom-killed"}
    assert scratch_cgroup.limit() is None  # the squeeze was undone
