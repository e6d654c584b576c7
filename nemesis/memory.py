"""Memory pressure: squeeze a node's cgroup limit towards its working set and/or run a
``stress-ng --vm`` balloon inside the node's cgroup, so the broker competes for memory.

For the fault window the release op records, per node: anonymous memory (~RSS) and
page cache at the start, their extremes during the window, the cgroup's failcnt and
OOM-kill deltas, and the machine's direct-reclaim counter deltas (/proc/vmstat
allocstall*, pgscan_direct, pgsteal_direct) and memory PSI. With cgroup v1 PSI exists
only system-wide (/proc/pressure/memory); v2 adds the cgroup's own memory.pressure.
Note that the kernel counts only *global* reclaim in /proc/vmstat: reclaim forced by
the cgroup limit shows as failcnt and as the cgroup's own counters.

A broker OOM-killed during the window is recorded at once as an ``oom-kill`` nemesis op
and restarted by the release (a ``start`` op with ``reason: oom-killed``, tagged, like
every op of this fault, with ``fault: memory`` and the fault's id).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clusters.base import Node, Unsupported
from . import cgroups, params
from .base import Context, FaultBase, TargetSpec
from .process import ensure_running

log = logging.getLogger("ktrial.nemesis")

MiB = 1 << 20
ENV_MARK = "KTRIAL_BALLOON"


def squeeze_target(
    anon: int,
    file: int,
    headroom: float = 0.25,
    min_headroom: int = 32 * MiB,
    limit_bytes: int | None = None,
    allow_oom: bool = False,
) -> int:
    """The limit to set (pure): anon + a share of the page cache, never below what would
    OOM the node at once (anon + 5% + 16 MiB) unless `allow_oom`."""
    target = (
        limit_bytes if limit_bytes is not None else anon + max(min_headroom, int(headroom * file))
    )
    floor = int(anon * 1.05) + 16 * MiB
    if not allow_oom:
        target = max(target, floor)
    return (target + 4095) // 4096 * 4096


def start_balloon(
    cg: cgroups.MemoryCgroup,
    nbytes: int,
    hang: bool = True,
    extra_env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``stress-ng --vm 1`` that joins `cg` before it allocates (the shell writes its own pid
    to cgroup.procs, then execs stress-ng). With `hang` the worker touches its memory once
    and then sleeps holding it (no CPU burn on a small machine)."""
    cmd = [
        "stress-ng",
        "--vm",
        "1",
        "--vm-bytes",
        str(nbytes),
        "--vm-keep",
        "--timeout",
        "0",
        "--quiet",
    ]
    if hang:
        cmd += ["--vm-hang", "0"]
    script = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'
    # our mark (nemesis clean) plus the cluster's (its teardown/clean kill its processes)
    env = {**os.environ, **(extra_env or {}), ENV_MARK: str(os.getpid())}
    try:
        return subprocess.Popen(
            ["sh", "-c", script, "ktrial-balloon", str(cg.path), *cmd],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError as e:
        raise Unsupported("the memory balloon needs stress-ng (apt-get install stress-ng)") from e


def balloon_pids(cg: cgroups.MemoryCgroup) -> list[int]:
    """Processes in `cg` that carry the balloon mark (ours or a dead run's)."""
    found = []
    with contextlib.suppress(OSError):
        for pid in cg.pids():
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:  # exited meanwhile
                continue
            if ENV_MARK.encode() + b"=" in env:
                found.append(pid)
    return found


def stop_balloon(proc: subprocess.Popen[bytes], cg: cgroups.MemoryCgroup | None = None) -> None:
    """Kill the balloon's whole process group (stress-ng forks its workers) and wait
    until none of its processes is left in the cgroup."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)
    if cg is None:
        return
    deadline = time.monotonic() + 10
    while (left := balloon_pids(cg)) and time.monotonic() < deadline:
        for pid in left:  # a worker that left the process group
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _psi_totals(psi: dict[str, dict[str, float]] | None) -> dict[str, float]:
    if not psi:
        return {}
    return {f"{k}_total_us": v.get("total", 0.0) for k, v in psi.items()}


@dataclass
class Window:
    """Observations of one node's cgroup over the fault window."""

    node: str
    cg: cgroups.MemoryCgroup
    anon0: int = 0
    file0: int = 0
    failcnt0: int = 0
    oom0: int | None = None
    majfault0: int = 0
    anon_max: int = 0
    file_min: int = 0
    usage_max: int = 0
    oom_seen: int = 0
    pid0: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def begin(self, pid: int | None) -> None:
        self.anon0, self.file0 = self.cg.anon_and_file()
        self.anon_max, self.file_min = self.anon0, self.file0
        self.failcnt0 = self.cg.failcnt()
        self.oom0 = self.cg.oom_kills()
        self.majfault0 = self._majfault()
        self.usage_max = self.cg.usage()
        self.pid0 = pid

    def _majfault(self) -> int:
        s = self.cg.stat()
        return s.get("total_pgmajfault", s.get("pgmajfault", 0))

    def sample(self) -> int:
        """Update extremes; return how many new OOM kills happened since the last sample."""
        if not self.cg.exists():
            return 0
        anon, file = self.cg.anon_and_file()
        self.anon_max = max(self.anon_max, anon)
        self.file_min = min(self.file_min, file)
        self.usage_max = max(self.usage_max, self.cg.usage())
        ooms = self.cg.oom_kills()
        if ooms is None or self.oom0 is None:
            return 0
        new = ooms - self.oom0 - self.oom_seen
        self.oom_seen += max(0, new)
        return max(0, new)

    def summary(self) -> dict[str, Any]:
        if not self.cg.exists():
            return {"cgroup": "gone"}
        anon, file = self.cg.anon_and_file()
        return {
            "anon_start": self.anon0,
            "file_start": self.file0,
            "anon_max": self.anon_max,
            "file_min": self.file_min,
            "usage_max": self.usage_max,
            "anon_end": anon,
            "file_end": file,
            "failcnt_delta": self.cg.failcnt() - self.failcnt0,
            "oom_kills": self.oom_seen,
            "pgmajfault_delta": self._majfault() - self.majfault0,
            "cgroup_psi": self.cg.pressure(),
            **self.extra,
        }


class MemoryFault(FaultBase):
    """Squeeze the targets' memory cgroup limits and/or run a balloon in their cgroups."""

    name = "memory"

    def __init__(
        self,
        ctx: Context,
        squeeze: bool = True,
        headroom: float = 0.25,
        min_headroom: int = 32 * MiB,
        limit_bytes: int | None = None,
        balloon_bytes: int | None = None,
        allow_oom: bool = False,
        sample_interval: float = 1.0,
    ) -> None:
        super().__init__(ctx)
        self.validate(
            {
                "squeeze": squeeze,
                "headroom": headroom,
                "min_headroom": min_headroom,
                "limit_bytes": limit_bytes,
                "balloon_bytes": balloon_bytes,
                "allow_oom": allow_oom,
                "sample_interval": sample_interval,
            }
        )
        self.squeeze, self.headroom, self.min_headroom = squeeze, headroom, min_headroom
        self.limit_bytes, self.balloon_bytes, self.allow_oom = limit_bytes, balloon_bytes, allow_oom
        self.sample_interval = sample_interval
        self.windows: dict[str, Window] = {}
        self.original: dict[str, tuple[int | None, int | None]] = {}  # node -> (max, high)
        # a local stress-ng, or a node's own balloon (one with ``stop()``, e.g. on an ssh host)
        self.balloons: dict[str, Any] = {}
        self._host_counters: Any = None  # the cgroup whose host's vmstat/PSI are recorded
        self._halt = threading.Event()
        self._sampler: threading.Thread | None = None
        self._vm0: dict[str, int] = {}
        self._psi0: dict[str, float] = {}

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        for flag in ("squeeze", "allow_oom"):
            if flag in p:
                params.boolean("memory", flag, p[flag])
        if "headroom" in p:
            params.number("memory", "headroom", p["headroom"], low=0)
        if "min_headroom" in p:
            params.number("memory", "min_headroom", p["min_headroom"], low=0, integer=True)
        for size in ("limit_bytes", "balloon_bytes"):
            if size in p:
                params.number("memory", size, p[size], low=0, integer=True, optional=True)
        if "sample_interval" in p:
            params.number("memory", "sample_interval", p["sample_interval"], low=0, low_open=True)
        if p.get("squeeze") is False and not p.get("balloon_bytes"):
            raise params.ParamError(
                "memory.squeeze=false without memory.balloon_bytes puts no pressure on the "
                "node: keep the squeeze or give the balloon a size in bytes"
            )

    @staticmethod
    def cgroup_of(node: Node) -> cgroups.MemoryCgroup:
        remote = getattr(node, "memory_cgroup", None)  # a node on another host (ssh)
        if callable(remote) and node.cgroup:
            cg: cgroups.MemoryCgroup | None = remote()
            if cg is not None:
                return cg
        if not node.cgroup:
            raise Unsupported(
                f"node {node.name} has no memory cgroup: memory pressure needs the local or "
                "docker backend running as root with a memory cgroup hierarchy"
            )
        return cgroups.MemoryCgroup(Path(node.cgroup))

    def _set_limit(self, cg: cgroups.MemoryCgroup, target: int) -> int:
        """Set the hard limit; v1 refuses (EBUSY) a limit it cannot reclaim down to at once,
        so step up 10% at a time. Returns the limit in force."""
        for _ in range(8):
            try:
                if cg.version == 2:
                    cg.set_high(target)
                    cg.set_limit(target + max(self.min_headroom, target // 10))
                else:
                    cg.set_limit(target)
                return target
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                target = target * 11 // 10
        raise OSError(errno.EBUSY, f"could not lower the limit of {cg.path} (busy)")

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        chosen = self.resolve(targets)
        nodes = self.ctx.nodes()
        cgs = {n: self.cgroup_of(nodes[n]) for n in chosen}
        self.ctx.touched.update(chosen)
        # the machine the nodes run on: this one, or (ssh) the first target's host
        self._host_counters = next((c for c in cgs.values() if hasattr(c, "vmstat")), None)
        self._vm0 = cgroups.reclaim_counters(self._vmstat())
        self._psi0 = _psi_totals(self._system_pressure())
        value: dict[str, Any] = {"nodes": chosen, "limits": {}, "balloon_bytes": self.balloon_bytes}
        self.info = value
        for name, cg in cgs.items():
            w = Window(name, cg)
            w.begin(nodes[name].pid)
            self.windows[name] = w
            if self.squeeze:
                self.original[name] = (cg.limit(), cg.high())
                target = squeeze_target(
                    w.anon0,
                    w.file0,
                    self.headroom,
                    self.min_headroom,
                    self.limit_bytes,
                    self.allow_oom,
                )
                value["limits"][name] = {
                    "from": self.original[name][0],
                    "to": self._set_limit(cg, target),
                    "anon": w.anon0,
                    "file": w.file0,
                }
            if self.balloon_bytes:
                marker = getattr(self.ctx.cluster, "marker_env", None) or {}
                own = getattr(nodes[name], "start_balloon", None)
                if callable(own):
                    self.balloons[name] = own(self.balloon_bytes)
                else:
                    self.balloons[name] = start_balloon(cg, self.balloon_bytes, extra_env=marker)
        self._sampler = threading.Thread(
            target=self._sample_loop, name="ktrial-memory-sampler", daemon=True
        )
        self._sampler.start()
        self.record("memory-squeeze", value)
        return value

    def _vmstat(self) -> dict[str, int]:
        host = self._host_counters
        return host.vmstat() if host is not None else cgroups.vmstat()  # type: ignore[no-any-return]

    def _system_pressure(self) -> dict[str, dict[str, float]] | None:
        host = self._host_counters
        return host.system_pressure() if host is not None else cgroups.system_pressure()  # type: ignore[no-any-return]

    def _sample_loop(self) -> None:
        nodes = self.ctx.nodes()
        while not self._halt.wait(self.sample_interval):
            for name, w in self.windows.items():
                try:
                    new = w.sample()
                except OSError:
                    continue
                if new:
                    node = nodes[name]
                    broker = "broker" if not node.is_running() or node.pid != w.pid0 else "other"
                    self.record(
                        "oom-kill",
                        {
                            "node": name,
                            "count": new,
                            "victim": broker,
                            "running": node.is_running(),
                        },
                    )

    def _stop(self) -> None:
        self._halt.set()
        if self._sampler is not None:
            self._sampler.join(5)
        errors: list[str] = []
        for name, proc in self.balloons.items():
            try:
                if isinstance(proc, subprocess.Popen):
                    stop_balloon(proc, self.windows[name].cg)
                else:
                    proc.stop()
            except Exception as e:
                errors.append(f"{name}: stopping the balloon: {e}")
        restored: dict[str, Any] = {}
        for name, (limit, high) in self.original.items():
            cg = self.windows[name].cg
            if not cg.exists():
                continue
            try:
                cg.set_limit(limit)
                cg.set_high(high)
                restored[name] = limit
            except OSError as e:
                errors.append(f"{name}: restoring the limit of {cg.path}: {e}")
        observed = {}
        for name, w in self.windows.items():
            try:
                w.sample()
                observed[name] = w.summary()
            except OSError as e:
                observed[name] = {"error": str(e)}
        vm1 = cgroups.reclaim_counters(self._vmstat())
        psi1 = _psi_totals(self._system_pressure())
        restarted = []
        nodes = self.ctx.nodes()
        for name in self.windows:
            try:
                if ensure_running(nodes[name]) == "start":
                    restarted.append(name)
            except Exception as e:
                errors.append(f"{name}: restart after OOM failed: {e}")
        value: dict[str, Any] = {
            "nodes": list(self.windows),
            "limits_restored": restored,
            "observed": observed,
            "vmstat_delta": {k: vm1[k] - self._vm0.get(k, 0) for k in vm1},
            "psi_scope": "cgroup+system"
            if any(o.get("cgroup_psi") for o in observed.values())
            else "system",
            "system_psi_delta_us": {k: psi1[k] - self._psi0.get(k, 0.0) for k in psi1},
        }
        if restarted:
            value["restarted"] = restarted
        if errors:
            value["errors"] = errors
        self.record("memory-release", value)
        if restarted:
            # the memory fault's own op (tagged with its family and id): a reader must not
            # take it for the end of a kill of the same node
            self.record("start", {"nodes": restarted, "reason": "oom-killed"})
