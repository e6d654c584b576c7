"""Live bookkeeping shared by a run's workers: offsets seen per key, and a rate limiter.

The tracker is what lets re-assignments chase keys with unread data and tells the
drain which offset each key must be read up to. It only ever looks at
completions, never at the cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any


class OffsetTracker:
    """Highest offsets per key: acknowledged by sends, read by polls, and seen at all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: dict[int, int] = {}
        self.read: dict[int, int] = {}
        self.seen: dict[int, int] = {}

    def observe(self, value: Any) -> None:
        """Fold a completion value (list of micro-ops in JSON shape) into the maxima."""
        if not isinstance(value, list):
            return
        with self._lock:
            for m in value:
                if not isinstance(m, list) or not m:
                    continue
                if m[0] == "send" and len(m) == 3 and isinstance(m[2], list):
                    off = m[2][0]
                    if isinstance(off, int):
                        k = int(m[1])
                        _bump(self.acked, k, off)
                        _bump(self.seen, k, off)
                elif m[0] == "poll" and len(m) == 2 and isinstance(m[1], dict):
                    for k, recs in m[1].items():
                        for off, _v in recs:
                            if isinstance(off, int):
                                _bump(self.read, int(k), off)
                                _bump(self.seen, int(k), off)

    def unread(self, limit: int) -> list[int]:
        """Up to `limit` keys whose acknowledged sends run furthest ahead of any read."""
        with self._lock:
            lag = [(off - self.read.get(k, -1), k) for k, off in self.acked.items()]
        lag = [x for x in lag if x[0] > 0]
        lag.sort(reverse=True)
        return [k for _, k in lag[:limit]]

    def targets(self, keys: Iterable[int]) -> dict[int, int]:
        """For each key: the offset the drain must reach (highest seen offset + 1)."""
        with self._lock:
            return {k: self.seen.get(k, -1) + 1 for k in keys}


def _bump(d: dict[int, int], k: int, off: int) -> None:
    if off > d.get(k, -1):
        d[k] = off


class RateLimiter:
    """Spaces op starts across all workers to at most `rate` per second (0: unlimited)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate and rate > 0 else 0.0
        self._lock = threading.Lock()
        self._next = time.monotonic()

    def wait(self, stop: threading.Event) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            t = max(now, self._next)
            self._next = t + self.interval
        if t > now:
            stop.wait(t - now)
