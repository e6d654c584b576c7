"""One hunt: search, then shrink, then confirm (the logic, with the trials supplied).

:class:`Hunt` drives the phases against a ``runner`` collaborator (a function from a
:class:`~ktrial.hunt.runner.TrialRequest` to a
:class:`~ktrial.hunt.runner.TrialResult`) and an ``export`` collaborator (the faults a
trial injected, as script entries). ``ktrial hunt`` gives it the subprocess runner;
the unit tests give it functions, so the whole flow is tested without a broker.

1. **search**: trials from the plan (hunt/plan.py) until one shows a target anomaly,
   the search budget is used up, ``max_trials`` ran, or Ctrl-C. A trial begins only
   when the time it is expected to take (the mean of the trials so far) still fits in
   the budget; the first one always runs, and a running trial is never cut short.
2. **shrink**: the found trial's recorded faults, replayed on its seed, shrunk by
   hunt/shrink.py; each candidate judged by the screened k-of-n test (hunt/repro.py).
   The shrink stops when its own budget would not leave room for the confirmation.
3. **confirm**: the final schedule replayed ``confirm`` more times; its reproduction
   rate is the share of these replays that reproduced the failure.

``on_change`` is called with the hunt after every trial, so what was found so far is
on disk whatever ends the hunt.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..nemesis.schedule import ScriptEntry
from .plan import SearchSpace, TrialPlan, plan_trials
from .repro import Rule, screened
from .runner import TrialRequest, TrialResult
from .shrink import Options, Shrunk, Stop, shrink, size
from .verdict import Match, hits

Export = Callable[[TrialResult], tuple[ScriptEntry, ...]]
FIRST_ESTIMATE_EXTRA_S = 60.0  # a trial's overhead before any was measured: start, drain, check
MAX_CONSECUTIVE_ERRORS = 2


@dataclass(frozen=True)
class HuntConfig:
    space: SearchSpace
    hunt_seed: int
    targets: frozenset[str]
    match: str = "same"
    budget_s: float = 600.0  # the search
    max_trials: int = 0  # 0: no limit
    shrink: bool = True
    shrink_budget_s: float = 900.0  # the shrink and the confirmation
    max_replays: int = 0  # 0: no limit (shrink and confirmation)
    rule: Rule = field(default_factory=Rule)
    confirm: int = 3
    shrink_opts: Options | None = None  # None: defaults with the trial's time limit

    def options(self) -> Options:
        return self.shrink_opts or Options(time_limit=self.space.time_limit)


@dataclass
class Hunt:
    cfg: HuntConfig
    runner: Callable[[TrialRequest], TrialResult]
    export: Export
    clock: Callable[[], float] = time.monotonic
    say: Callable[[str], object] = print
    on_change: Callable[[Hunt], object] = lambda h: None
    stop_requested: Callable[[], bool] = lambda: False

    trials: list[TrialResult] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # family -> why it was refused
    pending: dict[str, Any] | None = None  # a candidate the shrink stopped judging half-way
    plans: dict[int, TrialPlan] = field(default_factory=dict)  # search trial number -> plan
    found: TrialResult | None = None
    found_types: tuple[str, ...] = ()
    recorded: tuple[ScriptEntry, ...] | None = None  # the found trial's faults
    shrunk: Shrunk | None = None
    final: tuple[ScriptEntry, ...] | None = None
    confirmations: list[bool] = field(default_factory=list)
    reproduced: dict[int, bool] = field(default_factory=dict)  # replay number -> reproduced
    stopped: str | None = None  # why the search ended without a find, or the hunt early
    phase: str = "search"
    started: float = 0.0
    search_seconds: float = 0.0
    shrink_seconds: float = 0.0

    # ------------------------------------------------------------------ helpers

    def _estimate(self) -> float:
        done = [t.seconds for t in self.trials if t.seconds > 0]
        if not done:
            return self.cfg.space.time_limit + FIRST_ESTIMATE_EXTRA_S
        return sum(done) / len(done)

    def _run(self, req: TrialRequest) -> TrialResult:
        res = self.runner(req)
        self.trials.append(res)
        return res

    def _interrupted(self, res: TrialResult | None = None) -> bool:
        return self.stop_requested() or (res is not None and res.interrupted)

    @property
    def match(self) -> Match:
        return Match(self.cfg.targets, self.found_types, self.cfg.match)

    # ------------------------------------------------------------------ phases

    def run(self) -> Hunt:
        self.started = self.clock()
        try:
            self.search()
            self.search_seconds = round(self.clock() - self.started, 1)
            if self.found is not None:
                t0 = self.clock()
                self.recorded = self.export(self.found)
                self.final = self.recorded
                self.on_change(self)
                if self.cfg.shrink and not self._halted():
                    self.shrink()
                if not self._halted():
                    self.confirm()
                self.shrink_seconds = round(self.clock() - t0, 1)
        finally:
            self.phase = "done"
            self.on_change(self)
        return self

    def _halted(self) -> bool:
        return self.stop_requested() or self.stopped == "interrupted"

    def search(self) -> None:
        cfg = self.cfg
        errors = 0
        for planned in plan_trials(cfg.space, cfg.hunt_seed):
            plan = replace(
                planned, faults=tuple(f for f in planned.faults if f not in self.dropped)
            )
            if not plan.faults:
                continue
            elapsed = self.clock() - self.started
            if self.stop_requested():
                self.stopped = "interrupted"
                return
            if cfg.max_trials and plan.index >= cfg.max_trials:
                self.stopped = f"max trials ({cfg.max_trials}) ran without a find"
                return
            if self.trials and elapsed + self._estimate() > cfg.budget_s:
                self.stopped = (
                    f"search budget used ({elapsed:.0f} of {cfg.budget_s:g} s; a trial "
                    f"takes ~{self._estimate():.0f} s) without a find"
                )
                return
            number = len(self.trials) + 1
            self.plans[number] = plan
            self.say(f"trial {number} (search): {plan.describe()} ...")
            res = self._run(
                TrialRequest(
                    number, "search", plan.seed, tuple(plan.nemesis_args()), None, plan.describe()
                )
            )
            self.say(f"trial {number}: {_outcome(res)}")
            self.on_change(self)
            found = hits(res.bad, cfg.targets)
            if found:
                self.found, self.found_types = res, found
                self.say(
                    f"found: trial {number} is INVALID ({', '.join(found)}); "
                    f"run directory {res.run_dir}"
                )
                return
            if self._interrupted(res):
                self.stopped = "interrupted"
                return
            refused = [f for f in plan.faults if _names(res.error, f)]
            for f in refused:  # a family the cluster refused when the trial began
                self.dropped[f] = str(res.error)
                self.say(f"leaving out {f}: the cluster refused it ({res.error})")
            if len(self.dropped) == len(set(cfg.space.families)):
                self.stopped = "the cluster refused every fault family"
                return
            errors = errors + 1 if res.error and not refused else 0
            if errors >= MAX_CONSECUTIVE_ERRORS:
                self.stopped = f"{errors} trials in a row could not run: {res.error}"
                return

    def _replays_left(self) -> int | None:
        if not self.cfg.max_replays:
            return None
        return self.cfg.max_replays - sum(1 for t in self.trials if t.request.phase != "search")

    def _replay(self, entries: tuple[ScriptEntry, ...], phase: str, what: str) -> bool:
        assert self.found is not None
        number = len(self.trials) + 1
        self.say(f"trial {number} ({phase}): {what} ...")
        res = self._run(
            TrialRequest(number, phase, self.found.request.seed, (), tuple(entries), what)
        )
        ok = self.match.reproduced(res.bad) and not res.interrupted
        self.reproduced[number] = ok
        self.say(f"trial {number}: {_outcome(res)} -> {'reproduced' if ok else 'not reproduced'}")
        self.on_change(self)
        if self._interrupted(res):
            raise Stop("interrupted")
        return ok

    def shrink(self) -> None:
        cfg = self.cfg
        assert self.recorded is not None
        self.phase = "shrink"
        t0 = self.clock()
        reserve = cfg.confirm  # replays the confirmation will need

        def replay_once(entries: tuple[ScriptEntry, ...], what: str) -> bool:
            if self.stop_requested():
                raise Stop("interrupted")
            left = self._replays_left()
            if left is not None and left <= reserve:
                raise Stop(f"max replays ({cfg.max_replays}) reached")
            elapsed = self.clock() - t0
            if elapsed + self._estimate() * (1 + reserve) > cfg.shrink_budget_s:
                raise Stop(
                    f"shrink budget used ({elapsed:.0f} of {cfg.shrink_budget_s:g} s, "
                    f"{reserve} replays kept for the confirmation)"
                )
            return self._replay(entries, "replay", what)

        recorded = tuple(sorted(self.recorded, key=lambda e: e.at))

        def test(entries: tuple[ScriptEntry, ...], what: str) -> bool:
            # the failing trial ran the recorded schedule: it counts as one reproduction
            prior = 1 if entries == recorded else 0
            seen: list[bool] = []

            def once() -> bool:
                seen.append(replay_once(entries, what))
                return seen[-1]

            try:
                out = screened(once, cfg.rule, prior)
            except Stop:
                if seen:  # judged in part: say so, a bigger budget may finish it
                    self.pending = {
                        "action": what,
                        "faults": len(entries),
                        "reproduced": sum(seen) + prior,
                        "replays": len(seen) + prior,
                    }
                raise
            self.say(
                f"shrink: {what}: reproduced {out}"
                + (" (the failing trial counts as one)" if prior else "")
                + " -> "
                + ("kept" if out.kept else "rejected")
                + f" ({len(entries)} faults)"
            )
            return out.kept

        before = size(self.recorded, cfg.space.time_limit)
        self.say(
            f"shrinking {len(self.recorded)} recorded faults; a change is kept when "
            f"{self.match.describe()} in {cfg.rule} replays (the first one screens)"
        )
        self.shrunk = shrink(self.recorded, test, cfg.options())
        self.final = self.shrunk.entries
        after = size(self.final, cfg.space.time_limit)
        why = f" (stopped: {self.shrunk.stopped})" if self.shrunk.stopped else ""
        if self.pending:
            p = self.pending
            why += (
                f"; left half-judged: {p['action']}, reproduced {p['reproduced']} of {p['replays']}"
            )
        if self.shrunk.verified is False:
            self.say("the recorded schedule did not reproduce the failure: not shrunk")
        else:
            self.say(
                f"shrunk: {before[0]} -> {after[0]} faults, {before[1]:g} -> {after[1]:g} "
                f"fault-seconds{why}"
            )
        if self.shrunk.stopped == "interrupted":
            self.stopped = "interrupted"

    def confirm(self) -> None:
        if self.final is None or self.cfg.confirm <= 0:
            return
        if self.shrunk is not None and self.shrunk.verified is False:
            return  # the replays that failed to verify it are its rate (see rate())
        self.phase = "confirm"
        for i in range(self.cfg.confirm):
            if self.stop_requested():
                self.stopped = "interrupted"
                return
            try:
                ok = self._replay(
                    self.final, "confirm", f"confirmation {i + 1} of {self.cfg.confirm}"
                )
            except Stop:
                self.stopped = "interrupted"
                return
            self.confirmations.append(ok)

    # ------------------------------------------------------------------ results

    def rate(self) -> tuple[int, int]:
        """(reproduced, replays) of the final schedule: its confirmation replays, or the
        replays that tried to verify the recorded schedule when it did not reproduce."""
        if self.confirmations:
            return sum(self.confirmations), len(self.confirmations)
        if self.shrunk is not None and self.shrunk.verified is False:
            tries = [
                self.reproduced[t.request.number]
                for t in self.trials
                if t.request.phase == "replay" and t.request.number in self.reproduced
            ]
            return sum(tries), len(tries)
        return 0, 0


def _names(error: str | None, family: str) -> bool:
    """Whether a trial's error names `family` as refused ("kill: ..." but not
    "partition-then-kill: ...")."""
    return bool(error) and re.search(rf"(?<![\w-]){re.escape(family)}:", error or "") is not None


def _outcome(res: TrialResult) -> str:
    text = res.verdict
    if res.bad:
        text += f" ({', '.join(res.bad)})"
    if res.interrupted:
        text += ", interrupted"
    if res.error:
        text += f", could not run: {res.error}"
    return f"{text} in {res.seconds:.0f} s"
