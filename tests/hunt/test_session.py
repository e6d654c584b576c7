"""A whole hunt (hunt/session.py) with the trial runner replaced by a fake: a function
from a trial request to a verdict, on a fake clock. Search, shrink, confirmation,
budgets, errors and Ctrl-C, without a broker."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ktrial.hunt.plan import SearchSpace
from ktrial.hunt.repro import Rule
from ktrial.hunt.runner import TrialRequest, TrialResult
from ktrial.hunt.session import Hunt, HuntConfig
from ktrial.hunt.shrink import Options
from ktrial.hunt.verdict import parse_anomalies
from ktrial.nemesis.schedule import ScriptEntry

SAFETY = parse_anomalies("safety")
RECORDED = tuple(
    ScriptEntry(5.0 + 10 * i, f, ["n1"], 5.0, {"tag": i})
    for i, f in enumerate(["partition", "kill", "pause", "kill"])
)


def culprit(entries: tuple[ScriptEntry, ...]) -> bool:
    """The failure needs the kill tagged 1, held 2 s or more."""
    return any(e.params.get("tag") == 1 and (e.duration or 99) >= 2 for e in entries)


@dataclass
class Fake:
    """Search trial `find_at` fails with `types`; replays fail per `rule` (and, if
    `flaky`, only with probability `flaky`); each trial takes `seconds` on the clock."""

    find_at: int | None = 2
    types: tuple[str, ...] = ("lost-write", "unseen")
    rule: Callable[[tuple[ScriptEntry, ...]], bool] = culprit
    flaky: float = 1.0
    seconds: float = 60.0
    error: str | None = None
    interrupt_at: int | None = None
    now: float = 0.0
    seen: list[TrialRequest] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(3))
    on_call: Callable[[TrialRequest], None] = lambda r: None

    def clock(self) -> float:
        return self.now

    def __call__(self, req: TrialRequest) -> TrialResult:
        self.seen.append(req)
        self.on_call(req)
        self.now += self.seconds
        bad: tuple[str, ...] = ()
        if req.phase == "search":
            n = sum(1 for r in self.seen if r.phase == "search")
            if self.find_at is not None and n == self.find_at:
                bad = self.types
        elif req.script is not None and self.rule(req.script) and self.rng.random() < self.flaky:
            bad = self.types
        res = TrialResult(req, 1 if bad else 0, self.seconds, f"/runs/{req.number}")
        res.valid = not bad
        res.bad = bad
        res.error = self.error
        res.interrupted = self.interrupt_at == req.number
        return res


def hunt(fake: Fake, **cfg: object) -> Hunt:
    space = SearchSpace(("kill", "partition", "pause"), time_limit=30.0, base_seed=10)
    kw: dict[str, object] = {
        "space": space,
        "hunt_seed": 1,
        "targets": SAFETY,
        "budget_s": 1000.0,
        "shrink_budget_s": 100000.0,
        "shrink_opts": Options(time_limit=60.0, passes=("remove", "shorten")),
        **cfg,
    }
    h = Hunt(HuntConfig(**kw), fake, lambda r: RECORDED, clock=fake.clock, say=lambda m: None)  # type: ignore[arg-type]
    return h.run()


def test_finds_shrinks_and_confirms() -> None:
    fake = Fake()
    h = hunt(fake)
    assert h.found is not None and h.found.request.number == 2
    assert h.found_types == ("lost-write", "unseen")
    assert h.final is not None and [e.params["tag"] for e in h.final] == [1]
    assert h.final[0].duration is not None and 2 <= h.final[0].duration < 3
    assert h.rate() == (3, 3) and h.confirmations == [True] * 3
    # every replay ran on the found trial's seed
    assert {r.seed for r in fake.seen if r.phase != "search"} == {h.found.request.seed}
    assert [r.phase for r in fake.seen][-3:] == ["confirm"] * 3


def test_same_match_needs_the_primary_type() -> None:
    """Replays that show only `unseen` do not reproduce a lost-write (match same), and
    do with match any."""

    @dataclass
    class Weaker(Fake):
        def __call__(self, req: TrialRequest) -> TrialResult:
            res = super().__call__(req)
            if req.phase != "search" and res.bad:
                res.bad = ("unseen",)
            return res

    h = hunt(Weaker())
    assert h.shrunk is not None and h.shrunk.verified is False and h.rate() == (0, 2)
    h = hunt(Weaker(), match="any")
    assert h.shrunk is not None and h.shrunk.verified and h.rate() == (3, 3)


def test_nothing_found_within_the_budget() -> None:
    fake = Fake(find_at=None)
    h = hunt(fake, budget_s=300.0)
    assert h.found is None and h.stopped and "budget" in h.stopped
    # a trial begins only when it fits: 60 s each in 300 s
    assert len(fake.seen) == 5 and fake.now <= 300


def test_max_trials_and_the_first_trial_always_runs() -> None:
    fake = Fake(find_at=None)
    assert len(hunt(fake, max_trials=3).trials) == 3
    fake = Fake(find_at=None, seconds=500.0)
    assert len(hunt(fake, budget_s=10.0).trials) == 1


def test_two_errors_in_a_row_stop_the_search() -> None:
    fake = Fake(find_at=None, error="ktrial run exited 255")
    h = hunt(fake)
    assert h.found is None and len(h.trials) == 2 and "could not run" in (h.stopped or "")


def test_shrink_budget_keeps_room_for_the_confirmation() -> None:
    fake = Fake()
    h = hunt(fake, shrink_budget_s=60.0 * 8)
    assert h.shrunk is not None and h.shrunk.stopped and "budget" in h.shrunk.stopped
    assert len(h.confirmations) == 3  # the confirmation still ran
    assert sum(1 for r in fake.seen if r.phase != "search") <= 8


def test_max_replays_counts_the_confirmation() -> None:
    fake = Fake()
    hunt(fake, max_replays=6)
    assert sum(1 for r in fake.seen if r.phase != "search") == 6


def test_flaky_replays_are_judged_k_of_n() -> None:
    fake = Fake(flaky=0.7)
    h = hunt(fake, rule=Rule(2, 3), confirm=5)
    assert h.final is not None and culprit(h.final)
    k, n = h.rate()
    assert n == 5 and 0 <= k <= 5
    kept = [s for s in (h.shrunk.steps if h.shrunk else []) if s.kept]
    assert kept, "a 70% reproducer is kept at least once"


def test_ctrl_c_during_the_shrink_keeps_what_was_found() -> None:
    stop = {"now": False}
    fake = Fake()
    fake.on_call = lambda r: stop.update(now=stop["now"] or r.number == 5)
    space = SearchSpace(("kill",), time_limit=30.0)
    h = Hunt(
        HuntConfig(space, 1, SAFETY, shrink_opts=Options(60.0)),
        fake,
        lambda r: RECORDED,
        clock=fake.clock,
        say=lambda m: None,
        stop_requested=lambda: stop["now"],
    ).run()
    assert h.found is not None and h.recorded == RECORDED
    assert h.stopped == "interrupted" and h.confirmations == []
    assert h.final is not None and len(h.final) <= len(RECORDED)
    assert len(fake.seen) == 5  # nothing ran after the interrupted trial


def test_an_interrupted_search_trial_ends_the_hunt() -> None:
    fake = Fake(find_at=None, interrupt_at=2)
    h = hunt(fake)
    assert h.stopped == "interrupted" and len(h.trials) == 2


def test_on_change_sees_every_trial() -> None:
    fake = Fake()
    counts: list[int] = []
    space = SearchSpace(("kill",), time_limit=30.0)
    Hunt(
        HuntConfig(space, 1, SAFETY, shrink=False),
        fake,
        lambda r: RECORDED,
        clock=fake.clock,
        say=lambda m: None,
        on_change=lambda h: counts.append(len(h.trials)),
    ).run()
    assert set(range(1, len(fake.seen) + 1)) <= set(counts)
    assert counts[-1] == len(fake.seen) == 2 + 3  # search 2, confirm 3 (no shrink)


def test_a_family_the_cluster_refuses_is_left_out() -> None:
    """A trial fails at start because the cluster cannot take one family of its mix
    (e.g. a composite fault that needs transactions): that family leaves the pool, the
    search goes on, and no later trial asks for it."""

    @dataclass
    class Refuses(Fake):
        def __call__(self, req: TrialRequest) -> TrialResult:
            res = super().__call__(req)
            if "pause" in " ".join(req.nemesis_args):
                res.error, res.valid, res.bad = "run failed: Unsupported: pause: no", None, ()
            return res

    fake = Refuses(find_at=None)
    h = hunt(fake, max_trials=8)
    assert set(h.dropped) == {"pause"} and h.stopped and "max trials" in h.stopped
    later = [r for r in fake.seen[1:] if r.phase == "search"]
    assert later and all("pause" not in " ".join(r.nemesis_args) for r in later)


def test_a_refusal_names_its_family_exactly() -> None:
    from ktrial.hunt.session import _names

    err = "run failed: Unsupported: partition-then-kill: needs 3 nodes"
    assert _names(err, "partition-then-kill")
    assert not _names(err, "kill") and not _names(err, "partition") and not _names(None, "kill")
    assert _names("Unsupported: kill: no hook", "kill")


def test_a_candidate_left_half_judged_is_reported() -> None:
    """The budget runs out after the first (successful) replay of a candidate that
    needs two: the hunt says which one, and how far it got."""
    fake = Fake(find_at=1)
    # verify (1 replay), a rejected half (1), then one replay of the kept half
    h = hunt(fake, shrink_budget_s=60.0 * 7 - 1)
    assert h.shrunk is not None and h.shrunk.stopped and "budget" in h.shrunk.stopped
    assert h.pending is not None and h.pending["replays"] == 1
    assert h.pending["reproduced"] == 1 and h.pending["action"].startswith("remove")
