"""`ktrial hunt` against real brokers that lose writes: it finds and shrinks.

The unsafe profile (min.insync.replicas 1, unclean leader election) with careless
producers (acks=1, no idempotence, no transactions) loses or overwrites acknowledged
records when a leader is killed (bench/RESULTS.md, "Detection"). A hunt with a tiny
budget (at most two search trials, two replays, short trials) must find an INVALID trial,
replay its recorded faults as a script to judge a smaller schedule, confirm the
final script and write the hunt's directory: the script, the seed, the replay
command, the rate and every run directory. 3 trials of ~30 s of brokers each (4 when the
first search trial happens to stay valid).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from ktrial.nemesis.schedule import load_script

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _need_cluster() -> None:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)


def test_hunt_finds_an_unsafe_cluster_and_shrinks_the_find(tmp_path: Path) -> None:
    out_dir = tmp_path / "hunt"
    cmd = [
        *(sys.executable, "-m", "ktrial", "hunt", "-o", str(out_dir), "--seed", "5"),
        *("--time-limit", "12", "--nemesis", "kill", "--schedules", "interval"),
        *("--max-trials", "2", "--no-verify", "--repro", "1/1", "--confirm", "1"),
        *("--shrink-passes", "remove", "--max-replays", "2", "--match", "any"),
        # passed through to every `ktrial run`
        *("--profile", "unsafe", "--no-txn", "--no-idempotence", "--acks", "1"),
        *("--producer-config", "retries=5", "--heal-wait", "1", "--drain-timeout", "5"),
        *("--node-stats-interval", "0"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]  # 1: a failure was found
    doc = orjson.loads((out_dir / "hunt.json").read_bytes())
    found = doc["found"]
    phases = [t["phase"] for t in doc["trials"]]
    searched = phases.count("search")
    assert found["trial"] == searched and found["types"], doc
    assert phases == ["search"] * searched + ["replay", "confirm"], phases
    for t in doc["trials"]:  # every trial is a real run, kept in the hunt's store
        run = Path(t["run_dir"])
        assert run.parent.parent == out_dir / "runs" and (run / "results.json").is_file()
    # the shrinker judged a smaller schedule by a real replay; the output is no larger
    steps = doc["shrink"]["steps"]
    assert steps and steps[0]["faults"] < doc["shrink"]["from"][0]
    assert doc["shrink"]["to"][0] <= doc["shrink"]["from"][0]
    # the replays ran the scripts they were given, on the found trial's seed
    replay = doc["trials"][searched]
    assert replay["seed"] == found["seed"] == doc["trials"][searched - 1]["seed"]
    meta = orjson.loads((Path(replay["run_dir"]) / "test.json").read_bytes())
    assert meta["seed"] == found["seed"]
    result = doc["result"]
    assert result["rate"]["replays"] == 1 and f"--seed {found['seed']}" in result["replay"]
    assert "--profile unsafe" in result["replay"] and "--acks 1" in result["replay"]
    if doc["shrink"]["to"][0]:
        assert load_script(out_dir / "minimal.toml")
        assert "--nemesis-script" in result["replay"]
    assert (out_dir / "replay.sh").is_file() and (out_dir / "found.toml").is_file()
    assert "reproduction rate:" in proc.stdout and "[hunt]" in proc.stderr
