"""Shared by the worker adapter's tests: where the fake workers log their requests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the fake worker (or fake host) appends every request to, one JSON line
    each; the workers' stderr goes beside it."""
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("KTRIAL_WORKER_LOG", str(tmp_path / "stderr.log"))
    return log
