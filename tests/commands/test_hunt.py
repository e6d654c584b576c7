"""`ktrial hunt` from the command line, with a stand-in for `ktrial run`
(tests/hunt/fake_ktrial.py): usage errors before any trial, families the cluster
refuses left out, and a whole hunt that finds, shrinks and writes its directory."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from ktrial.nemesis.schedule import load_script
from ktrial.tests.checker.common import run_main

FAKE = [sys.executable, str(Path(__file__).parents[1] / "hunt" / "fake_ktrial.py")]


@pytest.fixture(autouse=True)
def _fake_ktrial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ktrial.hunt.runner.KTRIAL", FAKE)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nemesis-schedule", "stable"], "--nemesis-schedule cannot be given"),
        (["--from", "store/queue/latest"], "--from cannot be given"),
        (["--nemesis-script=x.toml"], "--nemesis-script cannot be given"),
        (["extra"], "unexpected argument 'extra'"),
        (["--anomalies", "lost-writes"], "unknown anomaly type"),
        (["--repro", "3/2"], "k <= n"),
        (["--nemesis", "kil"], "unknown fault"),
        (["--shrink-passes", "remove,reorder"], "shrink passes"),
        (["--profile", "bogus"], "flags are refused"),
    ],
)
def test_bad_flags_are_usage_errors(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_main(["hunt", "-o", str(tmp_path / "h"), *args], capsys)
    assert rc == 254, out + err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "h" / "runs").exists()  # no trial ran


def test_a_hunt_finds_shrinks_and_writes_its_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "h"
    rc, out, err = run_main(
        [
            "hunt",
            "-o",
            str(out_dir),
            "--seed",
            "3",
            "--nemesis",
            "pause,kill,loss",
            "--time-limit",
            "20",
            "--confirm",
            "2",
            "--profile",
            "unsafe",
        ],
        capsys,
    )
    assert rc == 1, out + err
    assert "leaving out loss" in err  # the cluster refuses it (the dry run said so)
    assert "[hunt]" in err and "trial 1 (search)" in err
    doc = orjson.loads((out_dir / "hunt.json").read_bytes())
    assert doc["found"]["trial"] == 1 and doc["found"]["types"] == ["lost-write"]
    assert doc["search"]["families"] == ["pause", "kill"]
    assert doc["result"]["rate"] == {
        "reproduced": 2,
        "replays": 2,
        "text": "2/2",
        "of": "2 of 2 confirmation replays",
    }
    assert doc["shrink"]["verified"] and doc["shrink"]["to"][0] == 1
    # the minimal script is the kill alone, shortened and moved earlier
    (e,) = load_script(out_dir / "minimal.toml")
    assert e.fault == "kill" and e.targets == ["n2"] and e.duration is not None
    assert e.duration < 4.0 and e.at < 5.0
    assert len(load_script(out_dir / "found.toml")) == 2
    replay = (out_dir / "replay.sh").read_text()
    assert f"--seed 3 --time-limit 20 --nemesis-script {out_dir / 'minimal.toml'}" in replay
    assert "ktrial run --profile unsafe" in replay
    assert "replay: ktrial run --profile unsafe --seed 3" in out
    assert "reproduction rate: 2/2" in out
    # every trial's run directory is listed and exists
    assert all(Path(t["run_dir"]).is_dir() for t in doc["trials"])
    assert [t["phase"] for t in doc["trials"]][-2:] == ["confirm", "confirm"]


def test_nothing_found_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_main(
        ["hunt", "-o", str(tmp_path / "h"), "--nemesis", "pause", "--max-trials", "2"], capsys
    )
    assert rc == 0, out + err
    assert "no failure in 2 trial(s)" in out
    doc = orjson.loads((tmp_path / "h" / "hunt.json").read_bytes())
    assert "found" not in doc and len(doc["trials"]) == 2
