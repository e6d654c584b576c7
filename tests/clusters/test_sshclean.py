"""clusters/sshclean.py: reading a host's scan, and whose leftovers may go."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from ktrial.clusters import sshclean
from ktrial.clusters import state as statemod

RULE = '-m comment --comment "ktrial-nemesis:123:abc-1-partition" -j DROP'


def test_parse_scan_keeps_only_well_formed_markers() -> None:
    text = "\n".join(
        [
            "run a1b2c3 n1,n2, ctl 12 34",
            "run NOTRUN n1, x",
            "proc 77 a1b2c3 n1 java",
            "proc 78 zzzzzz n1 java",
            "cgroup /sys/fs/cgroup/memory/ktrial-a1b2c3-n1",
            "cgroup /sys/fs/cgroup/memory/ktrial-evil",
            f"-A INPUT -s 10.0.0.1/32 {RULE}",
            f"rule -A INPUT -s 10.0.0.1/32 {RULE}",
            'rule -A INPUT -m comment --comment "ktrial-nemesis:x:y" -j DROP',
        ]
    )
    s = sshclean.parse_scan(text)
    assert s.runs == {"a1b2c3": (["n1", "n2"], "ctl 12 34")}
    assert s.procs == [(77, "a1b2c3", "n1", "java")]
    assert s.cgroups == [("/sys/fs/cgroup/memory/ktrial-a1b2c3-n1", "a1b2c3", "n1")]
    assert len(s.rules) == 1 and s.rules[0][1] == 123


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KTRIAL_STATE_DIR", str(tmp_path))
    return tmp_path


def test_owner_from_the_state_record(state_dir: Path) -> None:
    statemod.for_run("a1b2c3").write({"kind": "ssh", **statemod.owner_fields()})
    assert sshclean.owner_state("a1b2c3", "", "ctl")[0] is True
    statemod.for_run("a1b2c3").write({"kind": "ssh", "owner_pid": 2**22 + 7, "owner_start": 1})
    assert sshclean.owner_state("a1b2c3", "", "ctl")[0] is False


def test_owner_from_the_hosts_owner_file(state_dir: Path) -> None:
    here = socket.gethostname()
    me = statemod.owner_fields()
    line = f"{here} {me['owner_pid']} {me['owner_start']}"
    assert sshclean.owner_state("a1b2c3", line, here)[0] is True
    assert sshclean.owner_state("a1b2c3", f"{here} {2**22 + 7} 5", here)[0] is False
    alive, why = sshclean.owner_state("a1b2c3", f"elsewhere {os.getpid()} 5", here)
    assert alive is None and "elsewhere" in why
    assert sshclean.owner_state("a1b2c3", "garbage", here)[0] is None


class ScanHost:
    """A host whose scan finds a dead run that drove an installed system."""

    name = "h1"

    def __init__(self, text: str) -> None:
        self.text = text

    def out(self, script: str, **kw: object) -> str:
        return self.text


def test_a_dead_installed_run_is_restored_before_its_directory_goes(state_dir: Path) -> None:
    here = socket.gethostname()
    scan = f"run a1b2c3 n2, {here} {2**22 + 7} 5\nrestore a1b2c3 n2\n"
    plan = sshclean.plan_host(ScanHost(scan), "/var/tmp/ktrial", False, here)  # type: ignore[arg-type]
    what = [w for w, _ in plan.items]
    assert what[0].startswith("restore of installed n2 on h1 (run a1b2c3)")
    assert what[1] == "dir /var/tmp/ktrial/runs/a1b2c3 on h1"
    assert plan.items[0][1].startswith(sshclean.RESTORE_MARK)
    assert "/var/tmp/ktrial/runs/a1b2c3/n2/restore.sh" in plan.items[0][1]
    # a live owner: nothing restored (its own teardown puts the nodes back)
    me = statemod.owner_fields()
    scan = f"run a1b2c3 n2, {here} {me['owner_pid']} {me['owner_start']}\nrestore a1b2c3 n2\n"
    plan = sshclean.plan_host(ScanHost(scan), "/var/tmp/ktrial", False, here)  # type: ignore[arg-type]
    assert plan.items == [] and plan.refused
