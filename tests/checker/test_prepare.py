"""Pairing invokes with completions (checker/prepare.py): ops that never complete,
crashes that end a pending op, subscribe inference and nemesis ops.
"""

from __future__ import annotations

from pathlib import Path

from ktrial.tests.checker.common import check_ops_from
from ktrial.tests.histlines import (
    examples,
    info,
    inv,
    ok,
    parsed,
    poll_op,
    run,
    send_op,
    snd,
    types,
)


def test_invoke_without_completion_counts_as_info() -> None:
    res = check_ops_from(
        parsed(
            inv(0, "send", [["send", 1, 10]]),  # ktrial crashed: never completed
            poll_op(1, {"1": [[0, 10]]}),
        )
    )
    assert res["valid"] is True, res["error_types"]
    assert res["metrics"]["counts"]["send"]["info"] == 1
    assert res["metrics"]["info_causes"] == {"never completed": 1}


def test_nemesis_ops_are_not_data() -> None:
    res = check_ops_from(
        parsed(
            {"process": "nemesis", "type": "info", "f": "start-partition", "value": ["n1"]},
            send_op(0, 1, 10, 0),
            poll_op(1, {"1": [[0, 10]]}),
        )
    )
    assert res["valid"] is True and res["stats"]["nemesis_ops"] == 1


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
            poll_op(2, {"1": [[0, 10]]}),
            poll_op(2, {"1": [[2, 12]]}),
            poll_op(4, {"1": [[0, 10], [1, 11], [2, 12]]}),
        ],
    )
    assert types(res) == ({"poll-skip"}, set())
    assert res["valid"] is True
    assert res["stats"]["options"]["sub_via"] == "subscribe"


def test_a_crash_ends_a_pending_send_which_keeps_its_values(tmp_path: Path) -> None:
    """A crash completion does not pair with the process's pending send invoke: the
    send never completed (info, its invoke's values), and the crash wrote nothing.
    So a poll that ended before that send was invoked, yet read its value, read from
    the future: G1c-realtime, bad. (Hypothesis found this shape while the mutants
    ran; the brute-force reference of differential/test_independent.py's cycle test credits
    the crash with the send's values and disagrees; the checker is right.)"""
    res = run(
        tmp_path,
        [
            inv(2, "poll", [["poll"]]),
            poll_op(2, {"2": [[0, 13]]}),
            inv(0, "send", [["send", 2, 13]]),
            info(0, "crash"),
        ],
    )
    assert types(res) == ({"G1c-realtime"}, {"G1c-realtime"})
    (ex,) = examples(res, "G1c-realtime")
    assert sorted(ex["cycle"]) == [1, 2]
    assert "never completed" in ex["explanation"] and "value 13 to key 2" in ex["explanation"]
