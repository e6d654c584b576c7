"""Audit of `ktrial check` as a user meets it: help, options, output files, errors.

Runs the real entry point (`ktrial.cli.main`, which maps click's usage errors to
254) in process, or `python -m ktrial` in a subprocess where the process could hang.
Exit codes (DESIGN.md section 3): 0 valid, 1 invalid, 2 unknown, 254 usage error,
255 crash. Defects found are `xfail(strict=True)`: they pass once fixed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ktrial.cli import main
from ktrial.histories.store import create_run
from ktrial.tests.histlines import fail, inv, ok, pl, snd

Line = dict[str, Any]


# ================================================================ helpers


def write(path: Path, lines: list[Line], step_ns: int = 1_000_000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            json.dumps({"index": i, "time": i * step_ns, **o}) + "\n" for i, o in enumerate(lines)
        )
    )
    return path


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `ktrial ARGV` through the real entry point."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    cap = capsys.readouterr()
    code = e.value.code
    return (code if isinstance(code, int) else (0 if code is None else 1)), cap.out, cap.err


def usage_error(rc: int, out: str, err: str) -> bool:
    """254, nothing on stdout, an `Error:` line on stderr, no traceback."""
    return rc == 254 and out == "" and "Error:" in err and "Traceback" not in err


VALID = [
    inv(0, "send", [["send", 1, 10]]),
    ok(0, "send", [snd(1, 0, 10)]),
    inv(1, "poll", [["poll"]]),
    ok(1, "poll", [pl({"1": [[0, 10]]})]),
]
UNKNOWN = [ok(0, "send", [snd(1, 0, 10)])]  # nothing read: nothing could be checked
G1A = [
    fail(0, "txn", [snd(2, 0, 20)]),
    ok(1, "poll", [pl({"2": [[0, 20]]})]),
]
# Several bad types at once: G1a, duplicate, int-poll-skip, lost-write, unseen.
MANY = [
    ok(0, "send", [snd(1, 0, 10)]),
    ok(0, "send", [snd(1, 1, 11)]),
    ok(0, "send", [snd(1, 2, 12)]),
    fail(2, "txn", [snd(2, 0, 20)]),
    ok(1, "poll", [pl({"1": [[0, 10], [2, 12], [3, 10]], "2": [[0, 20]]})]),
]
HISTORIES = {"valid": (VALID, 0), "invalid": (G1A, 1), "unknown": (UNKNOWN, 2)}


# ================================================================ help


SUBCOMMANDS = [
    [],
    ["check"],
    ["cluster"],
    ["cluster", "install"],
    ["cluster", "up"],
    ["cluster", "status"],
    ["cluster", "down"],
    ["cluster", "clean"],
    ["report"],
    ["run"],
    ["runs"],
    ["trace"],
]


@pytest.mark.parametrize("cmd", SUBCOMMANDS, ids=lambda c: " ".join(c) or "ktrial")
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_of_every_command_prints_usage_and_exits_0(
    cmd: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = cli([*cmd, flag], capsys)
    assert rc == 0, err
    assert out.startswith("Usage: ktrial"), out[:200]
    assert "Traceback" not in out + err


def test_ktrial_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = cli(["--help"], capsys)
    for name in ("check", "cluster", "report", "run", "runs", "trace"):
        assert f"\n  {name} " in out


def test_check_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    from ktrial.commands.check import check as check_cmd

    rc, out, _ = cli(["check", "--help"], capsys)
    assert rc == 0
    opts = [o for p in check_cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
    assert len(opts) >= 16
    for o in opts:
        assert o in out, o
    assert "254" in out and "0 valid" in out


def test_version_and_no_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(["--version"], capsys)
    assert rc == 0 and out.startswith("ktrial, version ")
    rc, _, err = cli([], capsys)  # no command: help on stderr, a usage error
    assert rc == 254 and "Usage:" in err and "Traceback" not in err


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
    h = write(tmp_path / "h.jsonl", G1A)
    rc, out, err = cli(["check", str(h), *args], capsys)
    assert usage_error(rc, out, err), (rc, out, err)
    assert not (tmp_path / "results.json").exists()  # nothing checked, nothing written


@pytest.mark.parametrize("argv", [["check"], ["check", "a", "b"], ["chek", "x"]])
def test_bad_arguments_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = cli(argv, capsys)
    assert usage_error(rc, out, err), (rc, out, err)


def test_usage_error_through_python_dash_m(tmp_path: Path) -> None:
    h = write(tmp_path / "h.jsonl", VALID)
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
    h = write(tmp_path / "h.jsonl", VALID)
    rc, out, err = cli(["check", str(h), "--out", str(tmp_path / "r.json"), *args], capsys)
    # Either "no limit" (the check runs: VALID, 0) or a usage error (254); never a crash.
    assert "Traceback" not in err and "crashed" not in err, err[-300:]
    assert rc == 0 or usage_error(rc, out, err), (rc, err[-300:])


def test_infinite_cycle_timeout_and_recovery_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write(tmp_path / "h.jsonl", G1A)
    for args in (
        ["--cycle-timeout", "1e308"],
        ["--cycle-timeout", "inf"],
        ["--recovery-within", "inf"],
    ):
        rc, out, err = cli(["check", str(h), *args], capsys)
        assert rc == 1 and "INVALID" in out and "Traceback" not in err, (args, err)


@pytest.mark.parametrize(
    "args",
    [["--cycle-timeout", "nan"], ["--memory-growth", "nan"]],
    ids=lambda a: " ".join(a),
)
def test_nan_thresholds_are_usage_errors(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    h = write(tmp_path / "h.jsonl", VALID)
    rc, out, err = cli(["check", str(h), "--out", str(tmp_path / "r.json"), *args], capsys)
    assert usage_error(rc, out, err), (rc, out, err)


def test_nan_window_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = write(tmp_path / "h.jsonl", VALID)
    for args in (["--window", "nan"], ["--stuck-after", "nan"], ["--starvation-ratio", "nan"]):
        rc, out, err = cli(["check", str(h), *args], capsys)
        assert usage_error(rc, out, err), (args, rc, err)


def test_bad_cli_value_message_names_the_option_not_test_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write(tmp_path / "h.jsonl", VALID)
    rc, _, err = cli(["check", str(h), "--window", "nan"], capsys)
    assert rc == 254
    assert not err.startswith("Error: None:"), err
    assert "--window" in err, err
    (tmp_path / "test.json").write_text("{}")
    rc, _, err = cli(["check", str(h), "--stuck-after", "nan"], capsys)
    assert rc == 254 and "test.json" not in err and "--stuck-after" in err, err


@pytest.mark.parametrize("meta", [{"liveness_window_s": 1e300}, {"checker": {"stuck_s": 1e300}}])
def test_test_json_huge_threshold_is_not_a_crash(
    tmp_path: Path, meta: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "history.jsonl", VALID)
    (tmp_path / "test.json").write_text(json.dumps(meta))
    rc, out, err = cli(["check", str(tmp_path)], capsys)
    assert "Traceback" not in err, err[-300:]
    assert rc == 0 or usage_error(rc, out, err), (rc, err[-300:])


def test_test_json_bad_threshold_is_a_usage_error_naming_test_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "history.jsonl", VALID)
    (tmp_path / "test.json").write_text(json.dumps({"liveness_window_s": -1}))
    rc, out, err = cli(["check", str(tmp_path)], capsys)
    assert usage_error(rc, out, err) and "test.json" in err and "liveness_window_s" in err


def test_command_line_overrides_a_bad_test_json_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "history.jsonl", VALID)
    (tmp_path / "test.json").write_text(json.dumps({"liveness_window_s": -1}))
    rc, out, err = cli(["check", str(tmp_path), "--window", "5"], capsys)
    assert rc == 0 and "VALID" in out, err


# ================================================================ verdicts, stdout/stderr


@pytest.mark.parametrize("name", sorted(HISTORIES))
@pytest.mark.parametrize("as_json", [False, True])
def test_exit_code_equals_verdict(
    tmp_path: Path, name: str, as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, code = HISTORIES[name]
    h = write(tmp_path / "h.jsonl", lines)
    rc, out, err = cli(["check", str(h), *(["--json"] if as_json else [])], capsys)
    assert rc == code, (rc, out, err)
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["valid"] == {0: True, 1: False, 2: "unknown"}[code]
    if as_json:
        assert json.loads(out) == written  # stdout is exactly the results, nothing else
    else:
        verdict = {0: "VALID", 1: "INVALID", 2: "UNKNOWN"}[code]
        assert out.splitlines()[0] == f"{h}: {verdict}"
        assert out.rstrip().endswith(f"results: {tmp_path / 'results.json'}")
    assert err == ""


def test_summary_names_each_type_with_count_and_an_explained_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write(tmp_path / "h.jsonl", MANY)
    rc, out, _ = cli(["check", str(h)], capsys)
    res = json.loads((tmp_path / "results.json").read_text())
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
    h = write(tmp_path / "h.jsonl", lines)
    for n, shown in ((1, 1), (0, 0), (50, 3)):
        rc, out, _ = cli(["check", str(h), "--json", "--max-examples", str(n)], capsys)
        a = json.loads(out)["anomalies"]["G1a"]
        assert rc == 1 and a["count"] == 3 and len(a["examples"]) == shown


def test_json_output_pipes_with_a_torn_line_warning_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write(tmp_path / "h.jsonl", G1A)
    with h.open("a") as fh:
        fh.write('{"index": 2, "ti')
    rc, out, err = cli(["check", str(h), "--json"], capsys)
    assert rc == 1 and json.loads(out)["bad_error_types"] == ["G1a"]
    assert err.startswith("warning: ") and f"{h}:3" in err and "torn" in err


def test_json_through_a_real_pipe_is_pure_json(tmp_path: Path) -> None:
    h = write(tmp_path / "h.jsonl", G1A)
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
    write(tmp_path / "history.jsonl", lines)
    (tmp_path / "test.json").write_text(json.dumps({"workload": {"sub_via": "assign"}}))
    rc, out, _ = cli(["check", str(tmp_path), "--json"], capsys)
    res = json.loads(out)
    assert rc == 1 and res["bad_error_types"] == ["poll-skip"]
    assert res["stats"]["options"]["sub_via"] == "assign"
    rc, out, _ = cli(["check", str(tmp_path), "--json", "--sub-via", "subscribe"], capsys)
    res = json.loads(out)
    assert rc == 0 and "poll-skip" in res["error_types"] and res["bad_error_types"] == []
    assert res["stats"]["options"]["sub_via"] == "subscribe"
    for flag, want in (("--no-ww-deps", False), ("--ww-deps", True)):
        rc, out, _ = cli(["check", str(tmp_path), flag], capsys)
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
    rc, out, _ = cli(["check", str(h)], capsys)
    assert rc == 0 and "stuck-partition" not in out  # default 30 s
    rc, out, _ = cli(["check", str(h), "--stuck-after", "1"], capsys)
    assert rc == 0 and "warn liveness stuck-partition: 1" in out and "key 1" in out
    assert "--liveness-bad" in out
    rc, out, _ = cli(["check", str(h), "--stuck-after", "1", "--liveness-bad"], capsys)
    assert rc == 1 and "BAD  liveness stuck-partition: 1" in out and "value 10" in out
    rc, out, _ = cli(["check", str(h), "--stuck-after", "1", "--liveness-bad", "--json"], capsys)
    assert rc == 1 and json.loads(out)["bad_error_types"] == ["stuck-partition"]
    (tmp_path / "test.json").write_text(json.dumps({"liveness_bad": True, "stuck_s": 1}))
    rc, _, _ = cli(["check", str(h)], capsys)
    assert rc == 1
    rc, _, _ = cli(["check", str(h), "--no-liveness-bad"], capsys)
    assert rc == 0
    rc, _, _ = cli(["check", str(h), "--stuck-after", "10"], capsys)
    assert rc == 0


def test_tiny_cycle_timeout_makes_a_cycle_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        ok(0, "txn", [snd(1, 0, 1), pl({"2": [[0, 2]]})]),
        ok(1, "txn", [snd(2, 0, 2), pl({"1": [[0, 1]]})]),
    ]
    h = write(tmp_path / "h.jsonl", lines)
    rc, out, _ = cli(["check", str(h)], capsys)
    assert rc == 1 and "G1c" in out
    rc, out, _ = cli(["check", str(h), "--cycle-timeout", "1e-12"], capsys)
    assert rc == 2 and "UNKNOWN" in out and "cycle-search-timeout: 1" in out and "op 0" in out


# ================================================================ --out and results.json


def test_out_to_a_file_writes_there_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write(tmp_path / "h.jsonl", G1A)
    out_file = tmp_path / "elsewhere.json"
    rc, out, _ = cli(["check", str(h), "--out", str(out_file)], capsys)
    assert rc == 1 and f"results: {out_file}" in out
    assert json.loads(out_file.read_text())["bad_error_types"] == ["G1a"]
    assert not (tmp_path / "results.json").exists()


def test_out_to_a_directory_keeps_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write(tmp_path / "h.jsonl", G1A)
    d = tmp_path / "outdir"
    d.mkdir()
    rc, out, _ = cli(["check", str(h), "--out", str(d)], capsys)
    assert rc == 1 and "INVALID" in out


@pytest.mark.parametrize("where", ["missing-parent", "under-a-file"])
def test_unwritable_out_keeps_verdict_and_warns(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write(tmp_path / "h.jsonl", G1A)
    (tmp_path / "afile").write_text("x")
    target = tmp_path / ("no/such/dir/r.json" if where == "missing-parent" else "afile/r.json")
    for extra in ([], ["--json"]):
        rc, out, err = cli(["check", str(h), "--out", str(target), *extra], capsys)
        assert rc == 1, (rc, err)
        assert ("INVALID" in out) if not extra else (json.loads(out)["valid"] is False)
        assert str(target) in err and "Traceback" not in err


def test_unwritable_out_message_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pins today's behaviour (254, a one-line reason naming the path, no traceback)."""
    h = write(tmp_path / "h.jsonl", VALID)
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "r.json"
    rc, out, err = cli(["check", str(h), "--out", str(target)], capsys)
    if rc == 254:
        assert out == "" and f"{target}: cannot write results" in err and "Traceback" not in err
    else:  # after a fix: the verdict with a warning
        assert rc == 0 and str(target) in err


def test_unwritable_default_results_location_keeps_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As root nothing is read-only, so block the default path: results.json is a directory.
    write(tmp_path / "history.jsonl", G1A)
    (tmp_path / "results.json").mkdir()
    rc, out, err = cli(["check", str(tmp_path)], capsys)
    assert rc == 1 and "INVALID" in out and "G1a" in out
    assert "results.json" in err and "warning" in err.lower()


# ================================================================ odd input paths


def test_fifo_history_path_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "h.jsonl"
    os.mkfifo(fifo)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "ktrial", "check", str(fifo), "--out", str(tmp_path / "r")],
            capture_output=True,
            text=True,
            timeout=8,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("ktrial check on a FIFO hung")
    assert p.returncode == 254 and "Traceback" not in p.stderr


def test_dev_null_with_out_is_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    rc, out, _ = cli(["check", "/dev/null", "--out", str(out_file)], capsys)
    # An empty history: nothing could be checked (DESIGN.md section 3: unknown).
    assert rc in (2, 254)
    if rc == 2:
        assert "UNKNOWN" in out and "nothing could be checked" in out


def test_dev_null_does_not_write_into_dev(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    targets: list[Path] = []
    real = Path.write_bytes

    def spy(self: Path, data: Any) -> int:
        targets.append(self)
        if str(self).startswith("/dev/"):
            return len(data)  # do not really write into /dev
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", spy)
    cli(["check", "/dev/null"], capsys)
    assert not any(str(t).startswith("/dev/") for t in targets), targets


def test_symlink_loop_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    rc, out, err = cli(["check", str(a)], capsys)
    assert usage_error(rc, out, err)
    reason = err.replace(str(a), "PATH").lower()  # tmp_path itself contains "loop"
    assert "loop" in reason or "symbolic link" in reason, err


def test_symlink_loop_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    rc, out, err = cli(["check", str(a)], capsys)
    assert usage_error(rc, out, err) and str(a) in err


def test_directory_without_history_and_missing_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "history.txt").write_text("junk")
    rc, out, err = cli(["check", str(tmp_path / "d")], capsys)
    assert usage_error(rc, out, err) and "no history.jsonl" in err
    rc, out, err = cli(["check", str(tmp_path / "nope.jsonl")], capsys)
    assert usage_error(rc, out, err) and "no such file" in err


def test_not_a_history_file_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = tmp_path / "h.jsonl"
    h.write_text("Name:\tbash\nState:\tS\n")
    rc, out, err = cli(["check", str(h)], capsys)
    assert usage_error(rc, out, err) and f"{h}:1:" in err


# ================================================================ store layouts


def test_run_directory_and_latest_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = create_run(tmp_path / "store", "queue")
    write(run.history, G1A)
    run.write_test({"workload": {"sub_via": "assign"}, "ww_deps": True})
    latest = tmp_path / "store" / "queue" / "latest"
    assert latest.is_symlink()
    rc, out, _ = cli(["check", str(latest)], capsys)
    assert rc == 1 and out.splitlines()[0] == f"{latest / 'history.jsonl'}: INVALID"
    assert json.loads(run.results.read_text())["bad_error_types"] == ["G1a"]
    # the history file itself finds test.json beside it
    rc, out, _ = cli(["check", str(run.history), "--json"], capsys)
    assert rc == 1 and json.loads(out)["stats"]["options"]["sub_via"] == "assign"
    # the test directory (not a run): a usage error pointing at a run directory
    rc, out, err = cli(["check", str(tmp_path / "store" / "queue")], capsys)
    assert usage_error(rc, out, err) and "run directory" in err


JEPSEN_EDN = (
    "{:index 0, :time 10, :type :invoke, :process 0, :f :send, :value [[:send 3 5]]}\n"
    "{:index 1, :time 20, :type :fail, :process 0, :f :send, :value [[:send 3 [0 5]]]}\n"
    "{:index 2, :time 30, :type :info, :process :nemesis, :f :kill, :value :majority}\n"
    "{:index 3, :time 40, :type :invoke, :process 1, :f :poll, :value [[:poll]]}\n"
    "{:index 4, :time 50, :type :ok, :process 1, :f :poll, :value [[:poll {3 [[0 5]]}]]}\n"
)


def test_jepsen_store_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "store" / "kafka" / "20240101T000000.000Z"
    run.mkdir(parents=True)
    (run / "history.edn").write_text(JEPSEN_EDN)
    (run / "history.txt").write_text("0\t:invoke\t:send\t[[:send 3 5]]\n")
    (run / "results.edn").write_text("{:valid? true}\n")
    (run.parent / "latest").symlink_to(run.name)
    rc, out, err = cli(["check", str(run.parent / "latest")], capsys)
    assert rc == 1, err
    assert "G1a" in out and "value 5 of key 3" in out
    assert json.loads((run / "results.json").read_text())["bad_error_types"] == ["G1a"]
    rc, out, _ = cli(["check", str(run / "history.edn"), "--json"], capsys)
    assert rc == 1 and json.loads(out)["stats"]["nemesis_ops"] == 1
