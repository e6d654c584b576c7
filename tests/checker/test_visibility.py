"""Visibility analyses (checker/visibility.py): lost-write, unseen, duplicate,
inconsistent-offsets, G1a, precommitted-read and torn-transaction, each with its
legal near-misses.
"""

from __future__ import annotations

from pathlib import Path

from ktrial.tests.checker.common import check_ops_from, first_example, run_timed
from ktrial.tests.histlines import (
    S,
    examples,
    inv,
    ok,
    op,
    parsed,
    pl,
    poll_op,
    run,
    send_op,
    snd,
    txn_op,
    types,
)


def test_inconsistent_offsets() -> None:
    res = check_ops_from(
        parsed(send_op(0, 1, 10, 0), poll_op(1, {"1": [[0, 10]]}), poll_op(2, {"1": [[0, 99]]}))
    )
    ex = first_example(res, "inconsistent-offsets")
    assert ex["key"] == "1" and ex["offset"] == 0 and ex["values"] == [10, 99]
    assert "offset 0" in ex["explanation"] and "99" in ex["explanation"]
    assert "inconsistent-offsets" in res["bad_error_types"]


def test_duplicate() -> None:
    res = check_ops_from(
        parsed(
            send_op(0, 1, 10, 0),
            send_op(0, 1, 11, 1),
            poll_op(1, {"1": [[0, 10], [1, 11], [2, 10]]}),
        )
    )
    ex = first_example(res, "duplicate")
    assert ex["key"] == "1" and ex["value"] == 10 and ex["offsets"] == [0, 2]
    assert "10" in ex["explanation"] and "0, 2" in ex["explanation"]
    assert res["valid"] is False


def test_lost_write_and_unseen() -> None:
    res = check_ops_from(
        parsed(
            send_op(0, 1, 10, 0),
            send_op(0, 1, 11, 1),
            send_op(0, 1, 12, 2),
            poll_op(1, {"1": [[0, 10], [2, 12]]}),
        )
    )
    ex = first_example(res, "lost-write")
    assert ex["key"] == "1" and ex["value"] == 11 and ex["offset"] == 1
    assert "11" in ex["explanation"] and "offset 1" in ex["explanation"]
    assert "unseen" in res["bad_error_types"] and "lost-write" in res["bad_error_types"]


def test_unseen_without_later_reads_is_not_lost() -> None:
    res = check_ops_from(
        parsed(send_op(0, 1, 10, 0), send_op(0, 1, 11, 1), poll_op(1, {"1": [[0, 10]]}))
    )
    assert "lost-write" not in res["error_types"]
    ex = first_example(res, "unseen")
    assert ex["key"] == "1" and ex["values"] == [11] and "11" in ex["explanation"]
    assert res["metrics"]["unseen"]["final"] == 1


def test_info_send_never_read_is_neither_lost_nor_unseen() -> None:
    res = check_ops_from(
        parsed(
            send_op(0, 1, 10, 0),
            send_op(0, 1, 11, None, typ="info"),
            send_op(2, 1, 12, 2),
            poll_op(1, {"1": [[0, 10], [2, 12]]}),
        )
    )
    assert res["valid"] is True, res["error_types"]


def test_info_send_that_was_read_must_have_committed() -> None:
    # The info op's first value was read, so it committed: its second value is lost.
    res = check_ops_from(
        parsed(
            txn_op(0, [["send", 1, [0, 10]], ["send", 2, [0, 20]]], typ="info"),
            send_op(2, 2, 21, 1),
            poll_op(1, {"1": [[0, 10]], "2": [[1, 21]]}),
        )
    )
    ex = first_example(res, "lost-write")
    assert ex["value"] == 20
    assert "torn-transaction" in res["bad_error_types"]


def test_lost_write_by_realtime_with_null_offsets() -> None:
    # Queen answers -1 (unknown) for transactional sends: order comes from real time.
    res = check_ops_from(
        parsed(
            txn_op(0, [["send", 1, [-1, 10]]]),
            txn_op(0, [["send", 1, [-1, 11]]]),
            poll_op(1, {"1": [[5, 11]]}),
        )
    )
    ex = first_example(res, "lost-write")
    assert ex["value"] == 10 and "unknown offset" in ex["explanation"]


def test_null_offsets_read_back_are_valid() -> None:
    res = check_ops_from(
        parsed(
            txn_op(0, [["send", 1, [-1, 10]], ["send", 2, [None, 20]]]),
            poll_op(1, {"1": [[0, 10]], "2": [[0, 20]]}),
        )
    )
    assert res["valid"] is True, res["error_types"]


def test_torn_transaction() -> None:
    res = check_ops_from(
        parsed(
            txn_op(0, [["send", "a", [0, 1]], ["send", "b", [0, 2]]]),
            send_op(2, "b", 3, 1),
            poll_op(1, {"a": [[0, 1]], "b": [[1, 3]]}),
        )
    )
    ex = first_example(res, "torn-transaction")
    assert ex["keys_visible"] == ["a"] and ex["keys_lost"] == ["b"]
    assert "key b" in ex["explanation"]


def test_g1a_aborted_read() -> None:
    res = check_ops_from(
        parsed(txn_op(0, [["send", 1, [0, 10]]], typ="fail"), poll_op(1, {"1": [[0, 10]]}))
    )
    ex = first_example(res, "G1a")
    assert ex["key"] == "1" and ex["value"] == 10 and "failed" in ex["explanation"]
    assert "G1a" in res["bad_error_types"]


def test_aborted_records_seen_only_by_failed_polls_is_not_g1a() -> None:
    res = check_ops_from(
        parsed(
            txn_op(0, [["send", 1, [0, 10]]], typ="fail"),
            send_op(0, 1, 11, 2),
            poll_op(1, {"1": [[0, 10]]}, typ="fail"),
            poll_op(2, {"1": [[2, 11]]}),
        )
    )
    assert "G1a" not in res["error_types"]
    assert res["valid"] is True, res["error_types"]


def test_a_failed_send_retried_with_the_same_value_is_not_g1a() -> None:
    """fail = certainly not written; the retry that succeeded wrote the value."""
    res = check_ops_from(
        parsed(
            send_op(0, 1, 10, None, typ="fail"),
            send_op(0, 1, 10, 0),
            poll_op(1, {"1": [[0, 10]]}),
        )
    )
    assert "G1a" not in res["error_types"]
    assert res["valid"] is True, res["error_types"]
    # ... but a value only the failed op sent is still an aborted read
    res = check_ops_from(parsed(send_op(0, 1, 10, None, typ="fail"), poll_op(1, {"1": [[0, 10]]})))
    assert "G1a" in res["bad_error_types"]


def test_precommitted_read() -> None:
    res = check_ops_from(parsed(txn_op(0, [["send", 1, [0, 10]], ["poll", {"1": [[0, 10]]}]])))
    ex = first_example(res, "precommitted-read")
    assert ex["key"] == "1" and ex["value"] == 10 and "own" in ex["explanation"]


def test_torn_info_transaction_that_must_have_committed(tmp_path: Path) -> None:
    # An info txn wrote x=1 and y=2 (both offset 0); x=1 was read by an ok op, so it
    # committed; y=3 at offset 1 was read but y=2 never was: lost-write and torn.
    h = [
        inv(0, "txn", [["send", "x", 1], ["send", "y", 2]], 0),
        op(0, "info", "txn", [snd("x", 0, 1), snd("y", 0, 2)], S, error="commit timeout"),
        ok(1, "send", [snd("y", 1, 3)], 2 * S),
        ok(2, "poll", [pl({"x": [[0, 1]], "y": [[1, 3]]})], 3 * S),
    ]
    res = run_timed(tmp_path, h)
    assert {"lost-write", "torn-transaction"} <= set(res["bad_error_types"])
    (ex,) = res["anomalies"]["torn-transaction"]["examples"]
    assert ex["keys_visible"] == ["x"] and ex["keys_lost"] == ["y"]
    assert ex["visible"] == [["x", 1]] and ex["lost"] == [["y", 2]]


def test_a_transaction_read_on_one_key_and_unread_at_the_tail_of_another_is_not_torn(
    tmp_path: Path,
) -> None:
    # y=2 is unseen (nothing later on y was read): not a lost-write, so not torn.
    h = [
        inv(0, "txn", [["send", "x", 1], ["send", "y", 2]], 0),
        ok(0, "txn", [snd("x", 0, 1), snd("y", 0, 2)], S),
        ok(2, "poll", [pl({"x": [[0, 1]]})], 3 * S),
    ]
    res = run_timed(tmp_path, h)
    assert set(res["error_types"]) == {"unseen"}


def test_torn_info_transaction_explanation_names_offsets_and_readers(tmp_path: Path) -> None:
    h = [
        inv(0, "txn", [["send", "x", 1], ["send", "y", 2]], 0),
        ok(0, "txn", [snd("x", 5, 1), snd("y", 7, 2)], S),
        ok(1, "send", [snd("y", 8, 3)], 2 * S),
        ok(2, "poll", [pl({"x": [[5, 1]], "y": [[8, 3]]})], 3 * S),
    ]
    res = run_timed(tmp_path, h)
    (ex,) = res["anomalies"]["torn-transaction"]["examples"]
    text = ex["explanation"]
    # the lost value's offset (7), the later record read past it (8), the reader (op 3)
    assert "offset 7" in text and "offset 8" in text and "op 3" in text


def test_lost_write_bound_counts_where_a_duplicate_was_read(tmp_path: Path) -> None:
    """Mutant: the lost-write bound ignores the later offset where a duplicate was read.

    Value 11 sits at offsets 1 and 3 (a duplicate: a retry landed again after 12).
    12, acknowledged at offset 2, was never read by an ok op, yet op 3 read value 11
    at offset 3, a later position of key 1: docs/anomalies.md's lost-write, besides the
    duplicate and unseen."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, 0, 10), snd(1, 1, 11)]),
            ok(5, "send", [snd(1, 2, 12)]),
            poll_op(2, {"1": [[0, 10], [1, 11]]}),
            poll_op(3, {"1": [[3, 11]]}),
        ],
    )
    assert {"duplicate", "unseen"} <= types(res)[1]
    assert "lost-write" in types(res)[1]
    (ex,) = examples(res, "lost-write")
    assert (ex["key"], ex["value"], ex["offset"], ex["max_read_offset"]) == ("1", 12, 2, 3)


def test_lost_write_at_a_conflicting_offset_is_reported(tmp_path: Path) -> None:
    """Mutant: an acknowledged send whose offset an ok poll read with another value is
    not judged for lost-write.

    12 was acknowledged at offset 2, but an ok poll read 99 there: inconsistent
    offsets, and 12 was never read though consumers reached its offset (Jepsen counts
    acknowledged sends at or below the highest offset read), and it is unseen."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, 0, 10), snd(1, 1, 11)]),
            ok(5, "send", [snd(1, 2, 12)]),
            poll_op(2, {"1": [[0, 10], [1, 11], [2, 99]]}),
        ],
    )
    assert types(res)[1] == {"inconsistent-offsets", "lost-write", "unseen"}
    (ex,) = examples(res, "lost-write")
    assert (ex["key"], ex["value"], ex["offset"], ex["max_read_offset"]) == ("1", 12, 2, 2)
    (ex,) = examples(res, "inconsistent-offsets")
    assert (ex["key"], ex["offset"], ex["values"]) == ("1", 2, [12, 99])


def test_lost_write_at_a_conflicting_offset_does_not_say_later(tmp_path: Path) -> None:
    """Mutant: the explanation says a record was read at a "later offset" 2 when the
    conflicting record sits at 12's own offset 2."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, 0, 10), snd(1, 1, 11)]),
            ok(5, "send", [snd(1, 2, 12)]),
            poll_op(2, {"1": [[0, 10], [1, 11], [2, 99]]}),
        ],
    )
    (ex,) = examples(res, "lost-write")
    assert "later offset 2" not in ex["explanation"]
    assert "offset 2" in ex["explanation"]


def test_unseen_count_is_values_not_keys(tmp_path: Path) -> None:
    """Mutant: unseen's count is its number of examples (one per key).

    An unseen anomaly is a value (docs/anomalies.md: "values sent by ok ops that no ok poll ever
    read"), so count is the number of values; each example is one key's values, with
    their acknowledged offsets."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(2, 0, 20), snd(1, 2, 12)]),
            poll_op(2, {"1": [[0, 10]]}),
        ],
    )
    assert types(res) == ({"unseen"}, {"unseen"})
    assert res["anomalies"]["unseen"]["count"] == 3
    by_key = {e["key"]: e for e in examples(res, "unseen")}
    assert {k: (e["count"], e["values"], e["offsets"]) for k, e in by_key.items()} == {
        "1": (2, [11, 12], [1, 2]),
        "2": (1, [20], [0]),
    }


def test_a_transaction_lost_on_the_key_it_is_visible_on_is_not_torn(tmp_path: Path) -> None:
    """A transaction sent 10 and 11 to key 1; 10 was read, 11 lost. That is a lost-write,
    but the transaction is not torn across keys (visible on some keys, lost on others).

    Kills visibility.py:torn_transactions dropping the different-keys condition."""
    lines = [
        ok(0, "txn", [snd(1, 0, 10), snd(1, 1, 11)]),
        ok(0, "send", [snd(1, 2, 12)]),
        ok(1, "poll", [pl({"1": [[0, 10], [2, 12]]})]),
    ]
    res = run(tmp_path, lines)
    assert "lost-write" in res["bad_error_types"]
    assert "torn-transaction" not in res["error_types"]


def test_a_torn_transaction_names_offsets_and_every_reader(tmp_path: Path) -> None:
    """Op 1's transaction sent 11 to key 1 (offset unknown to its producer, read at
    offset 1 by op 3) and 21 to key 2 (offset 0, lost: op 4 read 22 at offset 1).
    The example places 11 where it was read, and its ops are the transaction, the
    reader of the visible value and the op that read past the lost one.

    Kills visibility.py:_torn_details `off = o` and dropping readers or max readers
    from its ops."""
    lines = [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(0, "txn", [snd(1, None, 11), snd(2, 0, 21)]),
        ok(0, "send", [snd(2, 1, 22)]),
        ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
        ok(2, "poll", [pl({"2": [[1, 22]]})]),
    ]
    res = run(tmp_path, lines)
    (ex,) = examples(res, "torn-transaction")
    assert ex["ops"] == [1, 3, 4]
    assert ex["visible_at"] == [{"key": "1", "value": 11, "offset": 1, "reader": 3}]
    (lost,) = ex["lost_at"]
    assert lost["offset"] == 0 and lost["max_reader"] == 4 and lost["max_read_offset"] == 1
    text = ex["explanation"]
    assert "11 on key 1 at offset 1 (read by op 3)" in text
    assert "21 on key 2 at offset 0, though op 4 read value 22 at offset 1 past it" in text
