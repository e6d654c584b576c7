"""`ktrial check` (commands/check.py): exit codes 0/1/2/254, results.json, the human
summary, options from test.json and the command line, and odd or malformed input
(file:line: reason, never a traceback); its --help, bad option values (usage errors,
never a crash), what goes to stdout and stderr, and --out. What it accepts as a PATH
and beside it (run directories, store layouts, test.json) is in test_check_inputs.py;
exit codes are in docs/design.md (0 valid, 1 invalid, 2 unknown, 254 usage error,
255 crash).
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
from ktrial.tests.checker.common import (
    G1A,
    assert_refused,
    poll_pair,
    run_check,
    run_main,
    send_pair,
    usage_error,
    write_as_is,
)
from ktrial.tests.checker.factcheck import fact_check
from ktrial.tests.histlines import Line, examples, fail, info, inv, numbered, ok, pl, snd
from ktrial.tests.histlines import write as write_numbered

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
    assert_refused(h, line, reason, capsys)


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


def test_cli_rechecks_a_runs_background_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ktrial check RUN_DIR` judges the load.jsonl beside the history, as the run's own
    check did (it once dropped the `behind` check on a re-check); a broken one warns."""
    (tmp_path / "history.jsonl").write_bytes(jsonl(SEND_POLL))
    seconds = [
        {
            "type": "second",
            "t": t,
            "time": 1000.0 + t,
            "offered": 1000,
            "produced": 1000,
            "consumed": 1000 if t <= 10 else 500,
            "consumers": [500, 500 if t <= 10 else 0],
        }
        for t in range(1, 31)
    ]
    (tmp_path / "load.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in [{"type": "start", "time": 1000.0}, *seconds])
    )
    rc, out, _ = run_main(["check", str(tmp_path), "--json"], capsys)
    live = json.loads(out)["metrics"]["liveness"]
    assert rc == 0 and live["checks"]["behind"]["ok"] is False  # reported, not judged
    assert [c["idle_windows"] for c in live["load"]["consumers"]] == [0, 2]
    assert run_main(["check", str(tmp_path), "--liveness-bad"], capsys)[0] == 1
    (tmp_path / "load.jsonl").write_text("{broken\n{}\n")
    rc, out, _ = run_main(["check", str(tmp_path), "--json"], capsys)
    res = json.loads(out)
    assert rc == 0 and "behind" not in res["metrics"]["liveness"]["checks"]
    assert any("background load was not judged" in w for w in res["warnings"])


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
    assert json.loads((tmp_path / "h.results.json").read_text())["bad_error_types"] == ["G1a"]


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


# ================================================================ help, usage errors, output


VALID_RUN = [
    inv(0, "send", [["send", 1, 10]]),
    ok(0, "send", [snd(1, 0, 10)]),
    inv(1, "poll", [["poll"]]),
    ok(1, "poll", [pl({"1": [[0, 10]]})]),
]
UNKNOWN_RUN = [ok(0, "send", [snd(1, 0, 10)])]  # nothing read: nothing could be checked
# Several bad types at once: G1a, duplicate, int-poll-skip, lost-write, unseen.
MANY = [
    ok(0, "send", [snd(1, 0, 10)]),
    ok(0, "send", [snd(1, 1, 11)]),
    ok(0, "send", [snd(1, 2, 12)]),
    fail(2, "txn", [snd(2, 0, 20)]),
    ok(1, "poll", [pl({"1": [[0, 10], [2, 12], [3, 10]], "2": [[0, 20]]})]),
]
HISTORIES = {"valid": (VALID_RUN, 0), "invalid": (G1A, 1), "unknown": (UNKNOWN_RUN, 2)}


def test_check_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    from ktrial.commands.check import check as check_cmd

    rc, out, _ = run_main(["check", "--help"], capsys)
    assert rc == 0
    opts = [o for p in check_cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
    assert len(opts) >= 16
    for o in opts:
        assert o in out, o
    assert "254" in out and "0 valid" in out


# ================================================================ usage errors


@pytest.mark.parametrize(
    "args",
    [
        ["--sub-via", "foo"],
        ["--sub-via", ""],
        ["--window", "-1"],
        ["--window", "abc"],
        ["--window", "0"],
        ["--cycle-timeout", "0"],
        ["--cycle-timeout", "-5"],
        ["--cycle-timeout", "ten"],
        ["--max-examples", "-1"],
        ["--max-examples", "2.5"],
        ["--starvation-ratio", "1.5"],
        ["--starvation-ratio", "0"],
        ["--starvation-min-offered", "0"],
        ["--starvation-lag", "-1"],
        ["--stuck-after", "0"],
        ["--recovery-within", "-1"],
        ["--memory-growth", "-0.1"],
        ["--memory-growth-mib", "-1"],
        ["--memory-growth-mib", "lots"],
        ["--bogus"],
        ["--out"],
        ["--ww-deps=yes"],
    ],
    ids=lambda a: " ".join(a),
)
def test_bad_option_values_are_usage_errors(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", G1A)
    rc, out, err = run_main(["check", str(h), *args], capsys)
    assert usage_error(rc, out, err), (rc, out, err)
    assert not (tmp_path / "results.json").exists()  # nothing checked, nothing written


@pytest.mark.parametrize("argv", [["check"], ["check", "a", "b"], ["chek", "x"]])
def test_bad_arguments_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_main(argv, capsys)
    assert usage_error(rc, out, err), (rc, out, err)


def test_usage_error_through_python_dash_m(tmp_path: Path) -> None:
    h = write_numbered(tmp_path / "h.jsonl", VALID_RUN)
    p = subprocess.run(
        [sys.executable, "-m", "ktrial", "check", str(h), "--sub-via", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert p.returncode == 254 and p.stdout == "" and "Traceback" not in p.stderr
    assert "'--sub-via'" in p.stderr


# Out-of-range floats that click's FloatRange lets through (inf, 1e300, nan).
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--window", "inf"], id="window-inf"),
        pytest.param(["--window", "1e300"], id="window-1e300"),
        pytest.param(["--stuck-after", "inf"], id="stuck-inf"),
        pytest.param(["--starvation-lag", "inf"], id="lag-inf"),
        pytest.param(["--starvation-lag", "1e300"], id="lag-1e300"),
        pytest.param(["--starvation-lag", "nan"], id="lag-nan"),
        pytest.param(["--memory-growth-mib", "inf"], id="mib-inf"),
        pytest.param(["--memory-growth-mib", "1e300"], id="mib-1e300"),
        pytest.param(["--max-examples", str(10**20)], id="max-examples-1e20"),
    ],
)
def test_huge_or_infinite_thresholds_do_not_crash(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", VALID_RUN)
    rc, out, err = run_main(["check", str(h), "--out", str(tmp_path / "r.json"), *args], capsys)
    # Either "no limit" (the check runs: VALID_RUN, 0) or a usage error (254); never a crash.
    assert "Traceback" not in err and "crashed" not in err, err[-300:]
    assert rc == 0 or usage_error(rc, out, err), (rc, err[-300:])


def test_infinite_cycle_timeout_and_recovery_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", G1A)
    for args in (
        ["--cycle-timeout", "1e308"],
        ["--cycle-timeout", "inf"],
        ["--recovery-within", "inf"],
    ):
        rc, out, err = run_main(["check", str(h), *args], capsys)
        assert rc == 1 and "INVALID" in out and "Traceback" not in err, (args, err)


@pytest.mark.parametrize(
    "args",
    [["--cycle-timeout", "nan"], ["--memory-growth", "nan"]],
    ids=lambda a: " ".join(a),
)
def test_nan_thresholds_are_usage_errors(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", VALID_RUN)
    rc, out, err = run_main(["check", str(h), "--out", str(tmp_path / "r.json"), *args], capsys)
    assert usage_error(rc, out, err), (rc, out, err)


def test_nan_window_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = write_numbered(tmp_path / "h.jsonl", VALID_RUN)
    for args in (["--window", "nan"], ["--stuck-after", "nan"], ["--starvation-ratio", "nan"]):
        rc, out, err = run_main(["check", str(h), *args], capsys)
        assert usage_error(rc, out, err), (args, rc, err)


def test_bad_cli_value_message_names_the_option_not_test_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", VALID_RUN)
    rc, _, err = run_main(["check", str(h), "--window", "nan"], capsys)
    assert rc == 254
    assert not err.startswith("Error: None:"), err
    assert "--window" in err, err
    (tmp_path / "test.json").write_text("{}")
    rc, _, err = run_main(["check", str(h), "--stuck-after", "nan"], capsys)
    assert rc == 254 and "test.json" not in err and "--stuck-after" in err, err


@pytest.mark.parametrize("meta", [{"liveness_window_s": 1e300}, {"checker": {"stuck_s": 1e300}}])
def test_test_json_huge_threshold_is_not_a_crash(
    tmp_path: Path, meta: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    write_numbered(tmp_path / "history.jsonl", VALID_RUN)
    (tmp_path / "test.json").write_text(json.dumps(meta))
    rc, out, err = run_main(["check", str(tmp_path)], capsys)
    assert "Traceback" not in err, err[-300:]
    assert rc == 0 or usage_error(rc, out, err), (rc, err[-300:])


def test_test_json_bad_threshold_is_a_usage_error_naming_test_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_numbered(tmp_path / "history.jsonl", VALID_RUN)
    (tmp_path / "test.json").write_text(json.dumps({"liveness_window_s": -1}))
    rc, out, err = run_main(["check", str(tmp_path)], capsys)
    assert usage_error(rc, out, err) and "test.json" in err and "liveness_window_s" in err


def test_command_line_overrides_a_bad_test_json_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_numbered(tmp_path / "history.jsonl", VALID_RUN)
    (tmp_path / "test.json").write_text(json.dumps({"liveness_window_s": -1}))
    rc, out, err = run_main(["check", str(tmp_path), "--window", "5"], capsys)
    assert rc == 0 and "VALID" in out, err


# ================================================================ verdicts, stdout/stderr


@pytest.mark.parametrize("name", sorted(HISTORIES))
@pytest.mark.parametrize("as_json", [False, True])
def test_exit_code_equals_verdict(
    tmp_path: Path, name: str, as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, code = HISTORIES[name]
    h = write_numbered(tmp_path / "h.jsonl", lines)
    rc, out, err = run_main(["check", str(h), *(["--json"] if as_json else [])], capsys)
    assert rc == code, (rc, out, err)
    written = json.loads((tmp_path / "h.results.json").read_text())
    assert written["valid"] == {0: True, 1: False, 2: "unknown"}[code]
    if as_json:
        assert json.loads(out) == written  # stdout is exactly the results, nothing else
    else:
        verdict = {0: "VALID", 1: "INVALID", 2: "UNKNOWN"}[code]
        assert out.splitlines()[0] == f"{h}: {verdict}"
        assert out.rstrip().endswith(f"results: {tmp_path / 'h.results.json'}")
    assert err == ""


def test_summary_names_each_type_with_count_and_an_explained_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", MANY)
    rc, out, _ = run_main(["check", str(h)], capsys)
    res = json.loads((tmp_path / "h.results.json").read_text())
    assert rc == 1
    assert set(res["bad_error_types"]) >= {"G1a", "duplicate", "lost-write", "unseen"}
    lines = out.splitlines()
    for name in res["error_types"]:
        i = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"BAD {name}:"))
        assert lines[i].strip() == f"BAD {name}: {res['anomalies'][name]['count']}"
        assert lines[i + 1].strip().startswith("e.g. ")
    text = out
    assert "value 20 of key 2 at offset 0" in text and "op 3" in text  # G1a
    assert "Value 10 of key 1 sits at 2 offsets (0, 3)" in text  # duplicate
    assert "sent value 11 to key 1" in text and "offset 1" in text  # lost-write


def test_max_examples_caps_examples_not_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [fail(0, "txn", [snd(2, i, 20 + i)]) for i in range(3)]
    lines.append(ok(1, "poll", [pl({"2": [[i, 20 + i] for i in range(3)]})]))
    h = write_numbered(tmp_path / "h.jsonl", lines)
    for n, shown in ((1, 1), (0, 0), (50, 3)):
        rc, out, _ = run_main(["check", str(h), "--json", "--max-examples", str(n)], capsys)
        a = json.loads(out)["anomalies"]["G1a"]
        assert rc == 1 and a["count"] == 3 and len(a["examples"]) == shown


def test_json_output_pipes_with_a_torn_line_warning_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", G1A)
    with h.open("a") as fh:
        fh.write('{"index": 2, "ti')
    rc, out, err = run_main(["check", str(h), "--json"], capsys)
    assert rc == 1 and json.loads(out)["bad_error_types"] == ["G1a"]
    assert err.startswith("warning: ") and f"{h}:3" in err and "torn" in err


def test_json_through_a_real_pipe_is_pure_json(tmp_path: Path) -> None:
    h = write_numbered(tmp_path / "h.jsonl", G1A)
    p = subprocess.run(
        [sys.executable, "-m", "ktrial", "check", str(h), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1
    assert json.loads(p.stdout)["valid"] is False
    assert "Traceback" not in p.stderr


# ================================================================ options take effect


def test_sub_via_and_ww_deps_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A consumer's next read jumps past offset 1: poll-skip, bad only under assign.
    lines = [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(0, "send", [snd(1, 1, 11)]),
        ok(0, "send", [snd(1, 2, 12)]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
        ok(1, "poll", [pl({"1": [[2, 12]]})]),
        ok(2, "poll", [pl({"1": [[0, 10], [1, 11], [2, 12]]})]),
    ]
    write_numbered(tmp_path / "history.jsonl", lines)
    (tmp_path / "test.json").write_text(json.dumps({"workload": {"sub_via": "assign"}}))
    rc, out, _ = run_main(["check", str(tmp_path), "--json"], capsys)
    res = json.loads(out)
    assert rc == 1 and res["bad_error_types"] == ["poll-skip"]
    assert res["stats"]["options"]["sub_via"] == "assign"
    rc, out, _ = run_main(["check", str(tmp_path), "--json", "--sub-via", "subscribe"], capsys)
    res = json.loads(out)
    assert rc == 0 and "poll-skip" in res["error_types"] and res["bad_error_types"] == []
    assert res["stats"]["options"]["sub_via"] == "subscribe"
    for flag, want in (("--no-ww-deps", False), ("--ww-deps", True)):
        rc, out, _ = run_main(["check", str(tmp_path), flag], capsys)
        assert f"ww_deps={want}" in out


def test_liveness_thresholds_and_liveness_bad(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # value 10 acknowledged at ~0 s, first read 5 s later
    lines = [
        inv(0, "send", [["send", 1, 10]]),
        ok(0, "send", [snd(1, 0, 10)]),
        inv(1, "poll", [["poll"]]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
    ]
    h = tmp_path / "h.jsonl"
    h.write_text(
        "".join(
            json.dumps({"index": i, "time": t, **o}) + "\n"
            for i, (t, o) in enumerate(
                zip((0, 1_000_000, 5 * 10**9, 5 * 10**9 + 1), lines, strict=True)
            )
        )
    )
    rc, out, _ = run_main(["check", str(h)], capsys)
    assert rc == 0 and "stuck-partition" not in out  # default 30 s
    rc, out, _ = run_main(["check", str(h), "--stuck-after", "1"], capsys)
    assert rc == 0 and "warn liveness stuck-partition: 1" in out and "key 1" in out
    assert "--liveness-bad" in out
    rc, out, _ = run_main(["check", str(h), "--stuck-after", "1", "--liveness-bad"], capsys)
    assert rc == 1 and "BAD  liveness stuck-partition: 1" in out and "value 10" in out
    rc, out, _ = run_main(
        ["check", str(h), "--stuck-after", "1", "--liveness-bad", "--json"], capsys
    )
    assert rc == 1 and json.loads(out)["bad_error_types"] == ["stuck-partition"]
    (tmp_path / "test.json").write_text(json.dumps({"liveness_bad": True, "stuck_s": 1}))
    rc, _, _ = run_main(["check", str(h)], capsys)
    assert rc == 1
    rc, _, _ = run_main(["check", str(h), "--no-liveness-bad"], capsys)
    assert rc == 0
    rc, _, _ = run_main(["check", str(h), "--stuck-after", "10"], capsys)
    assert rc == 0


def test_tiny_cycle_timeout_makes_a_cycle_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        ok(0, "txn", [snd(1, 0, 1), pl({"2": [[0, 2]]})]),
        ok(1, "txn", [snd(2, 0, 2), pl({"1": [[0, 1]]})]),
    ]
    h = write_numbered(tmp_path / "h.jsonl", lines)
    rc, out, _ = run_main(["check", str(h)], capsys)
    assert rc == 1 and "G1c" in out
    rc, out, _ = run_main(["check", str(h), "--cycle-timeout", "1e-12"], capsys)
    assert rc == 2 and "UNKNOWN" in out and "cycle-search-timeout: 1" in out and "op 0" in out


# ================================================================ --out and results.json


def test_out_to_a_file_writes_there_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", G1A)
    out_file = tmp_path / "elsewhere.json"
    rc, out, _ = run_main(["check", str(h), "--out", str(out_file)], capsys)
    assert rc == 1 and f"results: {out_file}" in out
    assert json.loads(out_file.read_text())["bad_error_types"] == ["G1a"]
    assert not (tmp_path / "results.json").exists()


def test_out_to_a_directory_keeps_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", G1A)
    d = tmp_path / "outdir"
    d.mkdir()
    rc, out, _ = run_main(["check", str(h), "--out", str(d)], capsys)
    assert rc == 1 and "INVALID" in out


@pytest.mark.parametrize("where", ["missing-parent", "under-a-file"])
def test_unwritable_out_keeps_verdict_and_warns(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_numbered(tmp_path / "h.jsonl", G1A)
    (tmp_path / "afile").write_text("x")
    target = tmp_path / ("no/such/dir/r.json" if where == "missing-parent" else "afile/r.json")
    for extra in ([], ["--json"]):
        rc, out, err = run_main(["check", str(h), "--out", str(target), *extra], capsys)
        assert rc == 1, (rc, err)
        assert ("INVALID" in out) if not extra else (json.loads(out)["valid"] is False)
        assert str(target) in err and "Traceback" not in err


def test_unwritable_out_message_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pins today's behaviour (254, a one-line reason naming the path, no traceback)."""
    h = write_numbered(tmp_path / "h.jsonl", VALID_RUN)
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "r.json"
    rc, out, err = run_main(["check", str(h), "--out", str(target)], capsys)
    if rc == 254:
        assert out == "" and f"{target}: cannot write results" in err and "Traceback" not in err
    else:  # after a fix: the verdict with a warning
        assert rc == 0 and str(target) in err


def test_unwritable_default_results_location_keeps_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As root nothing is read-only, so block the default path: results.json is a directory.
    write_numbered(tmp_path / "history.jsonl", G1A)
    (tmp_path / "results.json").mkdir()
    rc, out, err = run_main(["check", str(tmp_path)], capsys)
    assert rc == 1 and "INVALID" in out and "G1a" in out
    assert "results.json" in err and "warning" in err.lower()


def test_two_histories_in_one_folder_keep_their_own_results(tmp_path: Path) -> None:
    """A bare history FILE.jsonl gets FILE.results.json beside it (checking another history
    in the same folder must not overwrite it); a run directory's history.jsonl gets the
    run's results.json; the summary prints the full path written."""
    a = write(tmp_path / "a.jsonl", INVALID)
    b = write(tmp_path / "b.jsonl", UNKNOWN)
    assert invoke(str(a)).exit_code == 1
    r = invoke(str(b))
    assert r.exit_code == 2
    assert json.loads((tmp_path / "a.results.json").read_text())["valid"] is False
    assert json.loads((tmp_path / "b.results.json").read_text())["valid"] == "unknown"
    assert f"results: {(tmp_path / 'b.results.json').absolute()}" in r.output
    assert not (tmp_path / "results.json").exists()
    run = tmp_path / "run"
    run.mkdir()
    h = write(run / "history.jsonl", INVALID)
    assert invoke(str(h)).exit_code == 1
    assert json.loads((run / "results.json").read_text())["valid"] is False
