"""Recorder: the one place that stamps ops with time and appends them to a history.

Workers and the nemesis share one Recorder per run. Times are nanoseconds since
the run started, from the monotonic clock. The recorder also keeps live counters
(ops by f and type, active faults) that the progress view reads.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from .jsonl import HistoryWriter
from .model import NEMESIS, Op


class Recorder:
    def __init__(self, writer: HistoryWriter, start_ns: int | None = None) -> None:
        self.writer = writer
        self.start_ns = time.monotonic_ns() if start_ns is None else start_ns
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.counts: Counter[tuple[str, str]] = Counter()  # (f, type) -> n
        self.active_faults: dict[str, Any] = {}  # fault name -> value
        self._next_process = 0

    def now(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def new_process(self) -> int:
        """A fresh logical process number (a crashed client's successor gets a new one)."""
        with self._lock:
            p = self._next_process
            self._next_process += 1
            return p

    def invoke(self, process: int, f: str, value: Any, **extra: Any) -> Op:
        op = Op(0, 0, process, "invoke", f, value, None, dict(extra))
        return self._append(op)

    def complete(self, invoke: Op, type_: str, value: Any, error: Any = None, **extra: Any) -> Op:
        """Record the completion (ok/fail/info) of `invoke`."""
        if type_ not in ("ok", "fail", "info"):
            raise ValueError(f"completion type must be ok, fail or info, not {type_!r}")
        op = Op(0, 0, invoke.process, type_, invoke.f, value, error, dict(extra))
        return self._append(op)

    def nemesis(self, f: str, value: Any, **extra: Any) -> Op:
        """Record a nemesis op (process "nemesis", type info)."""
        op = Op(0, 0, NEMESIS, "info", f, value, None, dict(extra))
        return self._append(op)

    def fault_started(self, name: str, value: Any) -> None:
        with self._lock:
            self.active_faults[name] = value

    def fault_ended(self, name: str) -> None:
        with self._lock:
            self.active_faults.pop(name, None)

    def snapshot(self) -> tuple[int, Counter[tuple[str, str]], dict[str, Any]]:
        """(elapsed ns, counts, active faults) — copies, for the live view."""
        with self._lock:
            return self.now(), Counter(self.counts), dict(self.active_faults)

    def _append(self, op: Op) -> Op:
        # Stamp the time under the write lock so file order is time order.
        with self._write_lock:
            op.time = self.now()
            self.writer.append(op)
        with self._lock:
            self.counts[(op.f, op.type)] += 1
        return op
