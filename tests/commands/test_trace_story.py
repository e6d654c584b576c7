"""`ktrial trace`'s reading of the history and the brokers' logs (commands/trace_story.py):
the writer op with its invoke's time and transactional id, the number of
`__transaction_state` partitions, and the time line's text."""

from __future__ import annotations

import json
from pathlib import Path

from ktrial.clusters.serverlog import LogLine
from ktrial.commands.trace_story import WriterOp, story_text, txn_state_partitions, writer_ops

S = 1_000_000_000


def write(path: Path, ops: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps({"index": i, **op}) + "\n" for i, op in enumerate(ops)))
    return path


def test_the_writer_op_is_found_by_its_completion_with_its_invokes_time_and_id(
    tmp_path: Path,
) -> None:
    h = write(
        tmp_path / "h.jsonl",
        [
            {
                "time": 1 * S,
                "process": 0,
                "type": "invoke",
                "f": "txn",
                "value": [["send", 1, 5]],
                "txn_id": "p-w0",
            },
            {"time": 2 * S, "process": 1, "type": "invoke", "f": "send", "value": [["send", 2, 6]]},
            {
                "time": 3 * S,
                "process": 0,
                "type": "info",
                "f": "txn",
                "value": [["send", 1, [4, 5]]],
            },
            {
                "time": 4 * S,
                "process": 1,
                "type": "ok",
                "f": "send",
                "value": [["send", 2, [0, 6]]],
            },
        ],
    )
    assert writer_ops(h, [2, 3, 9]) == {
        2: WriterOp(2, 0, "info", 1.0, 3.0, "p-w0"),
        3: WriterOp(3, 1, "ok", 2.0, 4.0, None),
    }
    assert writer_ops(h, []) == {}


def test_the_coordinator_partitions_are_counted_from_the_logs() -> None:
    def at(text: str) -> LogLine:
        return LogLine("n1", 0.0, "INFO", text)

    assert txn_state_partitions([at("Loading from __transaction_state-2 now")]) == 3
    assert txn_state_partitions([at("__transaction_state-0"), at("__transaction_state-49,")]) == 50
    assert txn_state_partitions([at("nothing"), at("__transaction_state-x")]) is None


def test_the_time_line_names_the_coordinator_partition_and_folds_repeats() -> None:
    op = WriterOp(7, 3, "info", 10.0, 20.0, "p-w0")  # Utils.abs(hash("p-w0")) % 3 == 0
    wall0 = 1000.0
    lines = [
        LogLine("n2", wall0 + 12, "INFO", "Leader __transaction_state-0 starts at leader epoch 0"),
        LogLine("n1", wall0 + 13, "INFO", "Leader __transaction_state-2 starts at leader epoch 0"),
        LogLine("n3", wall0 + 14, "WARN", "marker for p-w0 failed"),
        LogLine("n3", wall0 + 15, "WARN", "marker for p-w0 failed"),
        LogLine("n3", wall0 + 99, "INFO", "p-w0 too late"),
    ]
    text = story_text(lines, op, ["t-0"], wall0)
    assert (
        "transactional id p-w0 (coordinator partition __transaction_state-0), 5.0-50.0 s:"
        in text[0]
    )
    assert text[1:] == [
        "    12.000 s  n2   INFO  Leader __transaction_state-0 starts at leader epoch 0",
        "    14.000 s  n3   WARN  marker for p-w0 failed  (x2, until 15.000 s)",
    ]
