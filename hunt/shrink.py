"""Shrink a failing fault schedule to a small one that still fails (pure).

The shrinker knows nothing of clusters: it asks a ``test`` collaborator whether a
candidate schedule (a tuple of :class:`~ktrial.nemesis.schedule.ScriptEntry`) still
reproduces the failure, and keeps a change only when it does. ``ktrial hunt`` gives
it a test that replays the candidate k of n times (hunt/repro.py); the unit tests give
it a function.

Passes, in order, repeated until a round changes nothing:

1. **remove** entries, delta-debugging style: try removing each half, then each
   quarter, ... down to single entries; after a successful removal go on at a
   coarser granularity. When no single entry can be removed the schedule is
   1-minimal (for a deterministic test). The empty schedule (no fault at all) is a
   candidate like any other: a failure that needs no fault is worth knowing;
2. **shorten** each entry's duration by halves (not below ``min_duration``), an entry
   without a duration (to the end of the run) first to half of what is left of the run.
   An entry of a family in ``Options.jump`` (the composite faults) is first tried at
   ``min_duration`` at once: a composite runs its whole sequence (tens of seconds)
   before its end can come, so every duration shorter than the sequence means the same
   schedule (end as soon as the sequence is done), and halving down to it would spend
   replays on the same schedule again and again. When that jump is rejected, halving
   goes on as for any entry;
3. **earlier**: shift the whole schedule so that it begins at ``min_at``, then move each
   entry halfway towards the one before it (order is kept). A moved entry keeps its
   length (one that lasted to the end of the run gets the length it had).

A change smaller than ``resolution`` seconds is not tried. A candidate already tested
is not tested again (its answer is remembered). The test may raise :class:`Stop`
(budget used up, Ctrl-C): the shrinker then returns the smallest schedule kept so far.
Every candidate is derived from the input by removing entries, shortening them or
moving them earlier, so the output is never larger than the input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..nemesis.composite import COMPOSITES
from ..nemesis.schedule import ScriptEntry

Entries = tuple[ScriptEntry, ...]
Test = Callable[[Entries, str], bool]
PASSES = ("remove", "shorten", "earlier")


class Stop(Exception):
    """Raised by a test to end the shrink (its message says why)."""


@dataclass(frozen=True)
class Step:
    action: str
    entries: Entries
    kept: bool


@dataclass
class Shrunk:
    entries: Entries
    origins: tuple[int, ...]  # for each output entry, the index of the input entry it came from
    steps: list[Step] = field(default_factory=list)
    # the input itself reproduced: True, False (then nothing was shrunk), or None when it
    # was not tested (verification off, or stopped before its answer)
    verified: bool | None = True
    stopped: str | None = None  # why the shrink ended early; None: it ran to the end


@dataclass(frozen=True)
class Options:
    time_limit: float  # the run's: what "to the end of the run" means for a duration
    min_duration: float = 1.0
    min_at: float = 2.0  # clients need a moment before a fault can matter
    resolution: float = 1.0  # smallest change of a time worth a replay
    passes: tuple[str, ...] = PASSES
    verify: bool = True  # test the input first (a failure that does not replay is not shrunk)
    # families whose entries are first shortened straight to min_duration (see the module)
    jump: frozenset[str] = frozenset(COMPOSITES)

    def __post_init__(self) -> None:
        bad = [p for p in self.passes if p not in PASSES]
        if bad:
            raise ValueError(f"shrink passes {bad}: choose among {', '.join(PASSES)}")


Item = tuple[int, ScriptEntry]  # (index in the input, entry)


def entry_key(e: ScriptEntry) -> str:
    return json.dumps([e.at, e.fault, e.targets, e.duration, e.params], sort_keys=True, default=str)


def size(entries: Sequence[ScriptEntry], time_limit: float) -> tuple[int, float, float]:
    """How big a schedule is: entries, fault-seconds, sum of start times."""
    return (
        len(entries),
        round(sum(effective_duration(e, time_limit) for e in entries), 6),
        round(sum(e.at for e in entries), 6),
    )


def effective_duration(e: ScriptEntry, time_limit: float) -> float:
    return e.duration if e.duration is not None else max(0.0, time_limit - e.at)


class _Shrinker:
    def __init__(self, test: Test, opts: Options) -> None:
        self.test = test
        self.opts = opts
        self.cache: dict[str, bool] = {}
        self.steps: list[Step] = []
        self.best: list[Item] = []  # the last candidate kept

    def attempt(self, items: list[Item], action: str) -> bool:
        entries = tuple(e for _, e in items)
        key = "|".join(entry_key(e) for e in entries)
        if key not in self.cache:
            self.cache[key] = bool(self.test(entries, action))
            self.steps.append(Step(action, entries, self.cache[key]))
        if self.cache[key]:
            self.best = list(items)
        return self.cache[key]

    # ---------------------------------------------------------------- remove
    def remove(self, cur: list[Item]) -> list[Item]:
        n = 2
        while cur:
            chunks = _split(cur, min(n, len(cur)))
            for chunk in chunks:
                gone = {i for i, _ in chunk}
                cand = [x for x in cur if x[0] not in gone]
                if self.attempt(cand, f"remove {_names(chunk)} ({len(cand)} left)"):
                    cur = cand
                    n = max(n - 1, 2)
                    break
            else:
                if n >= len(cur):
                    break
                n = min(len(cur), 2 * n)
        return cur

    # ---------------------------------------------------------------- shorten
    def shorten(self, cur: list[Item]) -> tuple[list[Item], bool]:
        o = self.opts
        changed = False
        for pos in range(len(cur)):
            i, e = cur[pos]
            eff = effective_duration(e, o.time_limit)
            if e.fault in o.jump and eff - o.min_duration >= o.resolution:
                cand = list(cur)
                cand[pos] = (i, replace(e, duration=o.min_duration))
                if self.attempt(cand, f"shorten {_name(i, e)} to {o.min_duration:g} s"):
                    cur, changed = cand, True
                    continue
            while True:
                i, e = cur[pos]
                eff = effective_duration(e, o.time_limit)
                new = max(o.min_duration, round(eff / 2, 3))
                if eff - new < o.resolution:
                    break
                cand = list(cur)
                cand[pos] = (i, replace(e, duration=new))
                if not self.attempt(cand, f"shorten {_name(i, e)} to {new:g} s"):
                    break
                cur, changed = cand, True
        return cur, changed

    # ---------------------------------------------------------------- earlier
    def earlier(self, cur: list[Item]) -> tuple[list[Item], bool]:
        o = self.opts
        changed = False
        if cur:
            shift = round(cur[0][1].at - o.min_at, 3)
            if shift >= o.resolution:
                cand = [(i, _moved(e, e.at - shift, o.time_limit)) for i, e in cur]
                if self.attempt(cand, f"start every fault {shift:g} s earlier"):
                    cur, changed = cand, True
        for pos in range(len(cur)):
            while True:
                i, e = cur[pos]
                lower = cur[pos - 1][1].at if pos else min(o.min_at, e.at)
                new = round(lower + (e.at - lower) / 2, 3)
                if e.at - new < o.resolution:
                    break
                cand = list(cur)
                cand[pos] = (i, _moved(e, new, o.time_limit))
                if not self.attempt(cand, f"start {_name(i, e)} at {new:g} s"):
                    break
                cur, changed = cand, True
        return cur, changed


def shrink(entries: Sequence[ScriptEntry], test: Test, opts: Options) -> Shrunk:
    """The smallest schedule found that still passes `test` (see the module docstring)."""
    s = _Shrinker(test, opts)
    cur: list[Item] = list(enumerate(sorted(entries, key=lambda e: e.at)))
    s.best = list(cur)
    verified: bool | None = None
    stopped = None
    try:
        if opts.verify:
            verified = s.attempt(cur, f"replay the recorded schedule ({len(cur)} faults)")
        while verified is not False:
            if "remove" in opts.passes:
                cur = s.remove(cur)
            changed = False
            if "shorten" in opts.passes:
                cur, moved = s.shorten(cur)
                changed = changed or moved
            if "earlier" in opts.passes:
                cur, moved = s.earlier(cur)
                changed = changed or moved
            if not changed or "remove" not in opts.passes:
                break
    except Stop as e:
        stopped = str(e) or "stopped"
    best = s.best
    return Shrunk(tuple(e for _, e in best), tuple(i for i, _ in best), s.steps, verified, stopped)


def _moved(e: ScriptEntry, at: float, time_limit: float) -> ScriptEntry:
    """`e` starting at `at`, as long as before: a fault that lasted to the end of the run
    keeps the length it had (it would grow if it still lasted to the end)."""
    duration = e.duration if e.duration is not None else effective_duration(e, time_limit)
    return replace(e, at=round(at, 3), duration=duration)


def _split(items: list[Item], n: int) -> list[list[Item]]:
    """`items` in `n` contiguous chunks of nearly equal size."""
    out, start = [], 0
    for k in range(n):
        end = start + (len(items) - start) // (n - k)
        out.append(items[start:end])
        start = end
    return [c for c in out if c]


def _name(i: int, e: ScriptEntry) -> str:
    return f"#{i + 1} {e.fault}"


def _names(chunk: list[Item]) -> str:
    if len(chunk) == 1:
        return _name(*chunk[0])
    return f"#{chunk[0][0] + 1}..#{chunk[-1][0] + 1} ({len(chunk)} faults)"


def describe(entries: Sequence[ScriptEntry]) -> list[str]:
    """One line per entry, for the terminal and docs."""
    out = []
    for e in entries:
        dur = "to the end" if e.duration is None else f"{e.duration:g} s"
        tgt = ",".join(e.targets) if isinstance(e.targets, list) else (e.targets or "default")
        params: dict[str, Any] = e.params
        extra = " ".join(f"{k}={v}" for k, v in params.items())
        out.append(f"{e.at:g} s {e.fault} on {tgt} for {dur}" + (f" ({extra})" if extra else ""))
    return out
