"""A small txn-cost matrix on the real 3-node local cluster, run as `ktrial run` runs it.

Two producer counts x two transaction sizes, 3 s per cell: the history must check
VALID (every committed value read back by the drain, nothing duplicated, no aborted
reads) and the table must hold a measured row for every cell.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.histories.store import create_run, load_json
from ktrial.trial import run_workload
from ktrial.workloads import make_workload
from ktrial.workloads.txn_cost import format_table

pytestmark = pytest.mark.integration

OPTS = {"sizes": "5,20", "producers": "2,4", "message_bytes": 1024, "seconds_per_cell": 3}


def test_txn_cost_matrix_is_measured_and_valid(local_cluster: Any, tmp_path: Path) -> None:
    wl = make_workload("txn-cost", dict(OPTS), 5)
    rd = create_run(tmp_path / "store", "txn-cost")
    # The run ends by itself once the matrix is done; the limit only bounds a hang.
    out = run_workload(local_cluster, wl, rd, 5, time_limit=180, drain_timeout=60)
    assert out.error is None, out.error
    table = out.drain["txn_cost"]
    print("\n" + format_table(table["cells"]))
    print(json.dumps({"counts": out.counts, "drain_s": out.drain["seconds"]}))

    assert out.results is not None
    assert out.results["valid"] is True, out.results.get("anomalies")
    assert out.drain["caught_up"], out.drain
    assert load_json(rd.test_json)["drain"]["txn_cost"] == table
    assert load_json(rd.test_json)["workload_results"] == table

    # every cell, in run order, measured for its full window
    cells = table["cells"]
    assert [(c["producers"], c["size"]) for c in cells] == [(2, 5), (2, 20), (4, 5), (4, 20)]
    for c in cells:
        assert c["status"] == "done" and c["seconds"] >= 3.0, c
        assert c["txns_ok"] > 0 and c["records_ok"] == c["txns_ok"] * c["size"], c
        assert c["commit_ms"]["n"] == c["txns_ok"] and c["commit_ms"]["p50"] > 0, c
        assert c["txn_ms"]["p50"] >= c["commit_ms"]["p50"], c  # the commit is part of the txn
        mb_per_s = c["records_ok"] * 1024 / c["seconds"] / 1e6
        assert c["mb_per_s"] == pytest.approx(mb_per_s, abs=1e-3)  # rounded to 3 places

    # Bigger transactions move more records: a transaction's time here is mostly fixed
    # (AddPartitionsToTxn waits for the previous markers, EndTxn), so 20-record
    # transactions gave ~5x the records/s of 5-record ones per producer count (first run:
    # 29.0 vs 5.3 and 63.8 vs 13.7 records/s, load average 17). A 3 s cell holds only a
    # handful of transactions, so one stall can swing a single cell: compare the sums.
    def rate(size: int) -> float:
        rows = [c for c in cells if c["size"] == size]
        return sum(c["records_ok"] for c in rows) / sum(c["seconds"] for c in rows)

    assert rate(20) > rate(5), cells

    # The history: txn ops of sends only; every value an ok txn committed was read
    # back by the drain (what `unseen` checks, asserted here directly).
    ops = [json.loads(line) for line in rd.history.read_text().splitlines()]
    committed = {
        (str(m[1]), m[2][1])
        for o in ops
        if o["f"] == "txn" and o["type"] == "ok"
        for m in o["value"]
    }
    read = {
        (k, v)
        for o in ops
        if o["f"] == "poll" and o["type"] == "ok"
        for k, recs in o["value"][0][1].items()
        for _, v in recs
    }
    assert committed and committed <= read, f"{len(committed - read)} committed values unread"
    assert sum(c["txns_ok"] for c in cells) <= out.counts["txn:ok"]
