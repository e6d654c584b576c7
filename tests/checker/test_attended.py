"""checker/attended.py: a value is stuck only for the time a consumer had its key assigned.

The queue workload moves consumers between keys, so a key may go a long time with
nobody assigned to it; a value written just before waits through no fault of the
system (a healthy 30-minute soak had three such keys, 113-173 s each). A consumer
that stays assigned and does not read still counts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from ktrial.checker.attended import Attendance
from ktrial.tests.histlines import Timeline

NS = 1_000_000_000


def test_a_key_nobody_was_assigned_to_never_stalls() -> None:
    att = Attendance({"1": [(0, 100 * NS)]})
    assert att.stall("0", 0, 100 * NS, 30 * NS, NS) is None


def test_a_wait_under_a_consumer_counts_from_the_ack() -> None:
    att = Attendance({"0": [(0, 100 * NS)]})
    assert att.stall("0", 0, 100 * NS, 30 * NS, NS) == (30 * NS, 100 * NS, 100 * NS)


def test_a_consumer_that_came_back_and_read_at_once_is_not_a_stall() -> None:
    att = Attendance({"0": [(0, 10 * NS), (95 * NS, 200 * NS)]})
    assert att.stall("0", 0, 96 * NS, 30 * NS, 5 * NS) is None  # 10 s attended, then read
    att = Attendance({"0": [(0, 40 * NS), (95 * NS, 200 * NS)]})
    assert att.stall("0", 0, 96 * NS, 30 * NS, 5 * NS) == (30 * NS, 40 * NS, 40 * NS)


intervals = st.lists(
    st.tuples(st.integers(0, 1000), st.integers(1, 200)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=8,
)


@given(ivs=intervals, lo=st.integers(0, 1000), span=st.integers(0, 1000), limit=st.integers(0, 300))
def test_a_stall_lies_in_the_wait_and_never_exceeds_it(
    ivs: list[tuple[int, int]], lo: int, span: int, limit: int
) -> None:
    att = Attendance({"k": ivs})
    got = att.stall("k", lo, lo + span, limit, 0)
    if got is not None:
        start, end, total = got
        assert lo + limit <= start <= end <= lo + span
        assert limit < total <= span
    # attended the whole time: the plain rule (waited longer than the limit)
    full = Attendance({"k": [(lo, lo + span)]}).stall("k", lo, lo + span, limit, 0)
    assert (full is not None) == (span > limit)


def _history(assigned_from: float) -> Timeline:
    """A value of key 0 acknowledged at 1 s and read at 90.5 s; consumer 1 is assigned
    to key 1 all along, consumer 2 to key 0 from `assigned_from`."""
    tl = Timeline()
    tl.pair(1, 0.0, 0.01, "assign", [1], [1])
    tl.pair(2, assigned_from, assigned_from + 0.01, "assign", [0], [0])
    tl.send(0, 0.9, 1.0, "0", 7, 0)
    for i in range(2, 90):
        tl.poll(1, i, i + 0.05, {})
        if i >= assigned_from + 1:
            tl.poll(2, i + 0.2, i + 0.25, {})
    tl.poll(2, 90.4, 90.5, {"0": [[0, 7]]})
    return tl


def test_a_key_without_a_consumer_is_not_stuck_but_reported() -> None:
    live = _history(assigned_from=90.0).check()["metrics"]["liveness"]
    assert not [v for v in live["violations"] if v["type"] == "stuck-partition"]
    assert live["stuck_partitions"]["unattended_keys"] == ["0"]


def test_a_consumer_assigned_and_not_reading_is_stuck() -> None:
    live = _history(assigned_from=0.0).check()["metrics"]["liveness"]
    (v,) = [v for v in live["violations"] if v["type"] == "stuck-partition"]
    assert v["key"] == "0" and 89 <= v["attended_s"] <= 90
    assert "with a consumer assigned to key 0" in v["explanation"]
