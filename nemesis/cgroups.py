"""Memory cgroup helpers for cgroup v1 (this machine) and v2 (other hosts).

v1: ``memory.limit_in_bytes``, ``memory.usage_in_bytes``, ``memory.failcnt``,
``memory.oom_control`` (``oom_kill N`` since Linux 4.13), ``memory.stat`` with
``rss``/``cache`` (and ``total_*``), ``cgroup.procs``; no per-cgroup PSI.
v2: ``memory.max``, ``memory.high``, ``memory.current``, ``memory.events``
(``max``, ``oom_kill``), ``memory.stat`` with ``anon``/``file``, ``memory.pressure``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

# v1 reports "no limit" as a huge page-aligned number
V1_UNLIMITED = 1 << 62


def parse_kv(text: str) -> dict[str, int]:
    """Lines of ``key value`` (memory.stat, memory.events, /proc/vmstat) -> dict (pure)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def parse_psi(text: str) -> dict[str, dict[str, float]]:
    """/proc/pressure/memory or memory.pressure -> {"some": {"avg10":..,"total":..}, ...}."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        out[parts[0]] = {k: float(v) for k, v in (p.split("=", 1) for p in parts[1:] if "=" in p)}
    return out


@dataclass(frozen=True, slots=True)
class MemoryCgroup:
    """One memory cgroup directory (v1 or v2, detected from the files it has)."""

    path: Path

    @property
    def version(self) -> int:
        return 1 if (self.path / "memory.limit_in_bytes").exists() else 2

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def _write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)

    def exists(self) -> bool:
        return self.path.is_dir()

    # ---- limits
    def limit(self) -> int | None:
        """The hard limit in bytes, None when unlimited."""
        if self.version == 1:
            v = int(self._read("memory.limit_in_bytes"))
            return None if v >= V1_UNLIMITED else v
        raw = self._read("memory.max").strip()
        return None if raw == "max" else int(raw)

    def set_limit(self, limit: int | None) -> None:
        """Set (None: remove) the hard limit. v1 raises OSError(EBUSY) if it cannot
        reclaim down to the new limit — the caller decides whether to retry higher."""
        if self.version == 1:
            self._write("memory.limit_in_bytes", "-1" if limit is None else str(limit))
        else:
            self._write("memory.max", "max" if limit is None else str(limit))

    def high(self) -> int | None:
        """v2 memory.high (throttling threshold); None when unlimited or on v1."""
        if self.version == 1:
            return None
        raw = self._read("memory.high").strip()
        return None if raw == "max" else int(raw)

    def set_high(self, high: int | None) -> None:
        if self.version == 2:
            self._write("memory.high", "max" if high is None else str(high))

    # ---- observations
    def usage(self) -> int:
        return int(self._read("memory.usage_in_bytes" if self.version == 1 else "memory.current"))

    def stat(self) -> dict[str, int]:
        return parse_kv(self._read("memory.stat"))

    def anon_and_file(self) -> tuple[int, int]:
        """(anonymous memory ~ RSS, page cache) of the cgroup and its children."""
        s = self.stat()
        if self.version == 1:
            return s.get("total_rss", s.get("rss", 0)), s.get("total_cache", s.get("cache", 0))
        return s.get("anon", 0), s.get("file", 0)

    def inactive_file(self) -> int:
        s = self.stat()
        return s.get("total_inactive_file", s.get("inactive_file", 0))

    def failcnt(self) -> int:
        """How often the limit was hit (v1 memory.failcnt, v2 memory.events `max`)."""
        if self.version == 1:
            return int(self._read("memory.failcnt"))
        return parse_kv(self._read("memory.events")).get("max", 0)

    def oom_kills(self) -> int | None:
        """OOM kills inside the cgroup so far; None if the kernel does not count them."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        with contextlib.suppress(OSError):
            return parse_kv(self._read(name)).get("oom_kill")
        return None

    def pressure(self) -> dict[str, dict[str, float]] | None:
        """Per-cgroup memory PSI (v2 only; cgroup v1 has none)."""
        p = self.path / "memory.pressure"
        if self.version == 2 and p.exists():
            with contextlib.suppress(OSError):
                return parse_psi(p.read_text())
        return None

    # ---- membership
    def add_pid(self, pid: int) -> None:
        self._write("cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        return [int(p) for p in self._read("cgroup.procs").split()]


def vmstat(path: Path = Path("/proc/vmstat")) -> dict[str, int]:
    return parse_kv(path.read_text())


RECLAIM_COUNTERS = ("allocstall", "pgscan_direct", "pgsteal_direct")


def reclaim_counters(vm: dict[str, int]) -> dict[str, int]:
    """Global direct-reclaim counters; allocstall is summed over zones.

    Note: the kernel counts only *global* reclaim here; reclaim forced by a cgroup
    limit shows in the cgroup (v1: failcnt, pgmajfault; v2: memory.stat pgscan_direct).
    """
    return {
        "allocstall": sum(v for k, v in vm.items() if k.startswith("allocstall")),
        "pgscan_direct": vm.get("pgscan_direct", 0),
        "pgsteal_direct": vm.get("pgsteal_direct", 0),
    }


def system_pressure(
    path: Path = Path("/proc/pressure/memory"),
) -> dict[str, dict[str, float]] | None:
    """System-wide memory PSI, None when the kernel lacks PSI."""
    try:
        return parse_psi(path.read_text())
    except OSError:
        return None
