"""clusters/sshremote.py: the scripts run on ssh hosts (checked by sh -n and on this
machine's own /proc where that is safe) and the parsers of their output."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
from ktrial.clusters import sshremote as R


def sh_ok(script: str) -> None:
    proc = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


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
        R.status_script("/w", rid),
        R.signal_script(12, rid, "KILL", "gone", 30),
        R.signal_script(12, rid, "STOP", "stopped", 5),
        R.memory_sample_script(12, "/cg"),
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
                    ["sh", "-c", R.status_script(w, "a1b2c3")], capture_output=True, text=True
                ).stdout
                assert out.startswith(want) if want else out == ""
        finally:
            for proc in (p, q):
                proc.kill()
                proc.wait()


def test_parse_memory_sample() -> None:
    text = (
        "#status\nVmRSS:\t 2048 kB\nRssAnon:\t 1024 kB\n#cgroup\ntotal_rss 500\ntotal_cache 700\n"
        "#cmdline\njava\n-Xmx1m\nkafka.Kafka\n\n#smaps\n"
        "7f0000000000-7f0000100000 rw-p 00000000 00:00 0\nAnonymous:        512 kB\n"
    )
    s = R.parse_memory_sample(text, 42)
    assert s is not None
    assert s["rss_bytes"] == 2048 * 1024 and s["rss_anon_bytes"] == 1024 * 1024
    assert s["cgroup_anon_bytes"] == 500 and s["cache_bytes"] == 700
    assert s["heap_max_bytes"] == 1 << 20 and s["heap_resident_bytes"] == 512 * 1024
    assert s["pid"] == 42
    assert R.parse_memory_sample("#status\n#cgroup\n", 42) is None


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
