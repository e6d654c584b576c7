"""The state file of a running cluster (clusters/state.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ktrial.clusters import state


def test_state_file_and_liveness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTRIAL_STATE_DIR", str(tmp_path))
    sf = state.for_run("abcdef")
    assert sf.read() == {}
    sf.write({"run_id": "abcdef", **state.owner_fields()})
    sf.update(status="ready")
    data = dict(state.all_states())["abcdef"]
    assert data["status"] == "ready" and state.state_is_live(data)
    # same pid, different start time: a recycled pid is not our owner
    assert not state.is_alive(os.getpid(), (data["owner_start"] or 0) + 1)
    assert not state.is_alive(None, None)
    sf.remove()
    assert not sf.dir.exists()
    assert len(state.new_run_id()) == 6
