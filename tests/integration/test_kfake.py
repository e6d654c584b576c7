"""franz-go's kfake as the system under test (`ktrial run --cluster kfake`, the local
backend running the kfake system), end to end.

* the queue workload with transactions, no faults: valid, and test.json records kfake;
* a scripted run of the `control` family (errors answered after the write was applied,
  coordinator and leader moves, refused fetches): every fault is in the history as a
  start and an end op with what was injected and how many requests it answered, the
  report names them, and the checker finds no anomaly in the ambiguous answers.

kfake is light (one Go process), but these still run under the broker lock like every
integration test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from ktrial.clusters.kfake import default_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not default_binary().exists(), reason="kfake not built (run scripts/setup.sh)"
    ),
]

KTRIAL = [sys.executable, "-m", "ktrial"]

# The control family only (no process faults: see docs/systems.md for what a restart
# of kfake's process does to read_committed consumers).
SCRIPT = """
[[entry]]
at = 2
fault = "control"
api = "produce"
error = "REQUEST_TIMED_OUT"
duration = 4

[[entry]]
at = 7
fault = "control"
action = "coordinators"
duration = 1

[[entry]]
at = 9
fault = "control"
api = "end_txn"
error = "NOT_COORDINATOR"
count = 20
duration = 3

[[entry]]
at = 13
fault = "control"
targets = "n2"
api = "produce"
error = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
duration = 3

[[entry]]
at = 17
fault = "control"
action = "leaders"
duration = 1

[[entry]]
at = 19
fault = "control"
api = "fetch"
error = "NOT_LEADER_OR_FOLLOWER"
duration = 3
"""


def _run(store: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    proc = subprocess.run(
        [
            *KTRIAL,
            "run",
            "--cluster",
            "kfake",
            "--store",
            str(store),
            "--name",
            name,
            "--no-live",
            "--seed",
            "3",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, (store / name / "latest").resolve()


def _ops(run: Path) -> list[dict[str, Any]]:
    data = (run / "history.jsonl").read_bytes()
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def _alive(run_id: str) -> list[str]:
    """Processes still carrying the run's marker (the kfake process must be gone)."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if f"KTRIAL_RUN={run_id}".encode() in (p / "environ").read_bytes():
                    found.append(p.name)
            except OSError:
                continue
    return found


def test_queue_with_transactions_runs_valid_on_kfake(tmp_path: Path) -> None:
    proc, run = _run(tmp_path / "store", "plain", "--time-limit", "20", "--txn")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "verdict: VALID" in proc.stdout
    meta = orjson.loads((run / "test.json").read_bytes())
    cluster = meta["cluster"]
    # the local backend running the kfake system (clusters/system.py)
    assert cluster["kind"] == "local" and cluster["system"] == "franz-go-kfake"
    assert cluster["kfake_version"].startswith("v0.0.0-") and cluster["one_process"] is True
    ok = [o for o in _ops(run) if o["type"] == "ok" and o["f"] == "txn"]
    assert len(ok) >= 200, f"only {len(ok)} committed transactions"
    assert _alive(cluster["run_id"]) == []


@pytest.mark.parametrize("txn", ["--txn", "--no-txn"])
def test_control_faults_are_recorded_reported_and_judged(tmp_path: Path, txn: str) -> None:
    script = tmp_path / "control.toml"
    script.write_text(SCRIPT)
    proc, run = _run(
        tmp_path / "store",
        "control",
        "--time-limit",
        "25",
        txn,
        "--nemesis-schedule",
        "script",
        "--nemesis-script",
        str(script),
    )
    out = proc.stdout + proc.stderr
    results = orjson.loads((run / "results.json").read_bytes())
    # a produce written but answered with an error is a retry for the client (info or
    # a retried success), never a lost, duplicated or reordered write
    assert proc.returncode == 0, out[-4000:] + str(results.get("bad_error_types"))
    assert results["valid"] is True and results["bad_error_types"] == []
    assert sorted(results["faults"]["injected"]) == ["control"], results["faults"]

    nem = [o for o in _ops(run) if o["process"] == "nemesis"]
    starts = {o["fault_id"]: o["value"] for o in nem if o["f"] == "start-control"}
    stops = {o["fault_id"]: o["value"] for o in nem if o["f"] == "stop-control"}
    assert len(starts) == 6 and set(stops) == set(starts)
    by_what = {(v["action"], v.get("api"), v.get("error")): fid for fid, v in starts.items()}
    timed_out = by_what[("error", "produce", "REQUEST_TIMED_OUT")]
    assert starts[timed_out]["applied"] is True and starts[timed_out]["code"] == 7
    assert stops[timed_out]["hits"] > 0 and stops[timed_out]["cleared"] == 1
    on_n2 = by_what[("error", "produce", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")]
    assert starts[on_n2]["nodes"] == ["n2"] and starts[on_n2]["node_ids"] == [1]
    assert ("leaders", None, None) in by_what and ("coordinators", None, None) in by_what

    html = (run / "report.html").read_text()
    assert "control" in html and timed_out in html
    assert "verdict: VALID" in proc.stdout and "faults: control ×6" in proc.stdout
