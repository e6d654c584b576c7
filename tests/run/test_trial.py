"""trial.py, the one run orchestration, over a fake cluster and workload (no brokers).

What is pinned: the phases' order and what each leaves in test.json (written before
the first op, completed after the drain), the ways a main phase ends (time, `until`,
Ctrl-C), a failing workload, a cluster the trial starts (and tears down) versus one
it is given (and leaves alone), and the outcome `ktrial run` prints from.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest
from ktrial.clusters.base import Cluster
from ktrial.histories.jsonl import read_history
from ktrial.histories.recorder import Recorder
from ktrial.histories.store import RunDir, create_run, load_json
from ktrial.histories.testmeta import TestMeta
from ktrial.trial import Trial, TrialSpec, run_workload

FRAGMENT = {
    "workload": "fake",
    "keys": {"0": {"topic": "t", "partition": 0}},
    "topics": {"t": 1},
    "sub_via": "assign",
    "ww_deps": True,
}
HEAD = ["ktrial_version", "name", "seed", "time_limit", "wall_start", "cluster"]
BEFORE = [*HEAD, *FRAGMENT, "consumer_rewinds", "nemesis", "run"]
AFTER = [*BEFORE, "history_wall_start", "drain", "workload_results", "interrupted", "wall_end"]


class FakeCluster:
    """What the trial asks of a cluster, recorded (not all of the Cluster protocol:
    passed as cast(Cluster, ...))."""

    kind = "fake"
    bootstrap_servers = "fake:9092"
    client_advertise = None

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.nodes: list[Any] = []

    def start(self, wait: bool = True) -> None:
        self.calls.append("start")

    def wait_ready(self, timeout: float = 120.0) -> None:
        self.calls.append("wait_ready")

    def unsupported_faults(self) -> dict[str, str]:
        return {}

    def metadata(self) -> dict[str, object]:
        return {"kind": "fake", "broker_versions": ["9.9.9"]}

    def teardown(self) -> None:
        self.calls.append("teardown")


class FakeWorkload:
    """Three acknowledged sends to key 0 and a poll reading them back, then idles until
    stopped; `on_ops` runs once the ops are recorded (e.g. to press Ctrl-C)."""

    name = "fake"

    def __init__(self, run_dir: RunDir | None = None, fail: bool = False) -> None:
        self.run_dir = run_dir
        self.fail = fail
        self.events: list[str] = []
        self.test_json_at_first_op: dict[str, Any] | None = None
        self.drain_timeout: float | None = None
        self.on_ops: Any = None

    def setup(self, cluster: Any) -> dict[str, Any]:
        self.events.append("setup")
        return dict(FRAGMENT)

    def run(self, recorder: Recorder, stop: threading.Event) -> None:
        self.events.append("run")
        if self.run_dir is not None:
            self.test_json_at_first_op = load_json(self.run_dir.test_json)
        p = recorder.new_process()
        for v in (1, 2, 3):
            inv = recorder.invoke(p, "send", [["send", 0, v]])
            recorder.complete(inv, "ok", [["send", 0, [v - 1, v]]])
            if self.fail:
                raise RuntimeError("client exploded")
        inv = recorder.invoke(p, "poll", [["poll"]])
        recorder.complete(inv, "ok", [["poll", {"0": [[0, 1], [1, 2], [2, 3]]}]])
        if self.on_ops is not None:
            self.on_ops()
        stop.wait()

    def drain(self, recorder: Recorder, timeout_s: float) -> dict[str, Any]:
        self.events.append("drain")
        self.drain_timeout = timeout_s
        return {"caught_up": True, "lagging_keys": {}}

    def results(self) -> dict[str, Any]:
        return {"cells": []}


def _spec(tmp_path: Path, **kw: Any) -> TrialSpec:
    base: dict[str, Any] = {
        "name": "fake",
        "store": str(tmp_path / "store"),
        "seed": 7,
        "time_limit": 30.0,
        "heal_wait": 0.0,
        "node_stats_interval": 0.0,
        "live": False,
    }
    return TrialSpec(**{**base, **kw})


def test_run_workload_phases_test_json_and_outcome(tmp_path: Path) -> None:
    cluster = FakeCluster()
    rd = create_run(tmp_path / "store", "fake")
    wl = FakeWorkload(rd)
    t0 = time.monotonic()
    out = run_workload(
        cast(Cluster, cluster), wl, rd, 7, 30.0, until=lambda c: c[("poll", "ok")] >= 1
    )

    assert time.monotonic() - t0 < 20  # `until` ended the 30 s main phase
    assert out.error is None and out.exit_code == 0 and out.interrupted is False
    assert out.results is not None and out.results["valid"] is True
    assert wl.events == ["setup", "run", "drain"]
    assert cluster.calls == []  # a given cluster is neither started nor torn down
    # test.json before the first op: everything known then, in the file's order
    assert wl.test_json_at_first_op is not None and list(wl.test_json_at_first_op) == BEFORE
    before = wl.test_json_at_first_op
    assert before["seed"] == 7 and before["time_limit"] == 30.0 and before["keys"]
    assert before["cluster"] == {"kind": "fake", "broker_versions": ["9.9.9"]}
    assert before["nemesis"]["faults"] == [] and before["run"]["workload"] == "fake"
    assert before["consumer_rewinds"] is True  # ktrial's drivers rewind: Jepsen's rule applies
    # ... and after: completed, the same record the outcome holds
    after = load_json(rd.test_json)
    assert list(after) == AFTER and after == json.loads(json.dumps(out.meta.to_json()))
    assert after["drain"] == out.drain == {"caught_up": True, "lagging_keys": {}}
    assert after["workload_results"] == {"cells": []} and after["interrupted"] is False
    assert after["wall_start"] <= after["history_wall_start"] <= after["wall_end"]
    assert wl.drain_timeout == 60.0
    assert out.counts == {"poll:invoke": 1, "poll:ok": 1, "send:invoke": 3, "send:ok": 3}
    assert load_json(rd.results)["valid"] is True
    assert (rd.path / "report.html").exists() and rd.junit.exists()
    assert out.report == rd.report


def test_a_trial_starts_and_tears_down_its_own_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    cluster = FakeCluster()
    spec = _spec(tmp_path, time_limit=1.0, heal_wait=0.01)
    trial = Trial(spec, say=said.append, workload=FakeWorkload())
    monkeypatch.setattr(trial, "_make_cluster", lambda nem_opts: cluster)
    out = trial.execute()

    assert out.exit_code == 0, out.error
    assert cluster.calls == ["start", "wait_ready", "teardown"]
    assert said[0].startswith(f"run directory: {out.run_dir.path}  (seed 7)")
    assert said[1:] == [
        "starting 3 Kafka nodes (safe profile)...",
        "cluster ready: fake:9092",
        "healed; waiting 0.01s before the drain",
        "draining: reading every key back from the beginning...",
        "tearing down the cluster...",
        "checking the history...",
    ]
    assert out.run_dir.path.parent == tmp_path / "store" / "fake"


def test_ctrl_c_ends_the_main_phase_early_and_still_drains_briefly(tmp_path: Path) -> None:
    rd = create_run(tmp_path / "store", "fake")
    wl = FakeWorkload(rd)
    spec = _spec(tmp_path, heal_wait=5.0)
    trial = Trial(
        spec, say=lambda _: None, cluster=cast(Cluster, FakeCluster()), workload=wl, run_dir=rd
    )

    def press_ctrl_c() -> None:
        trial.interrupts.handler(2, None)

    wl.on_ops = press_ctrl_c
    t0 = time.monotonic()
    out = trial.execute()
    assert time.monotonic() - t0 < 20  # neither the 30 s limit nor the 5 s quiet wait
    assert out.interrupted is True and out.meta.interrupted is True
    assert out.exit_code == 0 and out.results is not None  # the partial history is checked
    assert wl.events == ["setup", "run", "drain"] and wl.drain_timeout == 15.0


def test_a_second_ctrl_c_skips_the_drain(tmp_path: Path) -> None:
    rd = create_run(tmp_path / "store", "fake")
    wl = FakeWorkload(rd)
    spec = _spec(tmp_path)
    trial = Trial(
        spec, say=lambda _: None, cluster=cast(Cluster, FakeCluster()), workload=wl, run_dir=rd
    )

    def press_ctrl_c_twice() -> None:
        trial.interrupts.handler(2, None)
        trial.interrupts.handler(2, None)

    wl.on_ops = press_ctrl_c_twice
    out = trial.execute()
    assert out.interrupted is True and wl.events == ["setup", "run"]
    assert "drain" not in load_json(rd.test_json) and out.drain == {}
    assert out.results is not None


def test_a_failing_workload_is_a_harness_error_and_its_history_is_still_checked(
    tmp_path: Path,
) -> None:
    rd = create_run(tmp_path / "store", "fake")
    wl = FakeWorkload(rd, fail=True)
    out = run_workload(cast(Cluster, FakeCluster()), wl, rd, 7, 30.0)
    assert out.exit_code == 255 and out.error is not None
    assert "workload failed: RuntimeError('client exploded')" in out.error
    assert out.results is not None  # the one recorded send was checked
    assert len(read_history(rd.history)) == 2
    meta = TestMeta.read(rd.test_json)
    assert meta.wall_end is None and meta.drain is None  # the run never finished
    assert "run failed" in (rd.logs / "ktrial.log").read_text()


def test_a_given_cluster_cannot_take_toxic_faults(tmp_path: Path) -> None:
    from ktrial.nemesis import NemesisOptions

    rd = create_run(tmp_path / "store", "fake")
    spec = _spec(tmp_path, nemesis=NemesisOptions(faults=("toxic",)))
    out = Trial(
        spec, say=lambda _: None, cluster=cast(Cluster, FakeCluster()), workload=FakeWorkload(rd)
    ).execute()
    assert out.exit_code == 255 and out.error is not None and "toxic" in out.error
    assert out.results is None  # nothing was recorded
