"""Real processes for the clean-up tests (tests/clusters, tests/nemesis): a pid that
is surely dead, and processes a test starts that are killed and reaped at teardown
(the `procs` fixture in tests/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


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
