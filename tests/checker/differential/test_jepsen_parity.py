"""The checker against Jepsen's Kafka checker rules (jepsen.tests.kafka), rule by rule.

Each analysis is fed the shapes Jepsen's code distinguishes, in both history formats
(JSON lines and Jepsen's EDN); where ktrial deliberately differs, the test says
"Justified difference" and pins ktrial's rule (docs/anomalies.md lists them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check, check_file
from ktrial.histories.edn import iter_any_history
from ktrial.tests.checker.common import examples_of, pick
from ktrial.tests.histlines import Line, S, fail, info, inv, ok, op, pl, snd, types


def _edn(x: Any) -> str:
    """Jepsen's spelling: strings become keywords (:x, :send, :ok), maps and vectors."""
    if x is None:
        return "nil"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, str):
        return ":" + x
    if isinstance(x, dict):
        return "{" + ", ".join(f"{_edn(k)} {_edn(v)}" for k, v in x.items()) + "}"
    return "[" + " ".join(_edn(v) for v in x) + "]"


_EDN_FIELD = {"rebalance_log": "rebalance-log", "seek_to_beginning": "seek-to-beginning?"}


def write(path: Path, lines: list[Line], fmt: str = "jsonl") -> Path:
    out = []
    for i, o in enumerate(lines):
        o = {"index": i, "time": o.get("time", i * 1_000_000), **o}
        if fmt == "jsonl":
            out.append(json.dumps(o))
        else:
            fields = []
            for k, v in o.items():
                name = _EDN_FIELD.get(k, k)
                fields.append(f":{name} {_edn(v)}")
            out.append("#jepsen.history.Op{" + ", ".join(fields) + "}")
    path.write_text("\n".join(out) + "\n")
    return path


def run(tmp_path: Path, lines: list[Line], fmt: str = "jsonl", **opts: Any) -> dict[str, Any]:
    if fmt == "jsonl":
        return check_file(write(tmp_path / "history.jsonl", lines), CheckOptions(**opts))
    h = write(tmp_path / "history.edn", lines, "edn")
    return check(iter_any_history(h), CheckOptions(**opts))


FMTS = pytest.mark.parametrize("fmt", ["jsonl", "edn"])


# x: a@0 b@1 c@2, one ok send by process 0
ABC = ok(0, "send", [snd("x", 0, "a"), snd("x", 1, "b"), snd("x", 2, "c")])


def read_all_x(process: int = 9) -> Line:
    return ok(process, "poll", [pl({"x": [[0, "a"], [1, "b"], [2, "c"]]})])


def test_vo_failed_send_offset_is_not_log_truth(tmp_path: Path) -> None:
    # version-orders: a failed op is never must-have-committed?, so only its polls count
    res = run(
        tmp_path,
        [
            fail(0, "send", [snd("x", 0, 1)]),
            ok(1, "send", [snd("x", 0, 2)]),
            ok(2, "poll", [pl({"x": [[0, 2]]})]),
        ],
    )
    assert res["valid"] is True and res["error_types"] == []


@FMTS
@pytest.mark.parametrize("typ", ["fail", "info"])
def test_vo_polls_of_failed_and_info_ops_are_log_truth(tmp_path: Path, fmt: str, typ: str) -> None:
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd("x", 0, 2)]),
            op(3, typ, "poll", [pl({"x": [[0, 9]]})]),
            ok(2, "poll", [pl({"x": [[0, 2]]})]),
        ],
        fmt,
    )
    assert types(res) == ({"inconsistent-offsets"}, {"inconsistent-offsets"})
    ex = examples_of(res, "inconsistent-offsets")[0]
    assert pick(ex, "key", "offset", "values") == ("x", 0, [2, 9])
    assert ex["ops"] == [0, 1, 2]


def test_vo_committed_info_send_offset_is_log_truth(tmp_path: Path) -> None:
    # The info op committed (its y value was read by an ok op): its x ack counts too,
    # and Jepsen's lost-write (bound: equal or lower index) flags the unread value.
    res = run(
        tmp_path,
        [
            info(0, "send", [snd("x", 0, 1), snd("y", 0, 2)]),
            ok(1, "send", [snd("x", 0, 3)]),
            ok(2, "poll", [pl({"y": [[0, 2]], "x": [[0, 3]]})]),
        ],
    )
    assert types(res)[1] == {"inconsistent-offsets", "lost-write"}
    assert pick(examples_of(res, "inconsistent-offsets")[0], "offset", "values") == (0, [1, 3])
    lw = examples_of(res, "lost-write")[0]
    assert pick(lw, "key", "value", "offset", "max_read_offset", "writer") == ("x", 1, 0, 0, 0)


def test_vo_uncommitted_info_send_offset_is_not_log_truth(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            info(0, "send", [snd("x", 0, 1)]),
            ok(1, "send", [snd("x", 0, 3)]),
            ok(2, "poll", [pl({"x": [[0, 3]]})]),
        ],
    )
    assert res["valid"] is True and res["error_types"] == []


@FMTS
def test_vo_marker_holes_are_not_skips(tmp_path: Path, fmt: str) -> None:
    # offsets 1 and 3 are transaction markers: dense positions 0, 1, 2
    lines = [
        ok(0, "txn", [snd("x", 0, "a")]),
        ok(0, "txn", [snd("x", 2, "b")]),
        ok(0, "txn", [snd("x", 4, "c")]),
        ok(1, "poll", [pl({"x": [[0, "a"], [2, "b"]]})]),
        ok(1, "poll", [pl({"x": [[4, "c"]]})]),
    ]
    res = run(tmp_path, lines, fmt)
    assert res["valid"] is True and res["error_types"] == []


def test_duplicate_failed_send_then_ok_retry_is_not_a_duplicate(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            fail(0, "send", [snd("x", 0, 7)]),
            ok(0, "send", [snd("x", 1, 7)]),
            ok(2, "poll", [pl({"x": [[1, 7]]})]),
        ],
    )
    assert res["valid"] is True and res["error_types"] == []


def test_duplicate_committed_info_ack_against_poll(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            info(0, "send", [snd("x", 3, 7)]),
            ok(2, "poll", [pl({"x": [[4, 7]]})]),
        ],
    )
    assert "duplicate" in types(res)[1]
    ex = examples_of(res, "duplicate")[0]
    assert pick(ex, "key", "value", "offsets", "count") == ("x", 7, [3, 4], 2)
    assert "3" in ex["explanation"] and "4" in ex["explanation"]


def test_lost_write_bound_comes_from_ok_reads_only(tmp_path: Path) -> None:
    # info and fail polls read c (position 2); ok reads stop at a: b is unseen, not lost
    res = run(
        tmp_path,
        [
            ABC,
            ok(1, "poll", [pl({"x": [[0, "a"]]})]),
            info(2, "poll", [pl({"x": [[2, "c"]]})]),
            fail(3, "poll", [pl({"x": [[2, "c"]]})]),
        ],
    )
    assert types(res) == ({"unseen"}, {"unseen"})
    assert examples_of(res, "unseen")[0]["values"] == ["b", "c"]


def test_lost_write_value_whose_last_index_is_past_the_bound(tmp_path: Path) -> None:
    # a sits at dense 0 and (duplicate) at dense 2; ok reads reach dense 1 only:
    # Jepsen's log->last-index->values does not ask for a yet
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 0, "a")]),
            ok(0, "send", [snd("x", 1, "b")]),
            info(2, "poll", [pl({"x": [[3, "a"]]})]),
            ok(1, "poll", [pl({"x": [[1, "b"]]})]),
        ],
    )
    assert types(res)[0] == {"duplicate", "unseen"}


@FMTS
def test_lost_write_value_placed_only_by_a_failed_poll(tmp_path: Path, fmt: str) -> None:
    # the ok send's offset is unknown; a failed poll put a at offset 0
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", None, "a")]),
            ok(0, "send", [snd("x", 1, "b")]),
            fail(2, "poll", [pl({"x": [[0, "a"]]})]),
            ok(1, "poll", [pl({"x": [[1, "b"]]})]),
        ],
        fmt,
    )
    assert types(res)[1] == {"lost-write", "unseen"}
    ex = examples_of(res, "lost-write")[0]
    assert pick(ex, "key", "value", "offset", "max_read_offset", "writer", "max_reader") == (
        "x",
        "a",
        0,
        1,
        0,
        3,
    )


@FMTS
def test_lost_write_ok_retry_of_an_info_send(tmp_path: Path, fmt: str) -> None:
    # op 0 timed out (info, never read); op 1 re-sent v, acked at offset 0; an ok op
    # read w at offset 1. v's ok writer must have committed: lost-write (Jepsen's
    # writer-of keeps the *last* writer, the ok one, and flags it).
    res = run(
        tmp_path,
        [
            info(0, "send", [["send", "x", "v"]]),
            ok(0, "send", [snd("x", 0, "v")]),
            ok(0, "send", [snd("x", 1, "w")]),
            ok(1, "poll", [pl({"x": [[1, "w"]]})]),
        ],
        fmt,
    )
    assert pick(examples_of(res, "lost-write")[0], "value", "offset", "writer") == ("v", 0, 1)


def test_unseen_counts_only_ok_sends_and_ok_reads(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 0, "a")]),
            info(0, "send", [snd("y", 0, "p"), snd("z", 0, "q")]),  # committed: p is read
            info(1, "poll", [pl({"x": [[0, "a"]]})]),
            fail(1, "txn", [pl({"x": [[0, "a"]]})]),
            ok(2, "poll", [pl({"y": [[0, "p"]]})]),
        ],
    )
    assert types(res) == ({"unseen"}, {"unseen"})
    ex = examples_of(res, "unseen")
    assert [pick(e, "key", "values", "offsets", "ops") for e in ex] == [("x", ["a"], [0], [0])]
    assert res["metrics"]["unseen"]["final"] == 1


def test_g1a_only_ok_readers_count(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            fail(0, "send", [snd("x", 0, "a")]),
            info(1, "poll", [pl({"x": [[0, "a"]]})]),
            fail(2, "txn", [pl({"x": [[0, "a"]]})]),
            ok(3, "send", [snd("y", 0, "q")]),
            ok(3, "poll", [pl({"y": [[0, "q"]]})]),
        ],
    )
    assert res["valid"] is True and res["error_types"] == []


@FMTS
def test_g1a_ok_txn_reader(tmp_path: Path, fmt: str) -> None:
    res = run(
        tmp_path,
        [
            fail(0, "txn", [snd("x", 0, "a"), snd("y", 0, "b")]),
            ok(1, "txn", [pl({"x": [[0, "a"]]}), snd("z", 0, "c")]),
            ok(2, "poll", [pl({"z": [[0, "c"]]})]),
        ],
        fmt,
    )
    assert types(res) == ({"G1a"}, {"G1a"})
    ex = examples_of(res, "G1a")[0]
    assert pick(ex, "key", "value", "offset", "writer", "reader") == ("x", "a", 0, 0, 1)
    assert "abort" in ex["explanation"]


@pytest.mark.parametrize("ok_first", [False, True])
def test_g1a_justified_value_also_sent_by_an_ok_op(tmp_path: Path, ok_first: bool) -> None:
    """Justified difference: Jepsen's writes-by-type flags any value a failed op sent;
    docs/anomalies.md says G1a is a value *only* failed ops wrote (here an ok retry wrote it)."""
    f = fail(0, "send", [snd("x", None, "a")])
    o = ok(1, "send", [snd("x", 0, "a")])
    res = run(tmp_path, [*([o, f] if ok_first else [f, o]), ok(3, "poll", [pl({"x": [[0, "a"]]})])])
    assert res["valid"] is True and res["error_types"] == []


@FMTS
@pytest.mark.parametrize("typ", ["ok", "info", "fail"])
def test_precommitted_read_in_every_op_type(tmp_path: Path, fmt: str, typ: str) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 0, 1)]),
            op(1, typ, "txn", [snd("y", None, 5), pl({"y": [[0, 5]], "x": [[0, 1]]})]),
            ok(2, "poll", [pl({"x": [[0, 1]]})]),
        ],
        fmt,
    )
    assert "precommitted-read" in types(res)[1]
    ex = examples_of(res, "precommitted-read")
    assert [pick(e, "key", "value", "offset", "ops") for e in ex] == [("y", 5, 0, [1])]
    assert f"{typ} txn" in ex[0]["explanation"]


def test_precommitted_read_is_per_key(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("y", 0, 5)]),
            ok(1, "txn", [snd("x", 0, 5), pl({"y": [[0, 5]]})]),
            ok(2, "poll", [pl({"x": [[0, 5]]})]),
        ],
    )
    assert res["valid"] is True and res["error_types"] == []


def test_poll_empty_read_of_a_key_does_not_reset(tmp_path: Path) -> None:
    """Jepsen's per-process scan records an op that read `k []` as the last reader,
    whose last value is nil, so the next comparison is skipped; docs/anomalies.md defines the
    skip over the consumer's successive ok reads, so ktrial still reports it."""
    res = run(
        tmp_path,
        [
            ABC,
            ok(1, "poll", [pl({"x": [[0, "a"]]})]),
            ok(1, "poll", [pl({"x": []})]),
            ok(1, "poll", [pl({"x": [[2, "c"]]})]),
            ok(2, "poll", [pl({"x": [[1, "b"]]})]),
        ],
    )
    assert types(res) == ({"poll-skip"}, {"poll-skip"})
    ex = examples_of(res, "poll-skip")[0]
    assert pick(ex, "values", "offsets", "skipped", "ops", "process") == (
        ["a", "c"],
        [0, 2],
        ["b"],
        [1, 3],
        1,
    )


@FMTS
@pytest.mark.parametrize(
    ("typ", "expect"),
    [("fail", {"nonmonotonic-poll"}), ("info", set()), ("ok", set())],
)
def test_poll_assign_outcome_decides_the_reset(
    tmp_path: Path, fmt: str, typ: str, expect: set[str]
) -> None:
    # Jepsen: (:assign :subscribe) with type invoke/fail keep last-reads; ok/info
    # select-keys to the keys named
    res = run(
        tmp_path,
        [
            ABC,
            ok(1, "poll", [pl({"x": [[0, "a"], [1, "b"]]})]),
            op(1, typ, "assign", ["y"]),
            read_all_x(1),
        ],
        fmt,
    )
    assert types(res)[1] == expect
    if expect:
        ex = examples_of(res, "nonmonotonic-poll")[0]
        assert pick(ex, "values", "offsets", "delta", "ops") == (["b", "a"], [1, 0], -1, [1, 3])


def test_poll_txn_ops_are_consumers_too(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ABC,
            ok(1, "txn", [pl({"x": [[0, "a"]]})]),
            ok(1, "txn", [pl({"x": [[2, "c"]]}), snd("y", 0, "q")]),
            ok(2, "poll", [pl({"x": [[1, "b"]], "y": [[0, "q"]]})]),
        ],
    )
    assert types(res) == ({"poll-skip"}, {"poll-skip"})
    ex = examples_of(res, "poll-skip")[0]
    assert pick(ex, "skipped", "delta", "ops") == (["b"], 2, [1, 2])
    for word in ("Process 1", "'a'", "'c'", "offset 0", "offset 2", "'b'"):
        assert word in ex["explanation"]


@pytest.mark.parametrize(
    "reset",
    [
        [info(1, "crash")],
        [ok(1, "assign", ["x"], seek_to_beginning=True)],
        [inv(1, "assign", ["x"], seek_to_beginning=True), ok(1, "assign", ["x"])],
    ],
    ids=["crash", "seek", "seek-on-invoke"],
)
def test_poll_justified_crash_and_seek_reset(tmp_path: Path, reset: list[Line]) -> None:
    """Justified difference: Jepsen's scan ignores :crash and :seek-to-beginning? (its
    final polls use a new process anyway); docs/anomalies.md says both reset."""
    res = run(
        tmp_path,
        [ABC, ok(1, "poll", [pl({"x": [[0, "a"], [1, "b"]]})]), *reset, read_all_x(1)],
    )
    assert res["valid"] is True and res["error_types"] == []


def test_poll_justified_rebalance_log_resets_external_order(tmp_path: Path) -> None:
    """Justified difference: Jepsen uses :rebalance-log only for int-poll checks;
    docs/anomalies.md also resets the consumer's expectation for the keys it names."""
    lines = [
        ABC,
        ok(1, "poll", [pl({"x": [[0, "a"]]})]),
        ok(1, "poll", [pl({"x": [[2, "c"]]})], rebalance_log=[{"keys": ["x"]}]),
        read_all_x(2),
    ]
    res = run(tmp_path, lines, sub_via="assign")
    assert res["valid"] is True and res["error_types"] == []
    lines[2] = ok(1, "poll", [pl({"x": [[2, "c"]]})], rebalance_log=[{"keys": ["y"]}])
    res = run(tmp_path, lines, sub_via="assign")
    assert types(res) == ({"poll-skip"}, {"poll-skip"})


SEND5 = ok(0, "send", [snd("x", i, f"v{i}") for i in range(5)])


@FMTS
@pytest.mark.parametrize(
    ("start", "expect"),
    [(1, None), (2, None), (3, None), (4, "poll-skip"), (0, "nonmonotonic-poll")],
)
def test_poll_justified_failed_op_window(
    tmp_path: Path, fmt: str, start: int, expect: str | None
) -> None:
    """Justified difference, only with --no-consumer-rewinds (clients known not to
    rewind after an abort): Jepsen compares the next ok read with the last ok read only
    (start 2 or 3 would be a poll-skip, as it is under ktrial's default rule:
    tests/checker/test_order_positions.py); docs/anomalies.md lets the next ok read
    start anywhere from after the last ok read to after the furthest record the failed
    op read (here offsets 1..3), and skips are counted from there."""
    res = run(
        tmp_path,
        [
            SEND5,
            ok(1, "poll", [pl({"x": [[0, "v0"]]})]),
            fail(1, "txn", [pl({"x": [[1, "v1"], [2, "v2"]]})]),
            ok(1, "poll", [pl({"x": [[o, f"v{o}"] for o in range(start, 5)]})]),
            ok(2, "poll", [pl({"x": [[o, f"v{o}"] for o in range(5)]})]),
        ],
        fmt,
        consumer_rewinds=False,
    )
    if expect is None:
        assert res["valid"] is True and res["error_types"] == []
        return
    assert types(res) == ({expect}, {expect})
    ex = examples_of(res, expect)[0]
    assert ex["ops"] == [1, 3, 2]  # the pair, then the failed op in between
    assert ex["offsets"] == [0, start]
    if expect == "poll-skip":
        assert ex["skipped"] == ["v3"]  # v1, v2 were read by the failed op
        assert "offset 2" in ex["explanation"]  # how far the failed op read


@FMTS
@pytest.mark.parametrize("typ", ["fail", "info"])
def test_int_poll_checks_every_op_type(tmp_path: Path, fmt: str, typ: str) -> None:
    # Jepsen's int-poll-skip+nonmonotonic-cases maps over every op of the history
    res = run(
        tmp_path,
        [
            ABC,
            op(1, typ, "txn", [pl({"x": [[1, "b"]]}), pl({"x": [[0, "a"]]})]),
            op(3, typ, "poll", [pl({"x": [[0, "a"], [2, "c"]]})]),
            read_all_x(2),
        ],
        fmt,
    )
    assert types(res)[1] == {"int-nonmonotonic-poll", "int-poll-skip"}
    nm = examples_of(res, "int-nonmonotonic-poll")[0]
    assert pick(nm, "values", "offsets", "delta", "ops") == (["b", "a"], [1, 0], -1, [1])
    sk = examples_of(res, "int-poll-skip")[0]
    assert pick(sk, "values", "skipped", "delta", "ops") == (["a", "c"], ["b"], 2, [2])


def test_int_poll_nonmonotonic_across_an_unplaced_record(tmp_path: Path) -> None:
    """Jepsen resets its previous index at a record of unknown position, so it misses
    c -> (?) -> b; docs/anomalies.md ("a read goes back") is met, ktrial reports it."""
    res = run(
        tmp_path,
        [ABC, ok(1, "poll", [pl({"x": [[2, "c"], [None, "zz"], [1, "b"]]})]), read_all_x(2)],
    )
    assert "int-nonmonotonic-poll" in types(res)[1]
    ex = examples_of(res, "int-nonmonotonic-poll")[0]
    assert pick(ex, "values", "offsets", "delta") == (["c", "b"], [2, 1], -1)


def test_int_poll_skip_across_an_unplaced_record_is_not_claimed(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [ABC, ok(1, "poll", [pl({"x": [[0, "a"], [None, "zz"], [2, "c"]]})]), read_all_x(2)],
    )
    assert "int-poll-skip" not in types(res)[0]


def test_send_previous_last_against_next_first(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 0, "a"), snd("x", 5, "f")]),
            ok(0, "send", [snd("x", 3, "d")]),
            ok(9, "poll", [pl({"x": [[0, "a"], [3, "d"], [5, "f"]]})]),
        ],
    )
    assert "nonmonotonic-send" in types(res)[1]
    ex = examples_of(res, "nonmonotonic-send")[0]
    assert pick(ex, "values", "offsets", "delta", "ops", "process") == (
        ["f", "d"],
        [5, 3],
        -1,
        [0, 1],
        0,
    )
    # the previous op's *last* send (a, offset 0) is the reference, as in Jepsen
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 5, "f"), snd("x", 0, "a")]),
            ok(0, "send", [snd("x", 3, "d")]),
            ok(9, "poll", [pl({"x": [[0, "a"], [3, "d"], [5, "f"]]})]),
        ],
    )
    assert "nonmonotonic-send" not in types(res)[0]
    assert "int-nonmonotonic-send" in types(res)[1]


def test_send_assign_between_sends_does_not_reset(tmp_path: Path) -> None:
    """Jepsen's nonmonotonic-send-cases select-keys its last sends on assign/subscribe
    (copied from the poll scan); a producer's order has nothing to do with the consumer's
    assignment (docs/anomalies.md: "a producer's next send"), so ktrial still reports it."""
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 5, "f")]),
            ok(0, "assign", ["y"]),
            ok(0, "send", [snd("x", 3, "d")]),
            ok(9, "poll", [pl({"x": [[3, "d"], [5, "f"]]})]),
        ],
    )
    assert "nonmonotonic-send" in types(res)[1]


@pytest.mark.parametrize("read_by_failed_poll", [False, True])
def test_send_justified_uncommitted_info_op_not_judged(
    tmp_path: Path, read_by_failed_poll: bool
) -> None:
    """Justified difference: Jepsen judges every ok/info op; docs/anomalies.md judges
    only ops that must have committed (an info op none of whose values an ok op read
    did not)."""
    lines = [ok(0, "send", [snd("x", 5, "f")]), info(0, "send", [snd("x", 3, "d")])]
    if read_by_failed_poll:
        lines.append(fail(8, "poll", [pl({"x": [[3, "d"]]})]))
    lines.append(ok(9, "poll", [pl({"x": [[5, "f"]]})]))
    res = run(tmp_path, lines)
    assert res["valid"] is True and res["error_types"] == []


def test_send_failed_op_is_neither_judged_nor_a_reference(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 5, "f")]),
            fail(0, "send", [snd("x", 1, "z")]),
            ok(0, "send", [snd("x", 3, "d")]),
            ok(9, "poll", [pl({"x": [[3, "d"], [5, "f"]]})]),
        ],
    )
    assert [pick(e, "values", "ops") for e in examples_of(res, "nonmonotonic-send")] == [
        (["f", "d"], [0, 2])
    ]


def test_send_crash_resets_the_producer(tmp_path: Path) -> None:
    """Ambiguity (pinned): Jepsen does not reset on :crash (a crashed client's successor
    has a new process anyway); ktrial treats the same process after a crash as a new
    producer."""
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 5, "f")]),
            info(0, "crash"),
            ok(0, "send", [snd("x", 3, "d")]),
            ok(9, "poll", [pl({"x": [[3, "d"], [5, "f"]]})]),
        ],
    )
    assert "nonmonotonic-send" not in types(res)[0]


def test_send_same_offset_explanation(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 3, "a")]),
            ok(0, "send", [snd("x", 3, "b")]),
            ok(9, "poll", [pl({"x": [[3, "a"]]})]),
        ],
    )
    ex = examples_of(res, "nonmonotonic-send")[0]
    assert pick(ex, "values", "offsets", "delta") == (["a", "b"], [3, 3], 0)
    assert "before it" not in ex["explanation"]
    assert "same" in ex["explanation"]


def test_int_send_justified_only_committed_ops(tmp_path: Path) -> None:
    """Justified difference: Jepsen's int-send checks every completed op; ktrial only
    ops that must have committed (docs/anomalies.md, Producer order)."""
    inverted = info(0, "send", [snd("x", 5, "a"), snd("x", 4, "b")])
    res = run(
        tmp_path,
        [
            inverted,
            fail(1, "poll", [pl({"x": [[4, "b"], [5, "a"]]})]),
            ok(2, "send", [snd("y", 0, "q")]),
            ok(3, "poll", [pl({"y": [[0, "q"]]})]),
        ],
    )
    assert res["valid"] is True and res["error_types"] == []
    res = run(tmp_path, [inverted, ok(1, "poll", [pl({"x": [[4, "b"], [5, "a"]]})])])
    assert types(res) == ({"int-nonmonotonic-send"}, {"int-nonmonotonic-send"})
    ex = examples_of(res, "int-nonmonotonic-send")[0]
    assert pick(ex, "values", "offsets", "delta", "ops") == (["a", "b"], [5, 4], -1, [0])


def test_int_send_skip_is_reported_never_bad(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            inv(0, "send", [["send", "x", "a"], ["send", "x", "c"]]),
            ok(1, "send", [snd("x", 1, "b")]),
            ok(0, "send", [snd("x", 0, "a"), snd("x", 2, "c")]),
            ok(2, "poll", [pl({"x": [[0, "a"], [1, "b"], [2, "c"]]})]),
        ],
    )
    # the interleaving is also a G0 (op 0 -ww-> op 1 -ww-> op 0): allowed, as in Jepsen
    assert types(res) == ({"int-send-skip", "G0"}, set()) and res["valid"] is True
    assert pick(examples_of(res, "int-send-skip")[0], "values", "skipped", "delta") == (
        ["a", "c"],
        ["b"],
        2,
    )


def test_cycle_justified_uncommitted_info_ops_are_not_vertices(tmp_path: Path) -> None:
    """Justified difference: Jepsen's graph has every completed op, so two info txns
    that read each other's sends make a G1c; docs/anomalies.md: vertices are ops that
    committed, and no ok op read either value."""
    res = run(
        tmp_path,
        [
            info(0, "txn", [snd("x", None, 1), pl({"y": [[0, 2]]})]),
            info(1, "txn", [snd("y", None, 2), pl({"x": [[0, 1]]})]),
        ],
        ww_deps=False,
    )
    assert "G1c" not in types(res)[0]


@FMTS
def test_cycle_ok_and_committed_info_circular_visibility(tmp_path: Path, fmt: str) -> None:
    res = run(
        tmp_path,
        [
            inv(0, "txn", [["send", "x", 1], ["poll"]]),
            inv(1, "txn", [["send", "y", 2], ["poll"]]),
            ok(0, "txn", [snd("x", 0, 1), pl({"y": [[0, 2]]})]),
            info(1, "txn", [snd("y", None, 2), pl({"x": [[0, 1]]})]),
        ],
        fmt,
    )
    assert "G1c" in types(res)[1]
    ex = examples_of(res, "G1c")[0]
    assert sorted(ex["cycle"]) == [2, 3] and ex["edges"] == ["wr", "wr"]
    assert "info txn" in ex["explanation"] and "ok txn" in ex["explanation"]


def test_cycle_wr_edges_from_every_read_not_only_the_highest(tmp_path: Path) -> None:
    # op 2 read y = b (op 3's) and then c; Jepsen's docstring says "highest read" but
    # its wr-graph links every reader, as ktrial does: the b read closes the cycle
    res = run(
        tmp_path,
        [
            inv(0, "txn", [["send", "x", "a"], ["poll"]]),
            inv(1, "txn", [["send", "y", "b"], ["poll"]]),
            ok(0, "txn", [snd("x", 0, "a"), pl({"y": [[0, "b"], [1, "c"]]})]),
            ok(1, "txn", [snd("y", 0, "b"), pl({"x": [[0, "a"]]})]),
            ok(2, "send", [snd("y", 1, "c")]),
        ],
        ww_deps=False,
    )
    g1c = examples_of(res, "G1c")
    assert g1c and sorted(g1c[0]["cycle"]) == [2, 3]


def test_cycle_justified_g1c_realtime_bad_even_with_ww_deps(tmp_path: Path) -> None:
    """Justified difference: with ww-deps Jepsen allows every G1c-realtime; a wr +
    realtime cycle (a read from the future) is always bad in docs/anomalies.md."""
    res = run(
        tmp_path,
        [
            inv(0, "poll", [["poll"]]),
            ok(0, "poll", [pl({"x": [[0, "a"]]})]),
            inv(1, "send", [["send", "x", "a"]]),
            ok(1, "send", [snd("x", 0, "a")]),
        ],
        ww_deps=True,
    )
    assert types(res) == ({"G1c-realtime"}, {"G1c-realtime"})
    assert sorted(examples_of(res, "G1c-realtime")[0]["edges"]) == ["rt", "wr"]


def test_cycle_g0_realtime_is_never_bad(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd("x", 5, "f")]),
            ok(1, "send", [snd("x", 3, "d")]),
            ok(9, "poll", [pl({"x": [[3, "d"], [5, "f"]]})]),
        ],
    )
    assert types(res) == ({"G0-realtime"}, set()) and res["valid"] is True


def _timed(lines: list[tuple[float, Line]]) -> list[Line]:
    return [{**o, "time": int(t * S)} for t, o in lines]


def test_realtime_lag_jepsen_docstring_example(tmp_path: Path) -> None:
    lines = _timed(
        [
            (0, inv(0, "send", [["send", "x", "a"]])),
            (1, ok(0, "send", [snd("x", 0, "a")])),
            (1.5, inv(1, "poll", [["poll"]])),
            (2, ok(1, "poll", [pl({"x": [[0, "a"]]})])),
            (2.5, inv(0, "send", [["send", "x", "b"]])),
            (3, ok(0, "send", [snd("x", 1, "b")])),
            (4, inv(1, "poll", [["poll"]])),
            (5, ok(1, "poll", [pl({})])),
            (6, inv(1, "poll", [["poll"]])),
            (7, ok(1, "poll", [pl({"x": [[1, "b"]]})])),
        ]
    )
    lag = run(tmp_path, lines)["metrics"]["realtime_lag"]
    assert lag["worst"] == {"key": "x", "lag_ms": 1000.0, "time_s": 4.0, "process": 1}
    assert lag["over_time"] == [[1.5, 0.0], [4.0, 1000.0], [6.0, 0.0]]


@pytest.mark.parametrize(("sub", "worst"), [("assign", 2000.0), ("subscribe", 0.0)])
def test_realtime_lag_assigned_but_unread_keys(tmp_path: Path, sub: str, worst: float) -> None:
    # Jepsen: assign puts the keys at offset -1 (stale since offset 0 existed);
    # subscribe resets to {} and only keys actually read are measured
    lines = _timed(
        [
            (0, ok(1, sub, ["x"])),
            (1, ok(0, "send", [snd("x", 0, "a")])),
            (3, inv(1, "poll", [["poll"]])),
            (4, ok(1, "poll", [pl({})])),
            (5, ok(2, "poll", [pl({"x": [[0, "a"]]})])),
        ]
    )
    lag = run(tmp_path, lines)["metrics"]["realtime_lag"]
    assert lag["worst"]["lag_ms"] == worst


def test_realtime_lag_crash_forgets_positions(tmp_path: Path) -> None:
    lines = _timed(
        [
            (0, ok(1, "assign", ["x"])),
            (1, ok(0, "send", [snd("x", 0, "a")])),
            (2, ok(0, "send", [snd("x", 1, "b")])),
            (3, ok(1, "poll", [pl({"x": [[0, "a"], [1, "b"]]})])),
            (4, info(1, "crash")),
            (5, ok(0, "send", [snd("x", 2, "c")])),
            (10, ok(1, "poll", [pl({})])),  # forgotten: no key to be stale on
            (11, ok(2, "poll", [pl({"x": [[0, "a"], [1, "b"], [2, "c"]]})])),
        ]
    )
    lag = run(tmp_path, lines)["metrics"]["realtime_lag"]
    assert lag["per_consumer"]["1"] == 0.0


def test_unseen_over_time_follows_ok_ops(tmp_path: Path) -> None:
    lines = _timed(
        [
            (1, ok(0, "send", [snd("x", 0, "a")])),
            (2, ok(0, "send", [snd("x", 1, "b")])),
            (3, ok(1, "poll", [pl({"x": [[0, "a"]]})])),
            (4, fail(1, "poll", [pl({"x": [[1, "b"]]})])),
            (5, ok(1, "poll", [pl({"x": [[1, "b"]]})])),
        ]
    )
    res = run(tmp_path, lines)
    assert res["metrics"]["unseen"] == {
        "final": 0,
        "over_time": [[0.0, 1], [1.0, 2], [2.0, 1], [4.0, 0]],
    }
    assert res["valid"] is True
