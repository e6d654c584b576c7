"""Each key's log as ground truth (checker/logs.py): which ops must have committed."""

from __future__ import annotations

from pathlib import Path

from ktrial.tests.histlines import examples, fail, ok, poll_op, run, snd, types


def test_a_failed_txn_never_committed_even_when_its_value_is_read(tmp_path: Path) -> None:
    """Mutant: build_logs() counts a fail op whose value an ok op read as committed.
    (Making must_have_committed() itself accept fail ops is an equivalent mutant:
    build_logs only asks it about info ops.)

    docs/anomalies.md: an op must have committed when it is ok, or info and read; fail =
    certainly did not take effect. Reading an aborted value is G1a, and the other
    aborted value (acknowledged at offset 0, never read) is not log truth, so it is
    no lost-write, and no torn-transaction either."""
    res = run(
        tmp_path,
        [
            fail(1, "txn", [snd(1, 0, 10), snd(2, 0, 20), snd(1, 1, 11)]),
            ok(4, "send", [snd(2, 0, 30)]),
            poll_op(2, {"1": [[1, 11]]}),
            poll_op(3, {"2": [[0, 30]]}),
        ],
    )
    assert types(res) == ({"G1a"}, {"G1a"})
    (ex,) = examples(res, "G1a")
    assert (ex["key"], ex["value"], ex["offset"], ex["writer"]) == ("1", 11, 1, 0)
