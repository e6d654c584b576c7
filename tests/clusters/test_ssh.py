"""clusters/ssh.py: what of an installation is uploaded, and where it is on the host."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from ktrial.clusters.nodebase import NodeStateError
from ktrial.clusters.ssh import (
    SshCluster,
    SshNode,
    content_digest,
    program_parts,
    remote_program,
)
from ktrial.clusters.sshconn import HostSpec
from ktrial.clusters.system import Layout
from ktrial.nemesis.process import ensure_running
from ktrial.tests.clusters.test_sshremote import LocalHost


def test_program_parts_and_their_remote_copy(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.jar").write_bytes(b"a")
    tool = tmp_path / "tool.jar"
    tool.write_bytes(b"t")
    program = f"{lib}/*{os.pathsep}{tool}"
    assert program_parts(program) == [lib, tool]
    assert remote_program(program, "/r/p/d") == f"/r/p/d/0/*{os.pathsep}/r/p/d/1/tool.jar"


def test_digest_follows_content(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.jar").write_bytes(b"a")
    d1 = content_digest([lib])
    assert content_digest([lib]) == d1
    (lib / "a.jar").write_bytes(b"b")
    assert content_digest([lib]) != d1


def test_the_remote_directory_must_be_absolute() -> None:
    for bad in ("relative", "/", "/has space"):
        with pytest.raises(ValueError):
            SshCluster([HostSpec("h")], root=bad)


class Recorder:
    def __init__(self) -> None:
        self.ops: list[tuple[str, dict[str, object]]] = []

    def nemesis(self, f: str, value: dict[str, object], **extra: object) -> None:
        self.ops.append((f, value))


def test_outages_and_given_up_commands_are_recorded_once_each() -> None:
    """A host that stops answering: node-unreachable, then one harness-error however many
    commands fail (the run cannot be VALID), node-reachable once it answers again."""
    c = SshCluster([HostSpec("h1")], retry_for=3)
    rec = Recorder()
    detach = c.attach_recorder(rec, lambda m: None)
    c._host_event("h1", "Connection refused")
    c._gave_up("h1", "Connection refused")
    c._gave_up("h1", "Connection refused")
    c._host_event("h1", None)
    c._gave_up("h1", "timeout")
    fs = [f for f, _ in rec.ops]
    assert fs == ["node-unreachable", "harness-error", "node-reachable", "harness-error"]
    assert "unreachable over SSH" in str(rec.ops[1][1]["error"])
    detach()
    c._gave_up("h9", "x")  # after the run: logged and kept, not recorded
    assert len(rec.ops) == 4 and c.events[-1]["f"] == "harness-error"


class RemoteLikeNode:
    """A node whose process lives on another host: the nemesis must ask it, not this
    machine's /proc (its pid means nothing here)."""

    name = "n1"
    cgroup = "/sys/fs/cgroup/memory/ktrial-a1b2c3-n1"
    paused = False
    pid = 1  # this machine's init: reading /proc/1 would be wrong

    def memory_sample(self) -> dict[str, int | None]:
        return {"rss_bytes": 5, "pid": 4242}

    def process_state(self) -> str:
        return "T"

    def memory_cgroup(self) -> str:
        return "remote-cgroup"


def test_nemesis_asks_a_remote_node_itself() -> None:
    from ktrial.nemesis import nodestats, process
    from ktrial.nemesis.memory import MemoryFault

    node = RemoteLikeNode()
    assert nodestats.sample([node]) == {"n1": {"rss_bytes": 5, "pid": 4242}}  # type: ignore[list-item]
    assert process.is_paused(node) is True  # type: ignore[arg-type]
    assert MemoryFault.cgroup_of(node) == "remote-cgroup"  # type: ignore[arg-type, comparison-overlap]


class StubSystem:
    """A "broker" that is a `sleep`: what SshNode asks of a BrokerSystem."""

    name = "stub"
    one_process = False
    first_node_id = 1
    stop_signal = 15
    layout = Layout()

    def new_cluster_id(self) -> str:
        return "stub-cluster"

    def node_files(self, me: object, every: object, paths: object, adv: object) -> dict[str, str]:
        return {"server.properties": "node.id=1\n"}

    def run_command(self, paths: object, run_id: str, node: str) -> list[str]:
        return ["sleep", "60"]


def _local_node(tmp_path: Path) -> tuple[SshNode, LocalHost]:
    cluster = SshCluster([HostSpec("h1")], run_id="a1b2c3", system=StubSystem())  # type: ignore[arg-type]
    cluster.save_state = lambda *a, **k: None  # type: ignore[method-assign]
    host = LocalHost()
    node = SshNode(cluster, 1, host, "127.0.0.1", str(tmp_path / "n1"))  # type: ignore[arg-type]
    cluster._nodes.append(node)
    return node, host


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_each_process_operation_is_one_round_trip(tmp_path: Path) -> None:
    """start, pause, the state, resume, a sample, stop, kill: one script each on the host
    (run here with sh: the "broker" is a local sleep), and each really happens."""
    node, host = _local_node(tmp_path)
    try:
        ops: list[tuple[str, int]] = []

        def step(what: str, fn: Callable[[], object]) -> object:
            before = len(host.scripts)
            result = fn()
            ops.append((what, len(host.scripts) - before))
            return result

        step("start", node.start)
        pid = node._pid
        assert pid and _state(pid) in "RS"
        assert (tmp_path / "n1" / "server.properties").read_text() == "node.id=1\n"
        with pytest.raises(NodeStateError):
            step("start again", node.start)
        step("pause", node.pause)
        assert _state(pid) == "T" and node.is_frozen()
        assert step("state", node.process_state) == "T"
        step("resume", node.resume)
        assert _state(pid) != "T"
        sample = step("sample", node.memory_sample)
        assert sample and sample["pid"] == pid and sample["rss_bytes"], (sample, host.scripts[-1])  # type: ignore[index]
        step("pause", node.pause)
        # is it running, is it paused (one observation), then the resume
        assert step("ensure running", lambda: ensure_running(node)) == "resume"
        assert ops[-1] == ("ensure running", 2) and _state(pid) != "T"
        step("pause", node.pause)
        step("stop", node.stop)  # resumed first: a stopped process ignores TERM
        assert not Path(f"/proc/{pid}").exists() or _state(pid) == "Z"
        assert step("state", node.process_state) is None
        step("stop idle", node.stop)
        with pytest.raises(NodeStateError):
            step("pause idle", node.pause)
        step("start", node.start)
        step("kill", node.kill)
        assert step("sample idle", node.memory_sample) is None
        results = step("exec_many", lambda: node.exec_many([["echo", "x"], ["false"]]))
        assert results == [(0, "x\n", ""), (1, "", "")]
    finally:
        node._signal("KILL", "gone", 5, cont_first=True)
    assert all(n == 1 for what, n in ops if what != "ensure running"), ops


def test_partition_rules_are_one_round_trip_per_host() -> None:
    """A step's iptables rules on a host that runs several commands at once: one
    exec_many to add them, one to delete them and list what is left."""
    from ktrial.nemesis import iptables

    class Node:
        def __init__(self, name: str) -> None:
            self.name, self.batches, self.execs = name, [], []  # type: ignore[var-annotated]

        def exec_many(
            self, cmds: list[list[str]], timeout: float = 30.0
        ) -> list[tuple[int, str, str]]:
            self.batches.append(cmds)
            left = "-A INPUT -s 10.0.0.9/32 -m comment --comment c1 -j DROP\n"
            return [(0, left if c[0] == "iptables-save" else "", "") for c in cmds]

        def exec(self, cmd: list[str], check: bool = True, timeout: float = 30.0) -> str:
            self.execs.append(cmd)
            return ""

    nodes = {n: Node(n) for n in ("n1", "n2", "n3")}
    rules = iptables.rules_for_grudge(
        {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]},
        {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"},
        "c1",
    )
    assert iptables.apply_rules(nodes, rules) == rules  # type: ignore[arg-type]
    assert [len(n.batches) for n in nodes.values()] == [1, 1, 1]
    assert [c[2] for c in nodes["n1"].batches[0]] == ["-A", "-A"]
    assert iptables.remove_rules(nodes, rules) == []  # type: ignore[arg-type]
    assert [len(n.batches) for n in nodes.values()] == [2, 2, 2]
    assert nodes["n1"].batches[1][-1] == ["iptables-save", "-t", "filter"]
    assert [c[2] for c in nodes["n1"].batches[1][:-1]] == ["-D", "-D"]
    # what the listing still showed with the fault's tag is deleted too
    assert nodes["n2"].execs == [["iptables", "-w", "-D", "INPUT", "-s", "10.0.0.9/32",
                                  "-m", "comment", "--comment", "c1", "-j", "DROP"]]  # fmt: skip


def test_a_failed_rule_on_a_remote_host_raises() -> None:
    from ktrial.nemesis import iptables

    class Node:
        def exec_many(
            self, cmds: list[list[str]], timeout: float = 30.0
        ) -> list[tuple[int, str, str]]:
            return [(0, "", ""), (2, "", "iptables: bad rule")][: len(cmds)]

    rules = iptables.rules_for_grudge({"n1": ["n2", "n3"]}, {"n2": "a", "n3": "b", "n1": "c"}, "c")
    with pytest.raises(subprocess.CalledProcessError) as e:
        iptables.apply_rules({"n1": Node()}, rules)  # type: ignore[dict-item]
    assert "bad rule" in e.value.stderr
