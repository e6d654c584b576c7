"""`ktrial run --load` end to end (docs/load.md): real brokers, the real generator
(workers/bin/ktrial-loadgen) beside the checked workload; ~60-90 s of broker time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ktrial.histories.loadlog import read_loadlog
from ktrial.load.generator import loadgen_program

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_run_with_load(tmp_path: Path) -> None:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    try:
        loadgen_program()
    except ValueError as e:
        pytest.skip(str(e))
    store = tmp_path / "store"
    cmd = [
        sys.executable,
        "-m",
        "ktrial",
        "run",
        "--store",
        str(store),
        "--name",
        "load",
        "--seed",
        "3",
        "--time-limit",
        "20",
        "--heal-wait",
        "0",
        "--drain-timeout",
        "30",
        "--check-every",
        "0",
        "--no-live",
        "--load",
        "2000",
        "--load-opt",
        "partitions=3",
        "--load-opt",
        "consumers=2",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    run = (store / "load" / "latest").resolve()
    assert done.returncode == 0, done.stderr[-3000:]
    # the checked workload stayed valid beside the load
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True
    # the generator offered 2,000 msg/s for the main phase and its consumers kept up
    log = read_loadlog(run / "load.jsonl")
    assert log.final is not None and log.final["errors"] == 0
    steady = [s for s in log.seconds if s.dt > 0.9][2:]
    assert len(steady) >= 10
    # open loop on a clock: each second offers ~2,000 (a late telemetry tick on a busy
    # machine moves messages between neighbouring lines, not out of the total)
    rates = [s.offered / s.dt for s in steady]
    assert all(1500 <= r <= 2500 for r in rates), rates
    assert abs(log.final["offered_rate"] - 2000) <= 60, log.final
    assert sum(s.consumed for s in steady) >= 0.9 * sum(s.offered for s in steady)
    assert all(n > 0 for n in log.final["consumers"])  # both consumers progressed
    meta = json.loads((run / "test.json").read_text())
    assert meta["load"]["rate"] == 2000 and meta["load"]["exit_code"] == 0
    live = results["metrics"]["liveness"]
    assert "behind" in live["checks"] and live["load"]["windows_judged"] >= 1
    # node-stats every second with the reclaim telemetry, and the two plots
    stats = [
        json.loads(line)
        for line in (run / "history.jsonl").read_text().splitlines()
        if '"node-stats"' in line
    ]
    assert len(stats) >= 15
    fig = next(iter(stats[-1]["value"].values()))
    for key in ("cpu_ms", "majflt", "host_pgscan_direct", "host_allocstall", "cgroup_pgmajfault"):
        assert key in fig, key
    assert fig["cpu_ms"] > 0
    assert (run / "plots" / "load.png").stat().st_size > 10_000
    assert (run / "plots" / "node-memory.png").stat().st_size > 10_000
