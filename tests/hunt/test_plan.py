"""The search plan (hunt/plan.py): seeds × schedules × fault mixes, from the registry."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ktrial.hunt.plan import SearchSpace, plan_trials, registry_families
from ktrial.nemesis import core
from ktrial.nemesis.options import parse_faults

POOL = ("kill", "partition", "pause", "memory", "toxic")


def take(space: SearchSpace, n: int, seed: int = 1) -> list:  # type: ignore[type-arg]
    return list(itertools.islice(plan_trials(space, seed), n))


def test_first_trial_mixes_the_whole_pool_then_every_family_comes_round() -> None:
    plans = take(SearchSpace(POOL), 12)
    assert plans[0].faults == POOL
    later = Counter(f for p in plans[1:] for f in p.faults)
    assert set(later) == set(POOL)
    assert all(1 <= len(p.faults) <= 3 and len(set(p.faults)) == len(p.faults) for p in plans[1:])


def test_schedules_take_turns_and_seeds_are_fresh() -> None:
    plans = take(SearchSpace(POOL, base_seed=100), 6)
    assert [p.schedule for p in plans] == ["interval", "stable"] * 3
    assert [p.seed for p in plans] == list(range(100, 106))
    given_seeds = take(SearchSpace(POOL, seeds=(7, 9)), 4)
    assert [p.seed for p in given_seeds] == [7, 9, 7, 9]


def test_nemesis_args_are_run_flags() -> None:
    p, q = take(SearchSpace(("kill",)), 2)
    assert p.nemesis_args()[:4] == ["--nemesis", "kill", "--nemesis-schedule", "interval"]
    assert "--nemesis-interval" in p.nemesis_args()
    assert {"--nemesis-period", "--nemesis-quiet"} <= set(q.nemesis_args())


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 4))
def test_the_plan_is_a_function_of_the_hunt_seed(seed: int, max_mix: int) -> None:
    space = SearchSpace(POOL, max_mix=max_mix)
    a, b = take(space, 10, seed), take(space, 10, seed)
    assert a == b
    assert all(len(p.faults) <= max_mix for p in a[1:])


def test_families_come_from_the_registry_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A family registered in the nemesis (e.g. a composite fault) is in the pool of
    the hunt's "all" without any change to the hunt."""
    everything = registry_families("all")
    assert everything == tuple(n for n in core.FAMILIES if n not in ("restart", "control"))
    assert set(parse_faults("all")) <= set(everything)
    assert set(getattr(core, "COMPOSITE_NAMES", ())) <= set(everything)
    monkeypatch.setitem(core.FAMILIES, "brand-new", core.FAMILIES["kill"])
    monkeypatch.setattr("ktrial.nemesis.options.FAULT_NAMES", tuple(core.FAMILIES))
    assert "brand-new" in registry_families("all")
    assert registry_families("kill,all")[0] == "kill"
    assert registry_families("composites") == tuple(getattr(core, "COMPOSITE_NAMES", ()))


def test_bad_spaces_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        SearchSpace(())
    with pytest.raises(ValueError, match="choose among"):
        SearchSpace(POOL, schedules=("script",))
