"""What `ktrial check` takes as its PATH and beside it: a history file or a run
directory (ktrial's store with its `latest` link, Jepsen's store), test.json beside the
history and its bad values, and paths that are not histories (a FIFO, /dev/null, a
symlink loop, a missing path): a verdict or exit 254 naming the path, never a hang or
a traceback. Exit codes: docs/design.md (0 valid, 1 invalid, 2 unknown, 254 usage
error, 255 crash).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check_file
from ktrial.histories.store import create_run
from ktrial.tests.checker.common import G1A, run_main, usage_error
from ktrial.tests.histlines import Line, ok, pl, snd, write


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
    rc, out, _ = run_main(["check", "/dev/null", "--out", str(out_file)], capsys)
    # An empty history: nothing could be checked (docs/anomalies.md: unknown).
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
    run_main(["check", "/dev/null"], capsys)
    assert not any(str(t).startswith("/dev/") for t in targets), targets


def test_symlink_loop_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    rc, out, err = run_main(["check", str(a)], capsys)
    assert usage_error(rc, out, err)
    reason = err.replace(str(a), "PATH").lower()  # tmp_path itself contains "loop"
    assert "loop" in reason or "symbolic link" in reason, err


def test_symlink_loop_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    rc, out, err = run_main(["check", str(a)], capsys)
    assert usage_error(rc, out, err) and str(a) in err


def test_directory_without_history_and_missing_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "history.txt").write_text("junk")
    rc, out, err = run_main(["check", str(tmp_path / "d")], capsys)
    assert usage_error(rc, out, err) and "no history.jsonl" in err
    rc, out, err = run_main(["check", str(tmp_path / "nope.jsonl")], capsys)
    assert usage_error(rc, out, err) and "no such file" in err


def test_not_a_history_file_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = tmp_path / "h.jsonl"
    h.write_text("Name:\tbash\nState:\tS\n")
    rc, out, err = run_main(["check", str(h)], capsys)
    assert usage_error(rc, out, err) and f"{h}:1:" in err


# ================================================================ store layouts


def test_run_directory_and_latest_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = create_run(tmp_path / "store", "queue")
    write(run.history, G1A)
    run.write_test({"workload": {"sub_via": "assign"}, "ww_deps": True})
    latest = tmp_path / "store" / "queue" / "latest"
    assert latest.is_symlink()
    rc, out, _ = run_main(["check", str(latest)], capsys)
    assert rc == 1 and out.splitlines()[0] == f"{latest / 'history.jsonl'}: INVALID"
    assert json.loads(run.results.read_text())["bad_error_types"] == ["G1a"]
    # the history file itself finds test.json beside it
    rc, out, _ = run_main(["check", str(run.history), "--json"], capsys)
    assert rc == 1 and json.loads(out)["stats"]["options"]["sub_via"] == "assign"
    # the test directory (not a run): a usage error pointing at a run directory
    rc, out, err = run_main(["check", str(tmp_path / "store" / "queue")], capsys)
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
    rc, out, err = run_main(["check", str(run.parent / "latest")], capsys)
    assert rc == 1, err
    assert "G1a" in out and "value 5 of key 3" in out
    assert json.loads((run / "results.json").read_text())["bad_error_types"] == ["G1a"]
    rc, out, _ = run_main(["check", str(run / "history.edn"), "--json"], capsys)
    assert rc == 1 and json.loads(out)["stats"]["nemesis_ops"] == 1


def _invalid_unless_subscribe() -> list[Line]:
    """A consumer re-reads offset 0: nonmonotonic-poll, bad only with assign."""
    return [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
    ]


@pytest.mark.parametrize(
    ("test_json", "rc"),
    [
        (None, 1),
        ('{"sub_via": "subscribe"}', 0),
        ('{"workload": {"sub_via": [":assign", ":subscribe"]}}', 0),
        ('{"checker": {"sub-via": "assign"}}', 1),
        ('{"workload": "queue", "options": null, "checker": [1]}', 1),
    ],
)
def test_test_json_beside_the_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test_json: str | None, rc: int
) -> None:
    h = write(tmp_path / "history.jsonl", _invalid_unless_subscribe())
    if test_json is not None:
        (tmp_path / "test.json").write_text(test_json)
    assert run_main(["check", str(tmp_path)], capsys)[0] == rc
    assert run_main(["check", str(h)], capsys)[0] == rc
    # the command-line override wins over test.json
    assert run_main(["check", str(h), "--sub-via", "subscribe"], capsys)[0] == 0


@pytest.mark.parametrize(
    ("test_json", "reason"),
    [
        ("", "cannot read test metadata"),
        ("{", "cannot read test metadata"),
        ("\ufeff{", "cannot read test metadata"),  # a BOM is skipped; the rest is bad
        ("[1]", "must hold a JSON object"),
        ('{"sub_via": "subscibe"}', "sub_via"),
        ('{"ww_deps": "no"}', "ww_deps"),
        (None, "cannot read test metadata"),  # a directory named test.json
    ],
)
def test_malformed_test_json_exit_254_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test_json: str | None, reason: str
) -> None:
    write(tmp_path / "history.jsonl", _invalid_unless_subscribe())
    tj = tmp_path / "test.json"
    if test_json is None:
        tj.mkdir()
    else:
        tj.write_text(test_json, encoding="utf-8")
    rc, _out, err = run_main(["check", str(tmp_path)], capsys)
    assert rc == 254, err
    assert str(tj) in err and reason in err and "Traceback" not in err


def test_directory_without_history_and_missing_path_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _out, err = run_main(["check", str(tmp_path)], capsys)
    assert rc == 254 and str(tmp_path) in err and "history.jsonl" in err
    rc, _out, err = run_main(["check", str(tmp_path / "nope.jsonl")], capsys)
    assert rc == 254 and "no such file" in err


def test_run_directory_prefers_jsonl_over_edn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "history.jsonl", _invalid_unless_subscribe()[:2])  # valid
    (tmp_path / "history.edn").write_text("this is not EDN {\n")
    rc, _out, err = run_main(["check", str(tmp_path)], capsys)
    assert rc == 0, err


def test_check_options_object_is_honoured_by_check_file(tmp_path: Path) -> None:
    h = write(tmp_path / "history.jsonl", _invalid_unless_subscribe())
    assert check_file(h)["valid"] is False
    assert check_file(h, CheckOptions(sub_via="subscribe"))["valid"] is True
