"""`--load` in trial.py: the generator beside the workload, over a fake cluster and a
fake generator program (no brokers): started after the workload's topics, stopped as
the main phase ends (before the drain), on error too; its telemetry judged and plotted."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from ktrial.histories.recorder import Recorder
from ktrial.histories.store import load_json
from ktrial.load.generator import ENV, LoadOptions
from ktrial.tests.run.test_trial import FakeCluster, FakeWorkload, _spec
from ktrial.trial import Trial

# A stand-in for ktrial-loadgen: the same lines, one "second" every 0.2 s, consuming
# all it offers; its final line at SIGTERM. Its arguments go to args.txt.
FAKE = """#!{python}
import json, os, signal, sys, time
open(os.path.join(os.path.dirname(sys.argv[0]), "args.txt"), "w").write("\\n".join(sys.argv[1:]))
start = time.time()
def line(d):
    sys.stdout.write(json.dumps(d) + "\\n"); sys.stdout.flush()
def stop(*_):
    line({{"type": "final", "offered": 1, "consumers": [1]}})
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
line({{"type": "start", "time": start, "config": {{"rate": 100}}}})
t = 0.0
while True:
    time.sleep(0.2)
    t += 0.2
    line({{"type": "second", "t": t, "time": start + t, "dt": 0.2, "offered": 20,
          "produced": 20, "consumed": 20, "consumers": [10, 10], "produce_p99_ms": 4.0,
          "e2e_p99_ms": 9.0, "e2e_hist": [[9.0, 20]], "produce_hist": [[4.0, 20]],
          "cpu_s": 0.01}})
"""


class TopicCluster(FakeCluster):
    def __init__(self) -> None:
        super().__init__()
        self.topics: dict[str, int] = {}

    def create_topics(self, topics: dict[str, int], replication_factor: int = 3) -> None:
        self.calls.append("create_topics")
        self.topics.update(topics)


class WatchingWorkload(FakeWorkload):
    """Notes whether the generator had written its final line when the drain began."""

    def __init__(self, load_file: list[Path]) -> None:
        super().__init__()
        self.load_file = load_file
        self.final_at_drain: bool | None = None

    def run(self, recorder: Recorder, stop: threading.Event) -> None:
        super().run(recorder, stop)

    def drain(self, recorder: Recorder, timeout_s: float) -> dict[str, Any]:
        f = self.load_file[0] if self.load_file else None
        self.final_at_drain = f is not None and '"final"' in f.read_text()
        return super().drain(recorder, timeout_s)


@pytest.fixture
def fake_loadgen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    prog = d / "fake-loadgen"
    prog.write_text(FAKE.format(python=sys.executable))
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(ENV, str(prog))
    return prog


def test_load_runs_beside_the_workload_and_is_judged_and_plotted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_loadgen: Path
) -> None:
    cluster = TopicCluster()
    files: list[Path] = []
    wl = WatchingWorkload(files)
    spec = _spec(tmp_path, time_limit=2.5, load=LoadOptions(rate=100, partitions=4, topic="bg"))
    said: list[str] = []
    trial = Trial(spec, say=said.append, workload=wl)
    monkeypatch.setattr(trial, "_make_cluster", lambda nem_opts: cluster)
    orig = trial.start_load

    def start_load(stack: Any, c: Any, run_dir: Any) -> Any:
        files.append(run_dir.path / "load.jsonl")
        return orig(stack, c, run_dir)

    monkeypatch.setattr(trial, "start_load", start_load)
    out = trial.execute()

    assert out.exit_code == 0, out.error
    assert cluster.topics == {"bg": 4}  # created like the workload's
    args = (fake_loadgen.parent / "args.txt").read_text().splitlines()
    assert "-brokers=fake:9092" in args and "-topic=bg" in args and "-rate=100" in args
    assert wl.final_at_drain is True  # stopped as the main phase ended, before the drain
    meta = load_json(out.run_dir.test_json)
    assert meta["load"]["rate"] == 100 and meta["load"]["exit_code"] == 0
    assert meta["load"]["telemetry"] == "load.jsonl"
    assert "load" not in meta["run"]
    live = load_json(out.run_dir.results)["metrics"]["liveness"]
    assert live["checks"]["behind"]["ok"] is True
    assert live["load"]["offered"] > 0 and live["load"]["per_consumer"] == [1]
    assert (out.run_dir.path / "plots" / "load.png").read_bytes().startswith(b"\x89PNG")
    html = (out.run_dir.path / "report.html").read_text()
    assert 'id="plot-load"' in html
    assert any(m.startswith("load: 100 msg/s offered to bg") for m in said)


def test_the_generator_is_stopped_when_the_run_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_loadgen: Path
) -> None:
    cluster = TopicCluster()
    spec = _spec(tmp_path, time_limit=5.0, load=LoadOptions(rate=100))
    wl = FakeWorkload(fail=True)
    trial = Trial(spec, say=lambda _m: None, workload=wl)
    monkeypatch.setattr(trial, "_make_cluster", lambda nem_opts: cluster)
    pids: list[int] = []
    orig = trial.start_load

    def start_load(stack: Any, c: Any, run_dir: Any) -> Any:
        gen = orig(stack, c, run_dir)
        assert gen is not None and gen.pid is not None
        pids.append(gen.pid)
        return gen

    monkeypatch.setattr(trial, "start_load", start_load)
    out = trial.execute()
    assert out.exit_code == 255 and "workload failed" in (out.error or "")
    assert pids
    with pytest.raises(ProcessLookupError):  # stopped (and reaped) by the run's ExitStack
        os.kill(pids[0], 0)
