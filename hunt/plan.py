"""The search plan of `ktrial hunt`: which trials to run, in what order (pure).

A hunt walks through seeds × schedules × fault mixes. The walk is a function of the
hunt's own seed, so the same command plans the same trials:

- trial 0 runs the whole pool of fault families together (the broadest mix: the most
  likely to break something, and the shrinker takes away what did not matter);
- every later trial draws a mix of 1 to ``max_mix`` different families from a shuffled
  round-robin over the pool (every family is drawn once before any is drawn twice);
- schedules take turns (``interval``, then ``stable``, ...), each with a hold or a
  period drawn from a short list;
- every trial has a fresh seed (``base_seed + index``), or the seeds given, in turn.

The pool itself comes from the nemesis registry when the hunt starts
(:func:`registry_families`), never from a list here, so a fault family added to the
nemesis is searched as soon as it is registered.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..nemesis import core
from ..nemesis.options import parse_faults
from ..nemesis.schedule import FamilyCycle

SCHEDULES = ("interval", "stable")
# Holds (interval schedule) and periods (stable schedule) a trial draws from: short,
# because hunting trials are short; a period's mix of faults runs together.
INTERVALS = (5.0, 8.0)
PERIODS = (10.0, 15.0)
QUIET_P = 0.2  # a stable period is quiet this often (the run's default is 0.3)


# Left out of "all": a rolling restart of every node outlasts a short trial, and the
# control family needs a system with a control API (asked for by name).
NOT_IN_ALL = ("restart", "control")


def registry_families(text: str | Sequence[str] | None = "all") -> tuple[str, ...]:
    """The fault families a hunt draws from, read from the nemesis registry when asked
    (``nemesis.core.FAMILIES``): names, "all" (every registered family but those in
    NOT_IN_ALL, composite faults included, unlike ``ktrial run --nemesis all``) and
    "composites" (the registry's composite faults), mixed freely."""
    raw = text.split(",") if isinstance(text, str) else list(text or ())
    items = [i.strip() for i in raw if i.strip()] or ["all"]
    everything = [n for n in core.FAMILIES if n not in NOT_IN_ALL]
    names: list[str] = []
    for item in items:
        if item == "all":
            names += everything
        elif item == "composites":
            names += list(getattr(core, "COMPOSITE_NAMES", ()))
        else:
            names.append(item)
    return parse_faults(list(dict.fromkeys(names)))


@dataclass(frozen=True)
class SearchSpace:
    families: tuple[str, ...]
    time_limit: float = 30.0
    base_seed: int = 0
    seeds: tuple[int, ...] = ()  # given seeds, in turn; empty: base_seed + index
    schedules: tuple[str, ...] = SCHEDULES
    max_mix: int = 3

    def __post_init__(self) -> None:
        if not self.families:
            raise ValueError("a hunt needs at least one fault family to search")
        bad = [s for s in self.schedules if s not in SCHEDULES]
        if bad or not self.schedules:
            raise ValueError(f"schedules {bad or '[]'}: choose among {', '.join(SCHEDULES)}")
        if self.max_mix < 1:
            raise ValueError(f"max_mix {self.max_mix}: must be at least 1")
        if self.time_limit <= 0:
            raise ValueError(f"time limit {self.time_limit:g}: must be > 0")


@dataclass(frozen=True)
class TrialPlan:
    """One search trial: a seed, a schedule and the families it may start."""

    index: int
    seed: int
    schedule: str
    faults: tuple[str, ...]
    interval: float | None = None  # interval schedule: seconds each fault is held
    period: float | None = None  # stable schedule: seconds of a period
    quiet_p: float | None = None  # stable schedule: chance that a period is quiet

    def nemesis_args(self) -> list[str]:
        """The `ktrial run` flags of this trial's faults."""
        args = ["--nemesis", ",".join(self.faults), "--nemesis-schedule", self.schedule]
        if self.interval is not None:
            args += ["--nemesis-interval", f"{self.interval:g}"]
        if self.period is not None:
            args += ["--nemesis-period", f"{self.period:g}"]
        if self.quiet_p is not None:
            args += ["--nemesis-quiet", f"{self.quiet_p:g}"]
        return args

    def describe(self) -> str:
        if self.schedule == "interval":
            how = f"interval {self.interval:g}s"
        else:
            how = f"stable {self.period:g}s quiet {self.quiet_p:g}"
        return f"seed {self.seed}, {how}, faults {','.join(self.faults)}"


def plan_trials(space: SearchSpace, hunt_seed: int) -> Iterator[TrialPlan]:
    """The hunt's trials, in order, without end (the budget ends the walk)."""
    rng = random.Random(f"ktrial-hunt:{hunt_seed}")
    cycle = FamilyCycle(space.families, rng)
    pool = tuple(dict.fromkeys(space.families))
    index = 0
    while True:
        if index == 0:
            mix = pool
        else:
            k = rng.randint(1, min(space.max_mix, len(pool)))
            mix = tuple(cycle.distinct(k))
        schedule = space.schedules[index % len(space.schedules)]
        seed = space.seeds[index % len(space.seeds)] if space.seeds else space.base_seed + index
        if schedule == "interval":
            yield TrialPlan(index, seed, schedule, mix, interval=rng.choice(INTERVALS))
        else:
            yield TrialPlan(index, seed, schedule, mix, period=rng.choice(PERIODS), quiet_p=QUIET_P)
        index += 1
