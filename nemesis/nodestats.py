"""Periodic per-node memory samples, recorded in the history as ``node-stats`` ops.

Soaks fail slowly: a broker whose RSS creeps up for an hour is the slow follower of the
next hour. Every `interval_s` the sampler records one nemesis op (process "nemesis",
type info, f ``node-stats``) whose value maps each running node to:

- ``pid``, ``rss_bytes`` (VmRSS) and ``rss_anon_bytes`` (RssAnon) of the broker process;
- ``cgroup_anon_bytes`` and ``cache_bytes``: the anonymous memory and the page cache of
  the node's memory cgroup (every process of the node), when it has one;
- ``heap_max_bytes`` (-Xmx), ``heap_committed_bytes`` and ``heap_resident_bytes`` (the
  heap's resident anonymous pages) when the broker is a JVM (nemesis/jvmheap.py).

A figure that cannot be read is null. The checker (checker/memory.py) judges the
anonymous memory outside the heap, so a JVM touching its heap is not a leak; other
tools ignore the unknown nemesis f.
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
from .jvmheap import jvm_heap

log = logging.getLogger("ktrial.nemesis")

F_NODE_STATS = "node-stats"


class _Recorder(Protocol):
    def nemesis(self, f: str, value: Any, **extra: Any) -> Any: ...


def proc_memory(pid: int, proc: Path = Path("/proc")) -> tuple[int, int | None] | None:
    """(VmRSS, RssAnon) of a process in bytes; None when it is gone (or has no RSS line).
    RssAnon is None on kernels older than 4.5."""
    rss: int | None = None
    anon: int | None = None
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("RssAnon:"):
                anon = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None if rss is None else (rss, anon)


def sample(nodes: Sequence[Node]) -> dict[str, dict[str, int | None]]:
    """One sample: node name -> its figures (module docstring) for nodes with a live
    process (the pid tells the checker's memory-growth check one JVM from the next)."""
    out: dict[str, dict[str, int | None]] = {}
    for n in nodes:
        pid = n.pid
        if pid is None:
            continue
        mem = proc_memory(pid)
        if mem is None:
            continue
        anon: int | None = None
        cache: int | None = None
        if n.cgroup:
            with contextlib.suppress(OSError, ValueError):
                anon, cache = cgroups.MemoryCgroup(Path(n.cgroup)).anon_and_file()
        heap = jvm_heap(pid)
        out[n.name] = {
            "rss_bytes": mem[0],
            "rss_anon_bytes": mem[1],
            "cgroup_anon_bytes": anon,
            "cache_bytes": cache,
            "heap_max_bytes": heap.max_bytes if heap else None,
            "heap_committed_bytes": heap.committed_bytes if heap else None,
            "heap_resident_bytes": heap.resident_bytes if heap else None,
            "pid": pid,
        }
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
