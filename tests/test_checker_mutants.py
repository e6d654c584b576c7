"""Mutation audit of the checker's tests: behaviour no other test pins.

Each checker/*.py and histories/{jsonl,fastread}.py mutant that survived the
rest of the suite was judged against DESIGN.md section 3. Where the mutated
behaviour is wrong, a test here pins the right one (it passes on the real code
and fails under the mutant; the mutant is named in the test's docstring). Where
the real checker is wrong, the test is ``xfail(strict=True)``: it passes once fixed.

Histories are small and hand-written, as in test_checker_audit.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import check_file
from ktrial.checker.options import options_from_test_json
from ktrial.histories.jsonl import HistoryError, iter_history
from ktrial.tests.histlines import examples, fail, info, inv, ok, op, pl, run, snd, types, write

Line = dict[str, Any]


# ================================================================ helpers


def poll(process: Any, recs: dict[str, list[list[Any]]], typ: str = "ok", **extra: Any) -> Line:
    return op(process, typ, "poll", [pl(recs)], **extra)


# ======================================================= prepare.py


def test_a_never_completed_subscribe_still_means_subscribe(tmp_path: Path) -> None:
    """Mutant: a subscribe invoke that never completes does not set has_subscribe.

    history-format.md: sub_via absent is inferred, `subscribe` if any op has
    f == "subscribe"; an invoke cut short by the end of the history is such an op
    (it counts as info). So poll-skip is expected, not bad."""
    res = run(
        tmp_path,
        [
            inv(1, "subscribe", [1]),
            ok(3, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(1, 2, 12)]),
            poll(2, {"1": [[0, 10]]}),
            poll(2, {"1": [[2, 12]]}),
            poll(4, {"1": [[0, 10], [1, 11], [2, 12]]}),
        ],
    )
    assert types(res) == ({"poll-skip"}, set())
    assert res["valid"] is True
    assert res["stats"]["options"]["sub_via"] == "subscribe"


# ======================================================= logs.py


def test_a_failed_txn_never_committed_even_when_its_value_is_read(tmp_path: Path) -> None:
    """Mutant: build_logs() counts a fail op whose value an ok op read as committed.
    (Making must_have_committed() itself accept fail ops is an equivalent mutant:
    build_logs only asks it about info ops.)

    DESIGN 3: an op must have committed when it is ok, or info and read; fail =
    certainly did not take effect. Reading an aborted value is G1a, and the other
    aborted value (acknowledged at offset 0, never read) is not log truth, so it is
    no lost-write, and no torn-transaction either."""
    res = run(
        tmp_path,
        [
            fail(1, "txn", [snd(1, 0, 10), snd(2, 0, 20), snd(1, 1, 11)]),
            ok(4, "send", [snd(2, 0, 30)]),
            poll(2, {"1": [[1, 11]]}),
            poll(3, {"2": [[0, 30]]}),
        ],
    )
    assert types(res) == ({"G1a"}, {"G1a"})
    (ex,) = examples(res, "G1a")
    assert (ex["key"], ex["value"], ex["offset"], ex["writer"]) == ("1", 11, 1, 0)


# ======================================================= order.py


@pytest.mark.parametrize("acked", [True, False], ids=["fail-with-acks", "fail-without-acks"])
def test_a_failed_op_whose_values_a_retry_sent_in_another_order_is_not_nonmonotonic(
    tmp_path: Path, acked: bool
) -> None:
    """A failed op certainly did not take effect (DESIGN 3), so its sends land
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
            poll(3, {"1": [[0, 11], [1, 10]]}),
        ],
    )
    assert types(res) == (set(), set())
    assert res["valid"] is True


# ======================================================= graph.py / cycles.py


def test_realtime_edges_start_only_at_ok_ops(tmp_path: Path) -> None:
    """Mutant: info ops get realtime successors, both in ok_completion_positions()
    (candidate components) and in the cycle graph's realtime chain. Either alone is
    equivalent: the components gate the search, and the search uses the real edges.

    DESIGN 3: realtime edges link an *ok* op to ops invoked after it completed. An
    info transaction (commit timed out) may commit after its completion line, so
    a send invoked after it can land first: no G0-realtime, nothing at all."""
    res = run(
        tmp_path,
        [
            inv(1, "txn", [["send", 1, 11]]),
            info(1, "txn", [snd(1, None, 11)], error="commit timed out"),
            inv(2, "send", [["send", 1, 12]]),
            ok(2, "send", [snd(1, 0, 12)]),
            inv(3, "poll", [["poll"]]),
            poll(3, {"1": [[0, 12], [1, 11]]}),
        ],
    )
    assert types(res) == (set(), set())
    assert res["valid"] is True


def test_a_failed_writer_is_no_vertex_of_the_graph(tmp_path: Path) -> None:
    """Mutant: graph.Writers keeps writers that never committed.

    anomalies.md: vertices are completed data ops *that committed*. A poll that read
    a value only a failed send wrote is G1a; the send is not a vertex, so its being
    invoked after the poll ended makes no G1c-realtime cycle."""
    res = run(
        tmp_path,
        [
            inv(2, "poll", [["poll"]]),
            poll(2, {"2": [[0, 20]]}),
            inv(1, "send", [["send", 2, 20]]),
            fail(1, "send", [snd(2, 0, 20)]),
        ],
    )
    assert types(res) == ({"G1a"}, {"G1a"})
    (ex,) = examples(res, "G1a")
    assert (ex["key"], ex["value"], ex["offset"], ex["writer"], ex["reader"]) == ("2", 20, 0, 3, 1)


def test_read_from_the_future_is_bad_without_ww_deps(tmp_path: Path) -> None:
    """Mutant: the bad search (wr + realtime) drops its G1c-realtime search.

    With ww_deps on, the informational search also finds this cycle, so only a run
    without ww_deps shows whether the always-complete bad search does: a poll that
    read a value whose send was invoked after the poll ended is G1c-realtime, bad."""
    lines = [
        inv(2, "poll", [["poll"]]),
        poll(2, {"2": [[0, 20]]}),
        inv(1, "send", [["send", 2, 20]]),
        ok(1, "send", [snd(2, 0, 20)]),
    ]
    for ww in (False, True):
        res = run(tmp_path, lines, ww_deps=ww)
        assert types(res) == ({"G1c-realtime"}, {"G1c-realtime"}), ww
        (ex,) = examples(res, "G1c-realtime")
        assert sorted(ex["cycle"]) == [1, 3]
        assert ex["wr_only"] is True
        assert sorted(ex["edges"]) == ["rt", "wr"]
        assert "value 20 to key 2" in ex["explanation"]
        assert "offset 0" in ex["explanation"]


# ======================================================= options.py


@pytest.mark.parametrize(
    "given",
    [["assign", "subscribe"], ["subscribe", "assign"], [":assign", ":subscribe"], "subscribe"],
)
def test_jepsen_sub_via_set_with_subscribe_means_subscribe(given: Any) -> None:
    """Mutant: _norm_sub_via lets "assign" win over "subscribe" in Jepsen's set.

    Jepsen's :sub-via #{:assign :subscribe} runs both: consumers do subscribe and are
    rebalanced, so poll-skip and nonmonotonic-poll are expected (DESIGN 3: "not with
    subscribe")."""
    assert options_from_test_json({"sub_via": given}).sub_via == "subscribe"
    assert options_from_test_json({"workload": {"sub-via": given}}).sub_via == "subscribe"
    assert options_from_test_json({"sub_via": ["assign"]}).sub_via == "assign"


def test_jepsen_sub_via_set_makes_poll_skip_expected(tmp_path: Path) -> None:
    """The same, end to end: the option from test.json decides poll-skip's badness."""
    lines = [
        ok(3, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(1, 2, 12)]),
        ok(2, "assign", [1]),
        poll(2, {"1": [[0, 10]]}),
        poll(2, {"1": [[2, 12]]}),
        poll(4, {"1": [[0, 10], [1, 11], [2, 12]]}),
    ]
    path = write(tmp_path / "history.jsonl", lines)
    res = check_file(path, options_from_test_json({"sub_via": [":assign", ":subscribe"]}))
    assert types(res) == ({"poll-skip"}, set())
    res = check_file(path, options_from_test_json({"sub_via": ["assign"]}))
    assert types(res) == ({"poll-skip"}, {"poll-skip"})
    (ex,) = examples(res, "poll-skip")
    assert (ex["key"], ex["values"], ex["offsets"], ex["skipped"]) == ("1", [10, 12], [0, 2], [11])


# ======================================================= visibility.py: lost-write's bound


def test_lost_write_bound_counts_where_a_duplicate_was_read(tmp_path: Path) -> None:
    """Value 11 sits at offsets 1 and 3 (a duplicate: a retry landed again after 12).
    12, acknowledged at offset 2, was never read by an ok op, yet op 3 read value 11
    at offset 3, a later position of key 1: DESIGN 3's lost-write, besides the
    duplicate and unseen."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, 0, 10), snd(1, 1, 11)]),
            ok(5, "send", [snd(1, 2, 12)]),
            poll(2, {"1": [[0, 10], [1, 11]]}),
            poll(3, {"1": [[3, 11]]}),
        ],
    )
    assert {"duplicate", "unseen"} <= types(res)[1]
    assert "lost-write" in types(res)[1]
    (ex,) = examples(res, "lost-write")
    assert (ex["key"], ex["value"], ex["offset"], ex["max_read_offset"]) == ("1", 12, 2, 3)


def test_lost_write_at_a_conflicting_offset_is_reported(tmp_path: Path) -> None:
    """12 was acknowledged at offset 2, but an ok poll read 99 there: inconsistent
    offsets, and 12 was never read though consumers reached its offset (Jepsen counts
    acknowledged sends at or below the highest offset read), and it is unseen."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, 0, 10), snd(1, 1, 11)]),
            ok(5, "send", [snd(1, 2, 12)]),
            poll(2, {"1": [[0, 10], [1, 11], [2, 99]]}),
        ],
    )
    assert types(res)[1] == {"inconsistent-offsets", "lost-write", "unseen"}
    (ex,) = examples(res, "lost-write")
    assert (ex["key"], ex["value"], ex["offset"], ex["max_read_offset"]) == ("1", 12, 2, 2)
    (ex,) = examples(res, "inconsistent-offsets")
    assert (ex["key"], ex["offset"], ex["values"]) == ("1", 2, [12, 99])


def test_lost_write_at_a_conflicting_offset_does_not_say_later(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, 0, 10), snd(1, 1, 11)]),
            ok(5, "send", [snd(1, 2, 12)]),
            poll(2, {"1": [[0, 10], [1, 11], [2, 99]]}),
        ],
    )
    (ex,) = examples(res, "lost-write")
    assert "later offset 2" not in ex["explanation"]
    assert "offset 2" in ex["explanation"]


# ======================================================= histories/jsonl.py


@pytest.mark.parametrize(
    ("last", "reason"),
    [
        (b'{"index": 1, "process": 1, "type": "okay", "f": "poll", "value": []}', "okay"),
        (b'{"index": 1, "process": 1, "type": "ok", "f": "poll", "value": [["nope"]]}', "nope"),
        (b"[1, 2, 3]", "JSON object"),
    ],
    ids=["unknown-type", "bad-micro-op", "not-an-object"],
)
def test_a_complete_but_malformed_last_line_is_an_error_not_a_torn_line(
    tmp_path: Path, last: bytes, reason: str
) -> None:
    """Mutant: the reader skips any bad last line without a newline as torn.

    history-format.md: a torn last line is one with no trailing newline that is *not
    valid JSON*; any other malformed line is an error naming file:line and reason."""
    path = tmp_path / "history.jsonl"
    first = {"index": 0, "time": 0, "process": 0, "type": "ok", "f": "send"}
    path.write_bytes(json.dumps({**first, "value": [snd(1, 0, 10)]}).encode() + b"\n" + last)
    with pytest.raises(HistoryError) as e:
        list(iter_history(path))
    assert e.value.line == 2 and reason in e.value.reason
    with pytest.raises(HistoryError) as e:
        check_file(path)
    assert str(e.value).startswith(f"{path}:2: ")


# ======================================================= results.py


def test_unseen_count_is_values_not_keys(tmp_path: Path) -> None:
    """Mutant: unseen's count is its number of examples (one per key).

    An unseen anomaly is a value (DESIGN 3: "values sent by ok ops that no ok poll ever
    read"), so count is the number of values; each example is one key's values, with
    their acknowledged offsets."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(2, 0, 20), snd(1, 2, 12)]),
            poll(2, {"1": [[0, 10]]}),
        ],
    )
    assert types(res) == ({"unseen"}, {"unseen"})
    assert res["anomalies"]["unseen"]["count"] == 3
    by_key = {e["key"]: e for e in examples(res, "unseen")}
    assert {k: (e["count"], e["values"], e["offsets"]) for k, e in by_key.items()} == {
        "1": (2, [11, 12], [1, 2]),
        "2": (1, [20], [0]),
    }


@pytest.mark.parametrize("max_examples", [3, 8])
def test_max_examples_caps_examples_not_the_count(tmp_path: Path, max_examples: int) -> None:
    """Mutant: combine() keeps every example.

    anomalies.md: at most --max-examples are kept per type; count still says how many
    there are."""
    n = 10
    lines = [ok(1, "send", [snd(1, i, 100 + i) for i in range(n)])]
    lines.append(poll(2, {"1": [[i, 100 + i] for i in range(n)]}))
    lines.append(poll(3, {"1": [[n + i, 100 + i] for i in range(n)]}))  # each again, later
    res = run(tmp_path, lines, max_examples=max_examples)
    assert types(res)[1] == {"duplicate"}
    dup = res["anomalies"]["duplicate"]
    assert dup["count"] == n
    assert len(dup["examples"]) == max_examples
    for ex in dup["examples"]:
        assert ex["offsets"] == [ex["value"] - 100, ex["value"] - 100 + n]
        assert "explanation" in ex


def test_a_cycle_search_timeout_makes_the_verdict_unknown_not_false(tmp_path: Path) -> None:
    """Mutants: cycle-search-timeout becomes bad; or it no longer makes the verdict
    unknown. DESIGN 3: valid is "unknown" if the cycle search timed out (and no bad
    type occurred). A budget of a nanosecond cannot find the read-from-the-future
    cycle of test_read_from_the_future_is_bad_without_ww_deps."""
    res = run(
        tmp_path,
        [
            inv(2, "poll", [["poll"]]),
            poll(2, {"2": [[0, 20]]}),
            inv(1, "send", [["send", 2, 20]]),
            ok(1, "send", [snd(2, 0, 20)]),
        ],
        ww_deps=False,
        cycle_timeout_s=1e-9,
    )
    assert types(res) == ({"cycle-search-timeout"}, set())
    assert res["valid"] == "unknown"
    (ex,) = examples(res, "cycle-search-timeout")
    assert sorted(ex["ops"]) == [1, 3] and ex["size"] == 2


def test_the_biggest_skip_is_the_example_kept(tmp_path: Path) -> None:
    """Mutant: poll-skip examples ranked smallest jump first.

    anomalies.md keeps the most telling examples first (results.py: biggest jumps);
    with room for one, process 2's jump over three records is kept, not process 3's
    jump over one. count still says two."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, i, 10 + i) for i in range(6)]),
            poll(3, {"1": [[0, 10]]}),
            poll(3, {"1": [[2, 12]]}),
            poll(2, {"1": [[0, 10]]}),
            poll(2, {"1": [[4, 14], [5, 15]]}),
            poll(4, {"1": [[i, 10 + i] for i in range(6)]}),
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


def test_a_crash_ends_a_pending_send_which_keeps_its_values(tmp_path: Path) -> None:
    """A crash completion does not pair with the process's pending send invoke: the
    send never completed (info, its invoke's values), and the crash wrote nothing.
    So a poll that ended before that send was invoked, yet read its value, read from
    the future: G1c-realtime, bad. (Hypothesis found this shape while the mutants
    ran; the brute-force reference of test_checker_independent.py's cycle test credits
    the crash with the send's values and disagrees; the checker is right.)"""
    res = run(
        tmp_path,
        [
            inv(2, "poll", [["poll"]]),
            poll(2, {"2": [[0, 13]]}),
            inv(0, "send", [["send", 2, 13]]),
            info(0, "crash"),
        ],
    )
    assert types(res) == ({"G1c-realtime"}, {"G1c-realtime"})
    (ex,) = examples(res, "G1c-realtime")
    assert sorted(ex["cycle"]) == [1, 2]
    assert "never completed" in ex["explanation"] and "value 13 to key 2" in ex["explanation"]


def test_a_poll_skip_after_an_indeterminate_read_names_that_op(tmp_path: Path) -> None:
    """Mutants: the poll-skip example forgets the info op in between (its id, or the
    note). The consumer read offset 0, an info poll read 1..2 (the driver may not
    rewind), then its next ok read began at 4: only 13 (offset 3) was skipped, and the
    explanation must say why 11 and 12 are not counted: op 2 read up to offset 2."""
    res = run(
        tmp_path,
        [
            ok(1, "send", [snd(1, i, 10 + i) for i in range(5)]),
            poll(2, {"1": [[0, 10]]}),
            poll(2, {"1": [[1, 11], [2, 12]]}, typ="info", error="timeout"),
            poll(2, {"1": [[4, 14]]}),
            poll(3, {"1": [[i, 10 + i] for i in range(5)]}),
        ],
        consumer_rewinds=False,  # the relaxed rule; Jepsen's: tests/checker/test_order_positions.py
    )
    assert types(res) == ({"poll-skip"}, {"poll-skip"})
    (ex,) = examples(res, "poll-skip")
    assert (ex["key"], ex["values"], ex["offsets"], ex["skipped"]) == ("1", [10, 14], [0, 4], [13])
    assert ex["ops"] == [1, 3, 2]  # the pair, then the info op the text names
    assert "op 2 (process 2, info poll" in ex["explanation"]
    assert "read up to offset 2" in ex["explanation"]
