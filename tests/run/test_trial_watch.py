"""trial.py with the running safety check (watch.py), over a fake cluster and workload.

What is pinned: with --stop-on-anomaly a duplicate recorded early ends the main phase
long before its time limit; the run still drains and the final check finds the
duplicate (INVALID, exit 1); test.json's ``watch`` section says when and why it
stopped; results.json's first warning and the summary say so; watch.jsonl holds the
checks. Without --stop-on-anomaly the anomaly is said but the run goes on; with
checks off nothing is started and test.json has no ``watch`` section.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
from click.testing import CliRunner
from ktrial.clusters.base import Cluster
from ktrial.commands.run import _summary
from ktrial.histories.recorder import Recorder
from ktrial.histories.store import create_run, load_json
from ktrial.histories.testmeta import TestMeta
from ktrial.tests.run.test_trial import FakeCluster, FakeWorkload, _spec
from ktrial.trial import Trial, note_watch


class DuplicatingWorkload(FakeWorkload):
    """Value 1 acknowledged at offsets 0 and 1 of key 0 (a resend), read back, then idle."""

    def run(self, recorder: Recorder, stop: threading.Event) -> None:
        self.events.append("run")
        p = recorder.new_process()
        for off in (0, 1):
            inv = recorder.invoke(p, "send", [["send", 0, 1]])
            recorder.complete(inv, "ok", [["send", 0, [off, 1]]])
        inv = recorder.invoke(p, "poll", [["poll"]])
        recorder.complete(inv, "ok", [["poll", {"0": [[0, 1], [1, 1]]}]])
        stop.wait()


def _trial(tmp_path: Path, said: list[str], **kw: Any) -> tuple[Trial, Any]:
    rd = create_run(tmp_path / "store", "fake")
    spec = _spec(tmp_path, **kw)
    wl = DuplicatingWorkload(rd)
    trial = Trial(
        spec, say=said.append, cluster=cast(Cluster, FakeCluster()), workload=wl, run_dir=rd
    )
    return trial, wl


def test_stop_on_anomaly_ends_the_run_early_drains_and_the_final_check_rules(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    trial, wl = _trial(tmp_path, said, time_limit=120.0, check_every=0.3, stop_on_anomaly=True)
    t0 = time.monotonic()
    out = trial.execute()
    assert time.monotonic() - t0 < 60  # far less than the 120 s asked for
    assert wl.events == ["setup", "run", "drain"]  # drained as usual
    assert out.exit_code == 1 and out.results is not None
    assert out.results["valid"] is False and "duplicate" in out.results["bad_error_types"]
    shown = [s for s in said if s.startswith("anomaly while running")]
    assert len(shown) == 1 and "duplicate ×1 (key 0; ops" in shown[0], said
    assert "stopping the run early (--stop-on-anomaly): healing, draining, checking" in said
    # test.json: when and why
    meta = TestMeta.read(out.run_dir.test_json)
    assert meta.watch is not None and meta.interrupted is False
    stop = meta.watch["stopped_early"]
    assert stop["types"] == ["duplicate"] and 0 < stop["at_s"] < 60
    assert meta.watch["found"]["duplicate"]["count"] == 1 and meta.watch["checks"] >= 1
    assert meta.watch["check_every_s"] == 0.3 and meta.watch["stop_on_anomaly"] is True
    # results.json and the report's warnings lead with it
    results = load_json(out.run_dir.results)
    assert results["stopped_early"] == stop
    assert results["warnings"][0].startswith("the run stopped early at ")
    why = "of its 120 s (--stop-on-anomaly): duplicate found while it ran"
    assert why in results["warnings"][0]
    assert "the run stopped early" in (out.run_dir.path / "report.html").read_text()
    # watch.jsonl: every check, the finding where it first appeared
    checks = [orjson.loads(x) for x in (out.run_dir.path / "watch.jsonl").read_bytes().splitlines()]
    assert any(c["new"] == ["duplicate"] for c in checks)
    assert "anomaly while running" in (out.run_dir.logs / "ktrial.log").read_text()
    # the summary `ktrial run` prints
    with CliRunner().isolation() as (stdout, _err, _):
        _summary(out)
    text = stdout.getvalue().decode()
    assert "warning: the run stopped early at " in text and "verdict: INVALID" in text


def test_without_stop_on_anomaly_the_anomaly_is_said_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    trial, _ = _trial(tmp_path, said, time_limit=4.0, check_every=0.3)
    t0 = time.monotonic()
    out = trial.execute()
    assert time.monotonic() - t0 >= 4.0  # the whole main phase
    assert any(s.startswith("anomaly while running") for s in said)
    meta = TestMeta.read(out.run_dir.test_json)
    assert meta.watch is not None and "stopped_early" not in meta.watch
    assert "duplicate" in meta.watch["found"]
    assert out.exit_code == 1 and "stopped_early" not in (out.results or {})


def test_no_checks_no_watcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ktrial.trial as trial_mod

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("a watcher was started")

    monkeypatch.setattr(trial_mod, "Watcher", refuse)
    said: list[str] = []
    trial, _ = _trial(tmp_path, said, time_limit=0.5, check_every=0.0)
    out = trial.execute()
    assert out.exit_code == 1  # the final check alone finds the duplicate
    assert TestMeta.read(out.run_dir.test_json).watch is None
    assert not (out.run_dir.path / "watch.jsonl").exists()


def test_an_anomaly_the_final_check_does_not_confirm_is_a_warning() -> None:
    meta = TestMeta(time_limit=60.0, watch={"found": {"G1a": {"count": 1}}})
    results: dict[str, Any] = {"valid": True, "bad_error_types": [], "warnings": ["w"]}
    note_watch(results, meta)
    assert results["valid"] is True  # the final check rules
    assert results["warnings"][0].startswith("the running check found G1a, which the final")
    assert results["warnings"][1] == "w"
