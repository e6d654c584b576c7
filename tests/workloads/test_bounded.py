"""workloads.bounded: deadlines that shrink on stop, calls abandoned at their deadline."""

from __future__ import annotations

import threading

import pytest
from ktrial.workloads.bounded import CallTimeout, Deadline, call_bounded, in_background


def test_deadline_shrinks_to_the_grace_once_stop_is_set() -> None:
    stop = threading.Event()
    dl = Deadline(60.0, stop, grace_s=0.0)
    assert dl.left() > 59 and not dl.expired()
    stop.set()
    assert dl.expired()
    assert dl.slice() == 0.0


def test_deadline_without_stop_keeps_its_budget() -> None:
    dl = Deadline(30.0)
    assert 0 < dl.slice(0.5) <= 0.5
    assert not dl.expired()


def test_call_bounded_returns_the_result_and_reraises_errors() -> None:
    assert call_bounded(lambda: 42, Deadline(5.0), "answer") == 42

    def boom() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        call_bounded(boom, Deadline(5.0), "boom")


def test_a_call_that_ignores_its_timeout_is_abandoned_and_released_when_it_returns() -> None:
    gate = threading.Event()
    released = threading.Event()
    stop = threading.Event()
    stop.set()  # the run ended: only the grace is left
    with pytest.raises(CallTimeout, match="stuck"):
        call_bounded(gate.wait, Deadline(60.0, stop, grace_s=0.2), "stuck", released.set)
    assert not released.is_set()  # still blocked: the client must not be destroyed yet
    gate.set()  # the call finally returns...
    assert released.wait(5.0)  # ...and its own thread releases the client


def test_in_background_waits_at_most_its_bound() -> None:
    gate = threading.Event()
    assert in_background(lambda: None, "quick", 5.0)

    def slow() -> None:
        gate.wait(30)

    assert not in_background(slow, "slow", 0.1)
    gate.set()
