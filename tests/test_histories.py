"""history.jsonl reader and writer: exact errors for malformed input, torn lines, durability."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from ktrial.histories import (
    HistoryError,
    HistoryWriter,
    Op,
    Poll,
    Send,
    TornLineWarning,
    iter_history,
    read_history,
)
from ktrial.histories.jsonl import op_from_json

GOOD = {
    "index": 0,
    "time": 5,
    "process": 0,
    "type": "ok",
    "f": "send",
    "value": [["send", 1, [3, 7]]],
}


def lines(tmp_path: Path, *ls: str | bytes) -> Path:
    p = tmp_path / "history.jsonl"
    p.write_bytes(b"".join(x if isinstance(x, bytes) else x.encode() for x in ls))
    return p


def error_of(path: Path) -> HistoryError:
    with pytest.raises(HistoryError) as e:
        list(iter_history(path))
    return e.value


def test_round_trip_and_normalisation(tmp_path: Path) -> None:
    poll = {
        "index": 1,
        "time": 6,
        "process": 1,
        "type": "ok",
        "f": "poll",
        "value": [["poll", {"1": [[3, 7], [4, 8]]}]],
        "poll_ms": 100,
    }
    (op1, op2) = read_history(lines(tmp_path, json.dumps(GOOD) + "\n", json.dumps(poll) + "\n"))
    assert op1.value == [Send("1", 7, 3)]  # keys become strings
    assert isinstance(op2.value[0], Poll)
    assert [tuple(r) for r in op2.value[0].records["1"]] == [(3, 7), (4, 8)]
    assert op2.extra == {"poll_ms": 100}
    assert op_from_json(op2.to_json(), 0).to_json() == op2.to_json()


def test_queen_negative_offset_means_unknown() -> None:
    op = op_from_json({**GOOD, "value": [["send", 1, [-1, 7]]]}, 0)
    assert op.value == [Send("1", 7, None)]
    op = op_from_json({**GOOD, "f": "poll", "value": [["poll", {"1": [[-1, 7], [None, 8]]}]]}, 0)
    assert [list(r) for r in op.value[0].records["1"]] == [[None, 7], [None, 8]]


def test_jepsen_keyword_spellings_are_accepted() -> None:
    op = op_from_json({**GOOD, "type": ":ok", "f": ":send", "value": [[":send", 1, [3, 7]]]}, 0)
    assert (op.type, op.f, op.value) == ("ok", "send", [Send("1", 7, 3)])


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"index": 1, "type": "ok", "process": 0, "f": "se', "invalid JSON"),
        (json.dumps({**GOOD, "type": "done"}), "unknown op type 'done'"),
        (json.dumps({**GOOD, "value": [["send", 1]]}), "send micro-op"),
        (json.dumps({**GOOD, "value": [["frob", 1, 2]]}), "unknown function 'frob'"),
        (json.dumps({**GOOD, "f": "poll", "value": [["poll", [1, 2]]]}), "must be a map"),
        (
            json.dumps({**GOOD, "f": "poll", "value": [["poll", {"1": [[1, 2, 3]]}]]}),
            "[offset, value]",
        ),
        (
            json.dumps({**GOOD, "f": "poll", "value": [["poll", {"1": [[1.5, 2]]}]]}),
            "polled offset",
        ),
        (json.dumps({**GOOD, "value": "send 1 7"}), "list of micro-ops"),
        (json.dumps([1, 2]), "JSON object"),
    ],
)
def test_malformed_line_names_file_line_and_reason(tmp_path: Path, line: str, reason: str) -> None:
    p = lines(tmp_path, json.dumps(GOOD) + "\n", line + "\n", json.dumps(GOOD) + "\n")
    e = error_of(p)
    assert e.line == 2 and e.path == str(p)
    assert reason in e.reason, e.reason
    assert str(e).startswith(f"{p}:2: ")


def test_binary_garbage(tmp_path: Path) -> None:
    p = lines(
        tmp_path, json.dumps(GOOD) + "\n", b"\x00\xff\xfe\x01binary\n", json.dumps(GOOD) + "\n"
    )
    e = error_of(p)
    assert e.line == 2 and "binary" in e.reason


def test_torn_last_line_is_skipped_with_warning(tmp_path: Path) -> None:
    p = lines(tmp_path, json.dumps(GOOD) + "\n", json.dumps(GOOD)[:30])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ops = read_history(p)
    assert len(ops) == 1
    assert any(issubclass(w.category, TornLineWarning) and ":2:" in str(w.message) for w in caught)


def test_truncated_line_mid_file_is_an_error_not_a_torn_line(tmp_path: Path) -> None:
    p = lines(tmp_path, json.dumps(GOOD)[:30] + "\n", json.dumps(GOOD) + "\n")
    assert error_of(p).line == 1


def test_blank_lines_are_ignored_and_line_numbers_stay_true(tmp_path: Path) -> None:
    p = lines(
        tmp_path, "\n", json.dumps(GOOD) + "\n", "\n", json.dumps({**GOOD, "type": "x"}) + "\n"
    )
    assert error_of(p).line == 4


def test_writer_flushes_each_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        w.append(Op(0, 1, 0, "invoke", "send", [Send("1", 7, None)]))
        # Visible to a reader before close: flushed per line.
        assert [o.f for o in read_history(path)] == ["send"]
        w.append(Op(0, 2, 0, "ok", "send", [Send("1", 7, 3)]))
    ops = read_history(path)
    assert [o.index for o in ops] == [0, 1]
    assert ops[1].value == [Send("1", 7, 3)]


WRITER = """
import sys, time
from ktrial.histories import HistoryWriter, Op, Send
w = HistoryWriter(sys.argv[1])
i = 0
while True:
    w.append(Op(0, i, i % 4, "ok", "send", [Send("1", i, i)]))
    i += 1
    if i == 200:
        print("ready", flush=True)
    if i > 200:
        time.sleep(0.001)
"""


def test_history_of_a_killed_writer_is_readable(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        ops = read_history(path)
    assert len(ops) >= 200
    assert [o.index for o in ops] == list(range(len(ops)))


def test_checker_accepts_ops_built_in_code() -> None:
    from ktrial.checker import check

    ops: list[Any] = [
        Op(0, 0, 0, "ok", "send", [Send("1", 7, 0)]),
        Op(1, 1, 1, "ok", "poll", [Poll({"1": [(0, 7)]})]),
    ]
    assert check(ops)["valid"] is True
