"""The queue generator: reproducible by seed, unique values, key rotation, abort probability."""

from __future__ import annotations

from collections import Counter

import pytest
from ktrial.workloads.generator import Generator, GenOp, GenOptions


def take(g: Generator, n: int) -> list[GenOp]:
    return [g.next() for _ in range(n)]


def sends(ops: list[GenOp]) -> list[list]:
    return [m for op in ops if op.f in ("send", "txn") for m in op.value if m[0] == "send"]


def test_same_seed_same_ops_other_seed_other_ops() -> None:
    o = GenOptions(txn=True, abort_p=0.2, crash_every=50)
    assert take(Generator(o, 42), 2000) == take(Generator(o, 42), 2000)
    assert take(Generator(o, 42), 2000) != take(Generator(o, 43), 2000)


def test_values_are_unique_across_the_run() -> None:
    vals = [m[2] for m in sends(take(Generator(GenOptions(txn=True), 1), 5000))]
    assert len(vals) > 1000
    assert len(vals) == len(set(vals))


def test_keys_rotate_through_the_pool() -> None:
    o = GenOptions(n_keys=8, active_keys=2, writes_per_key=20, reassign_p=0.0)
    g = Generator(o, 3)
    ops = take(g, 2000)
    ss = sends(ops)
    # Every key of the pool is written, and at any moment only the active window is.
    assert {m[1] for m in ss} == set(range(8))
    counts = Counter(m[1] for m in ss)
    # Each pass over the pool gives each key about writes_per_key sends.
    passes = len(ss) / (o.writes_per_key * o.n_keys)
    for k in range(8):
        assert counts[k] == pytest.approx(o.writes_per_key * passes, rel=0.5)
    window = [m[1] for m in ss[:100]]
    for i in range(len(window) - 20):
        assert len(set(window[i : i + 10])) <= 3  # the 2-key window, plus one rotation


def test_abort_probability() -> None:
    ops = take(Generator(GenOptions(txn=True, abort_p=0.25, reassign_p=0.0), 9), 8000)
    txns = [op for op in ops if op.f == "txn"]
    assert len(txns) == 8000
    assert sum(op.abort for op in txns) / len(txns) == pytest.approx(0.25, abs=0.03)
    assert not any(op.abort for op in take(Generator(GenOptions(txn=True), 9), 2000))


def test_txn_shapes_and_plain_shapes() -> None:
    txns = [
        op for op in take(Generator(GenOptions(txn=True, max_txn_len=4), 5), 3000) if op.f == "txn"
    ]
    assert {len(op.value) for op in txns} == {1, 2, 3, 4}
    kinds = Counter(m[0] for op in txns for m in op.value)
    assert kinds["send"] > 1000 and kinds["poll"] > 1000
    plain = take(Generator(GenOptions(txn=False), 5), 3000)
    fs = Counter(op.f for op in plain)
    assert set(fs) == {"send", "poll", "assign"}
    for op in plain:
        if op.f == "send":
            assert all(m[0] == "send" for m in op.value)
        if op.f == "poll":
            assert op.value == [["poll"]]


def test_crash_every_and_reassignment_subsets() -> None:
    o = GenOptions(crash_every=100, sub_via="subscribe", reassign_p=0.1)
    ops = take(Generator(o, 1), 1000)
    assert [i for i, op in enumerate(ops) if op.f == "crash"] == list(range(99, 1000, 100))
    subs = [op for op in ops if op.f == "subscribe"]
    assert subs and all(1 <= len(op.value) <= o.active_keys for op in subs)
    assert all(op.value == sorted(set(op.value)) for op in subs)


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="active_keys"):
        GenOptions(n_keys=2, active_keys=3)
    with pytest.raises(ValueError, match="abort_p"):
        GenOptions(abort_p=1.5)
    with pytest.raises(ValueError, match="sub_via"):
        GenOptions(sub_via="poll")


@pytest.mark.parametrize("txn", [False, True])
def test_stop_polls_after_ends_every_read_and_nothing_else(txn: bool) -> None:
    """A consumer that stops (docs/soak.md's degraded run): after N ops no poll, neither as
    an op nor inside a transaction; before it the stream is the same as without the knob."""
    base = Generator(GenOptions(txn=txn, reassign_p=0.0), seed=11)
    stopping = Generator(GenOptions(txn=txn, reassign_p=0.0, stop_polls_after=200), seed=11)
    before = [stopping.next() for _ in range(200)]
    assert before == [base.next() for _ in range(200)]
    assert any("poll" in repr(op.value) for op in before)
    after = [stopping.next() for _ in range(500)]
    assert all(m[0] == "send" for op in after for m in op.value)


def test_stop_polls_after_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="stop_polls_after"):
        GenOptions(stop_polls_after=-1)
