"""`ktrial bench load`'s sweep over a fake cluster and a fake generator (no brokers)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner
from ktrial.clusters.base import Cluster
from ktrial.commands.bench import bench
from ktrial.load.generator import ENV, LoadOptions
from ktrial.load.sweep import SweepPlan, plot_sweep, sweep

# Offers -rate for -duration in 0.1 s lines; consumes everything up to 3,000 msg/s and
# half above (a cluster whose knee is 3,000).
FAKE = """#!{python}
import json, sys, time
args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:])
rate, dur = float(args["rate"]), float(args["duration"].rstrip("s"))
start = time.time()
print(json.dumps({{"type": "start", "time": start, "config": args}}), flush=True)
t = 0.0
while t < dur - 1e-9:
    time.sleep(0.02)
    t = round(t + 0.1, 3)
    off = int(rate * 0.1)
    con = off if rate <= 3000 else off // 2
    print(json.dumps({{"type": "second", "t": t, "time": start + t, "dt": 0.1, "offered": off,
        "produced": off, "consumed": con, "consumers": [con], "e2e_hist": [[7.0, con]],
        "produce_hist": [[3.0, off]], "cpu_s": 0.002}}), flush=True)
print(json.dumps({{"type": "final", "offered": 0, "consumers": [0]}}), flush=True)
"""


class TopicCluster:
    kind = "fake"
    bootstrap_servers = "fake:9092"

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.topics: dict[str, int] = {}

    def create_topics(self, topics: dict[str, int], replication_factor: int = 3) -> None:
        self.topics.update(topics)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    prog = tmp_path / "fake-loadgen"
    prog.write_text(FAKE.format(python=sys.executable))
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(ENV, str(prog))
    return prog


def test_sweep_finds_the_knee_and_stops_climbing(tmp_path: Path, fake: Path) -> None:
    cluster = TopicCluster()
    plan = SweepPlan(
        rates=(4000.0, 1000.0, 2000.0, 8000.0),
        partitions=(3,),
        point_s=1.0,
        measure_s=0.5,
        base=LoadOptions(consumers=1),
    )
    said: list[str] = []
    points, ks = sweep(cast(Cluster, cluster), plan, tmp_path / "out", say=said.append)
    assert [p.rate for p in points] == [1000.0, 2000.0, 4000.0]  # 8000 skipped
    assert [p.behind for p in points] == [False, False, True]
    assert points[0].e2e_p99_ms == 7.0 and points[0].offered_rate == 1000.0
    assert ks[0].rate == 2000.0 and ks[0].reached
    assert any("skipped" in m for m in said)
    assert len(cluster.topics) == 3 and all(v == 3 for v in cluster.topics.values())
    doc = json.loads((tmp_path / "out" / "points.json").read_text())
    assert doc["knees"][0]["rate"] == 2000.0 and len(doc["points"]) == 3
    assert "knee at 2000" in (tmp_path / "out" / "table.txt").read_text()
    png = plot_sweep(points, ks, tmp_path / "out" / "sweep.png")
    assert png is not None and png.read_bytes().startswith(b"\x89PNG")


def test_bench_load_usage_errors(fake: Path) -> None:
    r = CliRunner().invoke(bench, ["load", "--rates", "a,b"])
    assert r.exit_code == 2 and "comma-separated numbers" in r.output
    r = CliRunner().invoke(bench, ["load", "--measure-seconds", "90"])
    assert r.exit_code == 2 and "measure seconds" in r.output
    r = CliRunner().invoke(bench, ["load", "--load-opt", "nope=1"])
    assert r.exit_code == 2 and "unknown load option" in r.output
    r = CliRunner().invoke(bench, ["load", "--cluster", "external"])
    assert r.exit_code == 2 and "--bootstrap" in r.output
