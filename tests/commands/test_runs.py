"""`ktrial runs`: the store it lists, a missing store, --json and the path column;
`--trend`: exit codes, the table, JSON, junit and its usage errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from ktrial.cli import main
from ktrial.histories.store import create_run
from ktrial.testing.sample import write_sample_run
from ktrial.tests.report.trendruns import nightly, results, with_figures, write_run


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "elsewhere"
    now = time.time()
    write_sample_run(create_run(root, "queue", now=now - 100).path, anomalies=True)
    write_sample_run(create_run(root, "queue", now=now - 50).path, anomalies=False)
    return root


def test_runs_honours_ktrial_store_like_run_does(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTRIAL_STORE", str(store))
    monkeypatch.chdir(store.parent)  # ./store does not exist here
    rc, out, _ = _cli(["runs", "--json"], capsys)
    assert rc == 0
    rows = json.loads(out)
    assert [r["verdict"] for r in rows] == ["invalid", "valid"]
    assert all(Path(r["path"]).parent == store / "queue" for r in rows)
    assert rows[0]["bad"]["lost-write"] == 2 and rows[1]["latest"] is True


def test_a_missing_store_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KTRIAL_STORE", raising=False)
    rc, _, err = _cli(["runs", "--store", str(tmp_path / "nope")], capsys)
    assert rc == 254
    assert "no run store at" in err and "--store" in err


def test_the_table_shows_each_runs_path(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(["runs", "--store", str(store)], capsys)
    assert rc == 0
    assert "path" in out
    assert str(store / "queue") in out


# ---------------------------------------------------------------------- --trend


def test_trend_exits_1_on_a_regression_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nightly(tmp_path, "queue", [200.0, 210.0, 190.0, 205.0, 400.0])
    rc, out, _ = _cli(["runs", "--store", str(tmp_path), "--trend", "queue"], capsys)
    assert rc == 1
    assert "REGRESSION e2e_p99: 400 ms against a median of 202 ms over 4 runs" in out
    assert "▲ regression" in out and "faults kill,partition" in out
    assert out.count("REGRESSION") == 1
    for seed in ("100", "104"):  # every run's seed is a column of the table
        assert seed in out


def test_trend_within_tolerance_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nightly(tmp_path, "queue", [200.0, 210.0, 190.0, 205.0, 240.0])
    rc, out, _ = _cli(["runs", "--store", str(tmp_path), "--trend", "queue"], capsys)
    assert rc == 0 and "no regression" in out and "REGRESSION" not in out
    # the doubled p99 passes once its tolerance allows it
    write_run(tmp_path, "queue", 5, with_figures(results(), e2e_p99=400.0))
    args = ["runs", "--store", str(tmp_path), "--trend", "queue"]
    assert _cli(args, capsys)[0] == 1
    assert _cli([*args, "--tolerance", "e2e_p99=100%"], capsys)[0] == 0


def test_trend_without_enough_history_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nightly(tmp_path, "queue", [200.0, 400.0])
    rc, out, _ = _cli(["runs", "--store", str(tmp_path), "--trend", "queue"], capsys)
    assert rc == 2 and "not enough history" in out


def test_trend_json_and_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nightly(tmp_path, "queue", [200.0, 210.0, 190.0, 400.0])
    junit = tmp_path / "trend.xml"
    rc, out, _ = _cli(
        ["runs", "--store", str(tmp_path), "--trend", "queue", "--json", "--junit", str(junit)],
        capsys,
    )
    assert rc == 1
    doc = json.loads(out)
    assert doc["status"] == "regression" and doc["regressions"] == ["e2e_p99"]
    assert len(doc["runs"]) == 4 and doc["last"] == 5
    assert 'failures="1"' in junit.read_text() and "<failure" in junit.read_text()


def test_trend_of_an_unknown_test_lists_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nightly(tmp_path, "queue", [200.0])
    nightly(tmp_path, "copy", [200.0])
    rc, _, err = _cli(["runs", "--store", str(tmp_path), "--trend", "qeueu"], capsys)
    assert rc == 254
    assert "no runs of test 'qeueu'" in err and "tests there: copy, queue" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--trend", "queue", "--tolerance", "e2e_p98=0.5"], "no figure 'e2e_p98'"),
        (["--trend", "queue", "--tolerance", "lots"], "a fraction or a percentage"),
        (["--trend", "queue", "--last", "0"], "--last"),
        (["--last", "3"], "go with --trend"),
        (["--junit", "x.xml"], "go with --trend"),
        (["--trend", "queue", "--name", "queue"], "drop --html and --name"),
    ],
)
def test_trend_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    nightly(tmp_path, "queue", [200.0])
    rc, _, err = _cli(["runs", "--store", str(tmp_path), *args], capsys)
    assert rc == 254 and says in err and "Traceback" not in err


def test_trend_with_no_checked_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, "queue", 0, None)
    rc, _, err = _cli(["runs", "--store", str(tmp_path), "--trend", "queue"], capsys)
    assert rc == 254 and "has a readable results.json" in err


def test_runs_help_explains_trend(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(["runs", "--help"], capsys)
    assert rc == 0
    for flag in ("--trend NAME", "--last", "--tolerance [FIGURE=]X", "--junit"):
        assert flag in out
    assert "exit 1" in out
