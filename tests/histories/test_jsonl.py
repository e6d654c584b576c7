"""The history.jsonl reader and writer (histories/jsonl.py): round trips, exact errors
for malformed input (file:line: reason, exit 254 from `ktrial check`, the same message
from the strict reader), torn lines, a killed writer, empty and compressed files."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import check_file
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
from ktrial.histories.jsonl import iter_flat, op_from_json
from ktrial.tests.checker.common import assert_refused, run_main
from ktrial.tests.histories.common import (
    GOOD_TEXT,
    P1,
    S0,
    core,
    corpus,
    dump_lines,
    line_of,
    strict_only,
)

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
    assert isinstance(op2.value[0], Poll) and op2.value[0].records is not None
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


REJECTED: list[tuple[str, bytes, int, str]] = [
    ("torn-middle-line", (S0[:40] + "\n" + P1 + "\n").encode(), 1, "invalid JSON"),
    ("binary-nul", GOOD_TEXT.encode() + b"\x00\x01\x02\n", 3, "binary data"),
    (
        "latin-1",
        GOOD_TEXT.encode()
        + '{"process":0,"type":"ok","f":"send","value":[["send","é",[1,2]]]}\n'.encode("latin-1"),
        3,
        "not JSON text",
    ),
    (
        "unknown-type",
        (GOOD_TEXT + line_of(type="done", value=[]) + "\n").encode(),
        3,
        "unknown op type",
    ),
    ("no-f", (GOOD_TEXT + '{"process":0,"type":"ok"}\n').encode(), 3, 'field "f"'),
    (
        "bad-micro-op",
        (GOOD_TEXT + line_of(value=[["fetch", 1]]) + "\n").encode(),
        3,
        "unknown function",
    ),
    (
        "float-offset",
        (GOOD_TEXT + line_of(value=[["send", 1, [1.5, 2]]]) + "\n").encode(),
        3,
        "must be an integer or null",
    ),
    (
        "value-beyond-64-bits",
        (GOOD_TEXT + line_of(value=[["send", 1, [1, 2**70]]]) + "\n").encode(),
        3,
        "beyond 64 bits",
    ),
    (
        "bool-polled-value",
        (GOOD_TEXT + line_of(f="poll", value=[["poll", {"1": [[1, True]]}]]) + "\n").encode(),
        3,
        "must be an integer or a string",
    ),
    (
        "data-value-not-a-list",
        (GOOD_TEXT + line_of(value="x") + "\n").encode(),
        3,
        "list of micro-ops",
    ),
    ("line-is-a-list", (GOOD_TEXT + "[1, 2]\n").encode(), 3, "JSON object"),
    (
        "nested-too-deep",
        (GOOD_TEXT + line_of(value=[]).replace("[]", "[" * 3000 + "]" * 3000) + "\n").encode(),
        3,
        "depth",
    ),
    (
        "blank-lines-count",
        ("\n\n" + S0 + "\r\n\r\n" + line_of(type="x") + "\n").encode(),
        5,
        "unknown op type",
    ),
]


@pytest.mark.parametrize(
    ("content", "line", "reason"), [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED]
)
def test_malformed_jsonl_exit_254_names_file_line_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, line: int, reason: str
) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes(content)
    err = assert_refused(h, line, reason, capsys)
    with strict_only(), pytest.raises(HistoryError) as e:  # the same message without msgspec
        list(iter_flat(h))
    assert str(e.value) in err


def test_torn_last_line_is_skipped_with_a_warning_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hname, ops = corpus()[0]
    lines = [json.dumps(o) for o in ops]
    canon = tmp_path / "canon" / "history.jsonl"
    canon.parent.mkdir()
    canon.write_bytes(dump_lines(lines))
    torn = tmp_path / "torn" / "history.jsonl"
    torn.parent.mkdir()
    torn.write_bytes(dump_lines(lines) + b'{"index": 99999, "time": 1, "process": 0, "ty')
    rc, out, err = run_main(["check", str(torn), "--json"], capsys)
    assert f"warning: {torn}:{len(lines) + 1}: last line is torn" in err
    want = core(check_file(canon))
    assert core(json.loads(out)) == want
    assert rc == {True: 0, False: 1, "unknown": 2}[want["valid"]]


@pytest.mark.parametrize(
    "content",
    [b"", b"\n\n  \n", b"\r\n"],
    ids=["empty", "blank-lines", "one-crlf"],
)
def test_empty_history_is_unknown_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes(content)
    rc, out, err = run_main(["check", str(h), "--json"], capsys)
    assert rc == 2, err
    res = json.loads(out)
    assert res["valid"] == "unknown" and res["stats"]["ops"] == 0


def test_only_nemesis_ops_is_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes(
        dump_lines(
            [
                json.dumps({"process": "nemesis", "type": t, "f": f, "value": v})
                for t, f, v in [
                    ("info", "start-partition", {"isolate": ["n1"]}),
                    ("invoke", "kill", None),
                    ("info", "stop-partition", [[1, 2], "x"]),
                ]
            ]
        )
    )
    rc, out, err = run_main(["check", str(h), "--json"], capsys)
    assert rc == 2, err
    res = json.loads(out)
    assert res["valid"] == "unknown"
    assert res["stats"]["nemesis_ops"] == 3 and res["stats"]["client_ops"] == 0


def test_gzip_history_is_a_clear_error_whatever_its_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = b"".join(
        (
            json.dumps(
                {
                    "index": j,
                    "time": j,
                    "process": 0,
                    "type": "ok",
                    "f": "send",
                    "value": [["send", 1, [j, j]]],
                }
            )
            + "\n"
        ).encode()
        for j in range(3)
    )
    gz = gzip.compress(raw, mtime=0)
    assert b"\n" not in gz  # as most small compressed files
    h = tmp_path / "history.jsonl.gz"
    h.write_bytes(gz)
    rc, _out, err = run_main(["check", str(h)], capsys)
    assert rc == 254, err
    assert f"{h}:1: " in err and "binary" in err


def test_large_gzip_history_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(3)
    raw = b"".join(
        (
            line_of(index=i, value=[["send", rng.randrange(99), [i, rng.randrange(1 << 40)]]])
            + "\n"
        ).encode()
        for i in range(300)
    )
    gz = gzip.compress(raw, mtime=0)
    assert b"\n" in gz
    h = tmp_path / "history.jsonl.gz"
    h.write_bytes(gz)
    rc, _out, err = run_main(["check", str(h)], capsys)
    assert rc == 254, err
    assert f"{h}:1: " in err and "binary" in err and "Traceback" not in err


def test_classic_mac_line_endings_never_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CR-only line ends (ambiguity: today the whole file is one 'torn last line')."""
    h = tmp_path / "history.jsonl"
    h.write_bytes(GOOD_TEXT.replace("\n", "\r").encode())
    rc, _out, err = run_main(["check", str(h)], capsys)
    assert rc in (2, 254) and "Traceback" not in err
