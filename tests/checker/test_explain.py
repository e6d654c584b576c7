"""Explanations of examples (checker/explain.py and each analysis' texts): every claim
an example makes is checked against the history by the fact checker (factcheck.py),
on hand-written histories and on generated ones with injected faults; the fact
checker itself is shown to catch false claims.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions
from ktrial.testing import mutate
from ktrial.testing.gen import GenParams, generate
from ktrial.tests.checker.boundary_cases import DRAIN, TXN_CASES, W5, case
from ktrial.tests.checker.common import poll_pair, run_check, send_pair
from ktrial.tests.checker.factcheck import History, fact_check
from ktrial.tests.histlines import (
    POLL,
    Line,
    S,
    examples,
    fail,
    info,
    inv,
    isnd,
    numbered,
    ok,
    pl,
    run,
    snd,
)


def test_explanations_name_ops_keys_values_and_offsets(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd(7, 0, 70)]),  # 0
            ok(0, "send", [snd(7, 1, 71)]),  # 1
            fail(3, "txn", [snd(8, 0, 80)]),  # 2
            ok(4, "txn", [snd(9, 0, 90), pl({"9": [[0, 90]]})]),  # 3
            ok(1, "poll", [pl({"7": [[1, 71]], "8": [[0, 80]], "9": [[0, 90]]})]),  # 4
        ],
    )
    lw = examples(res, "lost-write")[0]
    assert (lw["key"], lw["value"], lw["offset"], lw["ops"]) == ("7", 70, 0, [0, 4])
    for s in ("op 0", "key 7", "value 70", "offset 0", "op 4", "value 71", "offset 1"):
        assert s in lw["explanation"], s
    g = examples(res, "G1a")[0]
    assert (g["key"], g["value"], g["offset"], g["writer"], g["reader"]) == ("8", 80, 0, 2, 4)
    for s in ("op 4", "op 2", "key 8", "value 80", "offset 0", "fail txn"):
        assert s in g["explanation"], s
    pc = examples(res, "precommitted-read")[0]
    for s in ("op 3", "key 9", "value 90", "offset 0", "micro-op 0", "micro-op 1"):
        assert s in pc["explanation"], s


def test_order_explanations_name_both_ops_and_the_skipped_values(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [W5, ok(1, "poll", [pl({"1": [[0, 10]]})]), ok(1, "poll", [pl({"1": [[3, 13]]})]), DRAIN],
    )
    ex = examples(res, "poll-skip")[0]
    assert ex["ops"] == [1, 2] and ex["offsets"] == [0, 3] and ex["skipped"] == [11, 12]
    for s in ("op 1", "op 2", "key 1", "value 10", "offset 0", "value 13", "offset 3", "11, 12"):
        assert s in ex["explanation"], s


def test_cycle_explanation_steps_name_keys_values_and_micro_ops(tmp_path: Path) -> None:
    res = run(tmp_path, case("G1c: circular visibility"))
    ex = examples(res, "G1c")[0]
    assert ex["wr_only"] is True and sorted(ex["cycle"]) == [2, 3]
    for s in ("op 2", "op 3", "value 10", "key 1", "value 20", "key 2", "micro-op", "offset 0"):
        assert s in ex["explanation"], s


def test_realtime_cycle_examples_show_their_realtime_edge(tmp_path: Path) -> None:
    # op 1 completes before op 3 is invoked (rt 1->3) and op 3 read op 1's value (wr 1->3);
    # op 1 read op 3's value (wr 3->1). G1c (wr, wr) and G1c-realtime (rt, wr) are both real,
    # but the G1c-realtime example reads exactly like the G1c one.
    res = run(
        tmp_path,
        [
            inv(0, "txn", [["send", 1, 10], ["poll"]]),
            ok(0, "txn", [snd(1, 0, 10), pl({"2": [[0, 20]]})]),
            inv(1, "txn", [["send", 2, 20], ["poll"]]),
            ok(1, "txn", [snd(2, 0, 20), pl({"1": [[0, 10]]})]),
        ],
    )
    assert {"G1c", "G1c-realtime"} <= set(res["error_types"])
    ex = examples(res, "G1c-realtime")[0]
    assert "rt" in ex["edges"], ex["explanation"]
    assert "before" in ex["explanation"] and "invoked" in ex["explanation"]


def test_g0_realtime_example_shows_its_realtime_edge(tmp_path: Path) -> None:
    # op 0 (99 at offset 1) completes before op 1 is invoked; op 1's 10 lands at offset 0,
    # before 99, and its 11 at offset 2, after it.
    res = run(
        tmp_path,
        [
            ok(2, "send", [snd(1, 1, 99)]),
            ok(0, "txn", [snd(1, 0, 10), snd(1, 2, 11)]),
            ok(1, "poll", [pl({"1": [[0, 10], [1, 99], [2, 11]]})]),
        ],
    )
    ex = examples(res, "G0-realtime")[0]
    assert "rt" in ex["edges"], ex["explanation"]


def test_poll_skip_explanation_pairs_the_right_value_and_offset(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(9, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(1, 2, 12)]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            ok(1, "poll", [pl({"1": [[None, 999], [2, 12]]})]),
            ok(8, "poll", [pl({"1": [[0, 10], [1, 11], [2, 12]]})]),
        ],
    )
    ex = examples(res, "poll-skip")[0]
    assert ex["offsets"] == [0, 2]
    assert ex["values"] == [10, 12], ex["explanation"]


def test_unseen_explanation_names_the_acknowledged_offset(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            ok(0, "send", [snd(1, 0, 10)]),
            ok(0, "send", [snd(1, 1, 11)]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
        ],
    )
    ex = examples(res, "unseen")[0]
    assert ex["ops"] == [1] and "value(s) sent to key 1" in ex["explanation"]
    assert "offset 1" in ex["explanation"], ex["explanation"]
    assert ex["values"] == [11] and ex["offsets"] == [1]


def checked(
    tmp_path: Path, lines: list[Line], meta: dict[str, Any] | None = None, **opts: Any
) -> tuple[list[Line], dict[str, Any]]:
    lines = numbered(*lines)
    res = run_check(tmp_path, lines, meta, **opts)
    return lines, res


def _params(seed: int) -> GenParams:
    return GenParams(
        seed=seed,
        ops=40 + 10 * seed,
        null_offset_p=0.2 if seed % 3 == 1 else 0.0,
        sub_via="subscribe" if seed % 4 == 3 else "assign",
        omit_invokes=seed % 5 == 2,
        int_keys=seed % 2 == 0,
    )


CASES = [
    pytest.param(name, seed, id=f"{name}-{seed}") for name in mutate.INJECTORS for seed in (0, 1, 3)
]


@pytest.mark.parametrize(("name", "seed"), CASES)
def test_every_claim_of_every_example_is_true_on_injected_faults(name: str, seed: int) -> None:
    g = generate(_params(seed))
    fault = mutate.INJECTORS[name](g, random.Random(seed))
    assert fault is not None
    from ktrial.checker import check
    from ktrial.testing.gen import to_ops

    res = check(to_ops(fault.ops), CheckOptions())
    assert fault.expect <= set(res["error_types"])
    # the explanation of an expected type names the fault's key and one of its values
    for t in fault.expect:
        text = " ".join(e.get("explanation", "") for e in res["anomalies"][t]["examples"])
        assert re.search(rf"\b[Kk]ey {re.escape(fault.key)}\b", text), (t, text)
        assert any(re.search(rf"\b{v}\b", text) for v in fault.values), (t, text)
    assert fact_check(fault.ops, res) == []


@pytest.mark.parametrize("seed", range(4))
def test_informational_examples_of_valid_generated_histories_are_true(seed: int) -> None:
    """Correct histories: G0, G1c(+ww), int-send-skip ... are reported as normal, truthfully."""
    params = GenParams(
        seed=100 + seed,
        ops=120,
        keys=2,
        null_offset_p=0.3 if seed == 1 else 0.0,
        sub_via="subscribe" if seed == 2 else "assign",
        truncate=seed == 3,
    )
    g = generate(params)
    from ktrial.checker import check
    from ktrial.testing.gen import to_ops

    res = check(to_ops(g.ops), CheckOptions())
    assert res["valid"] is True, res["bad_error_types"]
    assert fact_check(g.ops, res) == []


def test_g0_cycle_steps_are_true(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "txn", [["send", "x", 1], ["send", "y", 2]]),
            inv(2, "txn", [["send", "x", 3], ["send", "y", 4]]),
            ok(1, "txn", [snd("x", 0, 1), snd("y", 1, 2)]),
            ok(2, "txn", [snd("x", 1, 3), snd("y", 0, 4)]),
            *poll_pair(3, {"x": [[0, 1], [1, 3]], "y": [[0, 4], [1, 2]]}),
        ],
    )
    assert set(res["anomalies"]) == {"G0"} and res["valid"] is True
    ex = res["anomalies"]["G0"]["examples"][0]
    assert ex["edges"] == ["ww", "ww"] and sorted(ex["cycle"]) == [2, 3]
    assert fact_check(lines, res) == []


def test_g1c_with_ww_and_wr_steps_is_true_and_not_bad(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "txn", [["send", "x", 1], ["send", "y", 2]]),
            inv(2, "txn", [["poll"], ["send", "y", 4]]),
            ok(2, "txn", [pl({"x": [[0, 1]]}), snd("y", 0, 4)]),
            ok(1, "txn", [snd("x", 0, 1), snd("y", 1, 2)]),
            *poll_pair(3, {"x": [[0, 1]], "y": [[0, 4], [1, 2]]}),
        ],
    )
    assert set(res["anomalies"]) == {"G1c"} and res["valid"] is True
    assert sorted(res["anomalies"]["G1c"]["examples"][0]["edges"]) == ["wr", "ww"]
    assert fact_check(lines, res) == []
    lines, res = checked(tmp_path, lines, ww_deps=False)
    assert "G1c" not in res["anomalies"]  # without ww edges there is no such cycle
    assert fact_check(lines, res) == []


def test_g1c_realtime_read_from_the_future_is_explained_truthfully(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [*poll_pair(1, {"x": [[0, 5]]}), *send_pair(2, "x", 0, 5)],
    )
    assert set(res["bad_error_types"]) == {"G1c-realtime"}
    ex = res["anomalies"]["G1c-realtime"]["examples"][0]
    assert sorted(ex["edges"]) == ["rt", "wr"] and ex["wr_only"] is True
    assert fact_check(lines, res) == []


def test_g0_realtime_is_explained_truthfully(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            *send_pair(1, "x", 1, 1),
            *send_pair(2, "x", 0, 2),
            *poll_pair(3, {"x": [[0, 2], [1, 1]]}),
        ],
    )
    assert set(res["anomalies"]) == {"G0-realtime"} and res["valid"] is True
    assert fact_check(lines, res) == []


def test_int_send_skip_names_the_interleaved_record(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "send", [["send", "x", 1], ["send", "x", 2]]),
            *send_pair(2, "x", 1, 3),
            ok(1, "send", [snd("x", 0, 1), snd("x", 2, 2)]),
            *poll_pair(3, {"x": [[0, 1], [1, 3], [2, 2]]}),
        ],
    )
    assert "int-send-skip" in res["anomalies"] and res["valid"] is True
    assert res["anomalies"]["int-send-skip"]["examples"][0]["skipped"] == [3]
    assert fact_check(lines, res) == []


def test_lost_write_by_real_time_with_null_offsets_is_true(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "txn", [["send", "x", 1]]),
            ok(1, "txn", [snd("x", None, 1)]),
            inv(2, "txn", [["send", "x", 2]]),
            ok(2, "txn", [snd("x", -1, 2)]),
            *poll_pair(3, {"x": [[5, 2]]}),
        ],
    )
    assert set(res["bad_error_types"]) == {"lost-write", "unseen"}
    assert res["anomalies"]["lost-write"]["examples"][0]["ops"] == [1, 3]
    assert fact_check(lines, res) == []


def test_lost_write_of_an_info_writer_and_torn_transaction_are_true(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "txn", [["send", "x", 1], ["send", "y", 2]]),
            info(1, "txn", [snd("x", 0, 1), snd("y", 0, 2)], error="commit timed out"),
            *send_pair(2, "y", 1, 3),
            *poll_pair(3, {"x": [[0, 1]], "y": [[1, 3]]}),
        ],
    )
    assert set(res["bad_error_types"]) == {"lost-write", "torn-transaction"}
    lw = res["anomalies"]["lost-write"]["examples"][0]
    assert "must have committed" in lw["explanation"]
    assert fact_check(lines, res) == []


def test_g1a_int_nonmonotonic_send_and_precommitted_read_are_true(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "send", [["send", "x", 1]]),
            fail(1, "send", [["send", "x", 1]], error="refused"),
            inv(2, "send", [["send", "y", 5], ["send", "y", 6]]),
            ok(2, "send", [snd("y", 1, 5), snd("y", 0, 6)]),
            inv(3, "txn", [["send", "z", 7], ["poll"]]),
            ok(3, "txn", [snd("z", 0, 7), pl({"z": [[0, 7]]})]),
            *poll_pair(4, {"x": [[0, 1]], "y": [[0, 6], [1, 5]], "z": [[0, 7]]}),
        ],
    )
    assert {"G1a", "int-nonmonotonic-send", "precommitted-read"} <= set(res["bad_error_types"])
    assert fact_check(lines, res) == []


def test_consumer_order_examples_are_true(tmp_path: Path) -> None:
    writes = [inv(9, "send", [["send", "x", v] for v in range(10, 15)])]
    writes.append(ok(9, "send", [snd("x", i, 10 + i) for i in range(5)]))
    lines, res = checked(
        tmp_path,
        [
            ok(1, "assign", ["x"]),
            *writes,
            *poll_pair(1, {"x": [[0, 10], [1, 11]]}),
            *poll_pair(1, {"x": [[3, 13]]}),  # skips 12
            *poll_pair(1, {"x": [[2, 12]]}),  # goes back
            *poll_pair(2, {"x": [[i, 10 + i] for i in range(5)]}),
        ],
    )
    assert {"poll-skip", "nonmonotonic-poll"} <= set(res["bad_error_types"])
    assert res["anomalies"]["poll-skip"]["examples"][0]["skipped"] == [12]
    assert fact_check(lines, res) == []


def test_inconsistent_offsets_and_duplicate_name_who_saw_what(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            *send_pair(1, "x", 0, 1),
            *send_pair(1, "x", 1, 2),
            *poll_pair(2, {"x": [[0, 1], [1, 2]]}),
            *poll_pair(3, {"x": [[0, 9], [2, 2]]}),
        ],
    )
    assert {"inconsistent-offsets", "duplicate"} <= set(res["bad_error_types"])
    ex = res["anomalies"]["inconsistent-offsets"]["examples"][0]
    assert ex["values"] == [1, 9] and ex["ops"] == [1, 5, 7]
    assert fact_check(lines, res) == []


def test_string_values_and_keys_are_quoted_consistently(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [*send_pair(1, "k", 0, "a"), *send_pair(1, "k", 1, "b"), *poll_pair(2, {"k": [[1, "b"]]})],
    )
    ex = res["anomalies"]["lost-write"]["examples"][0]
    assert "value 'a' to key k" in ex["explanation"]
    assert fact_check(lines, res) == []


def test_never_completed_writer_is_named_as_such(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "send", [["send", "x", 1], ["send", "x", 2]]),
            *send_pair(2, "x", 3, 3),
            *poll_pair(3, {"x": [[0, 1], [3, 3]]}),
            *poll_pair(4, {"x": [[0, 1], [1, 2]]}, typ="fail"),
        ],
    )
    # 2 (at offset 1, seen only by a failed poll) was committed with 1: lost
    ex = res["anomalies"]["lost-write"]["examples"][0]
    assert ex["writer"] == 0 and "never completed" in ex["explanation"]
    assert fact_check(lines, res) == []


def test_the_fact_checker_catches_false_claims(tmp_path: Path) -> None:
    """The fact checker itself can fail: falsified explanations and fields are caught."""
    lines, res = checked(
        tmp_path,
        [*send_pair(1, "x", 0, 1), *send_pair(1, "x", 1, 2), *poll_pair(2, {"x": [[1, 2]]})],
    )
    assert fact_check(lines, res) == []
    ex = res["anomalies"]["lost-write"]["examples"][0]
    good = ex["explanation"]
    for bad_text in (
        good.replace("landed at offset 0", "landed at offset 7"),
        good.replace("op 1 (process 1, ok send", "op 1 (process 2, ok send"),
        good.replace("read value 2 at the later offset 1", "read value 2 at the later offset 3"),
        good.replace("op 5 (process 2", "op 3 (process 1"),
    ):
        assert bad_text != good
        ex["explanation"] = bad_text
        assert fact_check(lines, res), bad_text
    ex["explanation"] = good
    ex["writer"] = 3
    assert fact_check(lines, res)


def test_nonmonotonic_send_compares_each_send_with_the_previous_one(tmp_path: Path) -> None:
    # process 1 sends 1 (lands at 5), then 2 (lands at 3: back), then 3 (lands at 4: forward)
    lines, res = checked(
        tmp_path,
        [
            *send_pair(1, "x", 5, 1),
            *send_pair(1, "x", 3, 2),
            *send_pair(1, "x", 4, 3),
            *poll_pair(2, {"x": [[3, 2], [4, 3], [5, 1]]}),
        ],
    )
    assert res["anomalies"]["nonmonotonic-send"]["count"] == 1
    assert fact_check(lines, res) == []


def _skip_after_failed_polls(tmp_path: Path) -> tuple[list[Line], dict[str, Any]]:
    writes = [inv(9, "send", [["send", "x", v] for v in range(10, 15)])]
    writes.append(ok(9, "send", [snd("x", i, 10 + i) for i in range(5)]))
    return checked(
        tmp_path,
        [
            ok(1, "assign", ["x"]),
            *writes,
            *poll_pair(1, {"x": [[0, 10]]}),
            *poll_pair(1, {"x": [[1, 11], [2, 12]]}, typ="fail"),  # read up to offset 2
            *poll_pair(1, {"x": [[1, 11]]}, typ="info"),  # read up to offset 1 only
            *poll_pair(1, {"x": [[4, 14]]}),  # skips 13 (at offset 3)
            *poll_pair(2, {"x": [[i, 10 + i] for i in range(5)]}),
        ],
        consumer_rewinds=False,  # relaxed (Jepsen's rule: tests/checker/test_order_positions.py)
    )


def test_poll_skip_note_names_the_failed_op_that_read_furthest(tmp_path: Path) -> None:
    lines, res = _skip_after_failed_polls(tmp_path)
    ex = res["anomalies"]["poll-skip"]["examples"][0]
    assert ex["skipped"] == [13]
    text = ex["explanation"]
    m = re.search(r"In between, op (\d+) .* read up to offset (\d+)", text)
    assert m is not None, text
    assert [o for _i, k, o, _v in History(lines).polls(int(m[1])) if k == "x"][-1] == int(m[2])


def test_poll_skip_ops_list_every_op_its_explanation_names(tmp_path: Path) -> None:
    _lines, res = _skip_after_failed_polls(tmp_path)
    ex = res["anomalies"]["poll-skip"]["examples"][0]
    named = {int(x) for x in re.findall(r"(?<![-\w])op (\d+)\b", ex["explanation"])}
    assert named <= set(ex["ops"])


def test_ww_step_names_the_acknowledged_offset_of_a_duplicated_value(tmp_path: Path) -> None:
    # op A's 1 was acknowledged at offset 0; a retry's copy also sits at offset 2
    _lines, res = checked(
        tmp_path,
        [
            *send_pair(1, "x", 0, 1),
            *send_pair(2, "x", 1, 2),
            *poll_pair(3, {"x": [[0, 1], [1, 2], [2, 1]]}),
        ],
    )
    assert "duplicate" in res["bad_error_types"]
    steps = [
        s for n in res["anomalies"] if n.startswith("G") for e in res["anomalies"][n]["examples"]
        for s in e["steps"]
    ]  # fmt: skip
    claims = [
        s for s in steps if re.search(r"op 1 \(.*sent value 1 to key x \(micro-op 0, offset", s)
    ]
    for s in claims:
        assert "offset 0)" in s, s
    # the copy at offset 2 is no version of op 1: no write cycle comes from it
    assert not {n for n in res["anomalies"] if n.startswith("G0")}, res["error_types"]


COPY_META = {"copy": {"route": {"0": 2, "1": 3}, "value_modulus": 1000}}


def _eos_history() -> list[Line]:
    return [
        inv(1, "send", [["send", 0, 10], ["send", 0, 11]]),
        ok(1, "send", [snd(0, 0, 10), snd(0, 1, 11)]),
        inv(2, "txn", [["poll"]]),
        ok(2, "txn", [pl({"0": [[0, 10]]}), snd(2, 0, 1010)]),
        inv(3, "txn", [["poll"]]),
        ok(3, "txn", [pl({"0": [[0, 10]]}), snd(2, 2, 2010)]),
        *poll_pair(4, {"2": [[0, 1010], [2, 2010]]}),
    ]


def test_eos_claims_are_true(tmp_path: Path) -> None:
    lines, res = checked(tmp_path, _eos_history(), COPY_META)
    assert {"eos-duplicate", "eos-loss"} <= set(res["bad_error_types"])
    dup = res["anomalies"]["eos-duplicate"]["examples"][0]
    assert (dup["key"], dup["value"], dup["output_key"], dup["writers"]) == ("0", 10, "2", [3, 5])
    assert dup["offsets"] == [0, 2] and dup["input_offsets"] == [0]
    loss = res["anomalies"]["eos-loss"]["examples"][0]
    assert (loss["key"], loss["value"], loss["offset"], loss["evidence_op"]) == ("0", 11, 1, 1)
    problems = [p for p in fact_check(lines, res) if "'ops'" not in p]
    assert problems == []


def test_eos_examples_carry_ops_like_every_other_type(tmp_path: Path) -> None:
    _lines, res = checked(tmp_path, _eos_history(), COPY_META)
    for name in ("eos-duplicate", "eos-loss"):
        for ex in res["anomalies"][name]["examples"]:
            assert isinstance(ex.get("ops"), list) and ex["ops"], (name, ex)


def _liveness_history() -> list[Line]:
    lines: list[Line] = [
        {"process": "nemesis", "type": "info", "f": "start-partition", "value": "x", "time": 0},
        {"process": 1, "type": "invoke", "f": "send", "value": [["send", "x", 1]], "time": S},
        {"process": 1, "type": "ok", "f": "send", "value": [snd("x", 0, 1)], "time": 2 * S},
        {"process": "nemesis", "type": "info", "f": "stop-partition", "value": "x", "time": 3 * S},
        {"process": 1, "type": "invoke", "f": "send", "value": [["send", "x", 2]], "time": 4 * S},
        {"process": 1, "type": "fail", "f": "send", "value": [["send", "x", 2]], "time": 5 * S},
        {"process": 1, "type": "invoke", "f": "send", "value": [["send", "x", 3]], "time": 100 * S},
        {"process": 1, "type": "ok", "f": "send", "value": [snd("x", 1, 3)], "time": 101 * S},
        {"process": 2, "type": "invoke", "f": "poll", "value": [["poll"]], "time": 102 * S},
        {"process": 2, "type": "ok", "f": "poll", "value": [pl({"x": [[0, 1], [1, 3]]})],
         "time": 103 * S},
    ]  # fmt: skip
    # RSS +3 MiB/s from 10 s to 100 s: judged on the later half of the samples (60-100 s)
    for t, rss in ((1, 100), *((t, 100 + 3 * t) for t in range(10, 101, 10))):
        lines.append(
            {"process": "nemesis", "type": "info", "f": "node-stats", "time": t * S,
             "value": {"n1": {"rss_bytes": rss << 20, "pid": 1}}}
        )  # fmt: skip
    lines.sort(key=lambda d: d["time"])
    return [{"index": i, **d} for i, d in enumerate(lines)]


def test_liveness_violations_as_anomalies_are_true(tmp_path: Path) -> None:
    lines = _liveness_history()
    res = run_check(tmp_path, lines, liveness_bad=True)
    assert set(res["bad_error_types"]) == {"memory-growth", "slow-recovery", "stuck-partition"}
    st = res["anomalies"]["stuck-partition"]["examples"][0]
    assert (st["key"], st["value"], st["offset"], st["acked_s"], st["read_s"]) == (
        "x",
        1,
        0,
        2.0,
        103.0,
    )
    assert "value 1 at offset 0" in st["explanation"] and "t=103.0 s" in st["explanation"]
    sr = res["anomalies"]["slow-recovery"]["examples"][0]
    assert lines[sr["index"]]["f"] == "stop-partition" and sr["send_s"] == 97.0
    assert "op 4" in sr["explanation"] and "97.0 s" in sr["explanation"]
    mg = res["anomalies"]["memory-growth"]["examples"][0]
    assert "+180.0 MiB/min over t=60-100 s" in mg["explanation"], mg["explanation"]
    assert fact_check(lines, res) == []


def test_stuck_partition_names_the_writer_and_reader(tmp_path: Path) -> None:
    lines = _liveness_history()
    res = run_check(tmp_path, lines, liveness_bad=True)
    st = res["anomalies"]["stuck-partition"]["examples"][0]
    # ops are named by their completion's index, as everywhere (the send's ok is line 3,
    # the poll's ok line 20, after the node-stats samples)
    assert st.get("ops") == [3, 20]
    assert "written by op 3, first read by op 20" in st["explanation"]


def test_g1a_explanation_names_reader_writer_key_value_offset(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        [
            inv(1, "txn", [isnd(1, 2), isnd(2, 3)]),
            fail(1, "txn", [snd(1, 2, 22), snd(2, 0, 3)], error="abort"),
            inv(2, "poll", POLL),
            ok(2, "poll", [pl({"1": [[2, 22]]})]),
        ],
    )
    (ex,) = examples(res, "G1a")
    assert (ex["key"], ex["value"], ex["offset"], ex["writer"], ex["reader"]) == ("1", 22, 2, 1, 3)
    t = ex["explanation"]
    for s in ("op 3", "op 1", "fail txn", "ok poll", "value 22", "key 1", "offset 2", "abort"):
        assert s in t, (s, t)


def test_lost_write_of_info_txn_says_why_it_committed(tmp_path: Path) -> None:
    res = run(
        tmp_path, next(h for i, h, *_ in TXN_CASES if i.startswith("info txn: one value read"))
    )
    (ex,) = examples(res, "lost-write")
    assert (ex["key"], ex["value"], ex["offset"], ex["max_read_offset"]) == ("2", 6, 3, 5)
    t = ex["explanation"]
    for s in (
        "op 1",
        "info txn",
        "value 6",
        "key 2",
        "offset 3",
        "offset 5",
        "must have committed",
    ):
        assert s in t, (s, t)


def test_torn_transaction_structured_fields(tmp_path: Path) -> None:
    res = run(
        tmp_path, next(h for i, h, *_ in TXN_CASES if i.startswith("info txn: one value read"))
    )
    (ex,) = examples(res, "torn-transaction")
    assert ex["ops"][0] == 1
    assert ex["visible"] == [["1", 5]]
    assert ex["lost"] == [["2", 6]]
    assert ex["keys_visible"] == ["1"] and ex["keys_lost"] == ["2"]


def test_torn_transaction_explanation_names_offsets_and_readers(tmp_path: Path) -> None:
    """A torn transaction must be explained with its offsets: where the visible value
    was read (key 1 offset 3), where the lost one landed (key 2 offset 3), and the
    later record of key 2 that was read instead (offset 5, by op 5)."""
    res = run(
        tmp_path, next(h for i, h, *_ in TXN_CASES if i.startswith("info txn: one value read"))
    )
    (ex,) = examples(res, "torn-transaction")
    t = ex["explanation"]
    assert "offset 3" in t and "offset 5" in t, t
    assert "op 5" in t, t
    assert 5 in ex["ops"], ex


def test_precommitted_explanation(tmp_path: Path) -> None:
    res = run(
        tmp_path, next(h for i, h, *_ in TXN_CASES if i.startswith("precommitted-read: an ok"))
    )
    (ex,) = examples(res, "precommitted-read")
    assert (ex["key"], ex["value"], ex["offset"], ex["ops"]) == ("1", 7, 3, [1])
    t = ex["explanation"]
    for s in ("op 1", "ok txn", "value 7", "key 1", "offset 3", "micro-op 0", "micro-op 1"):
        assert s in t, (s, t)


def test_lso_int_poll_skip_explanation(tmp_path: Path) -> None:
    res = run(tmp_path, next(h for i, h, *_ in TXN_CASES if i.startswith("LSO: a consumer read")))
    (ex,) = examples(res, "int-poll-skip")
    assert ex["offsets"] == [4, 7] and ex["skipped"] == [50] and ex["ops"] == [5]
    t = ex["explanation"]
    for s in ("op 5", "key 1", "offset 4", "offset 7", "50"):
        assert s in t, (s, t)


def test_null_offset_lost_write_explanation_uses_real_time(tmp_path: Path) -> None:
    res = run(
        tmp_path, next(h for i, h, *_ in TXN_CASES if i.startswith("ok txn with null offsets"))
    )
    (ex,) = examples(res, "lost-write")
    assert (ex["key"], ex["value"], ex["offset"], ex["max_read_value"]) == ("2", 6, None, 9)
    assert set(ex["ops"]) == {1, 3}
    t = ex["explanation"]
    for s in ("op 1", "op 3", "unknown offset", "value 9", "key 2"):
        assert s in t, (s, t)
