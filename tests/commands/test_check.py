"""`ktrial check` (commands/check.py): exit codes 0/1/2/254, results.json, the human
summary, options from test.json and the command line, and odd or malformed input
(file:line: reason, never a traceback).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ktrial.cli import cli
from ktrial.tests.checker.boundary_cases import case
from ktrial.tests.checker.common import poll_pair, run_check, run_main, send_pair, write_as_is
from ktrial.tests.checker.factcheck import fact_check
from ktrial.tests.histlines import Line, examples, fail, info, inv, numbered, ok, pl, snd

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
    rc, out, err = run_main(["check", str(h), "--json"], capsys)
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
    rc, _out, err = run_main(["check", str(h)], capsys)
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
    rc_plain, out_plain, _ = run_main(["check", str(plain), "--json"], capsys)
    rc_bom, out_bom, err = run_main(["check", str(bom), "--json"], capsys)
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
    assert run_main(["check", str(tmp_path)], capsys)[0] == 1
    (tmp_path / "test.json").write_text(json.dumps({"options": {"sub-via": ":subscribe"}}))
    rc, out, _ = run_main(["check", str(tmp_path), "--json"], capsys)
    assert rc == 0 and json.loads(out)["stats"]["options"]["sub_via"] == "subscribe"
    assert run_main(["check", str(tmp_path), "--sub-via", "assign"], capsys)[0] == 1
    (tmp_path / "test.json").write_text(json.dumps({"checker": {"ww_deps": False}}))
    rc, out, _ = run_main(["check", str(tmp_path), "--json"], capsys)
    assert json.loads(out)["stats"]["options"]["ww_deps"] is False
    (tmp_path / "test.json").write_text("[1]")
    rc, _, err = run_main(["check", str(tmp_path)], capsys)
    assert rc == 254 and "test.json" in err and "Traceback" not in err


def test_cli_directory_without_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_main(["check", str(tmp_path)], capsys)
    assert rc == 254 and "no history.jsonl" in err


def test_cli_edn_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "history.edn").write_text(
        "{:type :fail, :f :txn, :value [[:send 3 [0 5]]], :time 1, :process 0, :index 0}\n"
        "{:type :info, :f :kill, :value :majority, :time 2, :process :nemesis, :index 1}\n"
        "#jepsen.history.Op{:index 2, :time 3, :type :ok, :process 1, :f :poll, "
        ":value [[:poll {3 [[0 5]]}]]}\n"
    )
    rc, out, _ = run_main(["check", str(tmp_path), "--json"], capsys)
    res = json.loads(out)
    assert rc == 1 and res["bad_error_types"] == ["G1a"]
    assert examples(res, "G1a")[0]["ops"] == [0, 2]  # Jepsen's indices
    (tmp_path / "history.edn").write_text("{:type :ok, :f :send, :value [[:send 3 [0 5]]]\n")
    rc, _, err = run_main(["check", str(tmp_path)], capsys)
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
    rc, _out, err = run_main(["check", str(h)], capsys)
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
    rc, _out, err = run_main(["check", str(h)], capsys)
    assert rc == 254 and f"{h}:1:" in err and "beyond 64 bits" in err, err


def test_cli_deeply_nested_value_in_an_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = tmp_path / "h.jsonl"
    deep = "[" * 5000 + "]" * 5000
    h.write_text(
        '{"index":0,"time":0,"process":"nemesis","type":"info","f":"kill","value":' + deep + "}\n"
    )
    rc, _out, err = run_main(["check", str(h)], capsys)
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
        rc, out, _ = run_main(["check", str(h), "--json"], capsys)
        assert rc == 1 and json.loads(out)["bad_error_types"] == ["G1a"], extra


def test_human_summary_prints_each_type_with_count_and_an_explained_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = numbered(
        *[
            *send_pair(1, "x", 0, 1),
            *send_pair(1, "x", 1, 2),
            *send_pair(1, "x", 2, 3),
            *poll_pair(2, {"x": [[0, 1], [2, 3]]}),
            *poll_pair(3, {"x": [[0, 9]]}),
            *poll_pair(4, {"y": [[0, 5]]}),
            *send_pair(5, "y", 0, 5),
        ]
    )
    write_as_is(tmp_path / "history.jsonl", lines)
    code, out, _ = run_main(["check", str(tmp_path)], capsys)
    assert code == 1, out
    res = json.loads((tmp_path / "results.json").read_text())
    assert {"lost-write", "inconsistent-offsets", "int-poll-skip", "G1c-realtime"} <= set(
        res["error_types"]
    )
    for name in res["error_types"]:
        a = res["anomalies"][name]
        tag = "BAD " if name in res["bad_error_types"] else "ok  "
        assert f"  {tag}{name}: {a['count']:,}\n" in out, name
        assert "e.g. " + a["examples"][0]["explanation"] in out, name
    assert fact_check(lines, res) == []


def test_examples_are_capped_and_counts_are_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 30
    lines = numbered(
        *[
            inv(1, "send", [["send", "x", v] for v in range(n + 1)]),
            ok(1, "send", [snd("x", v, v) for v in range(n + 1)]),
            *poll_pair(2, {"x": [[n, n]]}),
        ]
    )
    for cap in (0, 3, 8):
        res = run_check(tmp_path, lines, max_examples=cap)
        a = res["anomalies"]["lost-write"]
        assert a["count"] == n and len(a["examples"]) == cap
        assert res["anomalies"]["unseen"]["count"] == n
        assert fact_check(lines, res, cap) == []
    write_as_is(tmp_path / "history.jsonl", lines)
    code, out, _ = run_main(["check", str(tmp_path), "--json", "--max-examples", "2"], capsys)
    res = json.loads((tmp_path / "results.json").read_text())
    assert code == 1 and json.loads(out) == res
    assert all(len(a["examples"]) <= 2 for a in res["anomalies"].values())
    assert res["anomalies"]["lost-write"]["count"] == n


def write(path: Path, ops: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(json.dumps({"index": i, "time": i, **o}) + "\n" for i, o in enumerate(ops))
    )
    return path


VALID = [
    {"process": 0, "type": "ok", "f": "send", "value": [["send", 1, [0, 10]]]},
    {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 10]]}]]},
]


INVALID = [
    {"process": 0, "type": "fail", "f": "txn", "value": [["send", 1, [0, 10]]]},
    {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 10]]}]]},
]


UNKNOWN = [{"process": 0, "type": "ok", "f": "send", "value": [["send", 1, [0, 10]]]}]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, ["check", *args])


def test_valid_run_directory_writes_results(tmp_path: Path) -> None:
    write(tmp_path / "history.jsonl", VALID)
    r = invoke(str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "VALID" in r.output
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["valid"] is True


def test_invalid_history_file_exit_1_and_summary_explains(tmp_path: Path) -> None:
    h = write(tmp_path / "h.jsonl", INVALID)
    r = invoke(str(h))
    assert r.exit_code == 1, r.output
    assert "INVALID" in r.output and "G1a" in r.output and "failed" in r.output
    assert json.loads((tmp_path / "results.json").read_text())["bad_error_types"] == ["G1a"]


def test_unknown_exit_2_and_json_output(tmp_path: Path) -> None:
    h = write(tmp_path / "h.jsonl", UNKNOWN)
    out = tmp_path / "r.json"
    r = invoke(str(h), "--json", "--out", str(out))
    assert r.exit_code == 2, r.output
    assert json.loads(r.output)["valid"] == "unknown"
    assert json.loads(out.read_text())["valid"] == "unknown"


def test_options_from_test_json_and_overrides(tmp_path: Path) -> None:
    ops = [
        {"process": 9, "type": "ok", "f": "send", "value": [["send", 1, [0, 10]]]},
        {"process": 9, "type": "ok", "f": "send", "value": [["send", 1, [1, 11]]]},
        {"process": 9, "type": "ok", "f": "send", "value": [["send", 1, [2, 12]]]},
        {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 10]]}]]},
        {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"1": [[2, 12]]}]]},
        {"process": 2, "type": "ok", "f": "poll", "value": [["poll", {"1": [[1, 11]]}]]},
    ]
    write(tmp_path / "history.jsonl", ops)
    (tmp_path / "test.json").write_text(json.dumps({"workload": {"sub_via": ["subscribe"]}}))
    assert invoke(str(tmp_path)).exit_code == 0  # poll-skip is expected with subscribe
    assert invoke(str(tmp_path), "--sub-via", "assign").exit_code == 1


def test_a_test_json_option_it_cannot_read_is_a_usage_error(tmp_path: Path) -> None:
    """A typo in test.json must not silently change what is bad."""
    write(tmp_path / "history.jsonl", VALID)
    test = tmp_path / "test.json"
    test.write_text(json.dumps({"sub_via": "subscibe"}))
    r = invoke(str(tmp_path))
    assert r.exit_code == 254 and "subscibe" in r.output and "--sub-via" in r.output, r.output
    assert invoke(str(tmp_path), "--sub-via", "assign").exit_code == 0  # overridden: fine
    test.write_text(json.dumps({"ww_deps": "no"}))
    r = invoke(str(tmp_path))
    assert r.exit_code == 254 and "ww_deps" in r.output, r.output
    test.write_text(json.dumps({"ww_deps": "false", "sub_via": [":assign"]}))
    assert invoke(str(tmp_path)).exit_code == 0


def test_malformed_input_exit_254_names_file_and_line(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    h.write_text(
        json.dumps(VALID[0])
        + "\n"
        + '{"process": 1, "type": "ok", "f": "po\n'
        + json.dumps(VALID[1])
        + "\n"
    )
    r = invoke(str(h))
    assert r.exit_code == 254
    assert f"{h}:2:" in r.output and "invalid JSON" in r.output
    assert "Traceback" not in r.output


def test_missing_path_and_empty_directory_exit_254(tmp_path: Path) -> None:
    assert invoke(str(tmp_path / "nope")).exit_code == 254
    r = invoke(str(tmp_path))
    assert r.exit_code == 254 and "no history.jsonl" in r.output


def test_through_the_real_entry_point(tmp_path: Path) -> None:
    h = write(tmp_path / "h.jsonl", INVALID)
    p = subprocess.run(
        [sys.executable, "-m", "ktrial", "check", str(h)], capture_output=True, text=True
    )
    assert p.returncode == 1, p.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\x00\x01\x02garbage\n" + json.dumps(VALID[0]).encode() + b"\n")
    p = subprocess.run(
        [sys.executable, "-m", "ktrial", "check", str(bad)], capture_output=True, text=True
    )
    assert p.returncode == 254 and f"{bad}:1:" in p.stderr and "Traceback" not in p.stderr
