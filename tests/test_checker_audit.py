"""Audit of the history checker: each anomaly type at its boundaries, and `ktrial check`
on odd inputs.

Part 1 hand-writes, for every anomaly type of DESIGN.md section 3, the smallest
positive history and its legal near-misses, and checks the exact set of types
reported (so a wrong name, or a -realtime variant that is not needed, shows up),
which of them are bad, and that explanations name ops, keys, values and offsets.
Part 2 feeds `ktrial check` odd files and checks exit codes (0 valid, 1 invalid,
2 unknown, 254 unusable input, 255 crash), messages (file:line: reason, never a
traceback) and the results.json shape.

Problems found are `xfail(strict=True)`: they pass once fixed, and the suite
tells the fixer to drop the marker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.cli import main
from ktrial.tests.histlines import examples, fail, info, inv, ok, pl, run, snd, types

Line = dict[str, Any]


# ================================================================ helpers


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the real entry point in process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    code = e.value.code
    return (code if isinstance(code, int) else 0), out.out, out.err


# Five records of key 1 at offsets 0..4, acknowledged to one producer.
W5 = ok(9, "send", [snd(1, i, 10 + i) for i in range(5)])
DRAIN = ok(8, "poll", [pl({"1": [[i, 10 + i] for i in range(5)]})])


# ======================================================= part 1: each type, at its boundaries

# (id, history, options, expected error types, expected bad types)
CASES: list[tuple[str, list[Line], dict[str, Any], set[str], set[str]]] = [
    # --- inconsistent-offsets / duplicate
    (
        "inconsistent-offsets: two polls disagree about offset 0",
        [ok(1, "poll", [pl({"1": [[0, 10]]})]), ok(2, "poll", [pl({"1": [[0, 11]]})])],
        {},
        {"inconsistent-offsets"},
        {"inconsistent-offsets"},
    ),
    (
        "near-miss: a failed send's offset is not log truth",
        [
            fail(0, "send", [snd(1, 0, 10)]),
            ok(0, "send", [snd(1, 0, 11)]),
            ok(1, "poll", [pl({"1": [[0, 11]]})]),
        ],
        {},
        set(),
        set(),
    ),
    (
        "near-miss: an unread info send's offset is not log truth",
        [
            info(0, "send", [snd(1, 0, 10)]),
            ok(2, "send", [snd(1, 0, 11)]),
            ok(1, "poll", [pl({"1": [[0, 11]]})]),
        ],
        {},
        set(),
        set(),
    ),
    (
        "duplicate: one value at two offsets",
        [
            ok(0, "send", [snd(1, 0, 10)]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            ok(2, "poll", [pl({"1": [[1, 10]]})]),
        ],
        {},
        {"duplicate"},
        {"duplicate"},
    ),
    # --- lost-write / unseen
    (
        "lost-write: ok op read past an acknowledged value",
        [
            ok(0, "send", [snd(1, 0, 10)]),
            ok(0, "send", [snd(1, 1, 11)]),
            ok(1, "poll", [pl({"1": [[1, 11]]})]),
        ],
        {},
        {"lost-write", "unseen"},
        {"lost-write", "unseen"},
    ),
    (
        "near-miss: a gap across aborted records is not a loss",
        [
            fail(0, "txn", [snd(1, 0, 10)]),
            ok(2, "send", [snd(1, 2, 11)]),
            ok(1, "poll", [pl({"1": [[2, 11]]})]),
        ],
        {},
        set(),
        set(),
    ),
    (
        "near-miss: an info send nobody read may never have happened",
        [
            info(0, "send", [snd(1, 0, 10)]),
            ok(2, "send", [snd(1, 1, 11)]),
            ok(1, "poll", [pl({"1": [[1, 11]]})]),
        ],
        {},
        set(),
        set(),
    ),
    (
        "lost-write: an info txn committed (one value read), its other value lost",
        [
            info(0, "txn", [snd(1, 0, 10), snd(2, 0, 20)]),
            ok(2, "send", [snd(1, 1, 11)]),
            ok(1, "poll", [pl({"1": [[1, 11]], "2": [[0, 20]]})]),
        ],
        {},
        {"lost-write", "torn-transaction"},
        {"lost-write", "torn-transaction"},
    ),
    (
        "lost-write by real time: null offsets (Queen's -1)",
        [
            inv(0, "txn", [["send", 1, 10]]),
            ok(0, "txn", [snd(1, -1, 10)]),
            inv(2, "send", [["send", 1, 11]]),
            ok(2, "send", [snd(1, None, 11)]),
            ok(1, "poll", [pl({"1": [[5, 11]]})]),
        ],
        {},
        {"lost-write", "unseen"},
        {"lost-write", "unseen"},
    ),
    (
        "near-miss: null offsets, writers concurrent: order unknown, only unseen",
        [
            inv(0, "txn", [["send", 1, 10]]),
            inv(2, "send", [["send", 1, 11]]),
            ok(0, "txn", [snd(1, -1, 10)]),
            ok(2, "send", [snd(1, None, 11)]),
            ok(1, "poll", [pl({"1": [[5, 11]]})]),
        ],
        {},
        {"unseen"},
        {"unseen"},
    ),
    (
        "unseen only: nothing read past it",
        [
            ok(0, "send", [snd(1, 0, 10)]),
            ok(0, "send", [snd(1, 1, 11)]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
        ],
        {},
        {"unseen"},
        {"unseen"},
    ),
    # --- torn-transaction
    (
        "near-miss: a plain send op is not atomic, so it cannot be torn",
        [
            ok(0, "send", [snd(1, 0, 10), snd(2, 0, 20)]),
            ok(2, "send", [snd(1, 1, 11)]),
            ok(1, "poll", [pl({"1": [[1, 11]], "2": [[0, 20]]})]),
        ],
        {},
        {"lost-write", "unseen"},
        {"lost-write", "unseen"},
    ),
    # --- G1a
    (
        "G1a: ok poll read a value only a failed txn wrote",
        [fail(0, "txn", [snd(1, 0, 10)]), ok(1, "poll", [pl({"1": [[0, 10]]})])],
        {},
        {"G1a"},
        {"G1a"},
    ),
    (
        "G1a: failed completion without value; the invoke says what it sent",
        [
            inv(0, "txn", [["send", 1, 10]]),
            fail(0, "txn", None),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
        ],
        {},
        {"G1a"},
        {"G1a"},
    ),
    (
        "near-miss: an info txn's value read by an ok op: it committed",
        [info(0, "txn", [snd(1, 0, 10)]), ok(1, "poll", [pl({"1": [[0, 10]]})])],
        {},
        set(),
        set(),
    ),
    (
        "near-miss: aborted value seen only by a failed poll",
        [
            fail(0, "txn", [snd(1, 0, 10)]),
            fail(1, "txn", [pl({"1": [[0, 10]]})]),
            ok(2, "send", [snd(1, 1, 11)]),
            ok(1, "poll", [pl({"1": [[1, 11]]})]),
        ],
        {},
        set(),
        set(),
    ),
    # --- precommitted-read
    (
        "precommitted-read: a txn's poll returns its own send",
        [
            ok(0, "txn", [snd(1, 0, 10), pl({"1": [[0, 10]]})]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
        ],
        {},
        {"precommitted-read"},
        {"precommitted-read"},
    ),
    (
        "precommitted-read: info completion lost the send; the invoke had it",
        [
            inv(0, "txn", [["send", 1, 10], ["poll"]]),
            info(0, "txn", [["poll", {"1": [[0, 10]]}]]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
        ],
        {},
        {"precommitted-read"},
        {"precommitted-read"},
    ),
    (
        "near-miss: a txn reads an earlier value of the key it sends to",
        [
            ok(2, "send", [snd(1, 0, 9)]),
            ok(0, "txn", [pl({"1": [[0, 9]]}), snd(1, 1, 10)]),
            ok(1, "poll", [pl({"1": [[0, 9], [1, 10]]})]),
        ],
        {},
        set(),
        set(),
    ),
    # --- consumer order
    (
        "poll-skip with assign",
        [
            W5,
            ok(1, "assign", [1]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            ok(1, "poll", [pl({"1": [[2, 12]]})]),
            DRAIN,
        ],
        {},
        {"poll-skip"},
        {"poll-skip"},
    ),
    (
        "poll-skip with --sub-via subscribe: reported, not bad",
        [
            W5,
            ok(1, "assign", [1]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            ok(1, "poll", [pl({"1": [[2, 12]]})]),
            DRAIN,
        ],
        {"sub_via": "subscribe"},
        {"poll-skip"},
        set(),
    ),
    (
        "near-miss: a gap across a transaction marker is no skip",
        [
            ok(0, "txn", [snd(1, 0, 10)]),
            ok(0, "txn", [snd(1, 2, 11)]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            ok(1, "poll", [pl({"1": [[2, 11]]})]),
        ],
        {},
        set(),
        set(),
    ),
    (
        "near-miss: re-read after a failed poll (rewound)",
        [
            W5,
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            fail(1, "poll", [pl({"1": [[1, 11]]})]),
            ok(1, "poll", [pl({"1": [[1, 11]]})]),
            DRAIN,
        ],
        {},
        set(),
        set(),
    ),
    (
        "near-miss: re-read after an aborted txn (rewound)",
        [
            W5,
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            fail(1, "txn", [pl({"1": [[1, 11], [2, 12]]}), snd(2, 0, 99)]),
            ok(1, "poll", [pl({"1": [[1, 11]]})]),
            DRAIN,
        ],
        {},
        set(),
        set(),
    ),
    (
        "near-miss: no rewind after an info poll",
        [
            W5,
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            info(1, "poll", [pl({"1": [[1, 11]]})]),
            ok(1, "poll", [pl({"1": [[2, 12]]})]),
            DRAIN,
        ],
        # a near-miss of the relaxed rule; Jepsen's (the default) calls it a poll-skip
        {"consumer_rewinds": False},
        set(),
        set(),
    ),
    (
        "poll-skip past what the info poll read",
        [
            W5,
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            info(1, "poll", [pl({"1": [[1, 11]]})]),
            ok(1, "poll", [pl({"1": [[3, 13]]})]),
            DRAIN,
        ],
        {},
        {"poll-skip"},
        {"poll-skip"},
    ),
    (
        "nonmonotonic-poll: the same record again",
        [
            W5,
            ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
            ok(1, "poll", [pl({"1": [[1, 11]]})]),
            DRAIN,
        ],
        {},
        {"nonmonotonic-poll"},
        {"nonmonotonic-poll"},
    ),
    (
        "nonmonotonic-poll: a failed assign with seek did not rewind",
        [
            W5,
            ok(1, "assign", [1]),
            ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
            fail(1, "assign", [1], seek_to_beginning=True),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            DRAIN,
        ],
        {},
        {"nonmonotonic-poll"},
        {"nonmonotonic-poll"},
    ),
    (
        "near-miss: assign with seek_to_beginning, then from the start",
        [
            W5,
            ok(1, "assign", [1]),
            ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
            ok(1, "assign", [1], seek_to_beginning=True),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            DRAIN,
        ],
        {},
        set(),
        set(),
    ),
    (
        "near-miss: key unassigned then reassigned is forgotten",
        [
            W5,
            ok(1, "assign", [1]),
            ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
            ok(1, "assign", [2]),
            ok(1, "assign", [1]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            DRAIN,
        ],
        {},
        set(),
        set(),
    ),
    (
        "near-miss: crash forgets the consumer",
        [
            W5,
            ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
            info(1, "crash"),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            DRAIN,
        ],
        {},
        set(),
        set(),
    ),
    (
        "subscribe inferred: poll-skip and nonmonotonic-poll not bad",
        [
            W5,
            ok(1, "subscribe", [1]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            ok(1, "poll", [pl({"1": [[2, 12]]})]),
            ok(1, "poll", [pl({"1": [[0, 10]]})]),
            DRAIN,
        ],
        {},
        {"poll-skip", "nonmonotonic-poll"},
        set(),
    ),
    (
        "int-poll-skip is bad even with subscribe",
        [W5, ok(1, "subscribe", [1]), ok(1, "poll", [pl({"1": [[0, 10], [2, 12]]})]), DRAIN],
        {},
        {"int-poll-skip"},
        {"int-poll-skip"},
    ),
    (
        "int-poll-skip across two poll micro-ops of one txn",
        [W5, ok(1, "txn", [pl({"1": [[0, 10]]}), pl({"1": [[2, 12]]})]), DRAIN],
        {},
        {"int-poll-skip"},
        {"int-poll-skip"},
    ),
    (
        "int-nonmonotonic-poll",
        [W5, ok(1, "poll", [pl({"1": [[0, 10], [1, 11], [0, 10]]})]), DRAIN],
        {},
        {"int-nonmonotonic-poll"},
        {"int-nonmonotonic-poll"},
    ),
    (
        "near-miss: a key in the op's rebalance_log is not judged",
        [
            W5,
            ok(1, "subscribe", [1]),
            ok(1, "poll", [pl({"1": [[0, 10], [2, 12]]})], rebalance_log=[{"keys": [1]}]),
            DRAIN,
        ],
        {},
        set(),
        set(),
    ),
    # --- producer order
    (
        "nonmonotonic-send",
        [
            ok(0, "send", [snd(1, 1, 10)]),
            ok(0, "send", [snd(1, 0, 11)]),
            ok(1, "poll", [pl({"1": [[0, 11], [1, 10]]})]),
        ],
        {},
        {"nonmonotonic-send", "G0-realtime"},  # the second send was invoked after the first
        {"nonmonotonic-send"},
    ),
    (
        "near-miss: a new process number is a new producer",
        [
            ok(0, "send", [snd(1, 1, 10)]),
            ok(3, "send", [snd(1, 0, 11)]),
            ok(1, "poll", [pl({"1": [[0, 11], [1, 10]]})]),
        ],
        {},
        {"G0-realtime"},
        set(),
    ),
    (
        "int-nonmonotonic-send: one txn, one key, out of offset order",
        [
            ok(0, "txn", [snd(1, 1, 10), snd(1, 0, 11)]),
            ok(1, "poll", [pl({"1": [[0, 11], [1, 10]]})]),
        ],
        {},
        {"int-nonmonotonic-send"},
        {"int-nonmonotonic-send"},
    ),
    (
        "int-send-skip: another producer in between, normal",
        [
            inv(0, "txn", [["send", 1, 10], ["send", 1, 11]]),
            inv(2, "send", [["send", 1, 99]]),
            ok(2, "send", [snd(1, 1, 99)]),
            ok(0, "txn", [snd(1, 0, 10), snd(1, 2, 11)]),
            ok(1, "poll", [pl({"1": [[0, 10], [1, 99], [2, 11]]})]),
        ],
        {},
        {"int-send-skip", "G0"},
        set(),
    ),
    (
        "near-miss: a gap inside one txn's sends with nothing between is no skip",
        [
            ok(0, "txn", [snd(1, 0, 10), snd(1, 2, 11)]),
            ok(1, "poll", [pl({"1": [[0, 10], [2, 11]]})]),
        ],
        {},
        set(),
        set(),
    ),
    # --- cycles
    (
        "G1c: circular visibility between concurrent txns, bad even with ww_deps",
        [
            inv(0, "txn", [["send", 1, 10], ["poll"]]),
            inv(1, "txn", [["send", 2, 20], ["poll"]]),
            ok(0, "txn", [snd(1, 0, 10), pl({"2": [[0, 20]]})]),
            ok(1, "txn", [snd(2, 0, 20), pl({"1": [[0, 10]]})]),
        ],
        {},
        {"G1c"},
        {"G1c"},
    ),
    (
        "G1c-realtime: a poll read a value whose send began after the poll ended",
        [
            inv(1, "poll", [["poll"]]),
            ok(1, "poll", [pl({"1": [[0, 20]]})]),
            inv(2, "send", [["send", 1, 20]]),
            ok(2, "send", [snd(1, 0, 20)]),
        ],
        {},
        {"G1c-realtime"},
        {"G1c-realtime"},
    ),
    (
        "G0: interleaved concurrent txns, normal",
        [
            inv(0, "txn", [["send", 1, 10], ["send", 2, 20]]),
            inv(1, "txn", [["send", 1, 11], ["send", 2, 21]]),
            ok(0, "txn", [snd(1, 0, 10), snd(2, 1, 20)]),
            ok(1, "txn", [snd(1, 1, 11), snd(2, 0, 21)]),
            ok(2, "poll", [pl({"1": [[0, 10], [1, 11]], "2": [[0, 21], [1, 20]]})]),
        ],
        {},
        {"G0"},
        set(),
    ),
    (
        "G0 with ww_deps off: nothing to report",
        [
            inv(0, "txn", [["send", 1, 10], ["send", 2, 20]]),
            inv(1, "txn", [["send", 1, 11], ["send", 2, 21]]),
            ok(0, "txn", [snd(1, 0, 10), snd(2, 1, 20)]),
            ok(1, "txn", [snd(1, 1, 11), snd(2, 0, 21)]),
            ok(2, "poll", [pl({"1": [[0, 10], [1, 11]], "2": [[0, 21], [1, 20]]})]),
        ],
        {"ww_deps": False},
        set(),
        set(),
    ),
    (
        "G0-realtime: a txn invoked after another completed wrote before it",
        [
            inv(0, "txn", [["send", 1, 10]]),
            ok(0, "txn", [snd(1, 1, 10)]),
            inv(1, "txn", [["send", 1, 11]]),
            ok(1, "txn", [snd(1, 0, 11)]),
            ok(2, "poll", [pl({"1": [[0, 11], [1, 10]]})]),
        ],
        {},
        {"G0-realtime"},
        set(),
    ),
]


def case(prefix: str) -> list[Line]:
    """The history of the case whose id starts with `prefix`."""
    return next(c[1] for c in CASES if c[0].startswith(prefix))


@pytest.mark.parametrize(
    ("lines", "opts", "want", "want_bad"),
    [pytest.param(c[1], c[2], c[3], c[4], id=c[0]) for c in CASES],
)
def test_each_type_at_its_boundary(
    tmp_path: Path, lines: list[Line], opts: dict[str, Any], want: set[str], want_bad: set[str]
) -> None:
    res = run(tmp_path, lines, **opts)
    assert types(res) == (want, want_bad), {
        t: [e.get("explanation") for e in a["examples"]] for t, a in res["anomalies"].items()
    }
    assert res["valid"] is (not want_bad)
    for name in want:  # every reported type carries an explanation naming an op
        ex = examples(res, name)[0]
        assert "op " in ex["explanation"] and ex["ops"], (name, ex)


# ---------------------------------------------------------------- explanations


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


# ---------------------------------------------------------------- missed anomalies


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


# ======================================================= part 2: `ktrial check` on odd input

SEND_POLL = [ok(0, "send", [snd(1, 0, 5)]), ok(1, "poll", [pl({"1": [[0, 5]]})])]


def jsonl(lines: list[Line]) -> bytes:
    return b"".join(
        json.dumps({"index": i, "time": i, **o}).encode() + b"\n" for i, o in enumerate(lines)
    )


@pytest.mark.parametrize(
    ("content", "code"),
    [
        pytest.param(b"", 2, id="empty"),
        pytest.param(b"\n\n  \n", 2, id="blank-lines"),
        pytest.param(jsonl([inv(0, "send", [["send", 1, 5]])]), 2, id="only-invokes"),
        pytest.param(jsonl([info("nemesis", "kill", ["n1"])] * 2), 2, id="only-nemesis"),
        pytest.param(jsonl([fail(0, "send", [snd(1, 0, 5)])]), 2, id="only-fail"),
        pytest.param(jsonl(SEND_POLL), 0, id="valid"),
        pytest.param(jsonl(SEND_POLL).replace(b"\n", b"\r\n"), 0, id="crlf"),
        pytest.param(jsonl(SEND_POLL) + b'{"index": 2, "ti', 0, id="torn-last-line"),
        pytest.param(jsonl(SEND_POLL) + b"\x00\x00\x00", 0, id="zero-filled-tail"),
        pytest.param(
            jsonl(
                [
                    fail(0, "send", [["send", "ключ🔑", [0, "värde✓"]]]),
                    ok(1, "poll", [pl({"ключ🔑": [[0, "värde✓"]]})]),
                ]
            ),
            1,
            id="unicode-keys-values",
        ),
    ],
)
def test_cli_exit_codes_on_odd_but_usable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, code: int
) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes(content)
    rc, out, err = cli(["check", str(h), "--json"], capsys)
    assert rc == code, (out, err)
    assert "Traceback" not in err
    res = json.loads(out)
    assert res == json.loads((tmp_path / "results.json").read_text())
    assert {"valid", "error_types", "bad_error_types", "anomalies", "metrics", "stats"} <= set(res)
    assert res["valid"] == {0: True, 1: False, 2: "unknown"}[code]
    for name, a in res["anomalies"].items():
        assert set(a) == {"count", "examples"} and a["count"] >= 1, name
    assert set(res["bad_error_types"]) <= set(res["error_types"])
    if code == 1:
        ex = res["anomalies"]["G1a"]["examples"][0]
        assert ex["key"] == "ключ🔑" and "värde✓" in ex["explanation"]


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        pytest.param(b"\x00\x01\x02garbage\n", 1, "binary", id="binary"),
        pytest.param(b"hello\n", 1, "invalid JSON", id="text"),
        pytest.param(b"null\n", 1, "JSON object", id="null"),
        pytest.param(jsonl(SEND_POLL) + b'{"index": 2}\n', 3, "op type", id="bad-last-line"),
        pytest.param(b"[" * 5000 + b"]" * 5000 + b"\n", 1, "depth", id="deep-line"),
    ],
)
def test_cli_malformed_input_names_file_line_and_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, line: int, reason: str
) -> None:
    h = tmp_path / "h.jsonl"
    h.write_bytes(content)
    rc, _out, err = cli(["check", str(h)], capsys)
    assert rc == 254 and f"{h}:{line}:" in err and reason in err, err
    assert "Traceback" not in err


def test_cli_reads_a_history_that_starts_with_a_utf8_bom(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Windows tools may start UTF-8 text with a byte order mark: it is skipped (RFC 8259
    lets a parser ignore it), and the history reads as without it."""
    plain, bom = tmp_path / "plain.jsonl", tmp_path / "bom.jsonl"
    plain.write_bytes(jsonl(SEND_POLL))
    bom.write_bytes(b"\xef\xbb\xbf" + jsonl(SEND_POLL))
    rc_plain, out_plain, _ = cli(["check", str(plain), "--json"], capsys)
    rc_bom, out_bom, err = cli(["check", str(bom), "--json"], capsys)
    assert rc_bom == rc_plain == 0, err
    strip = ("check_time_s",)
    a, b = json.loads(out_plain), json.loads(out_bom)
    for r in (a, b):
        for k in strip:
            r["stats"].pop(k)
    assert a == b


def test_cli_run_directory_options_from_test_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = case("poll-skip with assign")
    (tmp_path / "history.jsonl").write_bytes(jsonl(lines))
    assert cli(["check", str(tmp_path)], capsys)[0] == 1
    (tmp_path / "test.json").write_text(json.dumps({"options": {"sub-via": ":subscribe"}}))
    rc, out, _ = cli(["check", str(tmp_path), "--json"], capsys)
    assert rc == 0 and json.loads(out)["stats"]["options"]["sub_via"] == "subscribe"
    assert cli(["check", str(tmp_path), "--sub-via", "assign"], capsys)[0] == 1
    (tmp_path / "test.json").write_text(json.dumps({"checker": {"ww_deps": False}}))
    rc, out, _ = cli(["check", str(tmp_path), "--json"], capsys)
    assert json.loads(out)["stats"]["options"]["ww_deps"] is False
    (tmp_path / "test.json").write_text("[1]")
    rc, _, err = cli(["check", str(tmp_path)], capsys)
    assert rc == 254 and "test.json" in err and "Traceback" not in err


def test_cli_directory_without_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = cli(["check", str(tmp_path)], capsys)
    assert rc == 254 and "no history.jsonl" in err


def test_cli_edn_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "history.edn").write_text(
        "{:type :fail, :f :txn, :value [[:send 3 [0 5]]], :time 1, :process 0, :index 0}\n"
        "{:type :info, :f :kill, :value :majority, :time 2, :process :nemesis, :index 1}\n"
        "#jepsen.history.Op{:index 2, :time 3, :type :ok, :process 1, :f :poll, "
        ":value [[:poll {3 [[0 5]]}]]}\n"
    )
    rc, out, _ = cli(["check", str(tmp_path), "--json"], capsys)
    res = json.loads(out)
    assert rc == 1 and res["bad_error_types"] == ["G1a"]
    assert examples(res, "G1a")[0]["ops"] == [0, 2]  # Jepsen's indices
    (tmp_path / "history.edn").write_text("{:type :ok, :f :send, :value [[:send 3 [0 5]]]\n")
    rc, _, err = cli(["check", str(tmp_path)], capsys)
    assert rc == 254 and "history.edn:1:" in err and "Traceback" not in err


BIG = 10**26  # beyond 64 bits: msgspec decodes it as an int, orjson cannot write it back


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param([SEND_POLL[0], {**SEND_POLL[1], "time": BIG}], id="time"),
        pytest.param([SEND_POLL[0], {**SEND_POLL[1], "time": 1e19}], id="float-time"),
        pytest.param([SEND_POLL[0], ok(1, "poll", [pl({"1": [[0, 5], [2**63, 6]]})])], id="offset"),
        pytest.param(
            [fail(0, "send", [snd(1, 0, BIG)]), ok(1, "poll", [pl({"1": [[0, BIG]]})])],
            id="value-in-example",
        ),
    ],
)
def test_cli_huge_ints_do_not_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[Line]
) -> None:
    h = tmp_path / "h.jsonl"
    h.write_text("".join(json.dumps(o) + "\n" for o in lines))
    rc, _out, err = cli(["check", str(h)], capsys)
    # times, offsets and int values are 64-bit: beyond, a usage error naming the line
    assert rc == 254 and f"{h}:" in err and "beyond 64 bits" in err, err
    assert "Traceback" not in err


def test_cli_huge_ints_in_index_process_key_are_refused_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whichever reader reads the line (msgspec keeps big ints, orjson makes them
    floats), an integer beyond 64 bits is refused with the same clear message."""
    lines = [
        {**SEND_POLL[0], "index": BIG, "process": BIG, "value": [snd(BIG, 0, 5)]},
        ok(1, "poll", [pl({str(BIG): [[0, 5]]})]),
    ]
    h = tmp_path / "h.jsonl"
    h.write_text("".join(json.dumps(o) + "\n" for o in lines))
    rc, _out, err = cli(["check", str(h)], capsys)
    assert rc == 254 and f"{h}:1:" in err and "beyond 64 bits" in err, err


def test_cli_deeply_nested_value_in_an_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = tmp_path / "h.jsonl"
    deep = "[" * 5000 + "]" * 5000
    h.write_text(
        '{"index":0,"time":0,"process":"nemesis","type":"info","f":"kill","value":' + deep + "}\n"
    )
    rc, _out, err = cli(["check", str(h)], capsys)
    assert rc == 254 and f"{h}:1:" in err and "Traceback" not in err, err


def test_cli_duplicate_json_keys_take_the_last_consistently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Last one wins, whether the line takes the fast reader or the strict one."""
    for extra in ("", ', "node": "n1"'):
        h = tmp_path / "h.jsonl"
        h.write_text(
            '{"index":0,"time":0,"process":0,"type":"ok","type":"fail","f":"send",'
            '"value":[["send",1,[0,5]]]' + extra + "}\n" + json.dumps(SEND_POLL[1]) + "\n"
        )
        rc, out, _ = cli(["check", str(h), "--json"], capsys)
        assert rc == 1 and json.loads(out)["bad_error_types"] == ["G1a"], extra
