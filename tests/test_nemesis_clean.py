"""`clean_leftovers` removes what a SIGKILLed ktrial's nemesis left behind — tagged
iptables rules in ktrial namespaces and marked processes — and keeps what belongs to
a live run unless asked for all."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from ktrial.nemesis.clean import clean_leftovers, clean_rules, marked_processes
from ktrial.nemesis.iptables import comment_for
from ktrial.nemesis.process import process_state
from ktrial.nemesis.toxiproxy import ENV_MARK as TOXIPROXY_MARK
from ktrial.nemesis.toxiproxy import default_binary

root_only = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("iptables") is None, reason="needs root and iptables"
)


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


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
def test_rules_of_dead_owners_go_and_live_ones_stay_unless_all(namespace: str) -> None:
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
