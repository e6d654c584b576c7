"""The drain phase: fresh clients read every key from the beginning until caught up.

After the main phase (and, with a nemesis, after the heal) every offset seen
during the run must be readable. A new process assigns every key with
``seek_to_beginning`` and polls until, for every key, its position has passed the
highest offset any op saw (send acknowledgement or poll), or the time limit
passes; the keys that did not catch up are reported. The drain's polls are
ordinary history ops, so the checker's `unseen` becomes a real loss check.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..histories.recorder import Recorder
from .driver import Completion


def drain_settings(run_id: str, consumer_config: dict[str, Any]) -> dict[str, Any]:
    """What every driver's drain clients share: read-only, assign mode, long polls, big
    batches, their own group (each driver's config takes these as keyword arguments)."""
    return {
        "group_id": f"ktrial-{run_id}-drain",
        "txn": False,
        "sub_via": "assign",
        "poll_ms": 500,
        "max_poll_records": 5000,
        "consumer_overrides": dict(consumer_config),
    }


class DrainDriver(Protocol):
    def assign(self, keys: Sequence[int], from_beginning: bool = False) -> Completion: ...

    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion: ...

    def positions(self, keys: Sequence[int]) -> dict[int, int]: ...

    def close(self, abrupt: bool = False) -> None: ...


def drain(
    recorder: Recorder,
    open_driver: Callable[[int], DrainDriver],
    targets: dict[int, int],
    timeout_s: float,
) -> dict[str, Any]:
    """Read every key of `targets` (key -> offset to reach) from the beginning.

    Returns ``{"caught_up": bool, "lagging_keys": {key: {"position", "target"}},
    "polls": n, "records": n, "seconds": s, "started_s": s}``; `started_s` is the
    history time the drain began (liveness is not judged from there on:
    checker/window.py).
    """
    started_ns = recorder.now()
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    keys = sorted(targets)
    polls = records = 0
    lagging: dict[int, dict[str, int]] = {}
    driver: DrainDriver | None = None
    try:
        while time.monotonic() < deadline:
            if driver is None:
                process = recorder.new_process()
                try:
                    driver = open_driver(process)
                except Exception:
                    time.sleep(1.0)
                    continue
                inv = recorder.invoke(process, "assign", keys, seek_to_beginning=True)
                c = driver.assign(keys, from_beginning=True)
                recorder.complete(inv, c.type, c.value, c.error, seek_to_beginning=True)
                if c.type != "ok":
                    driver.close(abrupt=True)
                    driver = None
                    continue
            inv = recorder.invoke(process, "poll", [["poll"]])
            c = driver.execute("poll", [["poll"]])
            recorder.complete(inv, c.type, c.value, c.error, **c.extra)
            polls += 1
            if c.type == "ok":
                records += sum(len(v) for v in c.value[0][1].values())
            if c.retire:
                driver.close(abrupt=True)
                driver = None
                continue
            pos = driver.positions(keys)
            lagging = {
                k: {"position": pos.get(k, -1), "target": t}
                for k, t in targets.items()
                if t > 0 and pos.get(k, -1) < t
            }
            if not lagging:
                break
        else:
            if not lagging and driver is None:
                lagging = {k: {"position": -1, "target": t} for k, t in targets.items() if t > 0}
    finally:
        if driver is not None:
            driver.close()
    return {
        "caught_up": not lagging,
        "lagging_keys": {str(k): v for k, v in lagging.items()},
        "polls": polls,
        "records": records,
        "seconds": round(time.monotonic() - t0, 3),
        "started_s": round(started_ns / 1e9, 3),
    }
