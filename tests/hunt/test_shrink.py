"""The shrinker (hunt/shrink.py) against fake tests: functions that say whether a
candidate schedule reproduces, by a rule the test knows.

Properties (hypothesis): the output always reproduces per the fake's rule, is never
larger than the input (every output entry comes from an input entry, in order, no
later and no longer), and is 1-minimal for a deterministic fake: removing any one of
its entries no longer reproduces.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ktrial.hunt.shrink import Entries, Options, Stop, effective_duration, shrink, size
from ktrial.nemesis.schedule import ScriptEntry

TIME_LIMIT = 60.0
FAULTS = ("kill", "partition", "pause", "toxic", "partition-then-kill")


def entry(tag: int, at: float, fault: str = "kill", duration: float | None = 5.0) -> ScriptEntry:
    # `tag` says which input entry a candidate's entry came from (the fakes read it)
    return ScriptEntry(at, fault, ["n1"], duration, {"tag": tag})


def tags(entries: Entries) -> list[int]:
    return [e.params["tag"] for e in entries]


@dataclass(frozen=True)
class Culprits:
    """Reproduces iff every culprit entry is present, held at least `need_s` seconds,
    and starting no earlier than `not_before` (clients must be running)."""

    need: frozenset[int]
    need_s: float = 0.0
    not_before: float = 0.0

    def __call__(self, entries: Entries, what: str = "") -> bool:
        present = {e.params["tag"]: e for e in entries}
        return all(
            t in present
            and effective_duration(present[t], TIME_LIMIT) >= self.need_s
            and present[t].at >= self.not_before
            for t in self.need
        )


@st.composite
def schedules(draw: st.DrawFn) -> list[ScriptEntry]:
    n = draw(st.integers(0, 9))
    out = []
    for i in range(n):
        at = draw(st.floats(0, 50).map(lambda x: round(x, 1)))
        dur = draw(st.one_of(st.none(), st.floats(0.5, 20).map(lambda x: round(x, 1))))
        out.append(entry(i, at, draw(st.sampled_from(FAULTS)), dur))
    return out


def _not_larger(inp: list[ScriptEntry], out: Entries, origins: tuple[int, ...]) -> None:
    ordered = sorted(inp, key=lambda e: e.at)
    assert len(out) <= len(inp)
    assert list(origins) == sorted(origins) and len(set(origins)) == len(origins)
    for e, o in zip(out, origins, strict=True):
        src = ordered[o]
        assert (e.fault, e.targets, e.params) == (src.fault, src.targets, src.params)
        assert e.at <= src.at
        assert effective_duration(e, TIME_LIMIT) <= effective_duration(src, TIME_LIMIT) + 1e-9
    a, b = size(inp, TIME_LIMIT), size(out, TIME_LIMIT)
    assert a[0] >= b[0] and a[1] >= b[1] - 1e-6 and a[2] >= b[2] - 1e-6


@settings(max_examples=200, deadline=None)
@given(schedules(), st.data())
def test_output_reproduces_is_no_larger_and_is_1_minimal(
    inp: list[ScriptEntry], data: st.DataObject
) -> None:
    k = data.draw(st.integers(0, len(inp)))
    need = frozenset(data.draw(st.permutations(range(len(inp))))[:k])
    fake = Culprits(need, data.draw(st.sampled_from([0.0, 1.5, 3.0])))
    if not fake(tuple(inp)):
        need = frozenset()  # a rule the input meets: culprits present, no time constraint
        fake = Culprits(need)
    out = shrink(inp, fake, Options(time_limit=TIME_LIMIT))
    assert out.verified and out.stopped is None
    assert fake(out.entries)
    _not_larger(inp, out.entries, out.origins)
    for i in range(len(out.entries)):
        assert not fake(out.entries[:i] + out.entries[i + 1 :]), f"entry {i} is removable"
    # deterministic fake: exactly the culprits remain
    assert sorted(tags(out.entries)) == sorted(need)


@settings(max_examples=100, deadline=None)
@given(schedules(), st.data())
def test_any_rule_the_input_meets_holds_on_the_output(
    inp: list[ScriptEntry], data: st.DataObject
) -> None:
    """A fake decided by an arbitrary (seeded) table of candidates still gets a
    reproducing, no larger, 1-minimal output."""
    salt = data.draw(st.integers(0, 2**16))
    sorted_inp = sorted(inp, key=lambda e: e.at)

    def fake(entries: Entries, what: str = "") -> bool:
        if entries == tuple(sorted_inp):
            return True
        return random.Random(f"{salt}:{entries!r}").random() < 0.4

    out = shrink(inp, fake, Options(time_limit=TIME_LIMIT))
    assert fake(out.entries)
    _not_larger(sorted_inp, out.entries, out.origins)
    for i in range(len(out.entries)):
        assert not fake(out.entries[:i] + out.entries[i + 1 :])


def test_halves_first_then_single_entries() -> None:
    """Eight faults of which #6 alone matters: the first candidates drop halves."""
    inp = [entry(i, 5.0 + i) for i in range(8)]
    seen: list[list[int]] = []

    def fake(entries: Entries, what: str = "") -> bool:
        seen.append(tags(entries))
        return 6 in tags(entries)

    out = shrink(inp, fake, Options(time_limit=TIME_LIMIT, passes=("remove",)))
    assert tags(out.entries) == [6]
    assert seen[0] == list(range(8))  # the recorded schedule is replayed first
    assert seen[1] == [4, 5, 6, 7]  # then the first half removed
    assert len(seen) <= 12  # log2-ish, not one replay per subset


def test_shortens_and_moves_earlier_down_to_what_the_rule_needs() -> None:
    inp = [entry(0, 40.0, duration=16.0), entry(1, 50.0, duration=None)]
    fake = Culprits(frozenset({0}), need_s=3.0, not_before=4.0)
    out = shrink(inp, fake, Options(time_limit=TIME_LIMIT, min_at=2.0, resolution=1.0))
    (e,) = out.entries
    assert e.duration is not None and 3.0 <= e.duration < 6.0  # 16 -> 8 -> 4 (2 fails)
    assert 4.0 <= e.at < 8.0  # shifted to 2 (fails), then halved towards 2
    assert fake(out.entries)


def test_no_duration_means_to_the_end_and_is_shortened_from_what_is_left() -> None:
    inp = [entry(0, 20.0, duration=None)]
    out = shrink(inp, Culprits(frozenset({0})), Options(time_limit=TIME_LIMIT))
    (e,) = out.entries
    # 40 s left of the run -> 20 -> 10 -> 5 -> 2.5 -> 1.25 (1 s more would save < 1 s)
    assert e.duration == 1.25
    assert e.at == 2.0


def test_a_composite_is_shortened_straight_to_the_minimum_in_one_step() -> None:
    # a composite's sequence outlasts any short duration: 26 s -> 1 s is one candidate,
    # not 13, 6.5, 3.25, 1.6 (four kept steps meaning the same schedule)
    inp = [entry(0, 2.0, "partition-then-kill", duration=26.0)]
    out = shrink(inp, Culprits(frozenset({0})), Options(time_limit=TIME_LIMIT))
    (e,) = out.entries
    assert e.duration == 1.0
    shortened = [s for s in out.steps if s.action.startswith("shorten")]
    assert [(s.action, s.kept) for s in shortened] == [
        ("shorten #1 partition-then-kill to 1 s", True)
    ]


def test_a_composite_whose_jump_fails_is_halved_as_any_entry() -> None:
    inp = [entry(0, 2.0, "partition-then-kill", duration=26.0)]
    out = shrink(inp, Culprits(frozenset({0}), need_s=6.0), Options(time_limit=TIME_LIMIT))
    (e,) = out.entries
    assert e.duration == 6.5  # 1 (rejected), then 13, 6.5 kept, 3.25 rejected
    tried = [s.entries[0].duration for s in out.steps if s.action.startswith("shorten")]
    assert tried == [1.0, 13.0, 6.5, 3.25]


def test_plain_families_are_not_jumped() -> None:
    inp = [entry(0, 2.0, "kill", duration=8.0)]
    out = shrink(inp, Culprits(frozenset({0})), Options(time_limit=TIME_LIMIT))
    tried = [s.entries[0].duration for s in out.steps if s.action.startswith("shorten")]
    assert tried == [4.0, 2.0, 1.0]


def test_a_failure_needing_no_fault_shrinks_to_the_empty_schedule() -> None:
    out = shrink([entry(0, 5.0), entry(1, 9.0)], lambda e, w: True, Options(TIME_LIMIT))
    assert out.entries == () and out.origins == ()


def test_a_recorded_schedule_that_does_not_replay_is_not_shrunk() -> None:
    inp = [entry(0, 5.0), entry(1, 9.0)]
    calls: list[Entries] = []

    def never(entries: Entries, what: str) -> bool:
        calls.append(entries)
        return False

    out = shrink(inp, never, Options(TIME_LIMIT))
    assert not out.verified and out.entries == tuple(inp) and len(calls) == 1


def test_stop_returns_the_last_kept_schedule() -> None:
    """The budget runs out after 4 candidates: the smallest kept so far comes back."""
    inp = [entry(i, 5.0 + i) for i in range(8)]
    n = 0

    def fake(entries: Entries, what: str) -> bool:
        nonlocal n
        n += 1
        if n > 4:
            raise Stop("shrink budget used")
        return 6 in tags(entries)

    out = shrink(inp, fake, Options(TIME_LIMIT))
    assert out.stopped == "shrink budget used"
    assert 6 in tags(out.entries) and len(out.entries) < 8
    assert any(s.kept and s.entries == out.entries for s in out.steps)


def test_a_candidate_is_never_tested_twice() -> None:
    inp = [entry(i, 5.0 + 3 * i) for i in range(5)]
    seen: list[str] = []

    def fake(entries: Entries, what: str) -> bool:
        seen.append(repr(entries))
        return {1, 3} <= set(tags(entries))

    shrink(inp, fake, Options(TIME_LIMIT))
    assert len(seen) == len(set(seen))


def test_unknown_pass_is_refused() -> None:
    with pytest.raises(ValueError, match="shrink passes"):
        Options(TIME_LIMIT, passes=("remove", "reorder"))


def test_verification_off_or_stopped_before_its_answer_is_unknown() -> None:
    inp = [entry(0, 5.0), entry(1, 9.0)]
    out = shrink(inp, Culprits(frozenset({1})), Options(TIME_LIMIT, verify=False))
    assert out.verified is None and tags(out.entries) == [1]

    def stop(entries: Entries, what: str) -> bool:
        raise Stop("interrupted")

    out = shrink(inp, stop, Options(TIME_LIMIT))
    assert out.verified is None and out.stopped == "interrupted" and out.entries == tuple(inp)
