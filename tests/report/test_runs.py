"""`ktrial runs` and `ktrial report`: listing the store, regenerating outputs, exit codes."""

import time
from pathlib import Path

import pytest
from ktrial.cli import main
from ktrial.histories.store import create_run, write_json
from ktrial.report.runs import summarize_store
from ktrial.testing.sample import write_sample_run


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    now = time.time()
    write_sample_run(create_run(root, "queue", now=now - 200).path, anomalies=True)
    write_sample_run(create_run(root, "queue", now=now - 100).path, anomalies=False)
    other = create_run(root, "copy", now=now - 50)
    write_sample_run(other.path, anomalies=False)
    (other.results).unlink()
    return root


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def test_summaries(store: Path) -> None:
    rows = summarize_store(store)
    assert [(r.name, r.verdict, r.latest) for r in rows] == [
        ("queue", "invalid", False),
        ("queue", "valid", True),
        ("copy", "not checked", True),
    ]
    assert rows[0].bad == {"G1c": 1, "duplicate": 1, "lost-write": 2}
    lines = (rows[0].run.history).read_bytes().count(b"\n")
    assert rows[0].ops == lines > 1000
    assert rows[0].duration_s == pytest.approx(60, abs=1)
    assert [r.name for r in summarize_store(store, "copy")] == ["copy"]
    assert summarize_store(store / "nothing-here") == []


def test_runs_command(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(["runs", "--store", str(store)], capsys)
    assert rc == 0
    rows = [ln for ln in out.splitlines() if "queue" in ln or "copy" in ln]
    assert len(rows) == 3
    assert "invalid" in rows[0] and "G1c ×1, duplicate ×1, lost-write ×2" in rows[0]
    assert "latest" not in rows[0] and "latest" in rows[1] and "not checked" in rows[2]
    rc, out, _ = run_cli(["runs", "--store", str(store), "--name", "copy"], capsys)
    assert rc == 0 and "copy" in out and "queue" not in out


def test_report_command_regenerates_and_exits_with_the_verdict(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    invalid, valid, _ = summarize_store(store)
    for summary, code in ((invalid, 1), (valid, 0)):
        run = summary.run
        for p in (run.report, run.junit):
            p.unlink(missing_ok=True)
        rc, out, _ = run_cli(["report", str(run.path)], capsys)
        assert rc == code
        assert out.strip() == str(run.report)
        assert run.report.exists() and run.junit.exists()
        assert (run.plots / "latency.png").exists()
    rc, out, _ = run_cli(["report", str(store / "queue" / "latest")], capsys)
    assert rc == 0 and out.strip() == str(valid.run.report)


def test_report_command_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["report", str(tmp_path / "missing")], capsys)
    assert rc == 254 and "does not exist" in err
    rc, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert rc == 254 and "no history.jsonl" in err
    run = write_sample_run(tmp_path / "t" / "r")
    (run / "results.json").write_text("{not json")
    rc, _, err = run_cli(["report", str(run)], capsys)
    assert rc == 254 and "results.json: unreadable" in err and "--recheck" in err


def test_report_rechecks_a_run_without_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checker = pytest.importorskip("ktrial.checker")
    if not hasattr(checker, "check_file"):
        pytest.skip("the checker has not landed yet")
    run = write_sample_run(tmp_path / "t" / "r", anomalies=False)
    (run / "results.json").unlink()
    write_json(run / "test.json", {"workload": {"name": "queue", "sub_via": "assign"}})
    rc, out, _ = run_cli(["report", str(run)], capsys)
    assert (run / "results.json").exists()
    assert rc in (0, 1, 2) and out.strip() == str(run / "report.html")
