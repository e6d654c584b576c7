"""Periodic per-node memory samples, recorded in the history as ``node-stats`` ops.

Soaks fail slowly: a broker whose RSS creeps up for an hour is the slow follower of the
next hour. Every `interval_s` the sampler records one nemesis op (process "nemesis",
type info, f ``node-stats``) whose value maps each running node to:

- ``pid``, ``rss_bytes`` (VmRSS) and ``rss_anon_bytes`` (RssAnon) of the broker process;
- ``cgroup_anon_bytes`` and ``cache_bytes``: the anonymous memory and the page cache of
  the node's memory cgroup (every process of the node), when it has one;
- ``heap_max_bytes`` (-Xmx), ``heap_committed_bytes`` and ``heap_resident_bytes`` (the
  heap's resident anonymous pages) when the broker is a JVM (nemesis/jvmheap.py).

and, to explain a latency spike (docs/load.md: direct reclaim, faults, CPU):

- ``cpu_ms`` and ``majflt``: the broker process's CPU milliseconds (user + system) and major
  page faults so far (/proc/<pid>/stat; counters: a plot takes their rate);
- ``cgroup_pgmajfault``, ``cgroup_failcnt`` (how often the node's charges hit its memory
  limit: each hit is a direct reclaim of the cgroup; v1 ``memory.failcnt``, v2
  ``memory.events`` ``max``), ``cgroup_refault`` (workingset refaults, file + anon: evicted
  pages read back, what reclaim cost), ``cgroup_usage_bytes`` and ``cgroup_limit_bytes``
  (null when unlimited: a squeeze shows as the limit appearing), and on cgroup v2
  ``cgroup_pgscan_direct``, ``cgroup_pgsteal_direct`` and ``cgroup_psi_some_us`` (the
  cgroup's memory PSI, "some" total, microseconds);
- the host's (the same for every node of a local cluster): ``host_allocstall``,
  ``host_pgscan_direct``, ``host_pgsteal_direct`` (/proc/vmstat: direct reclaim, which
  cgroup v1 does not count per cgroup), ``host_pgmajfault``, ``host_psi_some_us`` and
  ``host_psi_full_us`` (/proc/pressure/memory totals) and ``host_mem_available_bytes``.

The heap is read every `heap_every`-th sample (it walks the broker's page tables:
bench/nodestats.py) and carried forward in between.

A figure that cannot be read is null. The checker (checker/memory.py) judges the
anonymous memory outside the heap, so a JVM touching its heap is not a leak; other
tools ignore the unknown nemesis f.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..clusters.base import Node
from . import cgroups
from .jvmheap import jvm_heap

log = logging.getLogger("ktrial.nemesis")
_CLK_TCK = os.sysconf("SC_CLK_TCK")

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


def parse_proc_stat(text: str, clk_tck: int) -> tuple[float, int] | None:
    """(CPU seconds, major faults) of a /proc/<pid>/stat line (pure); None if malformed.
    The command name may hold spaces and parentheses: fields count from the last ')'."""
    try:
        f = text.rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / clk_tck, int(f[9])
    except (IndexError, ValueError):
        return None


def proc_cpu(pid: int, proc: Path = Path("/proc")) -> tuple[float, int] | None:
    """(CPU seconds, major faults) of a process so far; None when it is gone."""
    try:
        return parse_proc_stat((proc / str(pid) / "stat").read_text(), _CLK_TCK)
    except OSError:
        return None


def parse_meminfo_available(text: str) -> int | None:
    """MemAvailable of /proc/meminfo in bytes (pure); None when absent."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def host_figures(
    vmstat_text: str | None, psi_text: str | None, meminfo_text: str | None
) -> dict[str, int | None]:
    """The host's reclaim, fault and pressure counters (pure; None when unknown)."""
    vm = cgroups.parse_kv(vmstat_text) if vmstat_text else {}
    rc = cgroups.reclaim_counters(vm) if vm else {}
    psi = cgroups.parse_psi(psi_text) if psi_text else {}

    def total(kind: str) -> int | None:
        v = psi.get(kind, {}).get("total")
        return int(v) if v is not None else None

    return {
        "host_allocstall": rc.get("allocstall"),
        "host_pgscan_direct": rc.get("pgscan_direct"),
        "host_pgsteal_direct": rc.get("pgsteal_direct"),
        "host_pgmajfault": vm.get("pgmajfault"),
        "host_psi_some_us": total("some"),
        "host_psi_full_us": total("full"),
        "host_mem_available_bytes": parse_meminfo_available(meminfo_text) if meminfo_text else None,
    }


def cgroup_figures(stat: dict[str, int], version: int) -> dict[str, int | None]:
    """A memory cgroup's fault and reclaim counters from its memory.stat (pure): v1 has
    major faults and refaults (hierarchical ``total_*``) but no reclaim scan counts; v2
    counts direct reclaim."""
    if version == 1:  # hierarchical total_* (the node's processes may sit in children)
        return {
            "cgroup_pgmajfault": stat.get("total_pgmajfault", stat.get("pgmajfault")),
            "cgroup_pgscan_direct": None,
            "cgroup_pgsteal_direct": None,
            "cgroup_refault": _refaults(stat, "total_") or _refaults(stat, ""),
        }
    return {
        "cgroup_pgmajfault": stat.get("pgmajfault"),
        "cgroup_pgscan_direct": stat.get("pgscan_direct"),
        "cgroup_pgsteal_direct": stat.get("pgsteal_direct"),
        "cgroup_refault": _refaults(stat, ""),
    }


def _refaults(stat: dict[str, int], prefix: str) -> int | None:
    """workingset_refault_file + _anon (older kernels: one workingset_refault)."""
    parts = [stat.get(f"{prefix}workingset_refault_{k}") for k in ("file", "anon")]
    known = [x for x in parts if x is not None]
    if known:
        return sum(known)
    return stat.get(f"{prefix}workingset_refault")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def read_host(proc: Path = Path("/proc")) -> dict[str, int | None]:
    return host_figures(
        _read(proc / "vmstat"), _read(proc / "pressure" / "memory"), _read(proc / "meminfo")
    )


def _cgroup(path: str) -> dict[str, int | None]:
    """The node's cgroup counters; a figure that cannot be read is left out."""
    cg = cgroups.MemoryCgroup(Path(path))
    out: dict[str, int | None] = {}
    with contextlib.suppress(OSError, ValueError):
        out.update(cgroup_figures(cg.stat(), cg.version))
    for key, read in (
        ("cgroup_failcnt", cg.failcnt),
        ("cgroup_usage_bytes", cg.usage),
        ("cgroup_limit_bytes", cg.limit),
    ):
        with contextlib.suppress(OSError, ValueError):
            out[key] = read()
    with contextlib.suppress(OSError, ValueError):
        some = (cg.pressure() or {}).get("some", {}).get("total")
        out["cgroup_psi_some_us"] = int(some) if some is not None else None
    return out


def sample(
    nodes: Sequence[Node], heap: bool = True, last_heap: dict[int, Any] | None = None
) -> dict[str, dict[str, int | None]]:
    """One sample: node name -> its figures (module docstring) for nodes with a live
    process (the pid tells the checker's memory-growth check one JVM from the next)."""
    out: dict[str, dict[str, int | None]] = {}
    local: list[str] = []
    for n in nodes:
        remote = getattr(n, "memory_sample", None)
        if callable(remote):  # a node on another host (ssh) reads its own /proc
            figures = remote()
            if figures:
                out[n.name] = figures
            continue
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
        if heap or last_heap is None or pid not in last_heap:
            jh = jvm_heap(pid)
            if last_heap is not None:
                last_heap[pid] = jh
        else:
            jh = last_heap[pid]  # carried forward between heap readings
        cpu = proc_cpu(pid)
        out[n.name] = {
            "rss_bytes": mem[0],
            "rss_anon_bytes": mem[1],
            "cgroup_anon_bytes": anon,
            "cache_bytes": cache,
            "heap_max_bytes": jh.max_bytes if jh else None,
            "heap_committed_bytes": jh.committed_bytes if jh else None,
            "heap_resident_bytes": jh.resident_bytes if jh else None,
            "pid": pid,
            "cpu_ms": round(cpu[0] * 1000) if cpu else None,
            "majflt": cpu[1] if cpu else None,
            **(_cgroup(n.cgroup) if n.cgroup else {}),
        }
        local.append(n.name)
    if local:  # the host's counters, for the nodes on this host
        host = read_host()
        for name in local:
            out[name].update(host)
    return out


class NodeStatsSampler:
    """A daemon thread recording a ``node-stats`` op every `interval_s` until closed."""

    def __init__(
        self,
        nodes: Sequence[Node],
        recorder: _Recorder,
        interval_s: float = 5.0,
        heap_interval_s: float = 5.0,
    ):
        if interval_s <= 0:
            raise ValueError(f"node-stats interval must be > 0, got {interval_s}")
        self.nodes = list(nodes)
        # the heap (the dear part) at most every heap_interval_s
        self.heap_every = max(1, round(heap_interval_s / interval_s))
        self._last_heap: dict[int, Any] = {}
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
                value = sample(self.nodes, self.samples % self.heap_every == 0, self._last_heap)
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
