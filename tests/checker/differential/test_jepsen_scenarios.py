"""Fidelity to Jepsen's Kafka workload: its history.edn shapes and its checker's verdicts
on the scenarios of Jepsen's own tests (test_jepsen_parity.py goes rule by rule).

Every history here is written the way Jepsen writes one (jepsen.store/write-history!
`prn`s each op on its own line; ops are jepsen.history.Op records or plain maps),
with the op shapes of jepsen.tests.kafka and jepsen-io/redpanda's queue client:
`[:send k v]` invoked, `[:send k [offset v]]` ok, the invoke's value kept on info
and fail completions, `[:poll]` / `[:poll {k [[offset v] ...]}]`, `:error` as a
keyword or a `[:kind "message"]` vector, `:crash` ops, `:debug-topic-partitions`,
`:seek-to-beginning?`, `:poll-ms`, `:rebalance-log [{:keys [...]}]`.

The anomaly cases are the scenarios of Jepsen's own checker tests
(jepsen/test/jepsen/tests/kafka_test.clj), with the anomaly names and the
deltas/skipped values that Jepsen's analysis reports for them. Where ktrial
deliberately differs (docs/anomalies.md), the difference is pinned and says so.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ktrial.histories.edn import iter_edn_history
from ktrial.tests.checker.common import SEND6, examples_of, pick, run_edn_check
from ktrial.tests.histlines import edn_op as op  # a history.edn line (histlines.op: JSON)

KTRIAL = Path(sys.executable).parent / "ktrial"


def plain(line: str) -> str:
    """The same op as an older Jepsen's plain map."""
    return line.removeprefix("#jepsen.history.Op")


# --------------------------------------------------------- kafka_test.clj histories


# inconsistent-offsets-test, "info conflicts": an info send whose offset clashes with an
# ok send is not trusted until a poll proves the info op committed.
IO_BASE = [
    op(0, 0, "invoke", "send", "[[:send :x 1] [:send :y 1]]"),
    op(1, 0, "info", "send", "[[:send :x [0 1]] [:send :y 1]]"),
    op(2, 1, "invoke", "send", "[[:send :x 2]]"),
    op(3, 1, "ok", "send", "[[:send :x [0 2]]]"),
]
IO_READ = [
    op(4, 2, "invoke", "poll", "[[:poll]]"),
    op(5, 2, "ok", "poll", "[[:poll {:y [[5 1]]}]]"),
]


def test_inconsistent_offsets_info_send_is_trusted_only_once_read(tmp_path: Path) -> None:
    code, res = run_edn_check(tmp_path, IO_BASE)
    assert "inconsistent-offsets" not in res["error_types"]
    assert code == 2  # nothing read: unknown (Jepsen would say invalid: unseen)
    code, res = run_edn_check(tmp_path, IO_BASE + IO_READ)
    assert code == 1
    assert [
        pick(e, "key", "offset", "values") for e in examples_of(res, "inconsistent-offsets")
    ] == [("x", 0, [1, 2])]


def test_inconsistent_offsets_real_world_lines_without_index(tmp_path: Path) -> None:
    # Verbatim shape of kafka_test.clj's "real-world example": plain maps, no :index.
    lines = [
        "{:type :invoke, :f :send, :value [[:send 11 641]], :time 280153467070, :process 379}",
        "{:type :ok, :f :send, :value [[:send 11 [537 641]]], :time 280169754615, :process 379}",
        "{:type :invoke, :f :send, :value [[:send 11 645]], :time 283654729962, :process 363}",
        "{:type :ok, :f :send, :value [[:send 11 [537 645]]], :time 287474569112, :process 363}",
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1
    assert res["bad_error_types"] == ["inconsistent-offsets"]
    ex = examples_of(res, "inconsistent-offsets")[0]
    assert pick(ex, "key", "offset", "values") == ("11", 537, [641, 645])


def test_g1a_read_of_a_failed_send(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x 2] [:send :y 3]]"),
        op(1, 0, "fail", "send", "[[:send :x 2] [:send :y 3]]", error=":not-leader-or-follower"),
        op(2, 1, "invoke", "poll", "[[:poll]]"),
        op(3, 1, "ok", "poll", "[[:poll {:x [[0 2]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1 and res["bad_error_types"] == ["G1a"]
    ex = examples_of(res, "G1a")[0]
    assert pick(ex, "key", "value", "writer", "reader") == ("x", 2, 1, 3)


def test_lost_write_consistent(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x :a]]"),
        op(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
        op(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :d]]"),
        op(3, 0, "ok", "send", "[[:send :x [1 :b]] [:send :x [3 :d]]]"),
        op(4, 1, "invoke", "send", "[[:send :x :c]]"),
        op(5, 1, "info", "send", "[[:send :x :c]]", error=":timeout"),
        op(6, 0, "invoke", "poll", "[[:poll]]"),
        op(7, 0, "ok", "poll", "[[:poll {:x [[2 :c]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1
    lost = [
        pick(e, "key", "value", "offset", "writer", "max_reader")
        for e in examples_of(res, "lost-write")
    ]
    assert lost == [("x", "a", 0, 1, 7), ("x", "b", 1, 3, 7)]  # d (offset 3) is past the read
    assert "int-send-skip" not in res["bad_error_types"]  # Jepsen allows it too


def test_lost_write_with_inconsistent_offsets(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x :a]]"),
        op(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
        op(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :c]]"),
        op(3, 0, "ok", "send", "[[:send :x [0 :b]] [:send :x [2 :c]]]"),
        op(4, 0, "invoke", "poll", "[[:poll]]"),
        op(5, 0, "ok", "poll", "[[:poll {:x [[0 :b] [2 :c]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1
    assert [pick(e, "key", "value") for e in examples_of(res, "lost-write")] == [("x", "a")]
    assert "inconsistent-offsets" in res["bad_error_types"]


ATOMIC = [
    op(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :b]]"),
    op(1, 0, "info", "send", "[[:send :x :a] [:send :y [0 :b]]]"),
    op(2, 1, "invoke", "send", "[[:send :y :c]]"),
    op(3, 1, "info", "send", "[[:send :y :c]]"),
]
POLL_A = [
    op(4, 2, "invoke", "poll", "[[:poll]]"),
    op(5, 2, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
]
POLL_C = [
    op(6, 3, "invoke", "poll", "[[:poll]]"),
    op(7, 3, "ok", "poll", "[[:poll {:y [[1 :c]]}]]"),
]


def test_lost_write_of_an_info_txn_once_proven_committed(tmp_path: Path) -> None:
    code, res = run_edn_check(tmp_path, ATOMIC + POLL_C)
    assert code == 0 and "lost-write" not in res["error_types"]
    code, res = run_edn_check(tmp_path, ATOMIC + POLL_A + POLL_C)
    assert code == 1
    assert [pick(e, "key", "value", "writer") for e in examples_of(res, "lost-write")] == [
        ("y", "b", 1)
    ]


def test_precommitted_read(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
        op(1, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:x [[0 :a]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1 and res["bad_error_types"] == ["precommitted-read"]
    assert pick(examples_of(res, "precommitted-read")[0], "key", "value", "ops") == ("x", "a", [1])


def test_g1c_pure_wr(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
        op(1, 1, "invoke", "txn", "[[:send :y :b] [:poll]]"),
        op(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]"),
        op(3, 1, "ok", "txn", "[[:send :y [0 :b]] [:poll {:x [[0 :a]]}]]"),
    ]
    # Jepsen's analysis without ww-deps: G1c, not allowed.
    code, res = run_edn_check(tmp_path, lines, "--no-ww-deps")
    assert code == 1 and res["bad_error_types"] == ["G1c"]
    assert sorted(examples_of(res, "G1c")[0]["cycle"]) == [2, 3]
    # Divergence (docs/anomalies.md): with ww-deps Jepsen allows every G1c; ktrial
    # still fails a cycle of wr edges only (circular visibility).
    code, res = run_edn_check(tmp_path, lines, "--ww-deps")
    assert code == 1 and res["bad_error_types"] == ["G1c"]


def test_g1c_ww_wr_is_allowed_with_ww_deps(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "txn", "[[:send :x :a] [:send :y :c]]"),
        op(1, 1, "invoke", "txn", "[[:poll] [:send :y :b]]"),
        op(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:send :y [2 :c]]]"),
        op(3, 1, "ok", "txn", "[[:poll {:x [[0 :a]]}] [:send :y [1 :b]]]"),
    ]
    code, res = run_edn_check(tmp_path, lines, "--ww-deps")
    assert "G1c" in res["error_types"] and "G1c" not in res["bad_error_types"]
    # y's b and c were acknowledged and never polled: Jepsen's unseen, bad in both.
    assert code == 1 and res["bad_error_types"] == ["unseen"]


def test_g0_write_cycle(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :a]]"),
        op(1, 1, "invoke", "send", "[[:send :x :b] [:send :y :b]]"),
        op(2, 0, "ok", "send", "[[:send :x [0 :a]] [:send :y [1 :a]]]"),
        op(3, 1, "ok", "send", "[[:send :x [1 :b]] [:send :y [0 :b]]]"),
    ]
    _code, res = run_edn_check(tmp_path, lines, "--ww-deps")
    assert "G0" in res["error_types"] and "G0" not in res["bad_error_types"]
    assert sorted(examples_of(res, "G0")[0]["cycle"]) == [2, 3]


def test_duplicate_basic_and_in_aborted_polls(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x :a]]"),
        op(1, 0, "ok", "send", "[[:send :x [1 :a]]]"),
        op(2, 1, "invoke", "send", "[[:send :x :b]]"),
        op(3, 1, "info", "send", "[[:send :x :b]]"),
        op(4, 2, "invoke", "poll", "[[:poll]]"),
        op(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :a]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1 and res["bad_error_types"] == ["duplicate"]
    assert pick(examples_of(res, "duplicate")[0], "key", "value", "offsets") == ("x", "a", [1, 3])
    # "aborted txns": a failed poll's records are evidence; the failed send's 1 is not.
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x 0]]"),
        op(1, 0, "ok", "send", "[[:send :x [1 0]]]"),
        op(2, 0, "invoke", "send", "[[:send :x 1]]"),
        op(3, 0, "fail", "send", "[[:send :x [2 1]]]"),
        op(4, 1, "invoke", "poll", "[[:poll]]"),
        op(5, 1, "fail", "poll", "[[:poll {:x [[11 0] [12 1]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1
    assert [pick(e, "value", "offsets") for e in examples_of(res, "duplicate")] == [(0, [1, 11])]


def test_int_poll_skip(tmp_path: Path) -> None:
    lines = [
        op(0, 1, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :d]]"),
        op(1, 1, "info", "send", "[[:send :x :a] [:send :x :b] [:send :x :d]]"),
        op(2, 0, "invoke", "poll", "[[:poll]]"),
        op(3, 0, "ok", "poll", "[[:poll {:x [[1 :a], [4 :d]]}]]"),
        op(4, 0, "invoke", "poll", "[[:poll] [:poll]]"),
        op(5, 0, "ok", "poll", "[[:poll {:x [[1 :a]]}] [:poll {:x [[4 :d]]}]]"),
        op(6, 0, "invoke", "poll", "[[:poll]]"),
        op(7, 0, "ok", "poll", "[[:poll {:x [[2 :b]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1
    got = [pick(e, "values", "skipped", "delta", "ops") for e in examples_of(res, "int-poll-skip")]
    assert got == [(["a", "d"], ["b"], 2, [3]), (["a", "d"], ["b"], 2, [5])]
    # Jepsen's per-process analysis also flags process 0 going back to a, then to b.
    nm = [pick(e, "values", "delta") for e in examples_of(res, "nonmonotonic-poll")]
    assert nm == [(["d", "a"], -2), (["d", "b"], -1)]


def test_int_send_skip_is_allowed(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :c]]"),
        op(1, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x :c]]"),
        op(2, 1, "invoke", "send", "[[:send :x :b]]"),
        op(3, 1, "info", "send", "[[:send :x :b]]"),
        op(4, 2, "invoke", "poll", "[[:poll]]"),
        op(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    ex = examples_of(res, "int-send-skip")
    assert [pick(e, "values", "skipped", "delta", "ops") for e in ex] == [
        (["a", "c"], ["b"], 2, [1])
    ]
    assert "int-send-skip" not in res["bad_error_types"]
    # a (offset 1) sits below the read b, c and no ok op read it: Jepsen's
    # lost-write-cases flags it as well.
    assert code == 1 and [pick(e, "value") for e in examples_of(res, "lost-write")] == [("a",)]


def test_int_nonmonotonic_poll_and_send(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
        op(1, 0, "info", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
        op(2, 0, "invoke", "poll", "[[:poll]]"),
        op(3, 0, "ok", "poll", "[[:poll {:x [[3 :c] [1 :a]]}]]"),
        op(4, 0, "invoke", "poll", "[[:poll]]"),
        op(5, 0, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c]]}] [:poll {:x [[3 :c]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1
    got = [pick(e, "values", "delta", "ops") for e in examples_of(res, "int-nonmonotonic-poll")]
    assert got == [(["c", "a"], -2, [3]), (["c", "c"], 0, [5])]

    lines = [
        op(0, 0, "invoke", "send", "[[:send :x 3] [:send :x 1]]"),
        op(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [1 :a]]]"),
        op(2, 0, "invoke", "send", "[[:send :y :d] [:send :y :b]]"),
        op(3, 0, "info", "send", "[[:send :y :d] [:send :y :b]]"),
        op(4, 1, "invoke", "send", "[[:send :y :c]]"),
        op(5, 1, "info", "send", "[[:send :y :c]]"),
        op(6, 0, "invoke", "poll", "[[:poll]]"),
        op(7, 0, "ok", "poll", "[[:poll {:y [[2 :b] [3 :c] [4 :d]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1
    got = sorted(
        pick(e, "key", "values", "delta") for e in examples_of(res, "int-nonmonotonic-send")
    )
    assert got == [("x", ["c", "a"], -1), ("y", ["d", "b"], -2)]


def test_nonmonotonic_send(tmp_path: Path) -> None:
    lines = [
        op(0, 0, "invoke", "send", "[[:send :x :c] [:send :x :d]]"),
        op(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [4 :d]]]"),
        op(10, 0, "invoke", "send", "[[:send :x 1] [:send :x 2]]"),
        op(11, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x [2 :b]]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 1
    ex = examples_of(res, "nonmonotonic-send")
    assert [pick(e, "values", "delta", "ops") for e in ex] == [(["d", "a"], -3, [1, 11])]


SEND4 = [
    op(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
    op(
        1,
        0,
        "ok",
        "send",
        "[[:send :x [1 :a]] [:send :x [2 :b]] [:send :x [3 :c]] [:send :x [4 :d]]]",
    ),
]
POLL_123 = [
    op(2, 0, "invoke", "poll", "[[:poll]]"),
    op(3, 0, "ok", "poll", "[[:poll {:x [[1 :a], [2 :b], [3 :c]]}]]"),
]
POLL_234 = [
    op(6, 0, "invoke", "poll", "[[:poll]]"),
    op(7, 0, "ok", "poll", "[[:poll {:x [[2 :b], [3 :c], [4 :d]]}]]"),
]


@pytest.mark.parametrize(
    ("between", "opts", "expect"),
    [
        ([], (), "bad"),
        (
            [op(4, 0, "invoke", "assign", "[:y]"), op(5, 0, "ok", "assign", "[:y]")],
            (),
            None,
        ),
        (
            [op(4, 0, "invoke", "subscribe", "[:y]"), op(5, 0, "ok", "subscribe", "[:y]")],
            (),
            None,
        ),
        (
            [op(4, 0, "invoke", "assign", "[:x :y]"), op(5, 0, "ok", "assign", "[:x :y]")],
            (),
            "bad",
        ),
        # Jepsen reports it either way; whether it is bad follows the test's :sub-via.
        (
            [
                op(4, 0, "invoke", "subscribe", "[:x :y]"),
                op(5, 0, "ok", "subscribe", "[:x :y]"),
            ],
            (),
            "allowed",
        ),
        (
            [
                op(4, 0, "invoke", "subscribe", "[:x :y]"),
                op(5, 0, "ok", "subscribe", "[:x :y]"),
            ],
            ("--sub-via", "assign"),
            "bad",
        ),
    ],
)
def test_nonmonotonic_poll(
    tmp_path: Path, between: list[str], opts: tuple[str, ...], expect: str | None
) -> None:
    code, res = run_edn_check(tmp_path, SEND4 + POLL_123 + between + POLL_234, *opts)
    ex = examples_of(res, "nonmonotonic-poll")
    if expect is None:
        assert code == 0 and ex == []
        return
    assert [pick(e, "values", "delta", "ops") for e in ex] == [(["c", "b"], -1, [3, 7])]
    assert ("nonmonotonic-poll" in res["bad_error_types"]) == (expect == "bad")


# poll-skip-test: note the writers are invoked after the polls, as in Jepsen's test.
PS = [
    op(0, 0, "invoke", "poll", "[[:poll]]"),
    op(1, 0, "ok", "poll", "[[:poll {:x [[1 :a], [2 :b]]}]]"),
    op(2, 1, "invoke", "poll", "[[:poll]]"),
    op(3, 1, "ok", "poll", "[[:poll {:x [[3 :c]]}]]"),
]
PS_4 = [
    op(6, 0, "invoke", "poll", "[[:poll]]"),
    op(7, 0, "ok", "poll", "[[:poll {:x [[4 :d]]}]]"),
]
PS_REST = [
    op(10, 2, "invoke", "send", "[[:send :x :f]]"),
    op(11, 2, "ok", "send", "[[:send :x [6 :f]]]"),
    op(12, 0, "invoke", "poll", "[[:poll]]"),
    op(13, 0, "ok", "poll", "[[:poll {:x [[7 :g]]}]]"),
    op(
        14,
        3,
        "invoke",
        "send",
        "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d] [:send :x :g]]",
    ),
    op(
        15,
        3,
        "info",
        "send",
        "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d] [:send :x :g]]",
    ),
]
PS_ERRS = [(["c"], 2, [1, 7]), (["f"], 2, [7, 13])]


@pytest.mark.parametrize(
    ("mid1", "mid2", "expect"),
    [
        ([], [], PS_ERRS),
        (
            [op(4, 0, "invoke", "subscribe", "[:y]"), op(5, 0, "ok", "subscribe", "[:y]")],
            [op(8, 0, "invoke", "assign", "[:y]"), op(9, 0, "info", "assign", "[:y]")],
            [],
        ),
        (
            [
                op(4, 0, "invoke", "subscribe", "[:x :y]"),
                op(5, 0, "ok", "subscribe", "[:x :y]"),
            ],
            [op(8, 0, "invoke", "assign", "[:x :y]"), op(9, 0, "ok", "assign", "[:x :y]")],
            PS_ERRS,
        ),
    ],
)
def test_poll_skip(tmp_path: Path, mid1: list[str], mid2: list[str], expect: list[Any]) -> None:
    code, res = run_edn_check(tmp_path, PS + mid1 + PS_4 + mid2 + PS_REST, "--sub-via", "assign")
    got = [pick(e, "skipped", "delta", "ops") for e in examples_of(res, "poll-skip")]
    assert got == expect
    assert code == 1  # f is a lost write in every variant (Jepsen's lost-write-cases too)


def test_poll_after_aborted_txn_rewinds(tmp_path: Path) -> None:
    lines = [
        *SEND6,
        op(6, 1, "invoke", "txn", "[[:poll]]"),
        op(7, 1, "info", "txn", "[[:poll {:x [[1 1] [2 2]]}]]", error=":timeout"),
        op(8, 1, "invoke", "txn", "[[:poll]]"),
        op(9, 1, "ok", "txn", "[[:poll {:x [[1 1] [2 2] [3 3] [4 4] [5 5]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 0 and res["error_types"] == []


def test_divergence_failed_polls_that_do_not_rewind(tmp_path: Path) -> None:
    """kafka_test.clj "abort doesn't roll back" / "info can be a poll-skip".

    Jepsen: poll-skip (skipped [1 2], then [1 2 3 4]), because its per-process scan
    compares every poll -- fail and info ones too -- with the last *ok* read. So does
    ktrial by default (consumer_rewinds: tests/checker/test_order_positions.py pins
    those verdicts). With --no-consumer-rewinds (clients known not to rewind after an
    abort, docs/anomalies.md) only ok reads are compared, and an ok read may resume
    after the furthest record a failed op read: same verdict here (invalid, via
    lost-write/unseen), but no poll-skip.
    """
    lines = [
        *SEND6,
        op(6, 1, "invoke", "txn", "[[:poll]]"),
        op(7, 1, "fail", "txn", "[[:poll {:x [[3 3] [4 4]]}]]", error=":abort"),
        op(8, 1, "invoke", "txn", "[[:poll]]"),
        op(9, 1, "ok", "txn", "[[:poll {:x [[5 5]]}]]"),
    ]
    code, res = run_edn_check(tmp_path, lines, "--no-consumer-rewinds")
    assert code == 1 and "poll-skip" not in res["error_types"]
    assert [pick(e, "value") for e in examples_of(res, "lost-write")] == [(1,), (2,), (3,), (4,)]
    lines = [
        *SEND6,
        op(6, 1, "invoke", "txn", "[[:poll]]"),
        op(7, 1, "info", "txn", "[[:poll {:x [[3 3] [4 4]]}]]", error=":timeout"),
    ]
    code, res = run_edn_check(tmp_path, lines, "--no-consumer-rewinds")
    assert "poll-skip" not in res["error_types"]
    assert res["bad_error_types"] == ["unseen"]


@pytest.mark.parametrize(("keys", "bad"), [("[{:keys [:x]}]", False), ("[{:keys [:y]}]", True)])
def test_rebalance_log_excuses_internal_poll_order(tmp_path: Path, keys: str, bad: bool) -> None:
    lines = [
        *SEND4,
        op(2, 1, "invoke", "poll", "[[:poll] [:poll]]"),
        op(
            3,
            1,
            "ok",
            "poll",
            "[[:poll {:x [[1 :a] [2 :b]]}] [:poll {:x [[1 :a] [2 :b] [3 :c] [4 :d]]}]]",
            rebalance_log=keys,
        ),
    ]
    code, res = run_edn_check(tmp_path, lines)
    assert ("int-nonmonotonic-poll" in res["bad_error_types"]) == bad
    assert code == (1 if bad else 0)


def test_only_an_assign_nothing_read(tmp_path: Path) -> None:
    # kafka_test.clj empty-history-test: Jepsen says invalid; ktrial says unknown
    # (docs/anomalies.md: nothing read), never valid.
    lines = [op(0, 0, "invoke", "assign", "[:x]"), op(1, 0, "ok", "assign", "[:x]")]
    code, res = run_edn_check(tmp_path, lines)
    assert code == 2 and res["valid"] == "unknown"


# --------------------------------------------------------------- real client shapes

# What jepsen-io/redpanda's queue client and jepsen.tests.kafka's generators put in
# a history: error vectors and keywords, info/fail completions that keep the
# invoke's value, :crash (info, then a new process number), the final-polls round
# (:crash, :debug-topic-partitions, :assign with :seek-to-beginning?, :poll-ms),
# :unseen on assigns (poll-unseen), an ok poll carrying a :consumer-commit error.
REAL = [
    op(0, 0, "invoke", "assign", "[0 1]"),
    op(1, 0, "ok", "assign", "[0 1]", unseen="{0 {:polled -1, :sent 1}}"),
    op(2, 1, "invoke", "send", "[[:send 0 10]]"),
    op(3, 1, "ok", "send", "[[:send 0 [0 10]]]"),
    op(4, 1, "invoke", "send", "[[:send 1 11]]"),
    op(
        5,
        1,
        "info",
        "send",
        "[[:send 1 11]]",
        error='[:disconnect "Connection to node 1 was disconnected"]',
    ),
    op(6, 1, "invoke", "send", "[[:send 1 12]]"),
    op(7, 1, "info", "send", "[[:send 1 12]]", error='[:unknown-server-exception "unexpected"]'),
    op(8, 1, "invoke", "send", "[[:send 0 13]]"),
    op(9, 1, "fail", "send", "[[:send 0 13]]", error=":not-leader-or-follower"),
    op(10, 0, "invoke", "poll", "[[:poll]]"),
    op(
        11,
        0,
        "ok",
        "poll",
        "[[:poll {0 [[0 10]], 1 []}]]",
        error='[:consumer-commit "Commit cannot be completed"]',
    ),
    op(12, 0, "invoke", "crash", "nil"),
    op(13, 0, "info", "crash", "nil"),
    op(14, 5, "invoke", "txn", "[[:poll] [:send 1 14]]"),
    op(15, 5, "info", "txn", "[[:poll] [:send 1 14]]", error=":timeout"),
    op(16, "nemesis", "info", "kill", '["n1" "n2"]'),
    op(17, "nemesis", "info", "kill", '{"n1" :killed, "n2" :killed}'),
    op(18, 6, "invoke", "crash", "nil"),
    op(19, 6, "info", "crash", "nil"),
    op(20, 11, "invoke", "debug-topic-partitions", "(0 1)"),
    op(21, 11, "info", "debug-topic-partitions", "(0 1)", error='[:timeout "Timed out waiting"]'),
    op(22, 11, "invoke", "assign", "(0 1)", seek_to_beginning_="true"),
    op(23, 11, "ok", "assign", "(0 1)", seek_to_beginning_="true"),
    op(24, 11, "invoke", "poll", "[[:poll]]", poll_ms="1000"),
    op(25, 11, "ok", "poll", "[[:poll {0 [[0 10]]}]]", poll_ms="1000"),
]


def _real(records: bool) -> list[str]:
    return REAL if records else [plain(line) for line in REAL]


@pytest.mark.parametrize("records", [True, False])
def test_real_client_shapes_read_and_check(tmp_path: Path, records: bool) -> None:
    lines = _real(records)
    h = tmp_path / "h.edn"
    h.write_text("\n".join(lines) + "\n")
    ops = {o.index: o for o in iter_edn_history(h)}
    assert ops[1].extra["unseen"] == {"0": {"polled": -1, "sent": 1}}
    assert ops[5].error == ["disconnect", "Connection to node 1 was disconnected"]
    assert ops[11].error == ["consumer-commit", "Commit cannot be completed"]
    assert ops[13].f == "crash" and ops[13].type == "info"
    assert ops[16].process == "nemesis" and not ops[16].is_client
    assert ops[23].extra == {"seek_to_beginning": True}
    assert ops[25].extra == {"poll_ms": 1000}
    code, res = run_edn_check(tmp_path, lines)
    assert code == 0 and res["error_types"] == []
    assert res["stats"]["nemesis_ops"] == 2
    assert res["stats"]["sends"] == {"ok": 1, "fail": 1, "info": 2, "values": 4}


def test_info_causes_count_data_ops_only(tmp_path: Path) -> None:
    _, res = run_edn_check(tmp_path, _real(True))
    assert res["metrics"]["info_causes"] == {
        "disconnect": 1,
        "unknown-server-exception": 1,
        "timeout": 1,
    }


def test_console_script_exit_codes(tmp_path: Path) -> None:
    """The installed `ktrial check PATH` on a run directory holding history.edn."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.edn").write_text("\n".join(ATOMIC + POLL_A + POLL_C) + "\n")
    r = subprocess.run([str(KTRIAL), "check", str(run)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "lost-write" in r.stdout
    assert re.search(r"\bunseen\b|\blost-write\b", r.stdout)
