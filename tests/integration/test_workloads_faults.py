"""Liveness of the transactional queue workload under faults, on the real local cluster.

A node is killed and another partitioned away while the workload runs; after the
heal every worker slot must complete new ok ops (possibly as a replacement
process), no op may stay pending longer than its time budget, `run()` must return
soon after `stop` (trial.py joins the workload thread), and the checked history
must be valid.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import check_file, options_from_test_json
from ktrial.clusters.local import LocalCluster
from ktrial.histories.jsonl import HistoryWriter
from ktrial.histories.recorder import Recorder
from ktrial.nemesis import Nemesis
from ktrial.workloads.confluent import DriverConfig
from ktrial.workloads.driver import KeyMap
from ktrial.workloads.queue import QueueOptions, QueueWorkload

pytestmark = pytest.mark.integration

SLOTS = 6
# The longest a txn op may take by construction: main path (op_timeout_s), a commit
# that got at least commit_min_s, or an abort (abort_timeout_s), plus watchdog margins.
_D = DriverConfig(bootstrap="", keys=KeyMap({}), group_id="")
OP_BOUND_S = _D.op_timeout_s + max(_D.commit_min_s, _D.abort_timeout_s) + 2.0
MARGIN_S = 8.0  # scheduling on a shared 2-core machine


def history_lines(path: Path) -> list[dict[str, Any]]:
    """The ops written so far (the writer flushes every line)."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def ok_after(ops: list[dict[str, Any]], t_ns: int) -> set[Any]:
    """Processes with an ok data op completed after `t_ns`."""
    return {
        o["process"]
        for o in ops
        if o["type"] == "ok" and o["f"] in ("txn", "send", "poll") and o["time"] > t_ns
    }


def wait_for(cond: Any, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.5)
    return bool(cond())


def test_queue_txn_slots_recover_after_kill_and_partition(
    healed_local_cluster: LocalCluster, tmp_path: Path
) -> None:
    cluster = healed_local_cluster
    wl = QueueWorkload(QueueOptions(txn=True, concurrency=SLOTS), seed=5)
    meta = wl.setup(cluster)
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    rec = Recorder(writer)
    stop = threading.Event()
    errors: list[BaseException] = []

    def main() -> None:
        try:
            wl.run(rec, stop)
        except BaseException as e:
            errors.append(e)

    worker = threading.Thread(target=main, name="workload", daemon=True)
    worker.start()
    nem = Nemesis(cluster, rec, ["kill", "partition"], random.Random(1))
    try:
        # Warm up: every slot did some work before the faults.
        assert wait_for(lambda: len(ok_after(history_lines(path), 0)) >= SLOTS, 60), (
            "workload made no progress before any fault"
        )
        kill = nem.start("kill", ["n3"])
        part = nem.start("partition", ["n2"], shape="isolate")
        time.sleep(8)
        nem.stop(part)
        nem.stop(kill)
        nem.heal_all()
        healed = rec.now()

        def slots_progressed() -> bool:
            done = ok_after(history_lines(path), healed)
            return all(set(s.processes) & done for s in wl.slots)

        progressed = wait_for(slots_progressed, 45)
        recovered_s = (rec.now() - healed) / 1e9
        done = ok_after(history_lines(path), healed)
        stuck = [s.slot for s in wl.slots if not set(s.processes) & done]
    finally:
        t_stop = time.monotonic()
        stop.set()
        worker.join(60)
        returned_s = time.monotonic() - t_stop
        nem.heal_all()
    assert not worker.is_alive(), "run() did not return within 60 s of stop"
    assert not errors, errors
    assert progressed, f"slots {stuck} completed no ok op within 45 s of the heal"
    assert returned_s < OP_BOUND_S, f"run() returned {returned_s:.1f}s after stop"
    print(
        f"every slot resumed {recovered_s:.1f}s after the heal;"
        f" run() returned {returned_s:.1f}s after stop"
    )

    drain = wl.drain(rec, 60.0)
    writer.close()
    assert drain["caught_up"], drain

    # Every invoke completed, none took longer than an op's budget (+ margin).
    ops = history_lines(path)
    pending: dict[Any, dict[str, Any]] = {}
    longest = 0.0
    for o in ops:
        if o["process"] == "nemesis":
            continue
        if o["type"] == "invoke":
            assert o["process"] not in pending, f"two outstanding ops for process {o['process']}"
            pending[o["process"]] = o
        else:
            inv = pending.pop(o["process"])
            longest = max(longest, (o["time"] - inv["time"]) / 1e9)
    assert not pending, f"invokes never completed: {list(pending.values())[:3]}"
    assert longest <= OP_BOUND_S + MARGIN_S, f"an op took {longest:.1f}s"
    print(f"longest op {longest:.1f}s (bound {OP_BOUND_S:.0f}s + {MARGIN_S:.0f}s margin)")
    assert any(o["f"] == "kill" for o in ops if o["process"] == "nemesis")

    results = check_file(path, options_from_test_json(meta), meta)
    assert results["valid"] is True, results.get("anomalies")
