"""`ktrial hunt` against a real system that breaks under a kill: it finds and shrinks.

kfake (franz-go's Kafka, `--cluster kfake`) with transactions loses track of committed
records after a SIGKILL and restart: read_committed consumers skip them
(`int-poll-skip`, bench/findings/2026-12-02-kfake-restart-skip). A hunt with a tiny
budget (at most two search trials, two replays, 12 s trials) must find an INVALID
trial, replay its recorded faults as a script to judge a smaller schedule, confirm the
final script and write the hunt's directory: the script, the seed, the replay command,
the rate and every run directory. Hunt seed 3 plans its first trials with a 5 s
interval: the kill comes at 5 s, the restart at 10 s.

kfake rather than an `unsafe` Kafka cluster, for CI time: a kfake trial is ~20 s (one
process, up in a second), a Kafka trial ~29 s even with an 8 s main phase (a 3-node
cluster takes 11-18 s to be ready), so the same three trials take ~67 s instead of
~89 s. What is tested is the hunt (trials as `ktrial run` subprocesses, the find, the
export of its faults, replays of scripts on its seed, the shrink's decision, the
rate, the files); the Kafka hunts are measured in bench/RESULTS.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from ktrial.clusters.kfake import default_binary
from ktrial.nemesis.schedule import load_script

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        not default_binary().exists(), reason="kfake not built (run scripts/setup.sh)"
    ),
]


def test_hunt_finds_a_failure_and_shrinks_the_find(tmp_path: Path) -> None:
    out_dir = tmp_path / "hunt"
    cmd = [
        *(sys.executable, "-m", "ktrial", "hunt", "-o", str(out_dir), "--seed", "3"),
        *("--time-limit", "12", "--nemesis", "kill", "--schedules", "interval"),
        *("--max-trials", "2", "--no-verify", "--repro", "1/1", "--confirm", "1"),
        *("--shrink-passes", "remove", "--max-replays", "2", "--match", "any"),
        # passed through to every `ktrial run`
        *("--cluster", "kfake", "--txn", "--heal-wait", "0.5", "--drain-timeout", "4"),
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
    assert "--cluster kfake" in result["replay"] and "--txn" in result["replay"]
    if doc["shrink"]["to"][0]:
        assert load_script(out_dir / "minimal.toml")
        assert "--nemesis-script" in result["replay"]
    assert (out_dir / "replay.sh").is_file() and (out_dir / "found.toml").is_file()
    assert "reproduction rate:" in proc.stdout and "[hunt]" in proc.stderr
