"""A worker slot: one thread's succession of logical processes and their drivers.

The slot is where the recording rules live, so every workload obeys them the same
way: each op is an invoke recorded *before* the client call and a completion
recorded right after it (times stamped by the Recorder as they happen); one
outstanding op per process; an op that raised something unexpected is recorded
as ``info`` (never left dangling); and a retired or crashed process is replaced by
a new process number with fresh clients, retrying (with backoff) for as long as the
run goes on. Drivers bound every client call (:mod:`.bounded`), so an op completes
within its time budget and a worker notices `stop` within seconds.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

from ..histories.recorder import Recorder
from .driver import Completion, Driver, DriverFactory

log = logging.getLogger(__name__)


def transactional_id(prefix: str, slot: int) -> str:
    """The ``transactional.id`` of every process of worker `slot`: one per slot, so a
    successor process fences its predecessor (and settles a transaction it left open)."""
    return f"{prefix}-w{slot}"


class Slot:
    def __init__(
        self,
        recorder: Recorder,
        factory: DriverFactory,
        slot: int,
        stop: threading.Event,
        reopen_backoff_s: float = 0.1,
        max_backoff_s: float = 2.0,
        txn_id: str | None = None,
    ) -> None:
        self.recorder = recorder
        # written on each txn op's invoke (`txn_id`), so a reader of the history can find
        # the transaction in the coordinator's log (`ktrial trace`)
        self.txn_id = txn_id
        self.factory = factory
        self.slot = slot
        self.stop = stop
        self.backoff = reopen_backoff_s
        self.max_backoff = max_backoff_s
        self.process: int = -1
        self.driver: Driver | None = None
        self.processes: list[int] = []
        self.open_errors: list[str] = []

    def open(self) -> bool:
        """Start a new process: new number, fresh clients. False if stopped meanwhile.

        Opening (init_transactions above all) fails while the cluster is faulted;
        retry with exponential backoff for as long as the run goes on, so that the
        slot resumes work as soon as the cluster heals.
        """
        self.process = self.recorder.new_process()
        self.processes.append(self.process)
        backoff = self.backoff
        while not self.stop.is_set():
            try:
                self.driver = self.factory(self.process, self.slot)
                return True
            except Exception as e:
                msg = f"slot {self.slot} process {self.process}: opening clients failed: {e!r}"
                log.warning(msg)
                self.open_errors.append(msg)
                self.stop.wait(backoff)
                backoff = min(self.max_backoff, backoff * 2)
        return False

    def record(
        self, f: str, value: Any, call: Callable[[Driver], Completion], **invoke_extra: Any
    ) -> Completion:
        """Record invoke, run `call` on the driver, record its completion; replace if retired."""
        assert self.driver is not None, "Slot.open() first"
        if f == "txn" and self.txn_id:
            invoke_extra.setdefault("txn_id", self.txn_id)
        inv = self.recorder.invoke(self.process, f, value, **invoke_extra)
        try:
            c = call(self.driver)
        except Exception as e:
            log.warning(
                "slot %d process %d: %s op raised %r\n%s",
                self.slot,
                self.process,
                f,
                e,
                traceback.format_exc(),
            )
            c = Completion(
                "info", value, {"name": type(e).__name__, "message": str(e)}, retire=True
            )
        self.recorder.complete(inv, c.type, c.value, c.error, **c.extra)
        # As in Jepsen, an indeterminate op crashes its process: the successor gets fresh
        # clients. Keeping a producer whose send timed out is not safe: librdkafka's
        # idempotent producer then bumps its epoch and may re-append records still in
        # flight, a duplicate the safe profile must not show (seen: bench/RESULTS.md).
        if c.retire or c.type == "info":
            self.replace(abrupt=True)
        return c

    def crash(self) -> None:
        """A deliberate client crash: close the clients abruptly, continue as a new process."""
        inv = self.recorder.invoke(self.process, "crash", None)
        if self.driver is not None:
            self.driver.close(abrupt=True)
            self.driver = None
        self.recorder.complete(inv, "info", None)
        self.open()

    def replace(self, abrupt: bool = True) -> None:
        if self.driver is not None:
            try:
                self.driver.close(abrupt=abrupt)
            except Exception as e:
                log.warning("slot %d process %d: close failed: %r", self.slot, self.process, e)
            self.driver = None
        if not self.stop.is_set():
            self.open()

    def close(self) -> None:
        if self.driver is not None:
            try:
                self.driver.close(abrupt=False)
            except Exception as e:
                log.warning("slot %d process %d: close failed: %r", self.slot, self.process, e)
            self.driver = None
