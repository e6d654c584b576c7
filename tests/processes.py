"""Real processes for the clean-up tests (tests/clusters, tests/nemesis): a pid that
is surely dead, and processes a test starts that are killed and reaped at teardown
(the `procs` fixture in tests/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


class Procs:
    """Processes a test starts; all of them killed (and reaped) at teardown."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], **env: str) -> int:
        p = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.started.append(p)
        return p.pid

    def close(self) -> None:
        for p in self.started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


def confine_clean(
    monkeypatch: Any, pids: Collection[int] = (), namespaces: Collection[str] = ()
) -> None:
    """Let `nemesis.clean` see only the test's own processes and namespaces.

    A clean with ``all=True`` removes the leftovers of *live* runs too: run for real on a
    machine where a soak is going, a test would kill that run's Toxiproxy and balloons
    and delete its partition rules. Confined, the test still drives the real scan of
    /proc and of the namespace's rules, over what the test made and nothing else."""
    from ktrial.nemesis import clean

    real_marked = clean.marked_processes
    mine = set(pids)

    def marked(mark: str) -> Iterator[tuple[int, int | None]]:
        return ((pid, owner) for pid, owner in real_marked(mark) if _descends(pid, mine))

    monkeypatch.setattr(clean, "marked_processes", marked)
    monkeypatch.setattr(clean, "ktrial_namespaces", lambda: list(namespaces))
    # nor the link redirect rules of a live external run (clusters/linkproxy.py)
    monkeypatch.setattr(clean.linkproxy, "find_leftovers", lambda all=False: [])


def _descends(pid: int, roots: set[int]) -> bool:
    """Whether `pid` is one of `roots` or a descendant (stress-ng forks its workers)."""
    seen = 0
    while pid > 1 and seen < 64:
        if pid in roots:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
        seen += 1
    return False
