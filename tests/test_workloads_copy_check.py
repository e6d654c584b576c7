"""checker/copy.py on hand-made copy histories: exactly once, duplicated, lost."""

from __future__ import annotations

from typing import Any

from ktrial.checker.copy import check_copy
from ktrial.histories.jsonl import op_from_json
from ktrial.histories.model import Op
from ktrial.workloads.tracker import OffsetTracker

M = 1 << 32
META: dict[str, Any] = {"workload": "copy", "copy": {"route": {"0": 2, "1": 3}, "value_modulus": M}}


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
    assert check_copy(h, META) == {}


def test_a_second_copy_is_an_eos_duplicate() -> None:
    # A zombie copier's transaction committed the same input again (another step).
    h = ops(
        *base(),
        (5, "ok", "txn", [["poll", {"0": [[0, 10]]}], ["send", 2, [1, 2 * M + 10]]]),
        drain_reads({"2": [[0, M + 10], [1, 2 * M + 10]], "3": [[0, M + 11]]}),
    )
    res = check_copy(h, META)
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
    res = check_copy(h, {**META, "drain": {"copy_caught_up": False}})
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
    assert check_copy(h, META) == {}


def test_not_a_copy_run() -> None:
    assert check_copy(ops(*base()), {"workload": "queue"}) == {}


def test_tracker_targets_and_unread() -> None:
    t = OffsetTracker()
    t.observe([["send", 0, [5, 1]], ["send", 1, 2], ["poll", {"0": [[2, 9]], "3": [[7, 8]]}]])
    assert t.targets([0, 1, 3]) == {0: 6, 1: 0, 3: 8}
    assert t.unread(5) == [0]
    t.observe([["poll", {"0": [[5, 1]]}]])
    assert t.unread(5) == []
