"""`ktrial runs`: the store it lists, a missing store, --json and the path column."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from ktrial.cli import main
from ktrial.histories.store import create_run
from ktrial.testing.sample import write_sample_run


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
