"""`ktrial report` takes what `ktrial check` takes: a ktrial run directory, a Jepsen run
directory (history.edn) and a bare history file (JSONL or EDN, reported into
FILE.report/ beside it); reader warnings are `warning: ...` lines; the exit code is the
verdict's."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest
from ktrial.cli import main
from ktrial.histories.store import load_json, write_json
from ktrial.testing.sample import write_sample_run

JEPSEN = Path(__file__).parent.parent / "data" / "jepsen"


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def _suite(junit: Path) -> ET.Element:
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    return suite


def _failed(junit: Path) -> set[str]:
    return {
        c.get("name", "") for c in _suite(junit).iter("testcase") if c.find("failure") is not None
    }


@pytest.mark.parametrize(("example", "code"), [("queue-lost-write", 1), ("queue-valid", 0)])
def test_a_jepsen_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], example: str, code: int
) -> None:
    run = tmp_path / "jepsen-run"
    run.mkdir()
    shutil.copy(JEPSEN / f"{example}.edn", run / "history.edn")
    rc, out, err = _cli(["report", str(run)], capsys)
    assert rc == code, err
    assert out.strip() == str((run / "report.html").resolve())
    for name in ("report.html", "timeline.html", "junit.xml", "results.json"):
        assert (run / name).is_file(), name
    assert (run / "plots").is_dir()
    html = (run / "report.html").read_text()
    assert ("INVALID" in html) == (code == 1)
    assert '<a href="history.edn">history.edn</a>' in html
    results = load_json(run / "results.json")
    assert _failed(run / "junit.xml") == set(results["bad_error_types"])
    assert ("lost-write" in results["bad_error_types"]) == (code == 1)
    assert not (tmp_path / "index.html").exists()  # not a store: no index written


def test_a_bare_edn_file_is_reported_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hist = tmp_path / "queue-lost-write.edn"
    shutil.copy(JEPSEN / "queue-lost-write.edn", hist)
    rc, out, _ = _cli(["report", str(hist)], capsys)
    folder = tmp_path / "queue-lost-write.report"
    assert rc == 1 and out.strip() == str(folder / "report.html")
    for name in ("report.html", "timeline.html", "junit.xml", "results.json"):
        assert (folder / name).is_file(), name
    assert list((folder / "plots").glob("*.png"))
    assert load_json(folder / "results.json")["valid"] is False
    # the nemesis op of the EDN history is a fault in the report (read through edn.py)
    assert "kill" in (folder / "report.html").read_text()
    suite = _suite(folder / "junit.xml")
    assert suite.get("name") == "ktrial.queue-lost-write.queue-lost-write"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["history"] == str(hist.resolve()) and props["report"] == "report.html"
    assert "lost-write" in _failed(folder / "junit.xml")


def test_two_bare_files_in_one_folder_keep_their_own_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("queue-valid", "queue-duplicate"):
        shutil.copy(JEPSEN / f"{name}.edn", tmp_path / f"{name}.edn")
    assert _cli(["report", str(tmp_path / "queue-valid.edn")], capsys)[0] == 0
    assert _cli(["report", str(tmp_path / "queue-duplicate.edn")], capsys)[0] == 1
    assert load_json(tmp_path / "queue-valid.report" / "results.json")["valid"] is True
    assert load_json(tmp_path / "queue-duplicate.report" / "results.json")["valid"] is False


def test_a_bare_jsonl_file_prints_reader_warnings_as_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_sample_run(tmp_path / "src" / "t" / "r", anomalies=False)
    hist = tmp_path / "soak-7.jsonl"
    hist.write_bytes((run / "history.jsonl").read_bytes() + b'{"index": 1, "type": "ok", "f"')
    rc_check, _, _ = _cli(["check", str(hist), "--out", str(tmp_path / "c.json")], capsys)
    rc, out, err = _cli(["report", str(hist)], capsys)
    folder = tmp_path / "soak-7.report"
    assert rc == rc_check and out.strip() == str(folder / "report.html")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: {hist}:")
    assert "torn" in lines[0] and "Warning" not in err  # no Python warning format
    results = load_json(folder / "results.json")
    assert len(results["input"]["warnings"]) == 1


def test_a_bare_file_reuses_the_results_check_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hist = tmp_path / "q.edn"
    shutil.copy(JEPSEN / "queue-lost-write.edn", hist)
    rc, _, _ = _cli(["check", str(hist)], capsys)
    assert rc == 1 and (tmp_path / "q.results.json").is_file()
    marked = load_json(tmp_path / "q.results.json")
    marked["valid"] = "unknown"  # a mark: the report shows these results, not a new check
    write_json(tmp_path / "q.results.json", marked)
    rc, _, _ = _cli(["report", str(hist)], capsys)
    assert rc == 2
    assert load_json(tmp_path / "q.report" / "results.json")["valid"] == "unknown"
    rc, _, _ = _cli(["report", "--recheck", str(hist)], capsys)
    assert rc == 1


def test_a_history_jsonl_path_is_its_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_sample_run(tmp_path / "t" / "r")
    rc, out, _ = _cli(["report", str(run / "history.jsonl")], capsys)
    assert rc == 1 and out.strip() == str((run / "report.html").resolve())
    assert not (run / "history.report").exists()


def test_a_malformed_edn_history_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hist = tmp_path / "broken.edn"
    hist.write_text(
        '{:type :invoke, :f :send, :value [[:send 0 1]], :time 1, :process 0}\n{:type "'
    )
    rc, _, err = _cli(["report", str(hist)], capsys)
    assert rc == 254 and f"{hist}:2" in err and "Traceback" not in err


def test_a_folder_without_a_history_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _cli(["report", str(tmp_path)], capsys)
    assert rc == 254 and "no history.jsonl (or Jepsen history.edn)" in err


def test_results_written_by_check_json_are_valid_json(tmp_path: Path) -> None:
    """The report folder's results.json is plain JSON a script can read."""
    hist = tmp_path / "v.edn"
    shutil.copy(JEPSEN / "queue-valid.edn", hist)
    with pytest.raises(SystemExit):
        main(["report", str(hist)])
    assert orjson.loads((tmp_path / "v.report" / "results.json").read_bytes())["valid"] is True
