"""checker/attended.py: a value is stuck only for the time a consumer had its key assigned.

The queue workload moves consumers between keys, so a key may go a long time with
nobody assigned to it; a value written just before waits through no fault of the
system (a healthy 30-minute soak had three such keys, 113-173 s each). A consumer
that stays assigned and does not read still counts, and so does one blocked in an op or
retired while no successor could open its clients (a broker paused with replication
factor 1: every consumer retired, none came back, and the keys were counted
unattended)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from ktrial.checker.attended import Attendance, replaced
from ktrial.tests.histlines import Timeline

NS = 1_000_000_000
END = 1 << 62


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


# ------------------------------------------------------- replaced processes


def test_a_process_holds_its_slot_until_its_successor_begins() -> None:
    """Processes a, b end at 10 s and 20 s; c begins at 12 s, d at 25 s: a is replaced
    by c, b by d. e ends at 30 s and nothing begins after: it holds its slot to the end."""
    spans = {"a": (0, 10), "b": (0, 20), "c": (12, 40), "d": (25, 40), "e": (0, 30)}
    got = replaced(spans)
    assert (got["a"], got["b"]) == (12, 25)
    assert got["e"] == END and got["c"] == END and got["d"] == END


def test_a_process_begun_before_the_end_is_no_successor() -> None:
    got = replaced({"a": (0, 10), "b": (5, 50)})
    assert got["a"] == END


@given(
    spans=st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 100)).map(lambda t: (t[0], t[0] + t[1])),
        min_size=1,
        max_size=12,
    )
)
def test_each_successor_replaces_at_most_one_process_that_ended_before_it(
    spans: list[tuple[int, int]],
) -> None:
    got = replaced(dict(enumerate(spans)))
    begins = [b for b, _e in spans]
    taken = [u for u in got.values() if u != END]
    for p, (_b, end) in enumerate(spans):
        assert got[p] == END or (got[p] >= end and got[p] in begins)
    # no begin time serves more processes than there are processes beginning then
    for u in set(taken):
        assert taken.count(u) <= begins.count(u)


def _retired_consumer(successor_at: float | None) -> Timeline:
    """Consumer 1, assigned key 0, polls until its op fails at 40 s (the workload
    retires it); values of key 0 acknowledged from 35 s on are read by the drain at 300 s.
    Its successor (process 3, another key) begins at `successor_at`, or never."""
    tl = Timeline()
    tl.pair(1, 0.0, 0.01, "assign", [0], [0])
    for i in range(30):
        tl.send(0, i + 0.1, i + 0.2, "0", i, i)
        tl.poll(1, i + 0.3, i + 0.4, {"0": [[i, i]]})
    tl.send(0, 34.9, 35.0, "0", 99, 30)
    tl.poll(1, 30.5, 40.0, {}, "fail")
    for i in range(25):  # the producer goes on to the end
        tl.send(0, 45.0 + 10 * i, 45.1 + 10 * i, "0", 100 + i, 31 + i)
    if successor_at is not None:
        tl.pair(3, successor_at, successor_at + 0.01, "assign", [5], [5])
        tl.poll(3, successor_at + 0.1, 290.0, {})
    tl.drain(9, 300.0, {"0": [[30 + i, 99 + i] for i in range(26)]})
    return tl


def test_a_retired_consumer_with_no_successor_attends_to_the_end() -> None:
    """The replication-factor-1 pause: no new client could open, so no op shows it; the
    key waited on the cluster, not on the workload's choice."""
    live = _retired_consumer(None).check()["metrics"]["liveness"]
    (v,) = [v for v in live["violations"] if v["type"] == "stuck-partition"]
    assert v["key"] == "0" and v["attended_s"] > 250
    assert live["stuck_partitions"]["unattended_keys"] == []


def test_a_retired_consumer_replaced_at_once_leaves_its_key_unattended() -> None:
    live = _retired_consumer(41.0).check()["metrics"]["liveness"]
    assert not [v for v in live["violations"] if v["type"] == "stuck-partition"]
    assert live["stuck_partitions"]["unattended_keys"] == ["0"]


def test_a_consumer_blocked_in_an_op_that_never_completes_attends_to_the_end() -> None:
    tl = _retired_consumer(41.0)
    tl.ops = [d for d in tl.ops if not (d["process"] == 1 and d["type"] == "fail")]
    live = tl.check()["metrics"]["liveness"]
    (v,) = [v for v in live["violations"] if v["type"] == "stuck-partition"]
    assert v["key"] == "0" and v["attended_s"] > 250
