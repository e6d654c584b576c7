"""A watch on ktrial's own helper processes during a run (today: the Toxiproxy server).

Every client of a run with toxic faults reaches the brokers through ktrial's Toxiproxy.
If that process dies mid-run (killed by someone else's clean-up, the OOM killer, a
crash), the clients lose their path to a perfectly healthy cluster: every later stall,
stuck key or unread value is the harness's failure, not the system's. The watch notices
within a second, records one ``harness-error`` nemesis op (what died, its pid, how, and
when), and says so at once; the checker (checker/faults.py) then refuses to call the run
VALID and does not blame the system for the liveness violations that follow.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)
F_HARNESS_ERROR = "harness-error"


class Watched(Protocol):
    """A helper process: its pid, and its exit status once it exited by itself."""

    @property
    def pid(self) -> int | None: ...

    def died(self) -> int | None: ...


class _Recorder(Protocol):
    def nemesis(self, f: str, value: Any, **extra: Any) -> Any: ...


def how(status: int) -> str:
    """'killed by SIGKILL' / 'exited with status 2'."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"


class HarnessWatch:
    """A daemon thread polling the watched processes every `interval_s` until closed."""

    def __init__(
        self,
        watched: dict[str, Watched],
        recorder: _Recorder,
        say: Callable[[str], None] = lambda m: None,
        interval_s: float = 1.0,
    ) -> None:
        self.watched = dict(watched)
        self.recorder = recorder
        self.say = say
        self.interval_s = interval_s
        self.reported: list[dict[str, Any]] = []
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> HarnessWatch:
        self._thread = threading.Thread(target=self._loop, name="ktrial-harness", daemon=True)
        self._thread.start()
        return self

    def poll(self) -> None:
        """Record each watched process found dead since the last poll (once each)."""
        for what, proc in list(self.watched.items()):
            status = proc.died()
            if status is None:
                continue
            del self.watched[what]
            value = {
                "what": what,
                "pid": proc.pid,
                "status": status,
                "error": (
                    f"ktrial's {what} (pid {proc.pid}) {how(status)} during the run: the "
                    "clients lost their path to the brokers, so what follows says nothing "
                    "about the system under test"
                ),
            }
            self.reported.append(value)
            self.recorder.nemesis(F_HARNESS_ERROR, value)
            log.error("harness: %s", value["error"])
            self.say(f"HARNESS FAILURE: {value['error']}")

    def _loop(self) -> None:
        while not self._halt.wait(self.interval_s):
            try:
                self.poll()
            except Exception:  # the watch must never take the run down
                log.exception("harness watch failed")

    def close(self) -> None:
        """Stop watching (before the watched processes are stopped on purpose)."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(5)
        self.poll()  # a death just before the close still counts
