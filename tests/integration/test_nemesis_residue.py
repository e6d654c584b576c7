"""Ctrl-C during an active partition, a pause and a memory squeeze leaves nothing behind.

A child Python process drives the faults on the shared session cluster through a
`Node` implementation of its own (signals by pid, `ip netns exec`, the cgroup path — the
same system interfaces the local backend uses), registers `heal_all` with an ExitStack
exactly as a run does, and is interrupted with SIGINT while all three faults are active.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ktrial.clusters.local import LocalCluster
from ktrial.histories.jsonl import read_history
from ktrial.nemesis.cgroups import MemoryCgroup
from ktrial.nemesis.clean import marked_processes
from ktrial.nemesis.iptables import COMMENT_PREFIX, tagged_rules
from ktrial.nemesis.memory import ENV_MARK as BALLOON_MARK
from ktrial.nemesis.process import process_state

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent(
    """
    import contextlib, json, os, random, signal, subprocess, sys, time
    # Python installs its KeyboardInterrupt handler only if SIGINT was not inherited as
    # ignored (it is, under a non-interactive shell's `&`): install it, as ktrial run does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from ktrial.histories.jsonl import HistoryWriter
    from ktrial.histories.recorder import Recorder
    from ktrial.nemesis import Nemesis

    class AttachedNode:
        # A node of a cluster another process started: acts through pid, netns, cgroup.
        def __init__(self, d):
            self.__dict__.update(d)
            self.paused = False
        address = property(lambda self: self.host)
        def is_running(self):
            return os.path.exists(f"/proc/{self.pid}")
        def pause(self):
            os.kill(self.pid, signal.SIGSTOP); self.paused = True
        def resume(self):
            os.kill(self.pid, signal.SIGCONT); self.paused = False
        def start(self):
            raise RuntimeError("cannot start a node of another process")
        def exec(self, cmd, check=True, timeout=30.0):
            p = subprocess.run(["ip", "netns", "exec", self.netns, *cmd], capture_output=True,
                               text=True, timeout=timeout)
            if check and p.returncode:
                raise subprocess.CalledProcessError(p.returncode, cmd, p.stdout, p.stderr)
            return p.stdout

    class AttachedCluster:
        kind = "local"
        def __init__(self, nodes):
            self.nodes = [AttachedNode(n) for n in nodes]
        bootstrap_servers = property(lambda self: ",".join(n.client for n in self.nodes))

    cluster = AttachedCluster(json.loads(sys.argv[1]))
    writer = HistoryWriter(sys.argv[2])
    with contextlib.ExitStack() as stack:
        stack.callback(writer.close)
        nem = Nemesis(cluster, Recorder(writer), rng=random.Random(3))
        stack.callback(nem.heal_all)
        nem.start("partition", ["n1"], shape="isolate")
        nem.start("pause", ["n2"])
        # a balloon smaller than the squeeze's headroom (32 MiB): pressure without an
        # OOM loop that could kill the balloon before the test sees it
        nem.start("memory", ["n3"], balloon_bytes=8 << 20)
        print("READY", flush=True)
        time.sleep(600)
    """
)


def _eventually(pred: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_sigint_during_partition_pause_and_squeeze_leaves_nothing(
    healed_local_cluster: LocalCluster, tmp_path: Path
) -> None:
    cluster = healed_local_cluster
    nodes = [
        {
            "name": n.name,
            "node_id": n.node_id,
            "host": n.address,
            "pid": n.pid,
            "netns": n.netns,
            "cgroup": n.cgroup,
            "client": n.direct_client,
        }
        for n in cluster.nodes
    ]
    n1, n2, n3 = cluster.nodes
    cg3 = MemoryCgroup(Path(str(n3.cgroup)))
    limit_before = cg3.limit()
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    history = tmp_path / "history.jsonl"
    child = subprocess.Popen(
        [sys.executable, str(script), json.dumps(nodes), str(history)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "READY"
        # all three faults are really active
        assert tagged_rules(n1, COMMENT_PREFIX)
        assert process_state(n2.pid) == "T"
        assert cg3.limit() != limit_before
        # /proc/PID/environ reads empty while the balloon's shell execs stress-ng: look again
        assert _eventually(
            lambda: any(owner == child.pid for _, owner in marked_processes(BALLOON_MARK))
        ), "the balloon never ran"

        child.send_signal(signal.SIGINT)
        assert child.wait(60) != 0  # KeyboardInterrupt, after the ExitStack healed
    finally:
        if child.poll() is None:  # an assertion failed: let the child heal, then kill it
            child.send_signal(signal.SIGINT)
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    for n in cluster.nodes:
        assert tagged_rules(n, COMMENT_PREFIX) == [], f"{n.name} kept nemesis rules"
        assert n.is_running() and process_state(n.pid) not in ("T", None), n.name
    assert cg3.limit() == limit_before
    assert not any(owner == child.pid for _, owner in marked_processes(BALLOON_MARK))
    fs = [op.f for op in read_history(history) if op.process == "nemesis"]
    assert fs[:3] == ["start-partition", "pause", "memory-squeeze"]
    assert {"stop-partition", "resume", "memory-release", "heal"} <= set(fs[3:])
