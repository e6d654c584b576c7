"""Order analyses (checker/order.py): the consumer's position (poll-skip,
nonmonotonic-poll), order inside one op (int-poll-skip, int-nonmonotonic-poll,
int-nonmonotonic-send, int-send-skip) and the producer's order (nonmonotonic-send).

The consumer-position rule after failed and indeterminate reads has its own file,
test_order_positions.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.tests.checker.common import check_ops_from, first_example
from ktrial.tests.histlines import (
    POLL,
    examples,
    fail,
    info,
    inv,
    isnd,
    ok,
    parsed,
    pl,
    poll_op,
    run,
    send_op,
    snd,
    txn_op,
    types,
)


def _log3() -> list[dict]:
    return [send_op(9, 1, 10, 0), send_op(9, 1, 11, 1), send_op(9, 1, 12, 2)]


def test_poll_skip_bad_with_assign_not_with_subscribe() -> None:
    ops = [
        *_log3(),
        poll_op(1, {"1": [[0, 10]]}),
        poll_op(1, {"1": [[2, 12]]}),
        poll_op(2, {"1": [[1, 11]]}),
    ]
    res = check_ops_from(parsed(*ops), sub_via="assign")
    ex = first_example(res, "poll-skip")
    assert ex["key"] == "1" and ex["skipped"] == [11] and "11" in ex["explanation"]
    assert res["bad_error_types"] == ["poll-skip"]
    sub = check_ops_from(parsed(*ops), sub_via="subscribe")
    assert "poll-skip" in sub["error_types"] and sub["valid"] is True


def test_sub_via_is_inferred_from_subscribe_ops() -> None:
    ops = [
        {"process": 1, "type": "ok", "f": "subscribe", "value": [1]},
        *_log3(),
        poll_op(1, {"1": [[0, 10]]}),
        poll_op(1, {"1": [[2, 12]]}),
        poll_op(2, {"1": [[1, 11]]}),
    ]
    res = check_ops_from(parsed(*ops))
    assert res["stats"]["options"]["sub_via"] == "subscribe"
    assert res["valid"] is True


def test_gap_from_transaction_marker_is_not_a_skip() -> None:
    # Offset 2 is a commit marker: never returned by anyone.
    ops = [
        txn_op(9, [["send", 1, [0, 10]], ["send", 1, [1, 11]]]),
        send_op(9, 1, 12, 3),
        poll_op(1, {"1": [[0, 10], [1, 11]]}),
        poll_op(1, {"1": [[3, 12]]}),
        poll_op(2, {"1": [[0, 10], [1, 11], [3, 12]]}),
    ]
    res = check_ops_from(parsed(*ops))
    assert res["valid"] is True, res["error_types"]
    assert not {"poll-skip", "int-poll-skip"} & set(res["error_types"])


def test_nonmonotonic_poll() -> None:
    res = check_ops_from(
        parsed(
            *_log3(), poll_op(1, {"1": [[0, 10], [1, 11]]}), poll_op(1, {"1": [[1, 11], [2, 12]]})
        )
    )
    ex = first_example(res, "nonmonotonic-poll")
    assert ex["key"] == "1" and ex["offsets"] == [1, 1] and "offset 1" in ex["explanation"]
    assert "nonmonotonic-poll" in res["bad_error_types"]


def test_reread_after_failed_poll_is_not_nonmonotonic() -> None:
    ops = [
        *_log3(),
        poll_op(1, {"1": [[0, 10]]}),
        poll_op(1, {"1": [[1, 11], [2, 12]]}, typ="fail"),  # the driver rewinds to offset 1
        poll_op(1, {"1": [[1, 11], [2, 12]]}),
    ]
    res = check_ops_from(parsed(*ops))
    assert res["valid"] is True, res["error_types"]


def test_no_rewind_after_info_poll_is_not_a_skip() -> None:
    """With --no-consumer-rewinds (Jepsen's rule, the default, calls it a poll-skip:
    tests/checker/test_order_positions.py)."""
    ops = [
        *_log3(),
        poll_op(1, {"1": [[0, 10]]}),
        poll_op(1, {"1": [[1, 11]]}, typ="info"),
        poll_op(1, {"1": [[2, 12]]}),
        poll_op(2, {"1": [[1, 11]]}),
    ]
    res = check_ops_from(parsed(*ops), consumer_rewinds=False)
    assert res["valid"] is True, res["error_types"]


def test_seek_to_beginning_and_new_process_start_fresh() -> None:
    ops = [
        *_log3(),
        poll_op(1, {"1": [[0, 10], [1, 11], [2, 12]]}),
        {"process": 1, "type": "ok", "f": "assign", "value": [1], "seek_to_beginning": True},
        poll_op(1, {"1": [[0, 10]]}),
        poll_op(5, {"1": [[0, 10], [1, 11]]}),  # a crashed client's successor
    ]
    res = check_ops_from(parsed(*ops))
    assert res["valid"] is True, res["error_types"]


def test_rebalanced_key_is_not_judged() -> None:
    ops = [
        *_log3(),
        poll_op(1, {"1": [[0, 10], [1, 11]]}),
        poll_op(1, {"1": [[0, 10], [2, 12], [1, 11], [2, 12]]}, rebalance_log=[{"keys": [1]}]),
    ]
    res = check_ops_from(parsed(*ops))
    assert not {"int-poll-skip", "int-nonmonotonic-poll", "nonmonotonic-poll"} & set(
        res["error_types"]
    )


def test_int_poll_skip_and_int_nonmonotonic_poll() -> None:
    res = check_ops_from(
        parsed(*_log3(), poll_op(1, {"1": [[0, 10], [2, 12]]}), poll_op(2, {"1": [[1, 11]]}))
    )
    ex = first_example(res, "int-poll-skip")
    assert ex["skipped"] == [11] and "offset 2" in ex["explanation"]
    res = check_ops_from(parsed(*_log3(), poll_op(1, {"1": [[1, 11], [0, 10], [2, 12]]})))
    ex = first_example(res, "int-nonmonotonic-poll")
    assert ex["values"] == [11, 10] and "int-nonmonotonic-poll" in res["bad_error_types"]


def test_nonmonotonic_send() -> None:
    res = check_ops_from(
        parsed(send_op(0, 1, 10, 5), send_op(0, 1, 11, 3), poll_op(1, {"1": [[3, 11], [5, 10]]}))
    )
    ex = first_example(res, "nonmonotonic-send")
    assert ex["key"] == "1" and ex["offsets"] == [5, 3] and "offset 3" in ex["explanation"]
    assert "nonmonotonic-send" in res["bad_error_types"]


def test_int_nonmonotonic_send() -> None:
    res = check_ops_from(
        parsed(
            txn_op(0, [["send", 1, [4, 10]], ["send", 1, [3, 11]]]),
            poll_op(1, {"1": [[3, 11], [4, 10]]}),
        )
    )
    ex = first_example(res, "int-nonmonotonic-send")
    assert ex["values"] == [10, 11] and "int-nonmonotonic-send" in res["bad_error_types"]


def test_int_send_skip_is_normal() -> None:
    res = check_ops_from(
        parsed(
            inv(0, "txn", [["send", 1, 10], ["send", 1, 12]]),
            send_op(1, 1, 11, 1),
            txn_op(0, [["send", 1, [0, 10]], ["send", 1, [2, 12]]]),
            poll_op(2, {"1": [[0, 10], [1, 11], [2, 12]]}),
        )
    )
    ex = first_example(res, "int-send-skip")
    assert ex["skipped"] == [11]
    assert res["valid"] is True and res["bad_error_types"] == []


def test_failed_txn_retried_in_another_order_is_not_int_nonmonotonic(tmp_path: Path) -> None:
    """Txn 1 sends 1 then 2 (offsets 0, 1), aborts; its retry sends 2 then 1 and commits
    (offsets 3, 4). Nothing is wrong: the aborted txn's own sends were acknowledged in
    order. The checker places the aborted op's sends where the retry's records sit and
    says it "sent value 1 at offset 4" (it was acknowledged at offset 0)."""
    res = run(
        tmp_path,
        [
            inv(1, "txn", [isnd(1, 1), isnd(1, 2)]),
            fail(1, "txn", [snd(1, 0, 1), snd(1, 1, 2)], error="abort"),
            inv(1, "txn", [isnd(1, 2), isnd(1, 1)]),
            ok(1, "txn", [snd(1, 3, 2), snd(1, 4, 1)]),
            inv(2, "poll", POLL),
            ok(2, "poll", [pl({"1": [[3, 2], [4, 1]]})]),
        ],
    )
    assert types(res) == (set(), set()), res["anomalies"]
    assert res["valid"] is True


@pytest.mark.parametrize("acked", [True, False], ids=["fail-with-acks", "fail-without-acks"])
def test_a_failed_op_whose_values_a_retry_sent_in_another_order_is_not_nonmonotonic(
    tmp_path: Path, acked: bool
) -> None:
    """A failed op certainly did not take effect (docs/anomalies.md), so its sends land
    nowhere: no int-nonmonotonic-send can be blamed on it. The ok retry re-sent the
    same values (the checker accepts such retries: a failed op wrote nothing) in the
    other order, and they landed in the retry's order: nothing is wrong. (Found while
    judging an equivalent mutant of KeyLog.pos; order.internal now judges committed
    ops only.)"""
    failed = [snd(1, 5, 10), snd(1, 6, 11)] if acked else [["send", 1, 10], ["send", 1, 11]]
    res = run(
        tmp_path,
        [
            fail(1, "txn", failed),
            ok(2, "txn", [snd(1, 0, 11), snd(1, 1, 10)]),
            poll_op(3, {"1": [[0, 11], [1, 10]]}),
        ],
    )
    assert types(res) == (set(), set())
    assert res["valid"] is True


def test_the_biggest_skip_is_the_example_kept(tmp_path: Path) -> None:
    """Mutant: poll-skip examples ranked smallest jump first.

    anomalies.md keeps the most telling examples first (results.py: biggest jumps);
    with room for one, process 2's jump over three records is kept, not process 3's
    jump over one. count still says two."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, i, 10 + i) for i in range(6)]),
            poll_op(3, {"1": [[0, 10]]}),
            poll_op(3, {"1": [[2, 12]]}),
            poll_op(2, {"1": [[0, 10]]}),
            poll_op(2, {"1": [[4, 14], [5, 15]]}),
            poll_op(4, {"1": [[i, 10 + i] for i in range(6)]}),
        ],
        max_examples=1,
    )
    assert types(res) == ({"poll-skip"}, {"poll-skip"})
    assert res["anomalies"]["poll-skip"]["count"] == 2
    (ex,) = examples(res, "poll-skip")
    assert (ex["process"], ex["delta"], ex["skipped"], ex["offsets"]) == (
        2,
        4,
        [11, 12, 13],
        [0, 4],
    )


def test_a_poll_skip_after_an_indeterminate_read_names_that_op(tmp_path: Path) -> None:
    """Mutants: the poll-skip example forgets the info op in between (its id, or the
    note). The consumer read offset 0, an info poll read 1..2 (the driver may not
    rewind), then its next ok read began at 4: only 13 (offset 3) was skipped, and the
    explanation must say why 11 and 12 are not counted: op 2 read up to offset 2."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, i, 10 + i) for i in range(5)]),
            poll_op(2, {"1": [[0, 10]]}),
            poll_op(2, {"1": [[1, 11], [2, 12]]}, typ="info", error="timeout"),
            poll_op(2, {"1": [[4, 14]]}),
            poll_op(3, {"1": [[i, 10 + i] for i in range(5)]}),
        ],
        consumer_rewinds=False,  # the relaxed rule; Jepsen's: tests/checker/test_order_positions.py
    )
    assert types(res) == ({"poll-skip"}, {"poll-skip"})
    (ex,) = examples(res, "poll-skip")
    assert (ex["key"], ex["values"], ex["offsets"], ex["skipped"]) == ("1", [10, 14], [0, 4], [13])
    assert ex["ops"] == [1, 3, 2]  # the pair, then the info op the text names
    assert "op 2 (process 2, info poll" in ex["explanation"]
    assert "read up to offset 2" in ex["explanation"]


def test_nonmonotonic_send_compares_consecutive_sends(tmp_path: Path) -> None:
    """Sends land at 5, then 2, then 3: only the 5 -> 2 pair goes back (Jepsen compares
    each send with the previous one, not with the furthest).

    Kills order.py:sends updating its state only when a send lands further."""
    lines = [
        ok(0, "send", [snd(1, 5, 15)]),
        ok(0, "send", [snd(1, 2, 12)]),
        ok(0, "send", [snd(1, 3, 13)]),
        ok(1, "poll", [pl({"1": [[2, 12], [3, 13], [5, 15]]})]),
    ]
    res = run(tmp_path, lines)
    assert res["anomalies"]["nonmonotonic-send"]["count"] == 1
    (ex,) = examples(res, "nonmonotonic-send")
    assert ex["values"] == [15, 12] and ex["offsets"] == [5, 2] and ex["ops"] == [0, 1]


def test_a_poll_skip_after_a_failed_read_lists_only_records_nobody_read(tmp_path: Path) -> None:
    """Process 1 read offset 0 (ok), offsets 1-2 in an indeterminate poll, then began its
    next ok read at offset 4: the skip is over offset 3 (value 13) alone, and the
    example names the info op that read up to offset 2.

    Kills order.py:_poll_example `sk = kl.values[lo + 1 : d1]` and
    order.py:polls dropping the failed op id."""
    lines = [
        ok(0, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(1, 2, 12), snd(1, 3, 13), snd(1, 4, 14)]),
        ok(1, "assign", [1]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
        info(1, "poll", [pl({"1": [[1, 11], [2, 12]]})]),
        ok(1, "poll", [pl({"1": [[4, 14]]})]),
        ok(2, "poll", [pl({"1": [[0, 10], [1, 11], [2, 12], [3, 13], [4, 14]]})]),
    ]
    # the relaxed rule (--no-consumer-rewinds); Jepsen's: tests/checker/test_order_positions.py
    res = run(tmp_path, lines, consumer_rewinds=False)
    (ex,) = examples(res, "poll-skip")
    assert ex["skipped"] == [13]
    assert ex["values"] == [10, 14] and ex["offsets"] == [0, 4]
    assert ex["ops"] == [2, 4, 3]
    assert "1 record(s) it never read: 13." in ex["explanation"]
    assert "op 3 (process 1, info poll" in ex["explanation"]
    assert "read up to offset 2" in ex["explanation"]


def test_nonmonotonic_send_compares_the_first_send_of_the_next_op(tmp_path: Path) -> None:
    """Op 0 sent 13 (offset 3); the same producer's next op sent 11 (offset 1) then 14
    (offset 4): its first send lands before the previous one.

    Kills order.py:sends comparing the op's last send (`known[-1]`)."""
    lines = [
        ok(0, "send", [snd(1, 3, 13)]),
        ok(0, "send", [snd(1, 1, 11), snd(1, 4, 14)]),
        ok(1, "poll", [pl({"1": [[1, 11], [3, 13], [4, 14]]})]),
    ]
    res = run(tmp_path, lines)
    assert "nonmonotonic-send" in res["bad_error_types"]
    (ex,) = examples(res, "nonmonotonic-send")
    assert ex["values"] == [13, 11] and ex["offsets"] == [3, 1] and ex["ops"] == [0, 1]
    assert "micro-op 0" in ex["explanation"]


def test_an_uncommitted_info_transaction_says_nothing_about_send_order(tmp_path: Path) -> None:
    """An info transaction nobody read never committed (docs/anomalies.md): its sends,
    acknowledged at offsets 2 then 1 before the producer's 5, are no nonmonotonic-send
    and no int-nonmonotonic-send (docs/anomalies.md: only ops that must have
    committed are judged).

    Kills order.py:sends and order.py:internal judging uncommitted info ops."""
    lines = [
        ok(0, "send", [snd(1, 5, 15)]),
        info(0, "txn", [snd(1, 2, 12), snd(1, 1, 11)]),
        # a failed poll saw the aborted records: they are in the log, yet aborted
        fail(2, "poll", [pl({"1": [[1, 11], [2, 12]]})]),
        ok(1, "poll", [pl({"1": [[5, 15]]})]),
    ]
    res = run(tmp_path, lines)
    assert res["valid"] is True
    assert res["error_types"] == []


def test_a_committed_info_transaction_is_judged_for_send_order(tmp_path: Path) -> None:
    """Mutant: producer order skips every info op, committed or not.

    The same info transaction, once an ok op read one of its values, must have
    committed, so its sends are judged: 12 at offset 2 after the producer's 15 at
    offset 5 goes back, and 12 -> 11 inside it goes back too."""
    lines = [
        ok(0, "send", [snd(1, 5, 15)]),
        info(0, "txn", [snd(1, 2, 12), snd(1, 1, 11)]),
        ok(1, "poll", [pl({"1": [[1, 11], [2, 12], [5, 15]]})]),
    ]
    res = run(tmp_path, lines)
    assert {"nonmonotonic-send", "int-nonmonotonic-send"} <= set(res["bad_error_types"])
    (ex,) = examples(res, "nonmonotonic-send")
    assert ex["values"] == [15, 12] and ex["ops"] == [0, 1]
    (ix,) = examples(res, "int-nonmonotonic-send")
    assert ix["values"] == [12, 11] and ix["offsets"] == [2, 1]
