"""The consumer's position after failed and indeterminate ops (checker/order.py polls).

Jepsen's rule, ktrial's default (`consumer_rewinds`): a process's position in a key
is the end of its last ok read of it. Every later read of the key, whatever its op's
outcome, must begin right after that position: past it is a poll-skip, at or before
it a nonmonotonic-poll. A failed or indeterminate op does not move the position,
because the client rewinds to where that op began reading (ktrial's driver does:
workloads/rewind.py). The relaxed rule (`--no-consumer-rewinds`, for clients known
not to rewind) does not judge failed and indeterminate reads and lets the next ok
read begin anywhere up to just after the furthest record they read.

Here: Jepsen's own shapes (kafka_test.clj), the explanations of each, the option's
plumbing (test.json, the command line), the resets that still hold, the strict
counterparts of the older tests that pin the relaxed rule (now run with
consumer_rewinds=False), and properties over ktrial's model of a rewinding client.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial.checker import CheckOptions, check
from ktrial.checker.options import options_from_test_json
from ktrial.cli import main
from ktrial.testing.gen import GenParams, generate, to_ops
from ktrial.tests.checker.common import SEND6, run_edn_check
from ktrial.tests.checker.differential.model import (
    Params,
    Style,
    check_ops,
    render,
    simulate,
)
from ktrial.tests.checker.factcheck import fact_check
from ktrial.tests.histlines import edn_op, examples, fail, info, ok, pl, run, snd, types, write

Line = dict[str, Any]
ORDER = {"poll-skip", "nonmonotonic-poll"}

# key x: values 0..5 at offsets 0..5, one ok send by process 0
SIX = ok(0, "send", [snd("x", i, i) for i in range(6)])


def read_x(process: Any, *offsets: int, typ: str = "ok", **extra: Any) -> Line:
    """A poll of key x returning the records at `offsets` (value = offset)."""
    return {
        "process": process,
        "type": typ,
        "f": "poll",
        "value": [pl({"x": [[o, o] for o in offsets]})],
        **extra,
    }


DRAIN = read_x(9, *range(6))  # another process reads everything: no loss to report


def by_ops(res: dict[str, Any], name: str) -> dict[tuple[int, ...], dict[str, Any]]:
    return {tuple(e["ops"]): e for e in res["anomalies"].get(name, {}).get("examples", [])}


def lined(lines: list[Line]) -> list[Line]:
    """index and time as histlines.write gives them (for the fact checker)."""
    return [{"index": i, "time": i * 1_000_000, **o} for i, o in enumerate(lines)]


# ================================================================ Jepsen's shapes

JEPSEN_ABORT = [  # kafka_test.clj "abort doesn't roll back", in JSONL
    SIX,  # 0
    read_x(1, 0),  # 1: ok, the position is offset 0
    read_x(1, 1, 2, typ="fail"),  # 2: begins at 1: fine, and does not move the position
    read_x(1, 3, 4, typ="fail"),  # 3: begins at 3: the client did not rewind after op 2
    read_x(1, 5),  # 4: begins at 5: nor after op 3
    DRAIN,  # 5
]


def test_two_failed_polls_then_an_ok_one_are_two_poll_skips(tmp_path: Path) -> None:
    res = run(tmp_path, JEPSEN_ABORT)
    assert types(res) == ({"poll-skip"}, {"poll-skip"}) and res["valid"] is False
    got = by_ops(res, "poll-skip")
    assert set(got) == {(1, 3, 2), (1, 4, 3)}  # the pair, then the unfinished op in between
    failed, okay = got[(1, 3, 2)], got[(1, 4, 3)]
    # Jepsen: :skipped [1 2] (delta 3), then [1 2 3 4] (delta 5)
    assert (failed["skipped"], failed["delta"], failed["offsets"]) == ([1, 2], 3, [0, 3])
    assert (okay["skipped"], okay["delta"], okay["offsets"]) == ([1, 2, 3, 4], 5, [0, 5])
    assert okay["values"] == [0, 5] and okay["process"] == 1


def test_the_explanations_say_what_happened_in_words(tmp_path: Path) -> None:
    res = run(tmp_path, JEPSEN_ABORT)
    got = by_ops(res, "poll-skip")
    text = got[(1, 4, 3)]["explanation"]
    for part in (
        "last read value 0 of key x at offset 0",
        "its next ok read, op 4 (process 1, ok poll",
        "began at value 5, offset 5 (micro-op 0)",
        "jumping over 4 record(s) no ok read of this consumer returned: 1, 2, 3, 4.",
        "In between, op 3 (process 1, fail poll",
        "read offsets 3-4 of key x and failed",
        "so the next read had to begin at offset 1, right after the last ok read.",
        "This read began right after that op's, at offset 5: the client did not rewind.",
        "--no-consumer-rewinds",
    ):
        assert part in text, (part, text)
    text = got[(1, 3, 2)]["explanation"]
    for part in (
        "its later read of the key, op 3 (process 1, fail poll",
        "which failed, began at value 3, offset 3",
        "In between, op 2 (process 1, fail poll",
        "read offsets 1-2 of key x and failed",
        "at offset 3: the client did not rewind.",
    ):
        assert part in text, (part, text)
    assert fact_check(lined(JEPSEN_ABORT), res) == []


def test_jepsens_edn_history_through_the_command_line(tmp_path: Path) -> None:
    """The same shape as Jepsen writes it (history.edn, txn ops), checked by `ktrial
    check`: Jepsen's verdict by default, the relaxed one with --no-consumer-rewinds."""
    lines = [
        *SEND6,
        edn_op(6, 1, "invoke", "txn", "[[:poll]]"),
        edn_op(7, 1, "fail", "txn", "[[:poll {:x [[3 3] [4 4]]}]]", error=":abort"),
        edn_op(8, 1, "invoke", "txn", "[[:poll]]"),
        edn_op(9, 1, "ok", "txn", "[[:poll {:x [[5 5]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1 and "poll-skip" in res["bad_error_types"]
    assert res["stats"]["options"]["consumer_rewinds"] is True
    skipped = sorted(e["skipped"] for e in examples(res, "poll-skip"))
    assert skipped == [[1, 2], [1, 2, 3, 4]]  # Jepsen's :skipped of the two cases
    code, res = run_edn_check(tmp_path, lines, "--no-consumer-rewinds")
    assert code == 1 and "poll-skip" not in res["error_types"]  # lost-write still
    assert res["stats"]["options"]["consumer_rewinds"] is False


@pytest.mark.parametrize(
    ("true", "false"),
    [
        ("read offsets 3-4 of key x", "read offsets 3-5 of key x"),
        ("had to begin at offset 1,", "had to begin at offset 2,"),
        ("at offset 5: the client did not rewind", "at offset 4: the client did not rewind"),
        ("In between, op 3 (process 1, fail poll", "In between, op 2 (process 1, fail poll"),
        ("and failed; such", "and ended indeterminate; such"),
    ],
)
def test_the_fact_checker_catches_a_false_claim_of_these_explanations(
    tmp_path: Path, true: str, false: str
) -> None:
    """The fact checker (factcheck.py, test_explain.py) re-derives every claim above
    from the history: a wrong one is caught."""
    res = run(tmp_path, JEPSEN_ABORT)
    (ex,) = [e for e in examples(res, "poll-skip") if e["ops"] == [1, 4, 3]]
    assert true in ex["explanation"]
    ex["explanation"] = ex["explanation"].replace(true, false)
    assert fact_check(lined(JEPSEN_ABORT), res) != []


INFO_SKIP = [SIX, read_x(1, 0), read_x(1, 2, 3, typ="info"), read_x(1, 1, 2, 3, 4, 5), DRAIN]


def test_an_info_poll_that_skips_is_a_poll_skip(tmp_path: Path) -> None:
    """kafka_test.clj "info can be a poll-skip": the indeterminate read itself began
    past the position; the ok read after it rewound correctly (begins at 1)."""
    res = run(tmp_path, INFO_SKIP)
    assert types(res) == ({"poll-skip"}, {"poll-skip"})
    (ex,) = examples(res, "poll-skip")
    assert (ex["ops"], ex["skipped"], ex["offsets"]) == ([1, 2], [1], [0, 2])
    text = ex["explanation"]
    assert "its next read of the key, op 2 (process 1, info poll" in text
    assert "which ended indeterminate, began at value 2, offset 2" in text
    assert "jumping over 1 record(s) it never read: 1." in text
    assert "A failed or indeterminate op's reads must also begin right after" in text
    assert fact_check(lined(INFO_SKIP), res) == []


@pytest.mark.parametrize(("typ", "start"), [("fail", 0), ("fail", 1), ("info", 0)])
def test_an_unfinished_poll_that_starts_at_or_before_the_position_is_nonmonotonic(
    tmp_path: Path, typ: str, start: int
) -> None:
    lines = [SIX, read_x(1, 0, 1), read_x(1, *range(start, 3), typ=typ), read_x(1, 2, 3, 4, 5)]
    res = run(tmp_path, [*lines, DRAIN])
    assert types(res) == ({"nonmonotonic-poll"}, {"nonmonotonic-poll"})
    (ex,) = examples(res, "nonmonotonic-poll")
    assert (ex["ops"], ex["offsets"], ex["delta"]) == ([1, 2], [1, start], start - 1)
    how = "the same record again" if start == 1 else "1 record(s) back"
    assert (
        f": {how}, although the consumer was neither reassigned nor rewound." in (ex["explanation"])
    )
    assert fact_check(lined([*lines, DRAIN]), res) == []


# ================================================================ the relaxed option

STRICT_ONLY = {
    "Jepsen's abort shape": JEPSEN_ABORT,
    "info poll that skips": INFO_SKIP,
    "failed poll re-reading the position": [SIX, read_x(1, 0, 1), read_x(1, 1, typ="fail"), DRAIN],
    "failed poll going back": [SIX, read_x(1, 0, 1), read_x(1, 0, 1, typ="fail"), DRAIN],
    "ok read after an info poll did not rewind": [  # test_order.py's near-miss
        SIX,
        read_x(1, 0),
        read_x(1, 1, typ="info"),
        read_x(1, 2),
        DRAIN,
    ],
    "ok read after a failed txn did not rewind": [  # a boundary_cases.TXN_CASES case
        SIX,
        read_x(1, 0),
        {"process": 1, "type": "fail", "f": "txn", "value": [pl({"x": [[1, 1]]}), snd("y", 0, 7)]},
        read_x(1, 2, 3, 4, 5),
        DRAIN,
    ],
}


@pytest.mark.parametrize("name", sorted(STRICT_ONLY))
def test_the_relaxed_option_turns_the_strict_cases_off(tmp_path: Path, name: str) -> None:
    lines = STRICT_ONLY[name]
    strict = run(tmp_path, lines)
    assert set(strict["bad_error_types"]) & ORDER, strict["error_types"]
    relaxed = run(tmp_path, lines, consumer_rewinds=False)
    assert not set(relaxed["error_types"]) & ORDER, relaxed["error_types"]
    assert relaxed["stats"]["options"]["consumer_rewinds"] is False


def test_the_relaxed_option_still_catches_a_skip_past_what_failed_reads_returned(
    tmp_path: Path,
) -> None:
    lines = [SIX, read_x(1, 0), read_x(1, 1, 2, typ="fail"), read_x(1, 4, 5), DRAIN]
    relaxed = run(tmp_path, lines, consumer_rewinds=False)
    (ex,) = examples(relaxed, "poll-skip")
    assert ex["skipped"] == [3] and ex["ops"] == [1, 3, 2]
    assert "read up to offset 2 and did not succeed" in ex["explanation"]
    strict = run(tmp_path, lines)
    (ex,) = examples(strict, "poll-skip")
    assert ex["skipped"] == [1, 2, 3] and ex["ops"] == [1, 3, 2]
    assert "the client did not rewind" not in ex["explanation"]  # it began at 4, not 3


# ================================================================ what stays valid


@pytest.mark.parametrize("rewinds", [True, False])
@pytest.mark.parametrize(
    "lines",
    [
        # the ok read after a failed one restarts right after the last ok read
        [SIX, read_x(1, 0), read_x(1, 1, 2, typ="fail"), read_x(1, 1, 2, 3, 4, 5)],
        # several unfinished reads, each restarting there
        [
            SIX,
            read_x(1, 0),
            read_x(1, 1, 2, typ="fail"),
            read_x(1, 1, typ="info"),
            read_x(1, 1, 2, 3, typ="fail"),
            read_x(1, 1, 2, 3, 4, 5),
        ],
        # an unfinished read before any ok one has no position to be judged against
        [SIX, read_x(1, 3, 4, typ="fail"), read_x(1, 0, 1, 2, 3, 4, 5)],
        # an unfinished read that returned nothing of the key
        [SIX, read_x(1, 0), read_x(1, typ="fail"), read_x(1, 1, 2, 3, 4, 5)],
    ],
    ids=["restart", "several-unfinished", "no-position-yet", "read-nothing"],
)
def test_a_client_that_rewinds_is_valid(tmp_path: Path, lines: list[Line], rewinds: bool) -> None:
    res = run(tmp_path, [*lines, DRAIN], consumer_rewinds=rewinds)
    assert res["valid"] is True and res["error_types"] == [], res["error_types"]


# ================================================================ resets still hold


@pytest.mark.parametrize(
    ("reset", "expect"),
    [
        ([], ORDER),  # the control: without a reset both reads are judged
        ([info(1, "crash")], set()),
        ([ok(1, "assign", ["x"], seek_to_beginning=True)], set()),
        ([ok(1, "assign", ["y"])], set()),  # x no longer assigned: forgotten
        ([info(1, "subscribe", ["y"])], set()),  # an info subscribe takes effect
    ],
    ids=["none", "crash", "seek", "assign-other-key", "info-subscribe"],
)
def test_resets_forget_the_position_before_an_unfinished_read(
    tmp_path: Path, reset: list[Line], expect: set[str]
) -> None:
    lines = [SIX, read_x(1, 0, 1, 2), *reset, read_x(1, 0, 1, typ="fail"), read_x(1, 4, 5), DRAIN]
    res = run(tmp_path, lines, sub_via="assign")
    assert set(res["error_types"]) & ORDER == expect, res["error_types"]


def test_a_failed_assign_does_not_reset(tmp_path: Path) -> None:
    lines = [
        SIX,
        read_x(1, 0, 1),
        fail(1, "assign", ["x"], seek_to_beginning=True),
        read_x(1, 0, typ="fail"),
        DRAIN,
    ]
    res = run(tmp_path, lines)
    assert types(res)[1] == {"nonmonotonic-poll"}
    (ex,) = examples(res, "nonmonotonic-poll")
    assert ex["ops"] == [1, 3]


def test_a_key_rebalanced_during_an_unfinished_poll_is_not_judged(tmp_path: Path) -> None:
    lines = [
        SIX,
        read_x(1, 0),
        read_x(1, 3, 4, typ="fail", rebalance_log=[{"keys": ["x"]}]),
        read_x(1, 5),  # no position after the rebalance: a first read
        DRAIN,
    ]
    res = run(tmp_path, lines, sub_via="assign")
    assert res["valid"] is True and res["error_types"] == []
    lines[2] = read_x(1, 3, 4, typ="fail", rebalance_log=[{"keys": ["y"]}])  # another key
    res = run(tmp_path, lines, sub_via="assign")
    assert {tuple(e["ops"]) for e in examples(res, "poll-skip")} == {(1, 2), (1, 3, 2)}


def test_with_subscribe_the_skips_are_reported_not_bad(tmp_path: Path) -> None:
    res = run(tmp_path, [ok(1, "subscribe", ["x"]), *JEPSEN_ABORT])
    assert "poll-skip" in res["error_types"] and res["bad_error_types"] == []


# ================================================================ the option's plumbing


def test_test_json_and_overrides() -> None:
    assert CheckOptions().consumer_rewinds is True
    assert options_from_test_json({}).consumer_rewinds is True
    assert options_from_test_json({"consumer_rewinds": False}).consumer_rewinds is False
    assert (
        options_from_test_json({"checker": {"consumer-rewinds": "false"}}).consumer_rewinds is False
    )
    assert options_from_test_json({"workload": {"consumer_rewinds": "TRUE"}}).consumer_rewinds
    meta = {"consumer_rewinds": False}
    assert options_from_test_json(meta, {"consumer_rewinds": True}).consumer_rewinds is True
    assert options_from_test_json(meta, {"consumer_rewinds": None}).consumer_rewinds is False
    with pytest.raises(ValueError, match=r"--consumer-rewinds/--no-consumer-rewinds"):
        options_from_test_json({"consumer_rewinds": "maybe"})
    # the command line settles a value test.json spells wrong
    assert options_from_test_json({"consumer_rewinds": 1}, {"consumer_rewinds": False}) == (
        CheckOptions(consumer_rewinds=False)
    )
    with pytest.raises(ValueError, match="consumer_rewinds must be true or false"):
        CheckOptions(consumer_rewinds="no")  # type: ignore[arg-type]


def _ktrial_check(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(["check", *args])
    code = e.value.code if isinstance(e.value.code, int) else 0
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("test_json", "flag", "code"),
    [
        (None, None, 1),
        ({"consumer_rewinds": False}, None, 0),
        ({"consumer_rewinds": False}, "--consumer-rewinds", 1),
        ({"consumer_rewinds": True}, "--no-consumer-rewinds", 0),
        (None, "--no-consumer-rewinds", 0),
        ({"consumer_rewinds": "perhaps"}, "--no-consumer-rewinds", 0),
    ],
)
def test_ktrial_check_reads_test_json_and_the_flag_wins(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    test_json: dict[str, Any] | None,
    flag: str | None,
    code: int,
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write(run_dir / "history.jsonl", INFO_SKIP)
    if test_json is not None:
        (run_dir / "test.json").write_text(json.dumps(test_json))
    got, out, err = _ktrial_check([str(run_dir), *([flag] if flag else [])], capsys)
    assert got == code, out + err
    rewinds = code == 1
    res = json.loads((run_dir / "results.json").read_text())
    assert res["stats"]["options"]["consumer_rewinds"] is rewinds
    assert ("consumer_rewinds=False" in out) is (not rewinds)
    if rewinds:
        assert "BAD poll-skip: 1" in out


def test_a_wrong_test_json_value_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write(run_dir / "history.jsonl", INFO_SKIP)
    (run_dir / "test.json").write_text(json.dumps({"consumer_rewinds": "perhaps"}))
    code, _out, err = _ktrial_check([str(run_dir)], capsys)
    assert code == 254
    assert "test.json" in err and "consumer_rewinds 'perhaps'" in err
    assert "--consumer-rewinds/--no-consumer-rewinds" in err


def test_the_help_says_when_to_turn_it_off(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _ktrial_check(["--help"], capsys)
    assert code == 0 and "--consumer-rewinds / --no-consumer-rewinds" in out
    assert "not to rewind" in re.sub(r"\s+", " ", out)


# ================================================================ strict counterparts


@pytest.mark.parametrize(
    ("start", "expect", "skipped"),
    [
        (1, None, None),
        (2, "poll-skip", ["v1"]),
        (3, "poll-skip", ["v1", "v2"]),
        (4, "poll-skip", ["v1", "v2", "v3"]),
        (0, "nonmonotonic-poll", None),
    ],
)
def test_the_failed_op_window_under_jepsens_rule(
    tmp_path: Path, start: int, expect: str | None, skipped: list[str] | None
) -> None:
    """differential/test_jepsen_parity.test_poll_justified_failed_op_window, which pins
    the relaxed rule (starts 1..3 pass), under the default: only start 1 does."""
    lines = [
        ok(0, "send", [snd("x", i, f"v{i}") for i in range(5)]),
        ok(1, "poll", [pl({"x": [[0, "v0"]]})]),
        fail(1, "txn", [pl({"x": [[1, "v1"], [2, "v2"]]})]),
        ok(1, "poll", [pl({"x": [[o, f"v{o}"] for o in range(start, 5)]})]),
        ok(2, "poll", [pl({"x": [[o, f"v{o}"] for o in range(5)]})]),
    ]
    res = run(tmp_path, lines)
    if expect is None:
        assert res["valid"] is True and res["error_types"] == []
        return
    assert types(res) == ({expect}, {expect})
    (ex,) = examples(res, expect)
    assert ex["ops"] == [1, 3, 2] and ex["offsets"] == [0, start]
    assert ex.get("skipped") == skipped
    assert ("the client did not rewind" in ex["explanation"]) is (start == 3)
    assert fact_check(lined(lines), res) == []


def test_a_skip_after_unfinished_reads_names_the_last_of_them(tmp_path: Path) -> None:
    """test_order.py's and test_explain.py's relaxed shapes (a failed
    read of 1-2, an info read of 1, an ok read from 4) under the default: the ok read
    skipped 1, 2 and 3, and the example names the last unfinished read of the key."""
    lines = [
        SIX,
        read_x(1, 0),  # 1
        read_x(1, 1, 2, typ="fail"),  # 2
        read_x(1, 1, typ="info"),  # 3
        read_x(1, 4),  # 4
        DRAIN,
    ]
    res = run(tmp_path, lines)
    (ex,) = examples(res, "poll-skip")
    assert (ex["ops"], ex["skipped"], ex["values"]) == ([1, 4, 3], [1, 2, 3], [0, 4])
    assert "In between, op 3 (process 1, info poll" in ex["explanation"]
    assert "read offset 1 of key x and ended indeterminate" in ex["explanation"]
    assert fact_check(lined(lines), res) == []
    relaxed = run(tmp_path, lines, consumer_rewinds=False)
    (ex,) = examples(relaxed, "poll-skip")
    assert (ex["ops"], ex["skipped"]) == ([1, 4, 2], [3])  # the one that read furthest


# ================================================================ properties

ORDER_BAD = {"poll-skip", "nonmonotonic-poll"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31),
    sub_via=st.sampled_from(["assign", "subscribe"]),
    abort_p=st.sampled_from([0.0, 0.3, 0.6]),
    fail_p=st.sampled_from([0.0, 0.2, 0.5]),
    info_p=st.sampled_from([0.0, 0.2, 0.4]),
    crash_p=st.sampled_from([0.0, 0.05]),
    reassign_p=st.sampled_from([0.0, 0.1]),
    reseek=st.booleans(),
    null_offset_p=st.sampled_from([0.0, 0.3]),
    omit_invokes=st.booleans(),
)
def test_generated_valid_histories_have_no_consumer_order_anomaly_under_either_rule(
    seed: int,
    sub_via: str,
    abort_p: float,
    fail_p: float,
    info_p: float,
    crash_p: float,
    reassign_p: float,
    reseek: bool,
    null_offset_p: float,
    omit_invokes: bool,
) -> None:
    """testing/gen.py models a client that rewinds after fail/info ops, as ktrial's
    driver does: neither rule may call its consumers' order bad (and in assign mode,
    where positions never jump, neither may report it at all)."""
    g = generate(
        GenParams(
            seed=seed,
            ops=60,
            keys=2,
            processes=3,
            sub_via=sub_via,
            abort_p=abort_p,
            fail_p=fail_p,
            info_p=info_p,
            crash_p=crash_p,
            reassign_p=reassign_p,
            reseek=reseek,
            null_offset_p=null_offset_p,
            omit_invokes=omit_invokes,
        )
    )
    ops = to_ops(g.ops)
    for rewinds in (True, False):
        res = check(ops, CheckOptions(consumer_rewinds=rewinds, sub_via="assign"))
        found = set(res["error_types"]) & ORDER_BAD
        if sub_via == "assign":
            assert not found, (rewinds, {t: examples(res, t)[:1] for t in found})
        res = check(ops, CheckOptions(consumer_rewinds=rewinds))
        assert not set(res["bad_error_types"]) & ORDER_BAD, (rewinds, res["bad_error_types"])


def test_the_model_exercises_failed_reads_and_rewinds() -> None:
    """The property above is not hollow: the model's unfinished ops read records and
    the client rewinds after them, many times."""
    g = generate(GenParams(seed=3, ops=400, abort_p=0.4, fail_p=0.3, info_p=0.2))
    assert g.truth.rewinds > 20
    unfinished_reads = [
        d
        for d in g.ops
        if d["type"] in ("fail", "info")
        and any(m[0] == "poll" and len(m) > 1 and any(m[1].values()) for m in d["value"] or [])
    ]
    assert len(unfinished_reads) > 20


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_the_independent_model_of_rewinding_clients_is_valid_under_jepsens_rule(
    seed: int,
) -> None:
    """The independent model (differential/model.py, not ktrial's generator) with every
    client rewinding: valid under the default rule, assign mode judged strictly."""
    p = Params(n_keys=3, n_clients=3, ticks=300, subscribe_p=0.0, abort_p=0.3, info_p=0.2,
               rewind_p=1.0)  # fmt: skip
    w = simulate(seed, p)
    res = check_ops(render(w.events, Style(), seed), CheckOptions(sub_via="assign"))
    assert res["bad_error_types"] == [], {t: examples(res, t)[:1] for t in res["error_types"]}


def test_clients_that_do_not_rewind_are_caught_by_jepsens_rule_only() -> None:
    """The independent model's clients that never rewind: in some run one of them
    skips past what a failed read returned, and only Jepsen's rule calls it."""
    caught = 0
    for seed in range(60):
        p = Params(n_keys=2, n_clients=2, ticks=200, subscribe_p=0.0, abort_p=0.4,
                   info_p=0.3, rewind_p=0.0)  # fmt: skip
        w = simulate(seed, p)
        ops = render(w.events, Style(), seed)
        relaxed = check_ops(ops, CheckOptions(sub_via="assign", consumer_rewinds=False))
        assert not set(relaxed["bad_error_types"]) & ORDER_BAD, seed
        strict = check_ops(ops, CheckOptions(sub_via="assign"))
        caught += bool(set(strict["bad_error_types"]) & ORDER_BAD)
    assert caught >= 5, caught
