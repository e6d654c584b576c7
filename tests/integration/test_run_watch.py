"""`ktrial run --stop-on-anomaly` against real brokers that lose and overwrite writes.

The unsafe profile (min.insync.replicas 1, unclean leader election) with careless
producers (acks=1, no idempotence, no transactions) under kill and partition faults
overwrites acknowledged records within a minute (bench/RESULTS.md, "Detection": an
unclean leader writes a second value at an offset a producer was told holds its
first one: inconsistent-offsets, and the producer's next sends land below it:
nonmonotonic-send). The running check must show the anomaly while the run goes,
stop the main phase long before its 10-minute limit, and the final check must find
the same anomaly and call the run INVALID (exit 1).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIME_LIMIT = 600


@pytest.fixture(autouse=True)
def _need_cluster() -> None:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)


def test_stop_on_anomaly_ends_an_unsafe_run_early_with_the_anomaly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    cmd = [
        *(sys.executable, "-m", "ktrial", "run"),
        *("--store", str(store), "--name", "watch", "--seed", "5"),
        *("--time-limit", str(TIME_LIMIT), "--no-live"),
        *("--profile", "unsafe", "--no-txn", "--no-idempotence", "--acks", "1"),
        *("--producer-config", "retries=5"),
        *("--nemesis", "kill,partition", "--nemesis-interval", "4"),
        *("--check-every", "5", "--stop-on-anomaly", "--drain-timeout", "30"),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT + 600)
    took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    run = (store / "watch" / "latest").resolve()
    meta = orjson.loads((run / "test.json").read_bytes())
    stop = (meta.get("watch") or {}).get("stopped_early")
    assert stop is not None, f"the run was not stopped early:\n{out[-4000:]}"
    assert stop["at_s"] < TIME_LIMIT / 2 and took < TIME_LIMIT, (stop, took)
    # shown while running: before the drain began
    err = proc.stderr
    shown = err.find("anomaly while running")
    assert 0 <= shown < err.find("draining: reading every key back"), err[-4000:]
    assert "stopping the run early (--stop-on-anomaly)" in err
    # the final check: INVALID, with every anomaly the running check found
    results = orjson.loads((run / "results.json").read_bytes())
    assert proc.returncode == 1 and results["valid"] is False, out[-4000:]
    assert set(stop["types"]) <= set(results["bad_error_types"]), (stop, results["bad_error_types"])
    assert results["warnings"][0].startswith("the run stopped early at ")
    assert "warning: the run stopped early at " in proc.stdout
    assert "verdict: INVALID" in proc.stdout
    if {"lost-write", "torn-transaction"} & set(results["bad_error_types"]):
        assert f"into the brokers' logs: ktrial trace {run}" in proc.stdout
    assert meta["drain"], "the run was drained"
    checks = [orjson.loads(x) for x in (run / "watch.jsonl").read_bytes().splitlines()]
    assert checks and all(c.get("error") is None for c in checks), checks
