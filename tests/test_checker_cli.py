"""`ktrial check`: exit codes 0/1/2/254, results.json, summary, malformed input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from ktrial.cli import cli


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
