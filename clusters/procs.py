"""Process states from /proc, for faults that must know a signal took effect."""

from __future__ import annotations

import time
from pathlib import Path

STOPPED = frozenset("Tt")


def process_state(pid: int) -> str:
    """One-letter state (R, S, T, Z, ...) of the whole process, '' if it is gone.

    'T' only once every thread has stopped: SIGSTOP wakes one thread, which then stops
    the others, so on a busy machine the rest can keep running (and answering requests)
    for a while. Otherwise the state of the first thread that has not stopped.
    """
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return ""
    states = []
    for task in tasks:
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    if not states:
        return ""
    return next((s for s in states if s not in STOPPED), states[0])


def wait_stopped(pid: int, limit: float) -> bool:
    """Wait up to `limit` s until every thread of `pid` is stopped (or it is gone)."""
    deadline = time.monotonic() + limit
    while True:
        state = process_state(pid)
        if state in STOPPED or state == "":
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
