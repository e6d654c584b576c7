"""When faults happen: fixed interval, stable periods, or a scripted file.

Every schedule runs in a thread (``Schedule.run(nemesis, stop)``) until `stop` is set
or it has nothing left to do, and always ends with ``nemesis.heal_all()``.

The random schedules draw their faults from a :class:`FaultPlanner`: the families
come in a shuffled round-robin (:class:`FamilyCycle`: every family asked for runs once
before any runs twice), and each fault's targets and random parameters (partition
shape, toxic kind) are drawn when it is planned, from an rng of the run's seed alone
(:func:`schedule_rng`). So ``ktrial run --dry-run`` shows the same faults on the same
nodes as the run will inject (``preview``), except targets only the cluster can name
when the fault fires (the controller, the leaders) and the layout of a ring or bridge
partition.

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
import json
import logging
import random
import threading
import time
import tomllib
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import control, shapes, targets, toxics
from .base import FaultBase
from .core import FAULT_NAMES, Nemesis, check_params, random_target_specs

log = logging.getLogger("ktrial.nemesis")


class Schedule(Protocol):
    def run(self, nemesis: Nemesis, stop: threading.Event) -> None: ...


def schedule_rng(seed: int) -> random.Random:
    """The rng a random schedule plans with: a function of the run's seed only, apart
    from the rng the faults draw from at fault time, so a plan can be made (and shown)
    before the cluster exists."""
    return random.Random(f"ktrial-schedule:{seed}")


class FamilyCycle:
    """A shuffled round-robin over fault families: each round is a fresh permutation
    (seeded), so every family runs once before any runs twice; a round does not begin
    with the family the previous one ended with (with two families or more)."""

    def __init__(self, families: Sequence[str], rng: random.Random) -> None:
        self.families = list(dict.fromkeys(families))
        self.rng = rng
        self._pending: deque[str] = deque()
        self._last: str | None = None

    def _refill(self) -> None:
        round_ = list(self.families)
        self.rng.shuffle(round_)
        if len(round_) > 1 and round_[0] == self._last:
            round_[0], round_[-1] = round_[-1], round_[0]
        self._pending.extend(round_)

    def next(self) -> str:
        if not self.families:
            raise ValueError("no fault families to draw from")
        if not self._pending:
            self._refill()
        self._last = self._pending.popleft()
        return self._last

    def distinct(self, k: int) -> list[str]:
        """The next `k` families, all different (a mix of faults running together); a
        family skipped because it is already in the mix keeps its turn."""
        k = max(0, min(k, len(self.families)))
        mix: list[str] = []
        skipped: list[str] = []
        while len(mix) < k:
            f = self.next()
            (skipped if f in mix else mix).append(f)
        self._pending.extendleft(reversed(skipped))
        return mix


@dataclass(frozen=True)
class PlannedFault:
    """One fault as a random schedule planned it: its family, its targets (node names,
    or a spec the cluster resolves when the fault fires) and the parameters drawn."""

    fault: str
    targets: str | list[str] | None
    params: dict[str, Any] = field(default_factory=dict)


class FaultPlanner:
    """Draws the faults of a random schedule: families from a :class:`FamilyCycle`,
    then per fault a target spec (the run's ``FAULT.targets`` parameter, or one of the
    family's usual specs), resolved to node names when the node names are known and the
    spec does not need the cluster (controller, leaders), and a partition shape or a
    toxic kind when the run did not fix one."""

    def __init__(
        self,
        families: Sequence[str],
        rng: random.Random,
        nodes: Sequence[str] | None = None,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        with_leaders: bool = True,
    ) -> None:
        self.rng = rng
        self.cycle = FamilyCycle(families, rng)
        self.nodes = list(nodes) if nodes else None
        self.params = {k: dict(v) for k, v in (params or {}).items()}
        self.with_leaders = with_leaders

    def next(self) -> PlannedFault:
        return self.plan(self.cycle.next())

    def mix(self, k: int) -> list[PlannedFault]:
        return [self.plan(f) for f in self.cycle.distinct(k)]

    def plan(self, family: str) -> PlannedFault:
        fixed = self.params.get(family, {})
        spec = fixed.get("targets") or self.rng.choice(
            random_target_specs(family, self.with_leaders)
        )
        chosen: str | list[str] | None = spec
        if self.nodes and isinstance(spec, str) and spec not in targets.AT_FAULT_TIME:
            chosen = targets.select(spec, self.nodes, self.rng)
        drawn: dict[str, Any] = {}
        if family == "partition" and fixed.get("shape") is None and self.nodes:
            drawn["shape"] = self.rng.choice(shapes.applicable_shapes(len(self.nodes)))
        if family == "toxic" and fixed.get("kind") is None and fixed.get("attributes") is None:
            drawn["kind"] = self.rng.choice(toxics.KINDS)
        if family == "control":
            drawn.update(control.draw(fixed, self.rng))
        return PlannedFault(family, chosen, drawn)


def _planner(faults: Sequence[str], seed: int | None, nemesis: Nemesis) -> FaultPlanner:
    rng = schedule_rng(seed) if seed is not None else nemesis.rng
    return FaultPlanner(
        faults,
        rng,
        nemesis.ctx.node_names(),
        nemesis.params,
        with_leaders=nemesis.partitions is not None,
    )


def _try_start_planned(nemesis: Nemesis, p: PlannedFault) -> FaultBase | None:
    """Start a planned fault; on failure record a `fault-error` op and carry on."""
    try:
        return nemesis.start_planned(p.fault, p.targets, **p.params)
    except Exception as e:
        _record_error(nemesis, p.fault, e)
        return None


def _record_error(nemesis: Nemesis, name: str, e: Exception) -> None:
    log.warning("nemesis: starting %s failed: %s", name, e)
    try:
        nemesis.ctx.record("fault-error", {"fault": name, "error": str(e)})
    except Exception:
        log.exception("nemesis: could not record the failure")


def _try_start(nemesis: Nemesis, name: str, **kw: Any) -> FaultBase | None:
    """Start a fault; on failure record a `fault-error` nemesis op and carry on."""
    try:
        if kw:
            return nemesis.start(name, **kw)
        return nemesis.start_random(name)
    except Exception as e:
        _record_error(nemesis, name, e)
        return None


def _try_stop(nemesis: Nemesis, fault: FaultBase) -> None:
    try:
        nemesis.stop(fault)
    except Exception as e:
        log.warning("nemesis: stopping %s failed (heal_all will retry): %s", fault.id, e)


@dataclass
class IntervalSchedule:
    """Stay quiet `quiet` s (default: `interval`) so clients get going, then start the
    next planned fault (a shuffled round-robin of the families), hold it `interval` s,
    heal; repeat. `seed` None: plan with the nemesis' own rng (no preview possible)."""

    faults: Sequence[str]
    interval: float = 10.0
    quiet: float | None = None
    seed: int | None = None

    @property
    def _quiet(self) -> float:
        return self.interval if self.quiet is None else self.quiet

    def run(self, nemesis: Nemesis, stop: threading.Event) -> None:
        try:
            planner = _planner(self.faults, self.seed, nemesis) if self.faults else None
            while planner is not None and not stop.wait(self._quiet):
                fault = _try_start_planned(nemesis, planner.next())
                stop.wait(self.interval)
                if fault is not None:
                    _try_stop(nemesis, fault)
        finally:
            nemesis.heal_all()

    def preview(
        self,
        time_limit: float,
        nodes: Sequence[str] | None,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        seed: int = 0,
    ) -> list[ScriptEntry]:
        """The faults this schedule will start within `time_limit` s, at their nominal
        times (each begins `quiet` s after the previous one healed; a slow heal delays
        the rest)."""
        if not self.faults:
            return []
        planner = FaultPlanner(self.faults, schedule_rng(seed), nodes, params)
        out: list[ScriptEntry] = []
        at = self._quiet
        while at < time_limit:
            p = planner.next()
            hold = min(self.interval, time_limit - at)
            out.append(ScriptEntry(at, p.fault, p.targets, hold, p.params))
            at += self.interval + self._quiet
        return out


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
    seed: int | None = None

    def _period(self, planner: FaultPlanner) -> list[PlannedFault]:
        """The next period: [] (quiet) or a mix of faults (distinct families)."""
        rng = planner.rng
        quiet = rng.random() < self.quiet_p
        k = rng.randint(1, max(1, min(self.max_mix, len(self.faults))))
        return [] if quiet else planner.mix(k)

    def run(self, nemesis: Nemesis, stop: threading.Event) -> None:
        try:
            planner = _planner(self.faults, self.seed, nemesis) if self.faults else None
            while planner is not None and not stop.is_set():
                with nemesis.ctx.lock:
                    mix = self._period(planner)
                if not mix:
                    nemesis.ctx.record("quiet-period", {"seconds": self.period})
                    stop.wait(self.period)
                    continue
                started = [
                    f for f in (_try_start_planned(nemesis, p) for p in mix) if f is not None
                ]
                stop.wait(self.period)
                for f in reversed(started):
                    _try_stop(nemesis, f)
                if self.recovery:
                    stop.wait(self.recovery)
        finally:
            nemesis.heal_all()

    def preview(
        self,
        time_limit: float,
        nodes: Sequence[str] | None,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        seed: int = 0,
    ) -> list[ScriptEntry]:
        """The faults of the periods that begin within `time_limit` s (nominal times)."""
        if not self.faults:
            return []
        planner = FaultPlanner(self.faults, schedule_rng(seed), nodes, params)
        out: list[ScriptEntry] = []
        at = 0.0
        while at < time_limit:
            mix = self._period(planner)
            hold = min(self.period, time_limit - at)
            out += [ScriptEntry(at, p.fault, p.targets, hold, p.params) for p in mix]
            at += self.period + (self.recovery if mix else 0.0)
        return out


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
        spec = e.pop("targets", None)
        if at < 0 or (duration is not None and float(duration) <= 0):
            raise ValueError(f"{where}'at' must be >= 0 and 'duration' > 0")
        check_params(fault, {**e, "targets": spec}, where)
        entries.append(
            ScriptEntry(at, fault, spec, None if duration is None else float(duration), e)
        )
    return sorted(entries, key=lambda x: x.at)


def check_entries(
    entries: Iterable[ScriptEntry], nodes: Sequence[str] | None, source: str = "<script>"
) -> None:
    """Check a script's entries against the cluster's node names (targets, shapes)."""
    for i, e in enumerate(entries, 1):
        check_params(e.fault, {**e.params, "targets": e.targets}, f"{source}: entry {i}: ", nodes)


def format_script(entries: Iterable[ScriptEntry], header: str = "") -> str:
    """A schedule script (the TOML ``load_script`` reads) holding `entries`; `header`
    lines become comments at the top."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for e in entries:
        lines += ["", "[[entry]]", f"at = {_toml(round(e.at, 3))}", f"fault = {_toml(e.fault)}"]
        if e.targets is not None:
            lines.append(f"targets = {_toml(e.targets)}")
        for k, v in e.params.items():
            if v is not None:
                lines.append(f"{_bare_key(k)} = {_toml(v)}")
        if e.duration is not None:
            lines.append(f"duration = {_toml(round(e.duration, 3))}")
    return "\n".join(lines).lstrip("\n") + "\n"


def _bare_key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) else json.dumps(k)


def _toml(v: Any) -> str:
    """One TOML value: strings (JSON escapes are TOML escapes), numbers, booleans,
    arrays and inline tables."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return json.dumps(v)
    if isinstance(v, Mapping):
        items = ", ".join(
            f"{_bare_key(str(k))} = {_toml(x)}" for k, x in v.items() if x is not None
        )
        return "{ " + items + " }" if items else "{}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    raise ValueError(f"{v!r} cannot be written in a schedule script")


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

    def preview(
        self,
        time_limit: float,
        nodes: Sequence[str] | None = None,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        seed: int = 0,
    ) -> list[ScriptEntry]:
        """The entries that begin within `time_limit` s."""
        return [e for e in self.entries if e.at < time_limit]

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
            if nemesis.active():  # faults without a duration last until the end of the run
                stop.wait()
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
    seed: int | None = None,
) -> Schedule:
    """A schedule by name: "interval", "stable" or "script" (needs `script`). With
    `seed`, the random schedules plan from :func:`schedule_rng` (see ``preview``)."""
    if kind == "interval":
        return IntervalSchedule(list(faults), interval, seed=seed)
    if kind == "stable":
        return StablePeriodSchedule(list(faults), period, quiet_p, max_mix, seed=seed)
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
