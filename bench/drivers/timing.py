"""Where a driver's time goes: the confluent driver's client calls, timed on the Python side.

The worker drivers time every call to their worker already (``ClientFacts.timed``, in
test.json's ``workload_results.clients``). This module gives the confluent driver the
same measurement under the same call names, for bench/bench_workload.py: ``open``
(the producer and consumer built, ``init_transactions`` when transactional),
``produce`` (enqueue), ``flush``, ``fetch`` (one poll), ``begin``, ``send_offsets``,
``commit``, ``abort``, ``assign``. A benchmark aid, not used by ``ktrial run``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ktrial.workloads.bounded import Deadline
from ktrial.workloads.confluent import ConfluentDriver, DriverConfig
from ktrial.workloads.driver import Completion, DriverFactory
from ktrial.workloads.ops import Fetched, Last
from ktrial.workloads.worker.driver import ClientFacts


class TimedConfluentDriver(ConfluentDriver):
    """A ConfluentDriver whose client calls are timed into `facts` (count, total, max)."""

    def __init__(
        self,
        cfg: DriverConfig,
        process: int,
        slot: int,
        facts: ClientFacts,
        stop: threading.Event | None = None,
    ) -> None:
        self.facts = facts
        t0 = time.monotonic()
        try:
            super().__init__(cfg, process, slot, stop=stop)
        finally:
            facts.timed("open", time.monotonic() - t0)

    def _timed(self, call: str, fn: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        try:
            return fn()
        finally:
            self.facts.timed(call, time.monotonic() - t0)

    def assign(self, keys: Sequence[int], from_beginning: bool = False) -> Completion:
        return self._timed(
            "assign", lambda: super(TimedConfluentDriver, self).assign(keys, from_beginning)
        )

    def _produce(self, mops: list[Any], idx: list[int], results: list[Any]) -> None:
        self._timed(
            "produce", lambda: super(TimedConfluentDriver, self)._produce(mops, idx, results)
        )

    def _flush(self, dl: Deadline) -> int:
        return int(self._timed("flush", lambda: super(TimedConfluentDriver, self)._flush(dl)))

    def _fetch(self) -> tuple[list[Fetched], list[Any]]:
        out: tuple[list[Fetched], list[Any]] = self._timed(
            "fetch", lambda: super(TimedConfluentDriver, self)._fetch()
        )
        return out

    def _begin(self) -> None:
        self._timed("begin", lambda: super(TimedConfluentDriver, self)._begin())

    def _send_offsets(self, last: Last, budget_s: float) -> None:
        self._timed(
            "send_offsets", lambda: super(TimedConfluentDriver, self)._send_offsets(last, budget_s)
        )

    def _commit(self, budget_s: float) -> None:
        self._timed("commit", lambda: super(TimedConfluentDriver, self)._commit(budget_s))

    def _abort(self, budget_s: float) -> None:
        self._timed("abort", lambda: super(TimedConfluentDriver, self)._abort(budget_s))


def timed_confluent_factory(
    facts: ClientFacts, stop: Callable[[], threading.Event | None]
) -> Callable[[DriverConfig], DriverFactory]:
    """A QueueWorkload ``driver_factory`` opening TimedConfluentDrivers; `stop()` gives the
    run's stop event once the run has one (the drivers' grace after stop)."""

    def make(cfg: DriverConfig) -> DriverFactory:
        def open_driver(process: int, slot: int) -> TimedConfluentDriver:
            return TimedConfluentDriver(cfg, process, slot, facts, stop=stop())

        return open_driver

    return make


def breakdown(call_ms: dict[str, dict[str, float]], txns: int) -> dict[str, dict[str, float]]:
    """Per call: calls per transaction, mean ms per call, ms per transaction (from a
    ClientFacts' ``call_ms``: {call: {n, mean, max}}); `txns` counts completed txn ops."""
    out: dict[str, dict[str, float]] = {}
    for call, c in sorted(call_ms.items()):
        n, mean = float(c["n"]), float(c["mean"])
        out[call] = {
            "n": n,
            "per_txn": round(n / txns, 2) if txns else 0.0,
            "mean_ms": round(mean, 1),
            "max_ms": float(c["max"]),
            "ms_per_txn": round(n * mean / txns, 1) if txns else 0.0,
        }
    return out
