"""A small txn-cost matrix on the real 3-node local cluster, run as `ktrial run` runs it.

Two producer counts x two transaction sizes, 3 s per cell: the history must check
VALID (every committed value read back by the drain, nothing duplicated, no aborted
reads) and the table must hold a measured row for every cell. Then one tiny cell on
each worker driver (franz-go, kafka-clients): the workers pad the records themselves.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, cast

import confluent_kafka as ck
import pytest
from ktrial.histories.store import create_run, load_json
from ktrial.trial import run_workload
from ktrial.workloads import make_workload
from ktrial.workloads.txn_cost import TxnCostWorkload, format_table

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


@pytest.mark.parametrize("driver", ["franz", "java"])
def test_txn_cost_on_a_worker_driver_pads_records_and_is_valid(
    local_cluster: Any, tmp_path: Path, driver: str
) -> None:
    """One tiny cell through a worker driver: the records the brokers hold are the
    values padded to message_bytes by the worker itself (read back raw here, not
    through ktrial's decoder, which would hide a missing padding), the history checks
    VALID, and the table says where the window's time went per worker call."""
    opts = {
        "driver": driver,
        "sizes": "5",
        "producers": "2",
        "message_bytes": 300,
        "seconds_per_cell": 2,
    }
    wl = cast(TxnCostWorkload, make_workload("txn-cost", opts, 5))
    rd = create_run(tmp_path / "store", f"txn-cost-{driver}")
    out = run_workload(local_cluster, wl, rd, 5, time_limit=90, drain_timeout=40)
    assert out.error is None, out.error
    assert out.results is not None
    assert out.results["valid"] is True, out.results.get("anomalies")
    assert out.drain["caught_up"], out.drain
    test = load_json(rd.test_json)
    assert test["driver"] == driver
    table = test["workload_results"]
    (cell,) = table["cells"]
    assert cell["status"] == "done" and cell["txns_ok"] > 0, cell
    assert cell["commit_ms"]["n"] == cell["txns_ok"], cell
    assert {"begin", "produce", "flush", "commit"} <= set(cell["call_ms"]), cell
    assert "commit" in table["clients"][driver]["call_ms"]

    ops = [json.loads(line) for line in rd.history.read_text().splitlines()]
    committed = {m[2][1] for o in ops if o["f"] == "txn" and o["type"] == "ok" for m in o["value"]}
    raw = read_raw(local_cluster.bootstrap_servers, wl.topic, wl.opts.partitions)
    assert committed and committed <= set(raw), "committed values missing from the topic"
    # every committed record is its value's digits padded with spaces to 300 bytes
    bad = {v: r[:40] for v, r in raw.items() if r != str(v).encode().ljust(300)}
    assert not bad, f"{len(bad)} records not padded to 300 bytes, e.g. {next(iter(bad.items()))}"


def read_raw(bootstrap: str, topic: str, partitions: int) -> dict[int, bytes]:
    """Every committed record of `topic` as the brokers hold it: value -> raw bytes."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "raw-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, bytes] = {}
        eof: set[int] = set()
        deadline = time.monotonic() + 20
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == ck.KafkaError._PARTITION_EOF:
                    eof.add(int(m.partition() or 0))
                continue
            raw = m.value() or b""
            out[int(raw)] = raw
        return out
    finally:
        c.close()
