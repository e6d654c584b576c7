"""Second mutation audit, on the code changed in the cycle/order/visibility round.

Mutants of checker/{cycles,graph,order,visibility,metrics,liveness}.py and
histories/{fastread,jsonl}.py that survived the rest of the suite were judged
against DESIGN.md section 3 and docs/anomalies.md. Where the mutated behaviour is
wrong, a test here pins the right one (it passes on the real code and fails under
the mutant named in its docstring). Where the real code is wrong, the test is
``xfail(strict=True)``: it passes once fixed.

Histories are small and hand-written, as in test_checker_audit.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.tests.histlines import examples, fail, info, inv, ok, pl, run, snd

Line = dict[str, Any]


# ================================================================ helpers


# ================================================================ cycles.py


def test_the_shortest_realtime_cycle_is_reported(tmp_path: Path) -> None:
    """Three ops without invokes: op 2 sent 101 that op 0 and op 1 read earlier; op 0
    and op 2 also read each other's writes. The shortest G1c-realtime is op 1 -rt-> op 2
    -wr-> op 1 (2 ops; op 0 -rt-> op 2 -wr-> op 0 is as short), not op 0 -> op 1 -> op 2.

    Kills cycles.py:shortest_cycle `start = (v0, 0)` (the start edge's own type not
    counted) and `if len(best) <= 3: break` (settling for a 3-op cycle)."""
    lines = [
        ok(1, "txn", [snd(2, 1, 102), snd(0, 1, 103), pl({"0": [[1, 103]], "1": [[1, 101]]})]),
        ok(2, "txn", [pl({"0": [[1, 103]], "1": [[1, 101]], "2": [[1, 102]]})]),
        ok(0, "txn", [snd(1, 1, 101), pl({"2": [[1, 102]]})]),
    ]
    res = run(tmp_path, lines, ww_deps=False)
    assert res["valid"] is False
    (g1c,) = examples(res, "G1c")
    assert sorted(g1c["cycle"]) == [0, 2]
    (rt,) = examples(res, "G1c-realtime")
    # op 0 or op 1 -rt-> op 2 -wr-> it: two ops either way
    assert len(rt["cycle"]) == 2 and 2 in rt["cycle"]
    assert sorted(rt["edges"]) == ["rt", "wr"]
    assert "value 101 to key 1" in rt["explanation"]


# ================================================================ graph.py


def test_a_ww_step_names_the_writers_last_version_before_the_next(tmp_path: Path) -> None:
    """Op 2 wrote 10 and 11 (offsets 0, 1) to key 1, then op 3 wrote 12 (offset 2): the
    ww step is 11 -> 12, consecutive versions; saying '10 at offset 0, and the next
    committed record is 12' would be false.

    Kills graph.py:next_committed_writer `if w == self_id: continue`."""
    lines = [
        inv(0, "txn", [["send", 1, 10], ["send", 1, 11], ["send", 2, 21]]),
        inv(1, "txn", [["send", 1, 12], ["send", 2, 20]]),
        ok(0, "txn", [snd(1, 0, 10), snd(1, 1, 11), snd(2, 1, 21)]),
        ok(1, "txn", [snd(1, 2, 12), snd(2, 0, 20)]),
        ok(2, "poll", [pl({"1": [[0, 10], [1, 11], [2, 12]], "2": [[0, 20], [1, 21]]})]),
    ]
    res = run(tmp_path, lines)
    assert res["valid"] is True
    (g0,) = examples(res, "G0")
    text = g0["explanation"]
    assert "sent value 11 to key 1 (micro-op 1, offset 1)" in text
    assert "next committed record of key 1 is value 12 at offset 2" in text
    assert "value 10 " not in text
    assert "sent value 20 to key 2 (micro-op 1, offset 0)" in text
    assert "value 21 at offset 1" in text


def _g0_over_a_duplicate(ack_10: int, extra: list[Line]) -> list[Line]:
    """Op 2 sent 10 to key 1 and 21/20 to key 2, op 3 sent 11 to key 1 and the other of
    20/21; a poll read 10 twice on key 1 (offsets 0 and 2)."""
    a2, b2 = (1, 0) if ack_10 == 0 else (0, 1)
    return [
        inv(0, "txn", [["send", 1, 10], ["send", 2, 20 + a2]]),
        inv(1, "txn", [["send", 1, 11], ["send", 2, 20 + b2]]),
        ok(0, "txn", [snd(1, ack_10, 10), snd(2, a2, 20 + a2)]),
        ok(1, "txn", [snd(1, 1, 11), snd(2, b2, 20 + b2)]),
        *extra,
    ]


def test_a_duplicated_values_home_is_still_a_version(tmp_path: Path) -> None:
    """10 sits at offsets 0 (where op 2's send was acknowledged) and 2 (a copy). Its home
    is a version: 10 -> 11 on key 1 and 20 -> 21 on key 2 make a G0 of ops 2 and 3.

    Kills graph.py:Writers dropping the home position of a duplicated value too."""
    read = ok(2, "poll", [pl({"1": [[0, 10], [1, 11], [2, 10]], "2": [[0, 20], [1, 21]]})])
    res = run(tmp_path, _g0_over_a_duplicate(0, [read]))
    assert set(res["bad_error_types"]) == {"duplicate"}
    (g0,) = examples(res, "G0")
    assert sorted(g0["cycle"]) == [2, 3]
    text = g0["explanation"]
    assert "sent value 10 to key 1 (micro-op 0, offset 0)" in text
    assert "next committed record of key 1 is value 11 at offset 1" in text


def test_a_duplicated_values_version_is_where_it_was_acknowledged(tmp_path: Path) -> None:
    """Op 2's 10 was acknowledged at offset 2; a copy sits at offset 0. The version is
    at offset 2, after op 3's 11: ww 11 -> 10 on key 1 and 20 -> 21 on key 2 close a G0
    (docs/anomalies.md: a value is a version where its writer's send was acknowledged).

    Kills graph.py:home_pos using the first copy instead of the acknowledged offset."""
    read = ok(2, "poll", [pl({"1": [[0, 10], [1, 11], [2, 10]], "2": [[0, 20], [1, 21]]})])
    res = run(tmp_path, _g0_over_a_duplicate(2, [read]))
    (g0,) = examples(res, "G0")
    assert sorted(g0["cycle"]) == [2, 3]
    text = g0["explanation"]
    assert "sent value 11 to key 1 (micro-op 0, offset 1)" in text
    assert "next committed record of key 1 is value 10 at offset 2" in text


def test_a_copy_at_a_conflicting_offset_does_not_erase_the_other_version(
    tmp_path: Path,
) -> None:
    """One poll read 11 at offset 1 of key 1, another read 10 there (inconsistent
    offsets; 10 also sits at offset 0, its acknowledged home). The copy of 10 at offset
    1 is no version, but 11, the value the log keeps at offset 1, still is: 10 -> 11 and
    20 -> 21 make a G0.

    Kills graph.py:Writers blanking offset 1 without checking whose value sits there."""
    reads = [
        ok(2, "poll", [pl({"1": [[0, 10], [1, 11]], "2": [[0, 20], [1, 21]]})]),
        ok(3, "poll", [pl({"1": [[1, 10]]})]),
    ]
    res = run(tmp_path, _g0_over_a_duplicate(0, reads))
    assert {"duplicate", "inconsistent-offsets"} <= set(res["bad_error_types"])
    (g0,) = examples(res, "G0")
    assert sorted(g0["cycle"]) == [2, 3]
    assert "next committed record of key 1 is value 11 at offset 1" in g0["explanation"]


def test_a_duplicate_copy_orders_nothing_inside_a_component(tmp_path: Path) -> None:
    """Op 3 sent 10 (offset 0) and read op 2's 11 (offset 1); a poll read 10 again at
    offset 2. ww 10 -> 11 and wr 11 -> op 3 make a G1c (with ww), but the copy of 10
    at offset 2 is no version: no ww edge 11 -> 10, so no G0.

    Kills graph.py:next_committed_writer walking the copies (`wr.wid`)."""
    lines = [
        inv(0, "txn", [["send", 1, 10], ["poll"]]),
        inv(1, "send", [["send", 1, 11]]),
        ok(1, "send", [snd(1, 1, 11)]),
        ok(0, "txn", [snd(1, 0, 10), pl({"1": [[1, 11]]})]),
        ok(2, "poll", [pl({"1": [[0, 10], [1, 11], [2, 10]]})]),
    ]
    res = run(tmp_path, lines)
    assert set(res["error_types"]) == {"G1c", "duplicate"}
    (g1c,) = examples(res, "G1c")
    assert sorted(g1c["cycle"]) == [2, 3] and sorted(g1c["edges"]) == ["wr", "ww"]


# ================================================================ order.py


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
    """An info transaction nobody read never committed (DESIGN.md 3): its sends,
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
    """The same info transaction, once an ok op read one of its values, must have
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


# ================================================================ visibility.py


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


# ================================================================ metrics.py


def test_realtime_lag_forgets_positions_at_a_crash(tmp_path: Path) -> None:
    """docs/anomalies.md, realtime_lag: '`subscribe` and `crash` forget them'. The crash
    op is `info` (DESIGN.md 2): at HEAD dfedb8e metrics.py:realtime_lag skipped every
    non-ok op before its `r.f == "crash"` branch, so after the crash the process's
    empty polls were still charged with key 1 (worst 5 ms). Fixed in the working tree
    while this audit ran; this pins it."""
    lines = [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(0, "send", [snd(1, 1, 11)]),
        ok(1, "assign", [1]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
        info(1, "crash", None),
        ok(1, "poll", [pl({})]),
        ok(1, "poll", [pl({})]),
    ]
    lag = run(tmp_path, lines)["metrics"]["realtime_lag"]
    # the poll at index 3 (invoked at 3 ms) had read offset 0; offset 1 existed since 1 ms
    assert lag["worst"]["lag_ms"] == 2.0
    assert lag["per_consumer"] == {"1": 2.0}


def test_info_cause_prefers_type_then_cause_and_cuts_at_80() -> None:
    """docs/anomalies.md: the error object's `type`, `cause`, `name`, ... field, cut to 80
    characters. Kills metrics.py:info_cause skipping `cause`, and not cutting."""
    from ktrial.checker.metrics import info_cause

    assert info_cause({"name": "n", "cause": "c"}) == "c"
    assert info_cause({"cause": "c", "type": "t"}) == "t"
    assert info_cause({"cause": "z" * 100}) == "z" * 80
    assert info_cause("e" * 100) == "e" * 80


def test_downsample_keeps_the_peak_of_each_run() -> None:
    """Kills metrics.py:downsample keeping each run's first point instead of its peak,
    or dropping the last run."""
    from ktrial.checker.metrics import downsample

    pts: list[tuple[float, float]] = [(0, 1), (1, 5), (2, 2), (3, 0), (4, 1), (5, 7)]
    assert downsample(pts, 3) == [[1, 5], [2, 2], [5, 7]]
    assert downsample(pts, 6) == [[x, y] for x, y in pts]
    many = [(float(i), float(i % 10)) for i in range(5000)]
    out = downsample(many)
    assert len(out) == 2000
    assert max(y for _x, y in out) == 9.0
    assert out[-1][0] >= 4997.0  # the last run is kept


def test_downsample_always_keeps_the_last_point() -> None:
    """docs/anomalies.md, Metrics: over_time series are cut to at most 2,000 points 'by
    keeping the highest value of each run of points (...; the last point is always
    kept)'. An unseen count that peaks and then drains to 0 must still end at 0 on the
    plot. At HEAD dfedb8e metrics.py:downsample ended it at the last run's peak; fixed in
    the working tree while this audit ran; this pins it."""
    from ktrial.checker.metrics import downsample

    pts = [(float(i), 100.0) for i in range(2500)] + [(2500.0, 0.0)]
    out = downsample(pts)
    assert len(out) <= 2000
    assert out[-1] == [2500.0, 0.0]


def test_throughput_of_a_sub_second_run_is_per_second(tmp_path: Path) -> None:
    """docs/anomalies.md: ok data ops per second over the run (earliest to latest
    `time`). Three ok ops over 2 ms are 1,500 ops/s.

    Kills metrics.py:throughput flooring the span at 1 s."""
    lines = [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(0, "send", [snd(1, 1, 11)]),
        ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
    ]
    tp = run(tmp_path, lines)["metrics"]["throughput"]
    assert tp["ok_data_per_s"] == 1500.0
    assert tp["ok_per_s_by_f"] == {"poll": 500.0, "send": 1000.0}


# ================================================================ histories readers


def _line(i: int, o: Line) -> str:
    return json.dumps({"index": i, "time": i, **o})


def test_two_ops_on_one_line_are_an_error_beside_a_two_line_op(tmp_path: Path) -> None:
    """docs/history-format.md: two ops on one line, or an op spread over several lines,
    are errors at their line. In one block the two cancel out in decode_block's count
    of values per line; only the `} {` check sends the block to the strict reader.

    Kills fastread.py:decode_block dropping `_ADJACENT`."""
    from ktrial.histories.jsonl import HistoryError, iter_history

    a = _line(0, ok(0, "send", [snd(1, 0, 10)]))
    b = _line(1, ok(0, "send", [snd(1, 1, 11)]))
    c = _line(2, ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]))
    spread = c.replace(', "f"', ',\n "f"')
    path = tmp_path / "history.jsonl"
    path.write_text(f"{a} {b}\n{spread}\n")
    with pytest.raises(HistoryError) as e:
        list(iter_history(path))
    assert e.value.line == 1


def test_a_last_line_with_a_bare_cr_is_an_error_not_a_torn_line(tmp_path: Path) -> None:
    """docs/history-format.md: ops separated by a bare CR are an error at their line, and
    only the start of one op's JSON is a torn last line. `{op}\\r{"ind` is two ops
    split by a CR, the second cut short: an error, not skipped with a warning.

    Kills jsonl.py:_is_torn accepting a CR inside the line."""
    from ktrial.histories.jsonl import HistoryError, iter_history

    a = _line(0, ok(0, "send", [snd(1, 0, 10)]))
    b = _line(1, ok(0, "send", [snd(1, 1, 11)]))
    path = tmp_path / "history.jsonl"
    path.write_bytes(f'{a}\n{b}\r{{"index": 2, "ti'.encode())
    with pytest.raises(HistoryError) as e:
        list(iter_history(path))
    assert e.value.line == 2
