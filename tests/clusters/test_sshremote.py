"""clusters/sshremote.py: the scripts run on ssh hosts (checked by sh -n and on this
machine's own /proc where that is safe) and the parsers of their output."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import tarfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import pytest
from ktrial.clusters import sshremote as R


def sh_ok(script: str) -> None:
    proc = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _sh(script: str, input: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script], input=input.decode() if input else None,
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


@contextlib.contextmanager
def _marked_sleep(work: Path, run_id: str = "a1b2c3") -> Iterator[subprocess.Popen[bytes]]:
    """A `sleep` carrying the run's marker, as the node's broker in `work` (its pid file)."""
    p = subprocess.Popen(["sleep", "60"], env={**os.environ, "KTRIAL_RUN": run_id})
    (work / "broker.pid").write_text(f"{p.pid}\n")
    try:
        yield p
    finally:
        p.kill()
        p.wait()


def test_every_script_parses() -> None:
    rid = "a1b2c3"
    for s in (
        R.probe_script(),
        R.make_run_dir_script("/var/tmp/ktrial", rid, "ctl 1 2", ["n1", "n2"]),
        R.remove_run_dir_script("/var/tmp/ktrial", rid),
        R.program_upload_script("/var/tmp/ktrial", "0123456789abcdef0123"),
        R.make_cgroup_script(rid, "n1"),
        R.remove_cgroup_script("/sys/fs/cgroup/memory/ktrial-a1b2c3-n1", rid),
        R.start_script("/w", "/w/logs/stdout.log", ["java", "-cp", "a b/*", "X"], rid, "n1", "/cg"),
        R.start_script("/w", "/w/logs/stdout.log", ["java"], rid, "n1", None),
        R.start_script("/w", "/w/logs/stdout.log", ["java"], rid, "n1", None, unpack=True),
        R.node_signal_script("/w", rid, "KILL", "gone", 30, cont_first=True),
        R.node_signal_script("/w", rid, "STOP", "stopped", 5),
        R.node_signal_script("/w", rid, "CONT", "", 5),
        R.node_state_script("/w", rid),
        R.node_sample_script("/w", rid, "/cg"),
        R.node_sample_script("/w", rid, None),
        R.read_files_script("/cg", ["/cg/memory.stat", "/proc/vmstat"]),
        R.exec_many_script([["iptables", "-w", "-A", "INPUT"], ["iptables-save"]], "b0undary1"),
        R.balloon_start_script("/cg", 1 << 20, rid, 99, "n1"),
        R.balloon_stop_script(12, "/cg", rid),
    ):
        sh_ok(s)


@pytest.mark.parametrize("bad", ["A1B2C3", "a1b2c", "../x", "a1b2c3 ; rm"])
def test_run_ids_are_checked(bad: str) -> None:
    with pytest.raises(ValueError):
        R.run_dir("/r", bad)


def test_cgroup_removal_refuses_other_names() -> None:
    with pytest.raises(ValueError):
        R.remove_cgroup_script("/sys/fs/cgroup/memory/user.slice", "a1b2c3")
    with pytest.raises(ValueError):
        R.remove_cgroup_script("/sys/fs/cgroup/memory/ktrial-ffffff-n1", "a1b2c3")


def test_remove_run_dir_refuses_foreign_content(tmp_path: pytest.TempPathFactory) -> None:
    root = str(tmp_path)
    d = tmp_path / "runs" / "a1b2c3"  # type: ignore[operator]
    (d / "n1" / "data").mkdir(parents=True)
    (d / "owner").write_text("x")
    (d / "precious.txt").write_text("mine")
    proc = subprocess.run(
        ["sh", "-c", R.remove_run_dir_script(root, "a1b2c3")], capture_output=True, text=True
    )
    assert proc.returncode == 3 and "precious.txt" in proc.stderr and d.exists()
    (d / "precious.txt").unlink()
    again = subprocess.run(["sh", "-c", R.remove_run_dir_script(root, "a1b2c3")])
    assert again.returncode == 0 and not d.exists()


def test_status_names_only_processes_carrying_the_run() -> None:
    """Our own shell is alive but carries no KTRIAL_RUN: not reported as the broker."""
    import tempfile

    with tempfile.TemporaryDirectory() as w:
        p = subprocess.Popen(["sleep", "30"], env={**os.environ, "KTRIAL_RUN": "a1b2c3"})
        q = subprocess.Popen(["sleep", "30"])
        try:
            for pid, want in ((p.pid, f"{p.pid} "), (q.pid, "")):
                with open(f"{w}/broker.pid", "w") as fh:
                    fh.write(str(pid))
                out = subprocess.run(
                    ["sh", "-c", R.node_state_script(w, "a1b2c3")], capture_output=True, text=True
                ).stdout
                assert out.startswith(want) if want else out == ""
        finally:
            for proc in (p, q):
                proc.kill()
                proc.wait()


def test_parse_node_sample() -> None:
    text = (
        "#pid\n42\n#status\nVmRSS:\t 2048 kB\nRssAnon:\t 1024 kB\n"
        "#stat\n42 (java) S 1 42 42 0 -1 4194560 500 0 7 0 250 50 0 0 20 0 30 0 1 0 0\n"
        "#clk\n100\n#cmdline\njava\n-Xmx1m\nkafka.Kafka\n\n#smaps\n"
        "7f0000000000-7f0000100000 rw-p 00000000 00:00 0\nAnonymous:        512 kB\n"
        "#cgstat\ntotal_rss 500\ntotal_cache 700\ntotal_pgmajfault 9\n#failcnt\n3\n#cgpsi\n"
        "#vmstat\nallocstall_normal 2\nallocstall_movable 3\npgmajfault 11\n"
        "#psi\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=77\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
        "#meminfo\nMemTotal: 100 kB\nMemAvailable:  64 kB\n"
    )
    s = R.parse_node_sample(text)
    assert s is not None
    assert s["rss_bytes"] == 2048 * 1024 and s["rss_anon_bytes"] == 1024 * 1024
    assert s["cgroup_anon_bytes"] == 500 and s["cache_bytes"] == 700
    assert s["heap_max_bytes"] == 1 << 20 and s["heap_resident_bytes"] == 512 * 1024
    assert s["pid"] == 42 and s["cpu_ms"] == 3000 and s["majflt"] == 7
    assert s["cgroup_pgmajfault"] == 9 and s["cgroup_failcnt"] == 3
    assert s["cgroup_psi_some_us"] is None  # v1: no per-cgroup PSI
    assert s["host_allocstall"] == 5 and s["host_pgmajfault"] == 11
    assert s["host_psi_some_us"] == 77 and s["host_psi_full_us"] == 5
    assert s["host_mem_available_bytes"] == 64 * 1024
    assert R.parse_node_sample("") is None  # not running: the script prints nothing
    assert R.parse_node_sample("#pid\n42\n#status\n#cgstat\n") is None


def test_a_node_sample_has_the_keys_of_a_local_one(tmp_path: Path) -> None:
    """The script, run here on a live process with a stand-in cgroup directory, yields
    the same figures as the local sampler (nemesis/nodestats.py) does for a node."""
    cg = tmp_path / "cg"
    cg.mkdir()
    (cg / "memory.stat").write_text("anon 4096\nfile 8192\npgmajfault 1\n")
    (cg / "memory.pressure").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=12\n")
    with _marked_sleep(tmp_path) as p:
        out = _sh(R.node_sample_script(str(tmp_path), "a1b2c3", str(cg))).stdout
        s = R.parse_node_sample(out)
    assert s is not None and s["pid"] == p.pid and s["rss_bytes"]
    assert s["cgroup_anon_bytes"] == 4096 and s["cache_bytes"] == 8192
    assert s["cgroup_psi_some_us"] == 12 and s["cgroup_failcnt"] is None
    assert s["cpu_ms"] is not None and s["host_mem_available_bytes"]
    local = {"rss_bytes", "rss_anon_bytes", "cgroup_anon_bytes", "cache_bytes", "pid",
             "cpu_ms", "majflt", "cgroup_pgmajfault", "cgroup_failcnt", "cgroup_psi_some_us",
             "host_allocstall", "host_psi_some_us", "host_mem_available_bytes"}  # fmt: skip
    assert local <= set(s)
    # a process without the run's marker is not the node's broker
    (tmp_path / "broker.pid").write_text(str(os.getpid()))
    assert _sh(R.node_sample_script(str(tmp_path), "a1b2c3", str(cg))).stdout == ""


def test_parse_probe() -> None:
    assert R.parse_probe("uid=0\nmemcg=/sys/fs/cgroup/memory\njava=\n") == {
        "uid": "0",
        "memcg": "/sys/fs/cgroup/memory",
        "java": "",
    }


class _Host:
    """Stands in for an SshHost: answers a write with what dash printed here when the
    kernel refused a v1 memory limit below usage (EBUSY)."""

    name = "h1"

    def __init__(self, stderr: bytes) -> None:
        self.stderr = stderr

    def run(self, script: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(["sh"], 1, b"", self.stderr)


@pytest.mark.parametrize(
    ("stderr", "code"),
    [
        (b"sh: 1: echo: echo: I/O error", errno.EBUSY),
        (b"bash: echo: write error: Device or resource busy", errno.EBUSY),
        (b"sh: 1: cannot create /x: Permission denied", errno.EIO),
    ],
)
def test_a_refused_limit_write_reads_as_busy(stderr: bytes, code: int) -> None:
    """The squeeze steps a refused v1 limit up only on EBUSY: dash's generic message for
    the kernel's EBUSY must read as busy, or the memory fault fails on a busy node."""
    from pathlib import Path

    cg = R.RemoteMemoryCgroup(Path("/sys/fs/cgroup/memory/ktrial-a1b2c3-n1"), host=_Host(stderr))  # type: ignore[arg-type]
    with pytest.raises(OSError) as e:
        cg._write("memory.limit_in_bytes", "1000000")
    assert e.value.errno == code


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_process_faults_are_one_script_each(tmp_path: Path) -> None:
    """Finding the broker, checking it is ours, signalling and waiting: one script, so
    one round trip; exit 3 when there is no broker of this run."""
    w = str(tmp_path)
    with _marked_sleep(tmp_path) as p:
        stop = _sh(R.node_signal_script(w, "a1b2c3", "STOP", "stopped", 5))
        assert stop.returncode == 0 and stop.stdout.split() == [str(p.pid)]
        assert _state(p.pid) == "T"
        assert _sh(R.node_state_script(w, "a1b2c3")).stdout.split() == [str(p.pid), "T"]
        assert R.parse_pid_state(_sh(R.node_state_script(w, "a1b2c3")).stdout) == (p.pid, "T")
        # a stopped broker is resumed first, then killed, and the script waits for it
        kill = _sh(R.node_signal_script(w, "a1b2c3", "KILL", "gone", 5, cont_first=True))
        assert kill.returncode == 0
        p.wait(5)
        again = _sh(R.node_signal_script(w, "a1b2c3", "KILL", "gone", 5))
        assert again.returncode == R.NOT_RUNNING
        assert _sh(R.node_state_script(w, "a1b2c3")).stdout == ""
    with _marked_sleep(tmp_path, run_id="ffffff") as other:  # another run's process
        assert _sh(R.node_signal_script(w, "a1b2c3", "STOP", "", 5)).returncode == R.NOT_RUNNING
        assert _state(other.pid) != "T"
    (tmp_path / "broker.pid").unlink()
    assert _sh(R.node_signal_script(w, "a1b2c3", "KILL", "", 5)).returncode == R.NOT_RUNNING


def test_start_unpacks_the_files_and_refuses_a_running_broker(tmp_path: Path) -> None:
    w = tmp_path / "n1"
    buf = BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("server.properties")
        info.size = 3
        tar.addfile(info, BytesIO(b"a=1"))
    script = R.start_script(
        str(w), str(w / "logs/stdout.log"), ["sleep", "60"], "a1b2c3", "n1", None, unpack=True
    )
    first = _sh(script, buf.getvalue())
    assert first.returncode == 0, first.stderr
    pid = int(first.stdout.split()[-1])
    try:
        assert (w / "server.properties").read_text() == "a=1"
        assert (w / "broker.pid").read_text().strip() == str(pid)
        second = _sh(script, buf.getvalue())
        assert second.returncode == R.ALREADY_RUNNING and second.stdout.split() == [
            "running",
            str(pid),
        ]
    finally:
        os.kill(pid, signal.SIGKILL)


def test_exec_many_runs_every_command_and_reports_each(tmp_path: Path) -> None:
    cmds = [
        ["echo", "a b"],
        ["sh", "-c", "printf x; echo oops >&2; exit 3"],
        ["true"],
        ["printf", "l1\nl2\n"],
    ]
    out = _sh(R.exec_many_script(cmds, "bound4ry99")).stdout
    assert R.parse_exec_many(out, "bound4ry99", 4) == [
        (0, "a b\n", ""),
        (3, "x", "oops\n"),
        (0, "", ""),
        (0, "l1\nl2\n", ""),
    ]
    # cut short (the connection dropped): the commands not reported read as failed
    cut = out[: out.index("bound4ry99 2 ")]
    assert [r[0] for r in R.parse_exec_many(cut, "bound4ry99", 4)] == [0, 3, -1, -1]
    with pytest.raises(ValueError):
        R.exec_many_script(cmds, "a b; rm")


def test_read_files_reads_a_step_at_once(tmp_path: Path) -> None:
    (tmp_path / "memory.stat").write_text("rss 1\ncache 2\n")
    (tmp_path / "memory.failcnt").write_text("0")  # no newline at the end
    (tmp_path / "empty").write_text("")
    paths = [str(tmp_path / n) for n in ("memory.stat", "memory.failcnt", "empty", "missing")]
    exists, files = R.parse_files(_sh(R.read_files_script(str(tmp_path), paths)).stdout)
    assert exists
    assert files == {paths[0]: "rss 1\ncache 2\n", paths[1]: "0\n", paths[2]: "\n", paths[3]: None}
    gone = _sh(R.read_files_script(str(tmp_path / "nope"), paths[:1])).stdout
    assert R.parse_files(gone)[0] is False


def test_parse_cgroup() -> None:
    assert R.parse_cgroup("/sys/fs/cgroup/memory/ktrial-a1b2c3-n1\n1\n") == (
        "/sys/fs/cgroup/memory/ktrial-a1b2c3-n1",
        1,
    )
    assert R.parse_cgroup("/sys/fs/cgroup/ktrial-a1b2c3-n1\n2\n")[1] == 2  # type: ignore[index]
    assert R.parse_cgroup("") is None


class LocalHost:
    """An SshHost that runs its scripts here with sh (no ssh) and counts them."""

    name = "h1"

    def __init__(self, busy: str | None = None) -> None:
        self.scripts: list[str] = []
        self.busy = busy  # a file whose writes the "kernel" refuses with EBUSY

    def run(
        self, script: str, check: bool = True, input: bytes | None = None, **kw: object
    ) -> subprocess.CompletedProcess[bytes]:
        self.scripts.append(script)
        if self.busy and f"> {self.busy}" in script:
            return subprocess.CompletedProcess(["sh"], 1, b"", b"sh: 1: echo: echo: I/O error")
        proc = subprocess.run(["sh", "-c", script], input=input, capture_output=True, timeout=30)
        if check and proc.returncode:
            from ktrial.clusters.sshconn import RemoteError

            raise RemoteError(self.name, script[:40], proc.returncode, proc.stderr.decode())
        return proc

    def out(self, script: str, **kw: object) -> str:
        return self.run(script, **kw).stdout.decode()  # type: ignore[arg-type]


def _v1_cgroup(d: Path) -> None:
    d.mkdir()
    (d / "memory.limit_in_bytes").write_text(f"{1 << 62}\n")
    (d / "memory.usage_in_bytes").write_text("3000\n")
    (d / "memory.failcnt").write_text("3\n")
    (d / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    (d / "memory.stat").write_text("total_rss 100\ntotal_cache 200\ntotal_pgmajfault 4\n")
    (d / "cgroup.procs").write_text("7\n8\n")


def test_remote_cgroup_reads_a_step_in_one_round_trip(tmp_path: Path) -> None:
    """The memory fault's start (its window, the limits, the host's counters) reads the
    cgroup once; a write drops the snapshot, so what follows is read again."""
    from ktrial.nemesis.memory import Window

    _v1_cgroup(tmp_path / "cg")
    host = LocalHost()
    cg = R.remote_cgroup(host, str(tmp_path / "cg"), 1)  # type: ignore[arg-type]
    w = Window("n1", cg)
    w.begin(42)
    assert (cg.limit(), cg.high(), cg.exists()) == (None, None, True)
    assert cg.vmstat()  # the host's counters: from the same read
    assert (w.anon0, w.file0, w.failcnt0, w.oom0, w.majfault0, w.usage_max) == (
        100, 200, 3, 1, 4, 3000,
    )  # fmt: skip
    assert len(host.scripts) == 1
    cg.set_limit(1 << 20)
    assert (tmp_path / "cg/memory.limit_in_bytes").read_text().strip() == str(1 << 20)
    assert cg.limit() == 1 << 20  # read again after the write
    assert len(host.scripts) == 3
    assert cg.pids() == [7, 8]  # a file outside the snapshot: read on its own
    (tmp_path / "cg/memory.usage_in_bytes").unlink()
    cg.forget()
    with pytest.raises(OSError):
        cg.usage()  # a file the host does not have
    busy = LocalHost(busy=str(tmp_path / "cg/memory.limit_in_bytes"))
    with pytest.raises(OSError) as e:
        R.remote_cgroup(busy, str(tmp_path / "cg"), 1).set_limit(1 << 10)  # type: ignore[arg-type]
    assert e.value.errno == errno.EBUSY  # the squeeze then steps up, as locally


def test_remote_cgroup_snapshots_expire(tmp_path: Path) -> None:
    _v1_cgroup(tmp_path / "cg")
    host = LocalHost()
    cg = R.RemoteMemoryCgroup(tmp_path / "cg", host, 1, ttl=0.0)  # type: ignore[arg-type]
    cg.usage()
    cg.usage()
    assert len(host.scripts) == 2
    assert not R.remote_cgroup(host, str(tmp_path / "none"), 1).exists()  # type: ignore[arg-type]
