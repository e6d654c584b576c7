"""Dependency cycles (checker/cycles.py, checker/graph.py): G0, G1c and their realtime
variants on hand-written histories, when each is bad, how its steps are explained,
and the cycle-search budget. The comparison with a brute-force full dependency graph
is in differential/test_cycles_full_graph.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check
from ktrial.checker.cycles import Between
from ktrial.tests.checker.common import (
    bad_cycle,
    cycle_types,
    explain,
    forward_wr_in_a_realtime_cycle,
    glued_walk,
    long_visibility_chain,
    one_edge_wr_and_rt,
    run_all_examples,
    split_walk_history,
    three_way_visibility,
    three_way_writes,
)
from ktrial.tests.histlines import (
    Line,
    examples,
    fail,
    info,
    inv,
    ok,
    parsed,
    pl,
    poll_op,
    run,
    snd,
    types,
)


@pytest.mark.parametrize("other_value", [False, True], ids=["key-has-no-offsets", "placed-other"])
def test_read_from_the_future_with_null_offset_polls(tmp_path: Path, other_value: bool) -> None:
    lines = [ok(0, "send", [snd(1, 0, 5)])] if other_value else []
    seen: list[list[Any]] = [[0, 5], [None, 20]] if other_value else [[None, 20]]
    lines += [
        inv(1, "poll", [["poll"]]),
        ok(1, "poll", [pl({"1": seen})]),
        inv(2, "send", [["send", 1, 20]]),
        ok(2, "send", [snd(1, None, 20)]),
    ]
    res = run(tmp_path, lines)
    assert "G1c-realtime" in res["bad_error_types"], res["error_types"]


def test_read_from_the_future_with_offsets_is_found(tmp_path: Path) -> None:
    """The control for the test above: the same history with offsets."""
    res = run(
        tmp_path,
        [
            inv(1, "poll", [["poll"]]),
            ok(1, "poll", [pl({"1": [[0, 20]]})]),
            inv(2, "send", [["send", 1, 20]]),
            ok(2, "send", [snd(1, 0, 20)]),
        ],
    )
    assert res["bad_error_types"] == ["G1c-realtime"]
    assert "rt" in examples(res, "G1c-realtime")[0]["edges"]


def test_three_way_circular_visibility_is_g1c(tmp_path: Path) -> None:
    for ww in (True, False):
        res = run(tmp_path, three_way_visibility(), ww_deps=ww)
        assert cycle_types(res) == {"G1c", "G1c-realtime"}, (ww, explain(res))
        ex = examples(res, "G1c")[0]
        assert sorted(ex["cycle"]) == [0, 1, 2] and ex["edges"] == ["wr"] * 3
        assert ex["wr_only"] is True


def test_three_way_write_cycle_is_g0(tmp_path: Path) -> None:
    res = run(tmp_path, three_way_writes())
    assert cycle_types(res) == {"G0", "G0-realtime"}, explain(res)
    ex = examples(res, "G0")[0]
    assert sorted(ex["cycle"]) == [0, 1, 2] and ex["edges"] == ["ww"] * 3


def test_one_edge_wr_and_rt_is_no_g1c_realtime(tmp_path: Path) -> None:
    res = run(tmp_path, one_edge_wr_and_rt())
    assert "G1c-realtime" not in res["error_types"], explain(res)


def test_glued_walk_is_no_g1c_realtime(tmp_path: Path) -> None:
    res = run(tmp_path, glued_walk())
    assert cycle_types(res) == {"G1c", "G0-realtime"}, explain(res)


def test_forward_wr_in_a_realtime_cycle_is_g1c_realtime(tmp_path: Path) -> None:
    res = run(tmp_path, forward_wr_in_a_realtime_cycle())
    assert "G1c-realtime" in res["error_types"], explain(res)


def test_forward_wr_in_a_realtime_cycle_is_not_bad(tmp_path: Path) -> None:
    res = run(tmp_path, forward_wr_in_a_realtime_cycle())
    assert res["valid"] is True and {"G0", "G0-realtime"} <= cycle_types(res)


def test_split_walk_reports_g1c_realtime() -> None:
    res = run_all_examples(split_walk_history())
    assert "G1c-realtime" in cycle_types(res), explain(res)


def test_long_visibility_chain_beyond_max_extra_verdict_and_steps() -> None:
    """The verdict stays bad and the reported cycle is real, whatever its name: A
    (line 1) completed before Z (last line) was invoked, and Z wrote the z=1 A read.
    (Past Between.MAX_EXTRA ops between its members a component is searched without
    them, so this wr-only loop is named only G1c-realtime, not also G1c: a documented
    limit, docs/anomalies.md "Dependency cycles".)"""
    n = Between.MAX_EXTRA + 20
    lines = long_visibility_chain(n)
    res = run_all_examples(lines, ww_deps=False)
    assert bad_cycle(res) and res["valid"] is False
    a, z = 1, len(lines) - 1
    for name in cycle_types(res):
        for ex in res["anomalies"][name]["examples"]:
            assert len(set(ex["cycle"])) == len(ex["cycle"]) >= 2
            if ex["cycle"] in ([a, z], [z, a]):
                want = ["rt", "wr"] if ex["cycle"] == [a, z] else ["wr", "rt"]
                assert ex["edges"] == want and name == "G1c-realtime", ex
                assert "value 1 to key z" in ex["explanation"], ex["explanation"]
            else:  # the whole chain: wr steps only, each op read its predecessor's value
                assert name == "G1c" and set(ex["edges"]) == {"wr"}, ex


def circular() -> list[Any]:
    """Two concurrent transactions, each reading the other's write: circular visibility."""
    return parsed(
        inv(0, "txn", [["send", "x", 1], ["poll"]]),
        inv(1, "txn", [["send", "y", 2], ["poll"]]),
        ok(0, "txn", [["send", "x", [0, 1]], ["poll", {"y": [[0, 2]]}]]),
        ok(1, "txn", [["send", "y", [0, 2]], ["poll", {"x": [[0, 1]]}]]),
    )


def test_wr_only_g1c_is_bad_whatever_ww_deps_says() -> None:
    for ww in (True, False):
        res = check(circular(), CheckOptions(ww_deps=ww))
        assert res["bad_error_types"] == ["G1c"], (ww, res["error_types"])
        ex = res["anomalies"]["G1c"]["examples"][0]
        assert sorted(ex["cycle"]) == [2, 3] and ex["wr_only"] is True
        assert len(ex["steps"]) == 2
        assert "sent value 1 to key x (micro-op 0)" in ex["steps"][0] + ex["steps"][1]
        assert "circular visibility" in ex["explanation"]


def interleaved() -> list[Any]:
    """T1 writes x before T2, T2 writes y before T1: a write cycle (normal for Kafka)."""
    return parsed(
        inv(0, "txn", [["send", "x", 1], ["send", "y", 4]]),
        inv(1, "txn", [["send", "x", 2], ["send", "y", 3]]),
        ok(0, "txn", [["send", "x", [0, 1]], ["send", "y", [1, 4]]]),
        ok(1, "txn", [["send", "x", [1, 2]], ["send", "y", [0, 3]]]),
        ok(2, "poll", [pl({"x": [[0, 1], [1, 2]], "y": [[0, 3], [1, 4]]})]),
    )


def test_g0_is_reported_but_never_bad() -> None:
    res = check(interleaved(), CheckOptions(ww_deps=True))
    assert "G0" in res["error_types"] and res["valid"] is True
    ex = res["anomalies"]["G0"]["examples"][0]
    assert sorted(ex["cycle"]) == [2, 3] and ex["edges"] == ["ww", "ww"]
    assert "offset" in ex["steps"][0]
    # Without ww inference there are no write edges, so no write cycle at all.
    res = check(interleaved(), CheckOptions(ww_deps=False))
    assert "G0" not in res["error_types"] and res["valid"] is True


def test_g1c_through_ww_edges_is_normal_with_ww_deps() -> None:
    # T1 sends x:1 before T2's x:2 (ww T1->T2); T1 read T2's y:3 (wr T2->T1).
    h = parsed(
        inv(0, "txn", [["send", "x", 1], ["poll"]]),
        inv(1, "txn", [["send", "x", 2], ["send", "y", 3]]),
        ok(1, "txn", [["send", "x", [1, 2]], ["send", "y", [0, 3]]]),
        ok(0, "txn", [["send", "x", [0, 1]], ["poll", {"y": [[0, 3]]}]]),
        ok(2, "poll", [pl({"x": [[0, 1], [1, 2]]})]),
    )
    res = check(h, CheckOptions(ww_deps=True))
    assert "G1c" in res["error_types"] and "G1c" not in res["bad_error_types"]
    assert res["anomalies"]["G1c"]["examples"][0]["wr_only"] is False
    assert res["valid"] is True


def test_g1c_realtime_reading_the_future_is_bad() -> None:
    # The poll completed before the send was even invoked, yet read its value.
    h = parsed(
        ok(1, "poll", [pl({"x": [[0, 7]]})]),
        inv(0, "txn", [["send", "x", 7]]),
        {"process": 0, "type": "ok", "f": "send", "value": [["send", "x", [0, 7]]]},
    )
    res = check(h, CheckOptions(ww_deps=True))
    assert "G1c-realtime" in res["bad_error_types"]
    ex = res["anomalies"]["G1c-realtime"]["examples"][0]
    assert set(ex["edges"]) == {"wr", "rt"}
    assert "before" in ex["explanation"] and "value 7" in ex["explanation"]


def test_g0_realtime_is_not_bad() -> None:
    h = parsed(
        {"process": 0, "type": "ok", "f": "send", "value": [["send", "x", [5, 1]]]},
        {"process": 1, "type": "ok", "f": "send", "value": [["send", "x", [3, 2]]]},
        ok(2, "poll", [pl({"x": [[3, 2], [5, 1]]})]),
    )
    res = check(h)
    assert "G0-realtime" in res["error_types"] and res["valid"] is True


def test_cycle_search_timeout_makes_the_verdict_unknown() -> None:
    res = check(circular(), CheckOptions(cycle_timeout_s=1e-9))
    assert "cycle-search-timeout" in res["error_types"]
    assert res["bad_error_types"] == [] and res["valid"] == "unknown"
    ex = res["anomalies"]["cycle-search-timeout"]["examples"][0]
    assert ex["size"] == 2 and "visibility" in ex["explanation"]


def test_realtime_edges_start_only_at_ok_ops(tmp_path: Path) -> None:
    """Mutant: info ops get realtime successors, both in ok_completion_positions()
    (candidate components) and in the cycle graph's realtime chain. Either alone is
    equivalent: the components gate the search, and the search uses the real edges.

    docs/anomalies.md: realtime edges link an *ok* op to ops invoked after it completed. An
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
            poll_op(3, {"1": [[0, 12], [1, 11]]}),
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
            poll_op(2, {"2": [[0, 20]]}),
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
        poll_op(2, {"2": [[0, 20]]}),
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


def test_a_cycle_search_timeout_makes_the_verdict_unknown_not_false(tmp_path: Path) -> None:
    """Mutants: cycle-search-timeout becomes bad; or it no longer makes the verdict
    unknown. docs/anomalies.md: valid is "unknown" if the cycle search timed out (and no bad
    type occurred). A budget of a nanosecond cannot find the read-from-the-future
    cycle of test_read_from_the_future_is_bad_without_ww_deps."""
    res = run(
        tmp_path,
        [
            inv(2, "poll", [["poll"]]),
            poll_op(2, {"2": [[0, 20]]}),
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
