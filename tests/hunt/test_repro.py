"""The screened k-of-n test (hunt/repro.py): the first replay screens, then replays go
on until k reproduced or k is out of reach; never more than n."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.hunt.repro import Outcome, Rule, screened


def replays(results: list[bool]):  # type: ignore[no-untyped-def]
    it = iter(results)
    calls: list[bool] = []

    def replay() -> bool:
        calls.append(next(it))
        return calls[-1]

    return replay, calls


@pytest.mark.parametrize(
    ("results", "kept", "tries"),
    [
        ([False], False, 1),  # the screen rejects at once
        ([True, True], True, 2),
        ([True, False, True], True, 3),
        ([True, False, False], False, 3),
    ],
)
def test_two_of_three(results: list[bool], kept: bool, tries: int) -> None:
    replay, calls = replays(results)
    out = screened(replay, Rule(2, 3))
    assert (out.kept, out.tries, len(calls)) == (kept, tries, tries)
    assert out.reproduced == sum(results[:tries])


@given(st.integers(1, 5).flatmap(lambda n: st.tuples(st.integers(1, n), st.just(n))), st.data())
def test_decides_like_counting_with_the_screen(kn: tuple[int, int], data: st.DataObject) -> None:
    k, n = kn
    results = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    replay, calls = replays(results)
    out = screened(replay, Rule(k, n))
    assert out.tries == len(calls) <= n
    if not results[0]:
        assert out == Outcome(False, 0, 1)
    else:
        # kept exactly when k of the first n reproduced, decided as early as possible
        assert out.kept == (sum(results) >= k)
        assert out.reproduced == sum(calls)
        assert out.kept == (out.reproduced >= k)


@pytest.mark.parametrize("text", ["3/2", "0/3", "2", "a/b", "2/"])
def test_bad_rules_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"2/3|k <= n"):
        Rule.parse(text)


def test_rule_text_round_trips() -> None:
    assert str(Rule.parse("1/2")) == "1/2" and Rule.parse("2/3") == Rule()


@pytest.mark.parametrize(
    ("results", "kept", "tries"),
    [
        ([True], True, 2),  # the find + one reproduction
        ([False, True], True, 3),  # no screen: the find took its place
        ([False, False], False, 3),
    ],
)
def test_a_prior_reproduction_takes_the_place_of_the_screen(
    results: list[bool], kept: bool, tries: int
) -> None:
    replay, calls = replays(results)
    out = screened(replay, Rule(2, 3), prior=1)
    assert (out.kept, out.tries, len(calls) + 1) == (kept, tries, tries)


def test_a_prior_that_already_decides_runs_nothing() -> None:
    replay, calls = replays([])
    assert screened(replay, Rule(1, 1), prior=1) == Outcome(True, 1, 1) and calls == []
