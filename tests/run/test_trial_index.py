"""A run ends by rewriting its store's index.html (trial.py -> report/index.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.tests.run.test_trial import FakeCluster, FakeWorkload, _spec
from ktrial.trial import Trial


def test_each_run_rewrites_the_store_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = tmp_path / "store" / "index.html"
    for n in (1, 2):
        trial = Trial(
            _spec(tmp_path, time_limit=0.5, heal_wait=0.01), say=lambda _: None,
            workload=FakeWorkload(),
        )  # fmt: skip
        monkeypatch.setattr(trial, "_make_cluster", lambda nem_opts: FakeCluster())
        out = trial.execute()
        assert out.exit_code == 0, out.error
        text = index.read_text()
        assert text.count('<span class="v v-valid">valid</span>') == n + 1  # + tests table
        assert f'href="fake/{out.run_dir.path.name}/report.html"' in text
