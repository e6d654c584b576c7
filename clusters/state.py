"""The on-disk record of a running local cluster, so other shells can see and end it.

Each cluster writes `<state root>/<runid>/state.json` before it creates anything, and
rewrites it as resources appear. The state root is machine-wide (`/run/ktrial/clusters`
for root, else `<cache>/clusters`; `$KTRIAL_STATE_DIR` overrides) and deliberately NOT
below `$KTRIAL_CACHE`: `cluster clean` must see every live cluster on the machine,
whatever cache a run used, or it would take a live cluster for a leftover.

A cluster is live while its owner process (pid + kernel start time, which guards
against pid reuse) exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .install import cache_root


def state_root() -> Path:
    env = os.environ.get("KTRIAL_STATE_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0 and Path("/run").is_dir():
        return Path("/run/ktrial/clusters")
    return cache_root() / "clusters"


def new_run_id() -> str:
    """6 hex digits: short enough for 15-character interface names."""
    return secrets.token_hex(3)


def proc_start_time(pid: int) -> int | None:
    """The kernel start time of a process (clock ticks since boot), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])  # field 22 overall; fields[0] is field 3


def is_alive(pid: int | None, start_time: int | None) -> bool:
    if not pid:
        return False
    st = proc_start_time(pid)
    if st is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state in ("Z", "X"):
        return False
    return start_time is None or st == start_time


@dataclass
class StateFile:
    """Read/write access to one cluster's state.json (atomic replace on every write)."""

    dir: Path

    @property
    def path(self) -> Path:
        return self.dir / "state.json"

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def write(self, data: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".state.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
        os.replace(tmp, self.path)

    def update(self, **fields: Any) -> dict[str, Any]:
        data = self.read()
        data.update(fields)
        self.write(data)
        return data

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def for_run(run_id: str) -> StateFile:
    return StateFile(state_root() / run_id)


def owner_fields(pid: int | None = None) -> dict[str, Any]:
    pid = pid or os.getpid()
    return {"owner_pid": pid, "owner_start": proc_start_time(pid)}


def all_states() -> Iterator[tuple[str, dict[str, Any]]]:
    """(run id, state) of every cluster directory in the state root."""
    root = state_root()
    with contextlib.suppress(OSError):
        for d in sorted(root.iterdir()):
            if d.is_dir():
                yield d.name, StateFile(d).read()


def state_is_live(state: dict[str, Any]) -> bool:
    return is_alive(state.get("owner_pid"), state.get("owner_start"))
