"""clusters/ssh.py: what of an installation is uploaded, and where it is on the host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ktrial.clusters.ssh import SshCluster, content_digest, program_parts, remote_program
from ktrial.clusters.sshconn import HostSpec


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


class FakeHost:
    """SshHost.run/out over a dict of files (what `cat`, `echo >` and `test -d` touch)."""

    name = "h1"

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def run(self, script: str, check: bool = True, **kw: object) -> object:
        import shlex
        import subprocess

        argv = shlex.split(script)
        rc, out, err = 0, "", ""
        if argv[0] == "cat":
            if argv[1] in self.files:
                out = self.files[argv[1]]
            else:
                rc, err = 1, "No such file"
        elif argv[0] == "echo":
            if self.files.get("busy") == argv[3]:
                rc, err = 1, "write error: Device or resource busy"
            else:
                self.files[argv[3]] = argv[1]
        elif argv[0] == "test":
            rc = 0 if argv[2] in self.files or argv[2] == "/cg" else 1
        return subprocess.CompletedProcess(argv, rc, out.encode(), err.encode())

    def out(self, script: str, **kw: object) -> str:
        from ktrial.clusters.sshconn import RemoteError

        p = self.run(script)
        if p.returncode:  # type: ignore[attr-defined]
            raise RemoteError("h1", script, 1, p.stderr.decode())  # type: ignore[attr-defined]
        return p.stdout.decode()  # type: ignore[attr-defined, no-any-return]


def test_remote_cgroup_reads_and_writes_over_the_host() -> None:
    import errno

    from ktrial.clusters.sshremote import remote_cgroup

    files = {
        "/cg/memory.limit_in_bytes": str(1 << 62),
        "/cg/memory.stat": "total_rss 100\ntotal_cache 200\n",
        "/cg/memory.failcnt": "3",
        "/cg/cgroup.procs": "7\n8\n",
    }
    host = FakeHost(files)
    cg = remote_cgroup(host, "/cg")  # type: ignore[arg-type]
    assert cg.version == 1 and cg.exists()
    assert cg.limit() is None and cg.anon_and_file() == (100, 200) and cg.failcnt() == 3
    assert cg.pids() == [7, 8]
    cg.set_limit(1 << 20)
    assert files["/cg/memory.limit_in_bytes"] == str(1 << 20) and cg.limit() == 1 << 20
    files["busy"] = "/cg/memory.limit_in_bytes"
    with pytest.raises(OSError) as e:
        cg.set_limit(1 << 10)
    assert e.value.errno == errno.EBUSY  # the squeeze then steps up, as locally
    with pytest.raises(OSError):
        cg.usage()  # a file the host does not have


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
