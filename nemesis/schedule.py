"""When faults happen: fixed interval, stable periods, or a scripted file.

Every schedule runs in a thread (``Schedule.run(nemesis, stop)``) until `stop` is set
or it has nothing left to do, and always ends with ``nemesis.heal_all()``. Randomness
comes from the nemesis' seeded rng, so a seed replays the same fault sequence (as far
as the cluster's answers — controller, leaders — are the same).

Script files are TOML::

    [[entry]]
    at = 5                # seconds after the schedule starts
    fault = "partition"
    targets = "majority"  # optional: one, minority, majority, all, random, controller,
                          # leaders, or node names "n1,n2"
    shape = "split"       # any other key is a parameter of the fault family
    duration = 10         # seconds until the fault is healed (default: to the end)
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .base import FaultBase
from .core import FAULT_NAMES, Nemesis, check_params

log = logging.getLogger("ktrial.nemesis")


class Schedule(Protocol):
    def run(self, nemesis: Nemesis, stop: threading.Event) -> None: ...


def _try_start(nemesis: Nemesis, name: str, **kw: Any) -> FaultBase | None:
    """Start a fault; on failure record a `fault-error` nemesis op and carry on."""
    try:
        if kw:
            return nemesis.start(name, **kw)
        return nemesis.start_random(name)
    except Exception as e:
        log.warning("nemesis: starting %s failed: %s", name, e)
        try:
            nemesis.ctx.record("fault-error", {"fault": name, "error": str(e)})
        except Exception:
            log.exception("nemesis: could not record the failure")
        return None


def _try_stop(nemesis: Nemesis, fault: FaultBase) -> None:
    try:
        nemesis.stop(fault)
    except Exception as e:
        log.warning("nemesis: stopping %s failed (heal_all will retry): %s", fault.id, e)


@dataclass
class IntervalSchedule:
    """Stay quiet `quiet` s (default: `interval`) so clients get going, then start a
    random fault from the list, hold it `interval` s, heal; repeat."""

    faults: Sequence[str]
    interval: float = 10.0
    quiet: float | None = None

    def run(self, nemesis: Nemesis, stop: threading.Event) -> None:
        try:
            while self.faults and not stop.wait(
                self.interval if self.quiet is None else self.quiet
            ):
                fault = _try_start(nemesis, nemesis.choice(self.faults))
                stop.wait(self.interval)
                if fault is not None:
                    _try_stop(nemesis, fault)
        finally:
            nemesis.heal_all()


@dataclass
class StablePeriodSchedule:
    """Bufstream-style: every `period` s either stay quiet (probability `quiet_p`) or
    run a random mix of up to `max_mix` different faults together, healed at the end
    of the period, then `recovery` s of quiet."""

    faults: Sequence[str]
    period: float = 20.0
    quiet_p: float = 0.3
    max_mix: int = 2
    recovery: float = 0.0

    def run(self, nemesis: Nemesis, stop: threading.Event) -> None:
        try:
            while self.faults and not stop.is_set():
                with nemesis.ctx.lock:
                    quiet = nemesis.rng.random() < self.quiet_p
                    k = nemesis.rng.randint(1, max(1, min(self.max_mix, len(self.faults))))
                    mix = nemesis.rng.sample(list(self.faults), k)
                if quiet:
                    nemesis.ctx.record("quiet-period", {"seconds": self.period})
                    stop.wait(self.period)
                    continue
                started = [f for f in (_try_start(nemesis, n) for n in mix) if f is not None]
                stop.wait(self.period)
                for f in reversed(started):
                    _try_stop(nemesis, f)
                if self.recovery:
                    stop.wait(self.recovery)
        finally:
            nemesis.heal_all()


@dataclass(frozen=True)
class ScriptEntry:
    at: float
    fault: str
    targets: str | list[str] | None = None
    duration: float | None = None
    params: dict[str, Any] = field(default_factory=dict)


def parse_script(data: dict[str, Any], source: str = "<script>") -> list[ScriptEntry]:
    """Validate a parsed TOML schedule (pure); errors name the file and entry."""
    raw = data.get("entry")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{source}: a schedule needs [[entry]] tables (at, fault, duration)")
    entries = []
    for i, e in enumerate(raw, 1):
        where = f"{source}: entry {i}: "
        if not isinstance(e, dict):
            raise ValueError(f"{where}must be a table")
        e = dict(e)
        try:
            at = float(e.pop("at"))
            fault = str(e.pop("fault"))
        except KeyError as k:
            raise ValueError(f"{where}missing {k.args[0]!r}") from None
        if fault not in FAULT_NAMES:
            raise ValueError(
                f"{where}unknown fault {fault!r}; choose among {', '.join(FAULT_NAMES)}"
            )
        duration = e.pop("duration", None)
        targets = e.pop("targets", None)
        if at < 0 or (duration is not None and float(duration) <= 0):
            raise ValueError(f"{where}'at' must be >= 0 and 'duration' > 0")
        check_params(fault, e, where)
        entries.append(
            ScriptEntry(at, fault, targets, None if duration is None else float(duration), e)
        )
    return sorted(entries, key=lambda x: x.at)


def load_script(path: str | Path) -> list[ScriptEntry]:
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{p}: not valid TOML: {e}") from None
    return parse_script(data, str(p))


@dataclass
class ScriptSchedule:
    """Faults at fixed times for fixed durations (reproducible soaks)."""

    entries: Sequence[ScriptEntry]

    def run(self, nemesis: Nemesis, stop: threading.Event) -> None:
        t0 = time.monotonic()
        events: list[tuple[float, int, str, Any]] = []
        for i, e in enumerate(self.entries):
            heapq.heappush(events, (e.at, i, "start", e))
        seq = len(self.entries)
        try:
            while events and not stop.is_set():
                at, _, what, item = events[0]
                if stop.wait(max(0.0, t0 + at - time.monotonic())):
                    break
                heapq.heappop(events)
                if what == "start":
                    fault = _try_start(nemesis, item.fault, targets=item.targets, **item.params)
                    if fault is not None and item.duration is not None:
                        seq += 1
                        heapq.heappush(events, (at + item.duration, seq, "stop", fault))
                else:
                    _try_stop(nemesis, item)
        finally:
            nemesis.heal_all()


def make_schedule(
    kind: str,
    faults: Sequence[str] = (),
    interval: float = 10.0,
    period: float = 20.0,
    quiet_p: float = 0.3,
    max_mix: int = 2,
    script: str | Path | None = None,
) -> Schedule:
    """A schedule by name: "interval", "stable" or "script" (needs `script`)."""
    if kind == "interval":
        return IntervalSchedule(list(faults), interval)
    if kind == "stable":
        return StablePeriodSchedule(list(faults), period, quiet_p, max_mix)
    if kind == "script":
        if script is None:
            raise ValueError("a scripted nemesis schedule needs a file (--nemesis-script)")
        return ScriptSchedule(load_script(script))
    raise ValueError(f"unknown nemesis schedule {kind!r}: use interval, stable or script")


class ScheduleThread:
    """Run a schedule in a daemon thread; `close()` stops it and waits for its heal."""

    def __init__(self, schedule: Schedule, nemesis: Nemesis) -> None:
        self.stop_event = threading.Event()
        self.nemesis = nemesis
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(schedule, nemesis), name="ktrial-nemesis", daemon=True
        )

    def _run(self, schedule: Schedule, nemesis: Nemesis) -> None:
        try:
            schedule.run(nemesis, self.stop_event)
        except BaseException as e:  # reported by close()
            log.exception("nemesis schedule crashed")
            self.error = e

    def start(self) -> ScheduleThread:
        self._thread.start()
        return self

    def close(self, timeout: float = 120.0) -> None:
        """Stop the schedule: long faults (a rolling restart) end at their next step, the
        schedule heals and exits; wait up to `timeout` s for that."""
        self.stop_event.set()
        self.nemesis.ctx.halting.set()
        self._thread.join(timeout)

    def __enter__(self) -> ScheduleThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
