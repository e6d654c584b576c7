"""Nemesis leftovers (nemesis/clean.py): `clean_leftovers` removes what a SIGKILLed
ktrial's nemesis left behind -- tagged iptables rules in ktrial namespaces and marked
processes (toxiproxy, memory balloons) -- only what ktrial's nemesis started, with a
well-formed owner pid that is dead, unless asked for all; a dry run lists exactly what
a real clean removes.

Real processes stand in for a user's look-alikes and for a dead run's balloon."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from ktrial.clusters.state import is_alive
from ktrial.nemesis import clean as nclean
from ktrial.nemesis.clean import clean_leftovers, clean_rules, marked_processes
from ktrial.nemesis.iptables import comment_for
from ktrial.nemesis.memory import ENV_MARK as BALLOON_MARK
from ktrial.nemesis.process import process_state
from ktrial.nemesis.toxiproxy import ENV_MARK as TOXIPROXY_MARK
from ktrial.nemesis.toxiproxy import default_binary
from ktrial.tests.processes import Procs, confine_clean, dead_pid


def mentions(lines: list[str], pids: set[int]) -> list[str]:
    return [ln for ln in lines if any(f" pid {p} " in ln for p in pids)]


def test_marks_that_ktrial_did_not_set_are_left_alone(
    procs: Procs, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    confine_clean(monkeypatch, pids=users)  # all=True must not reach a live run's processes
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


# ----------------------------------------------- iptables rules and a killed ktrial's toxiproxy


root_only = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("iptables") is None, reason="needs root and iptables"
)


@pytest.fixture
def namespace() -> Iterator[str]:
    ns = f"kt-{secrets.token_hex(3)}-n99"  # a name clean recognises as ktrial's
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def rules(ns: str) -> list[str]:
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "iptables-save", "-t", "filter"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if "ktrial-nemesis:" in line]


@root_only
def test_rules_of_dead_owners_go_and_live_ones_stay_unless_all(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for owner, src in ((dead_pid(), "10.254.0.2"), (os.getpid(), "10.254.0.3")):
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                namespace,
                "iptables",
                "-w",
                "-A",
                "INPUT",
                "-s",
                src,
                "-m",
                "comment",
                "--comment",
                comment_for("x-1-partition", owner),
                "-j",
                "DROP",
            ],
            check=True,
        )
    assert len(rules(namespace)) == 2
    removed = clean_rules(all=False)
    assert [r for r in removed if namespace in r and "10.254.0.2" in r]
    assert len(rules(namespace)) == 1 and "10.254.0.3" in rules(namespace)[0]
    confine_clean(monkeypatch, namespaces=[namespace])  # not a live run's partition rules
    clean_rules(all=True)
    assert rules(namespace) == []


CHILD = """
import os
from ktrial.nemesis.toxiproxy import ToxiproxyServer
s = ToxiproxyServer()
s.start()
print(s.pid, flush=True)
os.kill(os.getpid(), 9)  # ktrial dies without cleaning up
"""


@pytest.mark.skipif(not default_binary().exists(), reason="toxiproxy-server not installed")
def test_a_toxiproxy_left_by_a_killed_ktrial_is_found_and_killed() -> None:
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    orphan = int(child.stdout.split()[0])
    try:
        assert (orphan, None) not in set(marked_processes(TOXIPROXY_MARK))
        assert any(pid == orphan for pid, _ in marked_processes(TOXIPROXY_MARK))
        removed = clean_leftovers(all=False)
        assert any(f"toxiproxy-server pid {orphan}" in r for r in removed)
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{orphan}") and time.monotonic() < deadline:
            time.sleep(0.05)  # reaped by init
        assert process_state(orphan) in (None, "Z")
    finally:
        if any(pid == orphan for pid, _ in marked_processes(TOXIPROXY_MARK)):
            os.kill(orphan, 9)
