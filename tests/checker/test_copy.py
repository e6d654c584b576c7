"""The exactly-once copy analysis (checker/copy.py): eos-duplicate and eos-loss, the
copy section of test.json, and what is and is not blamed on the copier; through the
whole checker on timed histories, and through check_copy alone on hand-made op lists.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker.copy import check_copy
from ktrial.histories.jsonl import op_from_json
from ktrial.histories.model import Op
from ktrial.tests.checker.common import COPY, META, M, run_main
from ktrial.tests.histlines import Timeline, examples


def two_inputs() -> Timeline:
    """Input 10 at key 0 offset 0 and 11 at key 1 offset 0, acknowledged."""
    h = Timeline()
    h.send(1000, 0.0, 0.1, 0, 10, 0)
    h.send(1000, 0.1, 0.2, 1, 11, 0)
    return h


def test_correct_copy_with_aborts_retries_info_commits_and_zombies_is_valid() -> None:
    h = Timeline()
    for p in (0, 1, 2):
        h.subscribe(p, 0.0, [0, 1])
    h.subscribe(4, 11.9, [0, 1])
    h.subscribe(5, 22.9, [0, 1])
    h.send(1000, 0.0, 0.1, 0, 10, 0)
    h.send(1000, 0.1, 0.2, 0, 11, 1)
    h.send(1000, 0.2, 0.3, 1, 12, 0)
    h.send(1000, 0.3, 0.4, 1, 13, 1)
    h.send(1001, 0.3, 5.0, 1, 14, None, typ="info")  # landed at offset 2 (read later)
    h.send(1001, 5.1, 9.0, 0, 15, None, typ="info")  # never landed: nobody reads it
    # step 1: a deliberate abort of the copy of 10 (its output was acknowledged at 0)
    h.copy(0, 1.0, 1.2, {"0": [[0, 10]]}, [(2, 0, 1 * M + 10)], typ="fail", error="abort")
    # step 2: the retry rereads 10 and copies 11 too (abort marker at 1)
    h.copy(0, 1.3, 1.5, {"0": [[0, 10], [1, 11]]}, [(2, 2, 2 * M + 10), (2, 3, 2 * M + 11)])
    # step 3: copier 1 copies 12; the commit timed out (info) but did commit
    h.copy(1, 1.6, 11.6, {"1": [[0, 12]]}, [(3, 0, 3 * M + 12)], typ="info", error="timeout")
    h.crash(1, 11.7)
    # step 4: a zombie of an older generation copies 13: fenced, nothing committed
    h.copy(2, 1.7, 2.0, {"1": [[1, 13]]}, [(3, 2, 4 * M + 13)], typ="fail", error="fenced")
    # step 5: the new owner reads 13 again and 14; its commit timed out and did NOT commit
    h.copy(4, 12.0, 22.0, {"1": [[1, 13], [2, 14]]}, [(3, 4, 5 * M + 13), (3, 5, 5 * M + 14)],
           typ="info", error="timeout")  # fmt: skip
    h.crash(4, 22.1)
    # step 6: its successor copies 13 and 14 (a third read of 13); then an empty step
    h.copy(5, 23.0, 23.3, {"1": [[1, 13], [2, 14]]}, [(3, 7, 6 * M + 13), (3, 8, 6 * M + 14)])
    h.copy(5, 24.0, 24.1, {}, [])
    h.drain(90, 30.0, {
        "0": [[0, 10], [1, 11]], "1": [[0, 12], [1, 13], [2, 14]],
        "2": [[2, 2 * M + 10], [3, 2 * M + 11]],
        "3": [[0, 3 * M + 12], [7, 6 * M + 13], [8, 6 * M + 14]],
    })  # fmt: skip
    res = h.check(META)
    assert res["valid"] is True, res["error_types"]
    assert res["error_types"] == []


def test_queen_null_offsets_for_transactional_sends_are_valid() -> None:
    # Queen returns -1 for transactional sends: recorded as null offsets.
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, None, M + 10), (3, None, M + 11)])
    # another copier's aborted copy of 10 (copier 0's own consumer had moved past
    # offset 0: re-reading it would be a nonmonotonic-poll, Jepsen's rule)
    h.copy(1, 2.0, 2.5, {"0": [[0, 10]]}, [(2, None, 2 * M + 10)], typ="fail", error="abort")
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [[0, M + 10]], "3": [[0, M + 11]]})
    res = h.check(META)
    assert res["valid"] is True and res["error_types"] == []


def test_copy_section_under_checker_or_workload_and_test_json_on_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(3, 0, M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [], "3": [[0, M + 11]]})
    for where in ("checker", "workload"):
        assert set(h.check({where: {"copy": COPY}})["error_types"]) == {"eos-loss"}
    d = h.write(tmp_path / "run", META)
    code, _out, _err = run_main(["check", str(d)], capsys)
    res = json.loads((d / "results.json").read_text())
    assert code == 1 and res["bad_error_types"] == ["eos-loss"]


def test_eos_duplicate_of_two_committed_copies_is_explained() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, 0, M + 10), (3, 0, M + 11)])
    # a zombie copier of the old generation was not fenced: it copied 10 again
    h.copy(1, 2.0, 2.5, {"0": [[0, 10]]}, [(2, 2, 2 * M + 10)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]],
                       "2": [[0, M + 10], [2, 2 * M + 10]], "3": [[0, M + 11]]})  # fmt: skip
    res = h.check(META)
    assert res["valid"] is False and set(res["bad_error_types"]) == {"eos-duplicate"}
    (ex,) = examples(res, "eos-duplicate")
    assert (ex["key"], ex["value"], ex["output_key"]) == ("0", 10, "2")
    assert ex["offsets"] == [0, 2] and ex["output_values"] == [M + 10, 2 * M + 10]
    assert len(ex["writers"]) == 2
    for s in ("input value 10", "key 0", "output key 2", "offset 0", "offset 2"):
        assert s in ex["explanation"]


def test_eos_duplicate_inside_one_step() -> None:
    # one step wrote the same input value twice (two offsets, one output value)
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]},
           [(2, 0, M + 10), (3, 0, M + 11), (2, 1, M + 10)])  # fmt: skip
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]],
                       "2": [[0, M + 10], [1, M + 10]], "3": [[0, M + 11]]})  # fmt: skip
    res = h.check(META)
    assert "eos-duplicate" in res["bad_error_types"]


def test_same_value_twice_in_one_op_does_not_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = Timeline()
    h.send(1000, 0.0, 0.1, 0, 10, 0)
    h.send(1000, 0.2, 0.3, 0, 10, 1)  # the input log holds 10 twice (a broker duplicate)
    h.copy(0, 1.0, 1.5, {"0": [[0, 10], [1, 10]]}, [(2, 0, M + 10), (2, 1, M + 10)])
    h.drain(90, 30.0, {"0": [[0, 10], [1, 10]], "2": [[0, M + 10], [1, M + 10]]})
    d = h.write(tmp_path / "run", META)
    code, _out, err = run_main(["check", str(d)], capsys)
    assert code == 1, err
    res = json.loads((d / "results.json").read_text())
    assert "duplicate" in res["bad_error_types"]


def test_input_duplicate_is_not_blamed_on_the_copier() -> None:
    h = Timeline()
    h.send(1000, 0.0, 0.1, 0, 10, 0)
    h.send(1000, 0.2, 0.3, 0, 10, 1)
    # copied in two steps: each input record exactly once
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]]}, [(2, 0, M + 10)])
    h.copy(0, 2.0, 2.5, {"0": [[1, 10]]}, [(2, 2, 2 * M + 10)])
    h.drain(90, 30.0, {"0": [[0, 10], [1, 10]], "2": [[0, M + 10], [2, 2 * M + 10]]})
    res = h.check(META)
    assert "duplicate" in res["bad_error_types"]  # the input log's own anomaly
    dup = res["anomalies"].get("eos-duplicate")
    if dup is not None:  # if reported, it must show the input held the value twice
        (ex,) = dup["examples"]
        assert ex.get("input_offsets") == [0, 1] or "input offsets 0" in ex["explanation"]


def test_eos_duplicate_names_the_zombie_info_writer() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 11.0, {"0": [[0, 10]]}, [(2, 0, M + 10)], typ="info", error="timeout")
    h.copy(1, 2.0, 2.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, 2, 2 * M + 10), (3, 0, M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]],
                       "2": [[0, M + 10], [2, 2 * M + 10]], "3": [[0, M + 11]]})  # fmt: skip
    lines = h.lines()
    info_idx = next(d["index"] for d in lines if d["type"] == "info" and d["f"] == "txn")
    ok_idx = next(d["index"] for d in lines if d["type"] == "ok" and d["f"] == "txn")
    res = h.check(META)
    (ex,) = examples(res, "eos-duplicate")
    assert info_idx in ex["writers"] and ok_idx in ex["writers"]
    assert f"op {info_idx}" in ex["explanation"] and f"op {ok_idx}" in ex["explanation"]


def test_eos_duplicate_with_unknown_offsets_and_no_output_read() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, None, M + 10), (3, None, M + 11)])
    h.copy(1, 2.0, 2.5, {"0": [[0, 10]]}, [(2, None, 2 * M + 10)])
    res = h.check(META)
    assert "eos-duplicate" in res["bad_error_types"]


def test_eos_loss_when_only_aborted_or_uncommitted_copies_exist() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]]}, [(2, 0, M + 10)], typ="fail", error="abort")
    h.copy(1, 2.0, 12.0, {"1": [[0, 11]]}, [(3, 0, M + 11)], typ="info", error="timeout")
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [], "3": []})
    res = h.check(META)
    assert set(res["bad_error_types"]) == {"eos-loss"}
    got = {(e["key"], e["value"], e["output_key"]) for e in examples(res, "eos-loss")}
    assert got == {("0", 10, "2"), ("1", 11, "3")}
    assert all("caveat" not in e for e in examples(res, "eos-loss"))


def test_eos_loss_caveat_when_the_copiers_did_not_catch_up() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"1": [[0, 11]]}, [(3, 0, M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [], "3": [[0, M + 11]]})
    meta = {**META, "drain": {"caught_up": False, "copy_caught_up": False}}
    (ex,) = examples(h.check(meta), "eos-loss")
    assert "caught up" in ex["caveat"]


def test_misrouted_copy_is_a_loss_of_its_input() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(3, 0, M + 10), (3, 1, M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [], "3": [[0, M + 10], [1, M + 11]]})
    res = h.check(META)
    (ex,) = examples(res, "eos-loss")
    assert (ex["key"], ex["value"], ex["output_key"]) == ("0", 10, "2")


def test_eos_loss_names_the_input_offset() -> None:
    h = two_inputs()
    h.send(1000, 0.2, 0.3, 0, 12, 1)
    h.copy(0, 1.0, 1.5, {"0": [[0, 10], [1, 12]]}, [(2, 0, M + 10)])
    h.copy(0, 1.6, 1.8, {"1": [[0, 11]]}, [(3, 0, 2 * M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10], [1, 12]], "1": [[0, 11]],
                       "2": [[0, M + 10]], "3": [[0, 2 * M + 11]]})  # fmt: skip
    (ex,) = examples(h.check(META), "eos-loss")
    assert (ex["key"], ex["value"]) == ("0", 12)
    assert ex.get("offset") == 1 and "offset 1" in ex["explanation"]


def test_an_acknowledged_copy_missing_from_the_drained_output_is_a_lost_write() -> None:
    """docs/anomalies.md: a copy acknowledged to an ok copier but never read back is a
    lost-write on the output key (the copier did its part; the log lost it), not an
    eos-loss -- and the run is invalid either way."""
    h = two_inputs()
    h.send(1000, 0.2, 0.3, 0, 12, 1)
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, 0, M + 10), (3, 0, M + 11)])
    h.copy(0, 2.0, 2.5, {"0": [[1, 12]]}, [(2, 2, 2 * M + 12)])
    h.drain(90, 30.0, {"0": [[0, 10], [1, 12]], "1": [[0, 11]],
                       "2": [[2, 2 * M + 12]], "3": [[0, M + 11]]})  # fmt: skip
    res = h.check(META)
    assert res["valid"] is False and "lost-write" in res["bad_error_types"]
    (ex,) = examples(res, "lost-write")
    assert (ex["key"], ex["value"]) == ("2", M + 10)
    assert "eos-loss" not in res["error_types"]


@pytest.mark.parametrize(
    "section",
    [{"input_keys": [0]}, {"route": {"0": 2}, "value_modulus": None}, {"route": [[0, 2]]}],
    ids=["no-route", "null-modulus", "route-list"],
)
def test_bad_copy_section_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section: dict[str, Any]
) -> None:
    h = two_inputs()
    h.poll(9, 1.0, 1.1, {"0": [[0, 10]]})
    d = h.write(tmp_path / "run", {"workload": "copy", "copy": section})
    code, _out, err = run_main(["check", str(d)], capsys)
    assert code == 254 and "test.json" in err and "copy" in err


# ------------------------------------------- check_copy alone, on hand-made op lists

# Only the route and the modulus: what check_copy needs of test.json's copy section.
ROUTE_META: dict[str, Any] = {
    "workload": "copy",
    "copy": {"route": {"0": 2, "1": 3}, "value_modulus": M},
}


def ops(*specs: tuple[int, str, str, Any]) -> list[Op]:
    return [
        op_from_json({"process": p, "type": t, "f": f, "value": v}, i)
        for i, (p, t, f, v) in enumerate(specs)
    ]


def base() -> list[tuple[int, str, str, Any]]:
    return [
        (0, "ok", "send", [["send", 0, [0, 10]]]),
        (0, "ok", "send", [["send", 1, [0, 11]]]),
        (
            1,
            "ok",
            "txn",
            [
                ["poll", {"0": [[0, 10]], "1": [[0, 11]]}],
                ["send", 2, [0, M + 10]],
                ["send", 3, [0, M + 11]],
            ],
        ),
    ]


def drain_reads(out: dict[str, list[list[int]]]) -> tuple[int, str, str, Any]:
    return (9, "ok", "poll", [["poll", out]])


def test_exactly_once_is_clean() -> None:
    h = ops(
        *base(),
        drain_reads({"0": [[0, 10]], "1": [[0, 11]], "2": [[0, M + 10]], "3": [[0, M + 11]]}),
    )
    assert check_copy(h, ROUTE_META) == {}


def test_a_second_copy_is_an_eos_duplicate() -> None:
    # A zombie copier's transaction committed the same input again (another step).
    h = ops(
        *base(),
        (5, "ok", "txn", [["poll", {"0": [[0, 10]]}], ["send", 2, [1, 2 * M + 10]]]),
        drain_reads({"2": [[0, M + 10], [1, 2 * M + 10]], "3": [[0, M + 11]]}),
    )
    res = check_copy(h, ROUTE_META)
    assert set(res) == {"eos-duplicate"}
    ex = res["eos-duplicate"]["examples"][0]
    assert (ex["key"], ex["value"], ex["offsets"]) == ("0", 10, [0, 1])
    assert "copied 2 times" in ex["explanation"]


def test_an_uncopied_committed_input_is_an_eos_loss() -> None:
    h = ops(
        *base(),
        (0, "ok", "send", [["send", 0, [1, 12]]]),
        drain_reads({"0": [[0, 10], [1, 12]], "2": [[0, M + 10]], "3": [[0, M + 11]]}),
    )
    res = check_copy(h, {**ROUTE_META, "drain": {"copy_caught_up": False}})
    assert set(res) == {"eos-loss"}
    ex = res["eos-loss"]["examples"][0]
    assert (ex["key"], ex["value"]) == ("0", 12)
    assert "caveat" in ex


def test_aborted_copies_do_not_count() -> None:
    # The failed (aborted) txn's send is ignored; its retry is the one copy.
    h = ops(
        *base()[:2],
        (1, "fail", "txn", [["poll", {"0": [[0, 10]]}], ["send", 2, [0, M + 10]]]),
        (
            1,
            "ok",
            "txn",
            [
                ["poll", {"0": [[0, 10]], "1": [[0, 11]]}],
                ["send", 2, [2, 2 * M + 10]],
                ["send", 3, [0, 2 * M + 11]],
            ],
        ),
        drain_reads({"2": [[2, 2 * M + 10]], "3": [[0, 2 * M + 11]]}),
    )
    assert check_copy(h, ROUTE_META) == {}


def test_not_a_copy_run() -> None:
    assert check_copy(ops(*base()), {"workload": "queue"}) == {}
