"""Time bounds for client calls: deadlines that notice `stop`, and calls run off-thread.

Why this exists: a worker that blocks forever in one client call leaves its op
pending in the history and keeps ``run()`` from returning. librdkafka honours the
timeout of most calls, but not all of them (``send_offsets_to_transaction`` waits
forever while the group coordinator is unreachable: librdkafka issues #5456 and
#5511), and destroying a client can wait on the network. So:

* :class:`Deadline` is an op's time budget; once ``stop`` is set the budget shrinks
  to a short grace, so outstanding ops end within seconds of the end of a run;
* :func:`call_bounded` runs a call that may ignore its own timeout in a daemon
  thread and gives up on it at the deadline (the call is then *abandoned*: its
  thread keeps the client alive until the call returns, if ever);
* :func:`in_background` runs a release/close step off-thread, waiting at most a
  bounded time for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# How often bounded waits look at the clock and at `stop`.
SLICE_S = 0.5


class Deadline:
    """An op's time budget: `budget_s` from now, or `grace_s` after `stop` was seen set."""

    def __init__(
        self, budget_s: float, stop: threading.Event | None = None, grace_s: float = 2.0
    ) -> None:
        self.end = time.monotonic() + budget_s
        self.stop = stop
        self.grace_s = grace_s
        self._stop_end: float | None = None

    def left(self) -> float:
        """Seconds left (<= 0 once expired)."""
        now = time.monotonic()
        end = self.end
        if self.stop is not None and self.stop.is_set():
            if self._stop_end is None:
                self._stop_end = now + self.grace_s
            end = min(end, self._stop_end)
        return end - now

    def expired(self) -> bool:
        return self.left() <= 0

    def slice(self, cap: float = SLICE_S) -> float:
        """A wait of at most `cap` seconds that does not overrun the deadline (>= 0)."""
        return max(0.0, min(cap, self.left()))


class CallTimeout(Exception):
    """A bounded call did not return before its deadline; it was abandoned."""


class _Box(Generic[T]):
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None


def call_bounded(
    fn: Callable[[], T],
    deadline: Deadline,
    name: str,
    on_abandoned_return: Callable[[], None] | None = None,
) -> T:
    """Run `fn()` in a daemon thread; return its result, re-raise its exception.

    Raises :class:`CallTimeout` when the deadline passes first. The call keeps
    running; `on_abandoned_return`, if given, runs in that thread once it returns
    (e.g. to release the client it was blocking).
    """
    box: _Box[T] = _Box()
    lock = threading.Lock()
    abandoned = False

    def run() -> None:
        try:
            box.result = fn()
        except BaseException as e:  # handed to the caller
            box.error = e
        finally:
            with lock:
                box.done.set()
                release = abandoned and on_abandoned_return is not None
            if release:
                log.info("abandoned call %s returned; releasing its client", name)
                assert on_abandoned_return is not None
                on_abandoned_return()

    t = threading.Thread(target=run, name=f"bounded-{name}", daemon=True)
    t.start()
    while not box.done.wait(deadline.slice()):
        if deadline.expired():
            with lock:
                if not box.done.is_set():
                    abandoned = True
            if abandoned:
                raise CallTimeout(f"{name} did not return within its deadline (abandoned)")
    if box.error is not None:
        raise box.error
    return box.result  # type: ignore[return-value]


def in_background(fn: Callable[[], None], name: str, wait_s: float) -> bool:
    """Run `fn()` in a daemon thread, waiting at most `wait_s`; True if it finished."""

    def run() -> None:
        try:
            fn()
        except Exception as e:
            log.warning("%s failed: %r", name, e)

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    if wait_s > 0:
        t.join(wait_s)
    finished = not t.is_alive()
    if not finished and wait_s > 0:
        log.warning("%s still running after %.1fs; left to finish in the background", name, wait_s)
    return finished
