"""The queue workload under each fault family (30 s each, `safe` profile) through the run
orchestration (`ktrial.trial.Trial`): the history must check valid, hold the family's
nemesis ops, and the run must leave no nemesis process behind.

Each run starts and tears down its own cluster (~1.5 min per family), so this module is
marked slow; it does not use the shared session cluster.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from ktrial.histories.jsonl import read_history
from ktrial.nemesis import NemesisOptions
from ktrial.nemesis.clean import marked_processes
from ktrial.nemesis.memory import ENV_MARK as BALLOON_MARK
from ktrial.nemesis.toxiproxy import ENV_MARK as TOXIPROXY_MARK
from ktrial.trial import Trial, TrialSpec

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# family -> (nemesis ops that must appear, fault parameters, seconds per fault/quiet).
# Kill uses one node and 10 s: a restarted broker on this small machine needs several
# seconds to rejoin the ISR, and killing the next one before that leaves no writable ISR
# (a 5 s interval with random majorities made every send time out: verdict unknown).
FAMILIES: dict[str, tuple[set[str], dict[str, Any], float]] = {
    "partition": ({"start-partition", "stop-partition"}, {}, 5.0),
    "loss": ({"start-loss", "stop-loss"}, {"loss": {"probability": 0.3}}, 5.0),
    "kill": ({"kill", "start"}, {"kill": {"targets": "one"}}, 10.0),
    "pause": ({"pause", "resume"}, {}, 5.0),
    "memory": ({"memory-squeeze", "memory-release"}, {"memory": {"balloon_bytes": 64 << 20}}, 5.0),
    "toxic": ({"toxic-on", "toxic-off"}, {"toxic": {"kind": "latency"}}, 5.0),
    # one node restarts per ~50 s here; the schedule's end cuts the rest short
    "restart": (
        {"start-rolling-restart", "restarted", "stop-rolling-restart"},
        {"restart": {"settle": 2}},
        10.0,
    ),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_queue_workload_stays_valid_under(family: str, tmp_path: Path) -> None:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    expected_fs, params, interval = FAMILIES[family]
    spec = TrialSpec(
        name=f"nemesis-{family}",
        store=str(tmp_path / "store"),
        seed=20261129,
        time_limit=30,
        live=False,
        nemesis=NemesisOptions(faults=(family,), interval=interval, params=params),
    )
    outcome = Trial(spec, say=lambda *_: None).execute()

    assert outcome.error is None
    assert outcome.results is not None and outcome.results["valid"] is True, outcome.results
    assert outcome.exit_code == 0
    fs = [op.f for op in read_history(outcome.run_dir.history) if op.process == "nemesis"]
    assert expected_fs <= set(fs), fs
    assert "fault-error" not in fs
    me = os.getpid()
    for mark in (BALLOON_MARK, TOXIPROXY_MARK):
        assert [p for p, owner in marked_processes(mark) if owner == me] == []
