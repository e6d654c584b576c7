"""Periodic per-node memory samples, recorded in the history as ``node-stats`` ops.

Soaks fail slowly: a broker whose RSS creeps up for an hour is the slow follower of the
next hour. Every `interval_s` the sampler records one nemesis op (process "nemesis",
type info, f ``node-stats``) whose value maps each running node to its RSS and, when the
node has a memory cgroup, the cgroup's page cache. The checker's liveness metrics turn
the samples into growth per node; other tools ignore the unknown nemesis f.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..clusters.base import Node
from . import cgroups

log = logging.getLogger("ktrial.nemesis")

F_NODE_STATS = "node-stats"


class _Recorder(Protocol):
    def nemesis(self, f: str, value: Any, **extra: Any) -> Any: ...


def rss_bytes(pid: int, proc: Path = Path("/proc")) -> int | None:
    """VmRSS of a process in bytes, None when it is gone (or has no RSS line)."""
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def sample(nodes: Sequence[Node]) -> dict[str, dict[str, int | None]]:
    """One sample: node name -> {rss_bytes, cache_bytes, pid} for nodes with a live
    process (the pid tells the checker's memory-growth check one JVM from the next)."""
    out: dict[str, dict[str, int | None]] = {}
    for n in nodes:
        pid = n.pid
        if pid is None:
            continue
        rss = rss_bytes(pid)
        if rss is None:
            continue
        cache: int | None = None
        if n.cgroup:
            with contextlib.suppress(OSError, ValueError):
                cache = cgroups.MemoryCgroup(Path(n.cgroup)).anon_and_file()[1]
        out[n.name] = {"rss_bytes": rss, "cache_bytes": cache, "pid": pid}
    return out


class NodeStatsSampler:
    """A daemon thread recording a ``node-stats`` op every `interval_s` until closed."""

    def __init__(self, nodes: Sequence[Node], recorder: _Recorder, interval_s: float = 5.0):
        if interval_s <= 0:
            raise ValueError(f"node-stats interval must be > 0, got {interval_s}")
        self.nodes = list(nodes)
        self.recorder = recorder
        self.interval_s = interval_s
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ktrial-node-stats", daemon=True)

    def start(self) -> NodeStatsSampler:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                value = sample(self.nodes)
                if value:
                    self.recorder.nemesis(F_NODE_STATS, value)
                    self.samples += 1
            except Exception as e:  # a sampler must never take the run down
                log.warning("node-stats sample failed: %r", e)
            self._stop.wait(self.interval_s)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
