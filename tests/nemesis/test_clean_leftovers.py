"""Nemesis leftovers (nemesis/clean.py): only what ktrial's nemesis started, with a
well-formed owner pid that is dead; a dry run lists exactly what a real clean removes.

Real processes stand in for a user's look-alikes and for a dead run's balloon."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
from ktrial.clusters.state import is_alive
from ktrial.nemesis import clean as nclean
from ktrial.nemesis.iptables import comment_for
from ktrial.nemesis.memory import ENV_MARK as BALLOON_MARK
from ktrial.nemesis.toxiproxy import ENV_MARK as TOXIPROXY_MARK


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


class Procs:
    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], **env: str) -> int:
        p = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.started.append(p)
        return p.pid


@pytest.fixture
def procs() -> Iterator[Procs]:
    ps = Procs()
    try:
        yield ps
    finally:
        for p in ps.started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


def mentions(lines: list[str], pids: set[int]) -> list[str]:
    return [ln for ln in lines if any(f" pid {p} " in ln for p in pids)]


def test_marks_that_ktrial_did_not_set_are_left_alone(procs: Procs) -> None:
    users = {
        procs.start(["sleep", "60"], **{BALLOON_MARK: "abc"}),
        procs.start(["sleep", "60"], **{TOXIPROXY_MARK: "abc"}),
        procs.start(["sleep", "60"], **{TOXIPROXY_MARK: "-1"}),
        procs.start(["sleep", "60"], **{BALLOON_MARK: "0"}),
        # a numeric, dead owner, but the process is no balloon (not stress-ng)
        procs.start(["sleep", "60"], **{BALLOON_MARK: str(dead_pid())}),
        procs.start(["sleep", "60"], **{TOXIPROXY_MARK: str(dead_pid())}),
    }
    time.sleep(0.2)  # exec done: /proc/<pid>/environ is sleep's
    real = nclean.clean_leftovers(all=False)
    assert mentions(real, users) == [] and all(is_alive(p, None) for p in users)
    real = nclean.clean_leftovers(all=True)
    assert mentions(real, users) == [] and all(is_alive(p, None) for p in users)
    dry = nclean.clean_leftovers(all=True, dry_run=True)
    assert mentions(dry, users) == []


def test_a_reused_owner_pid_is_not_the_owner(procs: Procs) -> None:
    first = procs.start(["sleep", "60"])
    time.sleep(0.05)
    later = procs.start(["sleep", "60"])
    time.sleep(0.05)
    assert nclean.owner_alive(first, later)
    assert not nclean.owner_alive(later, first)  # started after it: a reused pid
    assert not nclean.owner_alive(dead_pid(), first)


def test_only_ktrials_programs_count_as_balloons_and_proxies() -> None:
    assert nclean.is_balloon(["stress-ng", "--vm", "1"])
    assert nclean.is_balloon(["stress-ng-vm [run]"])
    assert nclean.is_balloon(["sh", "-c", "echo", "ktrial-balloon", "/cg", "stress-ng"])
    assert not nclean.is_balloon(["sleep", "60"]) and not nclean.is_balloon([])
    assert nclean.is_toxiproxy(["/root/.cache/ktrial/bin/toxiproxy-server", "-port", "1"])
    assert not nclean.is_toxiproxy(["python", "toxiproxy-server"])
    assert nclean.COMMENT_RE.match(comment_for("x-1-partition", 1234))
    assert not nclean.COMMENT_RE.match("ktrial-nemesis:abc:x-1")
    assert not nclean.COMMENT_RE.match("ktrial-nemesis:12:x 1")
    assert nclean.NETNS_RE.match("kt-a1b2c3-n1") and not nclean.NETNS_RE.match("kt-prod")


needs_tools = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("stress-ng") or not shutil.which("iptables"),
    reason="needs root, stress-ng and iptables",
)


@needs_tools
def test_dry_run_lists_exactly_what_a_real_clean_removes(procs: Procs) -> None:
    owner = dead_pid()
    balloon = procs.start(
        ["stress-ng", "--sleep", "1", "--timeout", "60", "--quiet"], **{BALLOON_MARK: str(owner)}
    )
    ns = f"kt-{secrets.token_hex(3)}-n99"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        rule = ["INPUT", "-s", "10.254.0.9", "-m", "comment", "--comment"]
        rule += [comment_for("x-1-partition", owner), "-j", "DROP"]
        subprocess.run(["ip", "netns", "exec", ns, "iptables", "-w", "-A", *rule], check=True)
        time.sleep(0.5)  # stress-ng has forked its worker
        dry = nclean.clean_leftovers(all=False, dry_run=True)
        ours = [ln for ln in dry if ns in ln or f"started by pid {owner})" in ln]
        assert any(ns in ln for ln in ours) and any(f"pid {balloon} " in ln for ln in ours)
        assert is_alive(balloon, None)  # a dry run removes nothing
        real = nclean.clean_leftovers(all=False)
        assert [ln for ln in real if ns in ln or f"started by pid {owner})" in ln] == ours
        procs.started[0].wait(10)
        save = subprocess.run(
            ["ip", "netns", "exec", ns, "iptables-save"], capture_output=True, text=True
        )
        assert "ktrial-nemesis" not in save.stdout
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
