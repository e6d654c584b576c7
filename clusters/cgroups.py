"""Per-node memory cgroups, created beneath the cgroup ktrial itself runs in.

Why beneath our own cgroup and never at a hierarchy's root: the brokers then stay
inside their parent's accounting and cleanup, which is what a delegated systemd scope
or a container expects. cgroup v1 (`memory` hierarchy, `memory.limit_in_bytes`) is
what this machine has; v2 (`memory.max`) is supported where the parent lets us
enable the memory controller for children. Directories are named
`ktrial-<runid>-<node>` so `cluster clean` can find them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PREFIX = "ktrial-"


class CgroupError(RuntimeError):
    """A cgroup could not be created or removed; the message names the directory."""


@dataclass(frozen=True)
class MemoryHierarchy:
    version: int  # 1 or 2
    mount: Path  # where the hierarchy is mounted
    own: Path  # directory of the cgroup this process runs in


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root, mountpoint, fstype, super options) of every mount, from mountinfo."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) >= 5 and len(rfields) >= 3:
            out.append((fields[3], fields[4], rfields[0], rfields[2]))
    return out


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """`/proc/self/cgroup` -> {controller or '' (v2): path} (pure)."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for c in controllers.split(",") if controllers else [""]:
            paths[c] = path
    return paths


def _join(mount: str, mount_root: str, path: str) -> Path:
    rel = os.path.relpath(path, mount_root) if path.startswith(mount_root) else path.lstrip("/")
    return Path(mount) / ("" if rel == "." else rel)


def memory_hierarchy() -> MemoryHierarchy | None:
    """The memory cgroup hierarchy and our place in it, or None if there is none."""
    own = parse_proc_cgroup(Path("/proc/self/cgroup").read_text())
    mounts = _mounts()
    for root, point, fstype, opts in mounts:
        if fstype == "cgroup" and "memory" in opts.split(",") and "memory" in own:
            d = _join(point, root, own["memory"])
            if d.is_dir():
                return MemoryHierarchy(1, Path(point), d)
    for root, point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own:
            d = _join(point, root, own[""])
            if d.is_dir() and "memory" in (Path(point) / "cgroup.controllers").read_text():
                return MemoryHierarchy(2, Path(point), d)
    return None


def cgroup_name(run_id: str, node: str) -> str:
    return f"{PREFIX}{run_id}-{node}"


def create(h: MemoryHierarchy, run_id: str, node: str) -> Path:
    """Make the node's cgroup (no limit set: the nemesis squeezes later)."""
    d = h.own / cgroup_name(run_id, node)
    if h.version == 2:
        ctl = h.own / "cgroup.subtree_control"
        if "memory" not in ctl.read_text().split():
            try:
                ctl.write_text("+memory")
            except OSError as e:
                raise CgroupError(
                    f"cannot enable the memory controller in {ctl} ({e}); on cgroup v2 run "
                    "ktrial in a delegated cgroup without processes of its own "
                    "(e.g. systemd-run --scope -p Delegate=yes)"
                ) from e
    try:
        d.mkdir()
    except FileExistsError:
        pass
    except OSError as e:
        raise CgroupError(f"cannot create cgroup {d}: {e}") from e
    return d


def unlimit(d: Path) -> None:
    """Lift any memory limit on a node's cgroup (v1 and v2 file names)."""
    for fname, value in (
        # v1: memsw must stay >= limit, so lift memsw first
        ("memory.memsw.limit_in_bytes", "-1"),
        ("memory.limit_in_bytes", "-1"),
        ("memory.soft_limit_in_bytes", "-1"),
        ("memory.max", "max"),
        ("memory.high", "max"),
        ("memory.swap.max", "max"),
    ):
        f = d / fname
        if f.exists():
            with contextlib.suppress(OSError):
                f.write_text(value)


def pids(d: Path) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(p) for p in (d / "cgroup.procs").read_text().split()]
    return []


def remove(d: Path, timeout: float = 10.0) -> None:
    """Remove a cgroup directory (and its children); waits for dying processes to leave.

    A SIGKILLed process stays in its cgroup until the kernel has reaped it, so
    rmdir can fail with EBUSY for a moment.
    """
    if not d.is_dir():
        return
    for child in sorted((p for p in d.iterdir() if p.is_dir()), reverse=True):
        remove(child, timeout)
    deadline = time.monotonic() + timeout
    while True:
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if time.monotonic() > deadline:
                raise CgroupError(
                    f"cannot remove cgroup {d}: {e}; processes still inside: {pids(d)}"
                ) from e
            time.sleep(0.1)


def find_all(h: MemoryHierarchy | None = None, max_depth: int = 6) -> Iterator[Path]:
    """Every `ktrial-*` memory cgroup anywhere in the hierarchy (for `cluster clean`)."""
    h = h or memory_hierarchy()
    if h is None:
        return
    stack = [(h.mount, 0)]
    while stack:
        d, depth = stack.pop()
        try:
            children = [c for c in d.iterdir() if c.is_dir()]
        except OSError:
            continue
        for c in children:
            if c.name.startswith(PREFIX):
                yield c
            elif depth < max_depth:
                stack.append((c, depth + 1))
