"""Each anomaly type on a small hand-written history, and the legal near-miss beside it.

Histories are written as Jepsen-style op dicts; most omit invokes, which the
checker must accept (a completion without an invoke counts as invoked at its
own position). Every positive case checks the type is named and that its first
example's explanation names the key and the value or offset at fault.
"""

from __future__ import annotations

from typing import Any

from ktrial.checker import CheckOptions, check
from ktrial.histories.jsonl import op_from_json


def H(*ops: dict[str, Any]) -> list[Any]:
    """Ops from dicts: index = position, time = position in ms unless given."""
    out = []
    for i, o in enumerate(ops):
        d = dict(o)
        d.setdefault("index", i)
        d.setdefault("time", i * 1_000_000)
        out.append(op_from_json(d, i))
    return out


def send(p: int, k: Any, v: int, o: int | None, typ: str = "ok", f: str = "send") -> dict:
    return {"process": p, "type": typ, "f": f, "value": [["send", k, [o, v]]]}


def poll(p: int, recs: dict[Any, list[list[Any]]], typ: str = "ok", **extra: Any) -> dict:
    return {"process": p, "type": typ, "f": "poll", "value": [["poll", recs]], **extra}


def txn(p: int, mops: list[Any], typ: str = "ok") -> dict:
    return {"process": p, "type": typ, "f": "txn", "value": mops}


def inv(p: int, f: str, mops: list[Any]) -> dict:
    return {"process": p, "type": "invoke", "f": f, "value": mops}


def run(ops: list[Any], **opts: Any) -> dict[str, Any]:
    return check(ops, CheckOptions(**opts))


def example(res: dict[str, Any], name: str) -> dict[str, Any]:
    assert name in res["error_types"], res["error_types"]
    ex = res["anomalies"][name]["examples"][0]
    assert isinstance(ex["explanation"], str) and ex["explanation"]
    return ex


# ------------------------------------------------------------------------------ valid


def test_a_correct_history_is_valid_with_metrics() -> None:
    res = run(
        H(
            inv(0, "send", [["send", 1, 10]]),
            send(0, 1, 10, 0),
            send(0, 1, 11, 1),
            inv(1, "poll", [["poll"]]),
            poll(1, {"1": [[0, 10], [1, 11]]}),
        )
    )
    assert res["valid"] is True
    assert res["error_types"] == [] and res["bad_error_types"] == []
    m = res["metrics"]
    assert m["counts"]["send"]["ok"] == 2 and m["counts"]["poll"]["ok"] == 1
    # the second send has no invoke: its latency is unknown, so it is left out
    assert m["latency_ms"]["send"]["ok"]["count"] == 1
    assert m["latency_ms"]["poll"]["ok"]["max"] == 1.0  # invoked at 3 ms, done at 4 ms
    assert m["unseen"]["final"] == 0
    assert set(m["realtime_lag"]) == {"worst", "per_key", "per_consumer", "over_time"}
    assert res["stats"]["keys"] == 1 and res["stats"]["reads"] == 2


def test_nothing_read_is_unknown() -> None:
    res = run(H(send(0, 1, 10, 0, typ="fail")))
    assert res["valid"] == "unknown"


def test_nothing_read_by_an_ok_op_is_unknown() -> None:
    """Only indeterminate and failed polls read (the cluster never answered a consumer
    in full): losses cannot be judged, so the verdict is unknown, not valid."""
    res = run(
        H(
            send(0, 1, 10, 0, typ="info"),
            poll(1, {"1": [[0, 10]]}, typ="info"),
            poll(2, {"1": [[0, 10]]}, typ="fail"),
        )
    )
    assert res["valid"] == "unknown" and res["bad_error_types"] == []
    # ... but what those polls show is still judged: two values at one offset
    res = run(
        H(
            send(0, 1, 10, 0, typ="info"),
            poll(1, {"1": [[0, 10]]}, typ="info"),
            poll(2, {"1": [[0, 11]]}, typ="fail"),
        )
    )
    assert res["valid"] is False and "inconsistent-offsets" in res["bad_error_types"]


# ------------------------------------------------------------------------------ log truth


def test_inconsistent_offsets() -> None:
    res = run(H(send(0, 1, 10, 0), poll(1, {"1": [[0, 10]]}), poll(2, {"1": [[0, 99]]})))
    ex = example(res, "inconsistent-offsets")
    assert ex["key"] == "1" and ex["offset"] == 0 and ex["values"] == [10, 99]
    assert "offset 0" in ex["explanation"] and "99" in ex["explanation"]
    assert "inconsistent-offsets" in res["bad_error_types"]


def test_duplicate() -> None:
    res = run(H(send(0, 1, 10, 0), send(0, 1, 11, 1), poll(1, {"1": [[0, 10], [1, 11], [2, 10]]})))
    ex = example(res, "duplicate")
    assert ex["key"] == "1" and ex["value"] == 10 and ex["offsets"] == [0, 2]
    assert "10" in ex["explanation"] and "0, 2" in ex["explanation"]
    assert res["valid"] is False


def test_lost_write_and_unseen() -> None:
    res = run(
        H(
            send(0, 1, 10, 0),
            send(0, 1, 11, 1),
            send(0, 1, 12, 2),
            poll(1, {"1": [[0, 10], [2, 12]]}),
        )
    )
    ex = example(res, "lost-write")
    assert ex["key"] == "1" and ex["value"] == 11 and ex["offset"] == 1
    assert "11" in ex["explanation"] and "offset 1" in ex["explanation"]
    assert "unseen" in res["bad_error_types"] and "lost-write" in res["bad_error_types"]


def test_unseen_without_later_reads_is_not_lost() -> None:
    res = run(H(send(0, 1, 10, 0), send(0, 1, 11, 1), poll(1, {"1": [[0, 10]]})))
    assert "lost-write" not in res["error_types"]
    ex = example(res, "unseen")
    assert ex["key"] == "1" and ex["values"] == [11] and "11" in ex["explanation"]
    assert res["metrics"]["unseen"]["final"] == 1


def test_info_send_never_read_is_neither_lost_nor_unseen() -> None:
    res = run(
        H(
            send(0, 1, 10, 0),
            send(0, 1, 11, None, typ="info"),
            send(2, 1, 12, 2),
            poll(1, {"1": [[0, 10], [2, 12]]}),
        )
    )
    assert res["valid"] is True, res["error_types"]


def test_info_send_that_was_read_must_have_committed() -> None:
    # The info op's first value was read, so it committed: its second value is lost.
    res = run(
        H(
            txn(0, [["send", 1, [0, 10]], ["send", 2, [0, 20]]], typ="info"),
            send(2, 2, 21, 1),
            poll(1, {"1": [[0, 10]], "2": [[1, 21]]}),
        )
    )
    ex = example(res, "lost-write")
    assert ex["value"] == 20
    assert "torn-transaction" in res["bad_error_types"]


def test_lost_write_by_realtime_with_null_offsets() -> None:
    # Queen answers -1 (unknown) for transactional sends: order comes from real time.
    res = run(
        H(
            txn(0, [["send", 1, [-1, 10]]]),
            txn(0, [["send", 1, [-1, 11]]]),
            poll(1, {"1": [[5, 11]]}),
        )
    )
    ex = example(res, "lost-write")
    assert ex["value"] == 10 and "unknown offset" in ex["explanation"]


def test_null_offsets_read_back_are_valid() -> None:
    res = run(
        H(
            txn(0, [["send", 1, [-1, 10]], ["send", 2, [None, 20]]]),
            poll(1, {"1": [[0, 10]], "2": [[0, 20]]}),
        )
    )
    assert res["valid"] is True, res["error_types"]


def test_torn_transaction() -> None:
    res = run(
        H(
            txn(0, [["send", "a", [0, 1]], ["send", "b", [0, 2]]]),
            send(2, "b", 3, 1),
            poll(1, {"a": [[0, 1]], "b": [[1, 3]]}),
        )
    )
    ex = example(res, "torn-transaction")
    assert ex["keys_visible"] == ["a"] and ex["keys_lost"] == ["b"]
    assert "key b" in ex["explanation"]


def test_g1a_aborted_read() -> None:
    res = run(H(txn(0, [["send", 1, [0, 10]]], typ="fail"), poll(1, {"1": [[0, 10]]})))
    ex = example(res, "G1a")
    assert ex["key"] == "1" and ex["value"] == 10 and "failed" in ex["explanation"]
    assert "G1a" in res["bad_error_types"]


def test_aborted_records_seen_only_by_failed_polls_is_not_g1a() -> None:
    res = run(
        H(
            txn(0, [["send", 1, [0, 10]]], typ="fail"),
            send(0, 1, 11, 2),
            poll(1, {"1": [[0, 10]]}, typ="fail"),
            poll(2, {"1": [[2, 11]]}),
        )
    )
    assert "G1a" not in res["error_types"]
    assert res["valid"] is True, res["error_types"]


def test_a_failed_send_retried_with_the_same_value_is_not_g1a() -> None:
    """fail = certainly not written; the retry that succeeded wrote the value."""
    res = run(
        H(
            send(0, 1, 10, None, typ="fail"),
            send(0, 1, 10, 0),
            poll(1, {"1": [[0, 10]]}),
        )
    )
    assert "G1a" not in res["error_types"]
    assert res["valid"] is True, res["error_types"]
    # ... but a value only the failed op sent is still an aborted read
    res = run(H(send(0, 1, 10, None, typ="fail"), poll(1, {"1": [[0, 10]]})))
    assert "G1a" in res["bad_error_types"]


def test_precommitted_read() -> None:
    res = run(H(txn(0, [["send", 1, [0, 10]], ["poll", {"1": [[0, 10]]}]])))
    ex = example(res, "precommitted-read")
    assert ex["key"] == "1" and ex["value"] == 10 and "own" in ex["explanation"]


# ------------------------------------------------------------------------------ consumer order


def _log3() -> list[dict]:
    return [send(9, 1, 10, 0), send(9, 1, 11, 1), send(9, 1, 12, 2)]


def test_poll_skip_bad_with_assign_not_with_subscribe() -> None:
    ops = [
        *_log3(),
        poll(1, {"1": [[0, 10]]}),
        poll(1, {"1": [[2, 12]]}),
        poll(2, {"1": [[1, 11]]}),
    ]
    res = run(H(*ops), sub_via="assign")
    ex = example(res, "poll-skip")
    assert ex["key"] == "1" and ex["skipped"] == [11] and "11" in ex["explanation"]
    assert res["bad_error_types"] == ["poll-skip"]
    sub = run(H(*ops), sub_via="subscribe")
    assert "poll-skip" in sub["error_types"] and sub["valid"] is True


def test_sub_via_is_inferred_from_subscribe_ops() -> None:
    ops = [
        {"process": 1, "type": "ok", "f": "subscribe", "value": [1]},
        *_log3(),
        poll(1, {"1": [[0, 10]]}),
        poll(1, {"1": [[2, 12]]}),
        poll(2, {"1": [[1, 11]]}),
    ]
    res = run(H(*ops))
    assert res["stats"]["options"]["sub_via"] == "subscribe"
    assert res["valid"] is True


def test_gap_from_transaction_marker_is_not_a_skip() -> None:
    # Offset 2 is a commit marker: never returned by anyone.
    ops = [
        txn(9, [["send", 1, [0, 10]], ["send", 1, [1, 11]]]),
        send(9, 1, 12, 3),
        poll(1, {"1": [[0, 10], [1, 11]]}),
        poll(1, {"1": [[3, 12]]}),
        poll(2, {"1": [[0, 10], [1, 11], [3, 12]]}),
    ]
    res = run(H(*ops))
    assert res["valid"] is True, res["error_types"]
    assert not {"poll-skip", "int-poll-skip"} & set(res["error_types"])


def test_nonmonotonic_poll() -> None:
    res = run(H(*_log3(), poll(1, {"1": [[0, 10], [1, 11]]}), poll(1, {"1": [[1, 11], [2, 12]]})))
    ex = example(res, "nonmonotonic-poll")
    assert ex["key"] == "1" and ex["offsets"] == [1, 1] and "offset 1" in ex["explanation"]
    assert "nonmonotonic-poll" in res["bad_error_types"]


def test_reread_after_failed_poll_is_not_nonmonotonic() -> None:
    ops = [
        *_log3(),
        poll(1, {"1": [[0, 10]]}),
        poll(1, {"1": [[1, 11], [2, 12]]}, typ="fail"),  # the driver rewinds to offset 1
        poll(1, {"1": [[1, 11], [2, 12]]}),
    ]
    res = run(H(*ops))
    assert res["valid"] is True, res["error_types"]


def test_no_rewind_after_info_poll_is_not_a_skip() -> None:
    """With --no-consumer-rewinds (Jepsen's rule, the default, calls it a poll-skip:
    tests/checker/test_order_positions.py)."""
    ops = [
        *_log3(),
        poll(1, {"1": [[0, 10]]}),
        poll(1, {"1": [[1, 11]]}, typ="info"),
        poll(1, {"1": [[2, 12]]}),
        poll(2, {"1": [[1, 11]]}),
    ]
    res = run(H(*ops), consumer_rewinds=False)
    assert res["valid"] is True, res["error_types"]


def test_seek_to_beginning_and_new_process_start_fresh() -> None:
    ops = [
        *_log3(),
        poll(1, {"1": [[0, 10], [1, 11], [2, 12]]}),
        {"process": 1, "type": "ok", "f": "assign", "value": [1], "seek_to_beginning": True},
        poll(1, {"1": [[0, 10]]}),
        poll(5, {"1": [[0, 10], [1, 11]]}),  # a crashed client's successor
    ]
    res = run(H(*ops))
    assert res["valid"] is True, res["error_types"]


def test_rebalanced_key_is_not_judged() -> None:
    ops = [
        *_log3(),
        poll(1, {"1": [[0, 10], [1, 11]]}),
        poll(1, {"1": [[0, 10], [2, 12], [1, 11], [2, 12]]}, rebalance_log=[{"keys": [1]}]),
    ]
    res = run(H(*ops))
    assert not {"int-poll-skip", "int-nonmonotonic-poll", "nonmonotonic-poll"} & set(
        res["error_types"]
    )


def test_int_poll_skip_and_int_nonmonotonic_poll() -> None:
    res = run(H(*_log3(), poll(1, {"1": [[0, 10], [2, 12]]}), poll(2, {"1": [[1, 11]]})))
    ex = example(res, "int-poll-skip")
    assert ex["skipped"] == [11] and "offset 2" in ex["explanation"]
    res = run(H(*_log3(), poll(1, {"1": [[1, 11], [0, 10], [2, 12]]})))
    ex = example(res, "int-nonmonotonic-poll")
    assert ex["values"] == [11, 10] and "int-nonmonotonic-poll" in res["bad_error_types"]


# ------------------------------------------------------------------------------ producer order


def test_nonmonotonic_send() -> None:
    res = run(H(send(0, 1, 10, 5), send(0, 1, 11, 3), poll(1, {"1": [[3, 11], [5, 10]]})))
    ex = example(res, "nonmonotonic-send")
    assert ex["key"] == "1" and ex["offsets"] == [5, 3] and "offset 3" in ex["explanation"]
    assert "nonmonotonic-send" in res["bad_error_types"]


def test_int_nonmonotonic_send() -> None:
    res = run(
        H(txn(0, [["send", 1, [4, 10]], ["send", 1, [3, 11]]]), poll(1, {"1": [[3, 11], [4, 10]]}))
    )
    ex = example(res, "int-nonmonotonic-send")
    assert ex["values"] == [10, 11] and "int-nonmonotonic-send" in res["bad_error_types"]


def test_int_send_skip_is_normal() -> None:
    res = run(
        H(
            inv(0, "txn", [["send", 1, 10], ["send", 1, 12]]),
            send(1, 1, 11, 1),
            txn(0, [["send", 1, [0, 10]], ["send", 1, [2, 12]]]),
            poll(2, {"1": [[0, 10], [1, 11], [2, 12]]}),
        )
    )
    ex = example(res, "int-send-skip")
    assert ex["skipped"] == [11]
    assert res["valid"] is True and res["bad_error_types"] == []


# ------------------------------------------------------------------------------ pairing


def test_invoke_without_completion_counts_as_info() -> None:
    res = run(
        H(
            inv(0, "send", [["send", 1, 10]]),  # ktrial crashed: never completed
            poll(1, {"1": [[0, 10]]}),
        )
    )
    assert res["valid"] is True, res["error_types"]
    assert res["metrics"]["counts"]["send"]["info"] == 1
    assert res["metrics"]["info_causes"] == {"never completed": 1}


def test_nemesis_ops_are_not_data() -> None:
    res = run(
        H(
            {"process": "nemesis", "type": "info", "f": "start-partition", "value": ["n1"]},
            send(0, 1, 10, 0),
            poll(1, {"1": [[0, 10]]}),
        )
    )
    assert res["valid"] is True and res["stats"]["nemesis_ops"] == 1
