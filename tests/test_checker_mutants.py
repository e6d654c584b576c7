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
from ktrial.checker import CheckOptions, check_file
from ktrial.checker.options import options_from_test_json

Line = dict[str, Any]


# ================================================================ helpers


def op(process: Any, typ: str, f: str, value: Any = None, **extra: Any) -> Line:
    return {"process": process, "type": typ, "f": f, "value": value, **extra}


def ok(process: Any, f: str, value: Any = None, **extra: Any) -> Line:
    return op(process, "ok", f, value, **extra)


def fail(process: Any, f: str, value: Any = None, **extra: Any) -> Line:
    return op(process, "fail", f, value, **extra)


def info(process: Any, f: str, value: Any = None, **extra: Any) -> Line:
    return op(process, "info", f, value, **extra)


def inv(process: Any, f: str, value: Any = None, **extra: Any) -> Line:
    return op(process, "invoke", f, value, **extra)


def snd(k: Any, o: int | None, v: Any) -> list[Any]:
    return ["send", k, [o, v]]


def pl(recs: dict[str, list[list[Any]]]) -> list[Any]:
    return ["poll", recs]


def write(path: Path, lines: list[Line]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"index": i, "time": i * 1_000_000, **o}) + "\n" for i, o in enumerate(lines)
        )
    )
    return path


def run(tmp_path: Path, lines: list[Line], **opts: Any) -> dict[str, Any]:
    """Check from a file, as `ktrial check` does."""
    return check_file(write(tmp_path / "history.jsonl", lines), CheckOptions(**opts))


def types(res: dict[str, Any]) -> tuple[set[str], set[str]]:
    return set(res["error_types"]), set(res["bad_error_types"])


def examples(res: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return res["anomalies"][name]["examples"]  # type: ignore[no-any-return]


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
    """Mutant: must_have_committed() accepts a fail op whose value an ok op read.

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
    other order, and they landed in the retry's order: nothing is wrong."""
    failed = (
        [snd(1, 5, 10), snd(1, 6, 11)] if acked else [["send", 1, 10], ["send", 1, 11]]
    )
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
