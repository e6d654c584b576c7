"""Whole runs of the queue and copy workloads on the real 3-node local cluster, checked.

Each run goes through the run orchestration (trial.run_workload) exactly as `ktrial run`
does: setup -> main phase -> drain -> checker, into a run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ktrial.histories.jsonl import read_history
from ktrial.histories.store import create_run, load_json
from ktrial.trial import TrialOutcome, run_workload
from ktrial.workloads import make_workload
from ktrial.workloads.worker import worker_program

pytestmark = pytest.mark.integration


def run(
    cluster: Any,
    tmp_path: Path,
    workload: str,
    opts: dict[str, Any],
    seconds: float,
    targets: dict[str, int],
    seed: int = 11,
) -> TrialOutcome:
    """Run for at most `seconds`, ending early once every target count ("f:type") is reached.

    Sizing runs by work done keeps them short on a quiet machine; the caps keep the
    whole file within a few minutes on a loaded one.
    """
    wl = make_workload(workload, opts, seed)
    rd = create_run(tmp_path / "store", workload)

    def reached(counts: Any) -> bool:
        return all(counts[tuple(k.split(":"))] >= v for k, v in targets.items())

    out = run_workload(cluster, wl, rd, seed, seconds, drain_timeout=60.0, until=reached)
    assert out.error is None, out.error
    assert out.results is not None
    # What run_workload returned is what it wrote.
    assert load_json(rd.results)["valid"] == out.results["valid"]
    meta = load_json(rd.test_json)
    pconf = meta["producer_config"]
    for c in pconf.values() if "input" in pconf else [pconf]:
        assert c["acks"] == "all"
    assert meta["seed"] == seed and meta["keys"] and meta["drain"] == out.drain
    assert meta["consumer_config"]["isolation.level"] == "read_committed"
    assert meta["cluster"]["kind"] == "local"
    if workload in ("queue", "copy"):
        mixed = "mix" if opts.get("driver_mix") else "confluent"
        assert meta["driver"] == opts.get("driver", mixed)
    return out


def n(out: TrialOutcome, f: str, t: str) -> int:
    return out.counts.get(f"{f}:{t}", 0)


def explain(out: TrialOutcome) -> str:
    return f"results={(out.results or {}).get('anomalies')} drain={out.drain} counts={out.counts}"


def assert_fully_drained(out: TrialOutcome) -> None:
    assert out.drain["caught_up"], explain(out)
    assert out.drain["lagging_keys"] == {}
    # Every value an ok send acknowledged was read back by an ok poll.
    ops = read_history(out.run_dir.history)
    sent = {
        (m.key, m.value)
        for o in ops
        if o.type == "ok" and o.is_data
        for m in o.value
        if type(m).__name__ == "Send" and m.offset is not None
    }
    read = {
        (k, v)
        for o in ops
        if o.type == "ok" and o.is_data
        for m in o.value
        if type(m).__name__ == "Poll" and m.records
        for k, recs in m.records.items()
        for _, v in recs
    }
    assert sent and sent <= read, f"{len(sent - read)} acknowledged values never read"


# Targets end a run early once reached; the assertions are the floors a run must pass
# even on this shared 2-core machine under heavy load from other jobs (measured rates:
# bench/RESULTS.md "Workload throughput").


def driver_param(name: str) -> Any:
    """A --driver to run with; a worker driver is skipped when its program is not built."""
    if name == "confluent":
        return name
    try:
        worker_program(name)
    except ValueError as e:
        return pytest.param(name, marks=pytest.mark.skip(reason=str(e)))
    return name


DRIVERS = [driver_param("confluent"), driver_param("franz"), driver_param("java")]


# java in host mode: the processes share JVMs (processes_per_jvm), a crash is a forced
# close of one process's clients inside its JVM (docs/drivers.md)
HOSTED = {"java": 16}


def hosted(opts: dict[str, Any], driver: str, per_jvm: int) -> dict[str, Any]:
    """`opts` for `driver`; a `java-hosted` entry runs java with `per_jvm` per JVM."""
    if driver != "java-hosted":
        return {**opts, "driver": driver}
    return {**opts, "driver": "java", "producer_config": {"processes_per_jvm": per_jvm}}


def assert_hosted(out: TrialOutcome, per_jvm: int) -> None:
    """The processes shared JVMs: fewer started than processes were opened."""
    clients = load_json(out.run_dir.test_json)["workload_results"]["clients"]["java"]
    hosts = clients["hosts"]
    assert hosts["processes_per_host"] == per_jvm, clients
    opened = clients["call_ms"]["open"]["n"]
    assert 1 <= hosts["hosts_started"] <= opened // 2, clients


def java_hosted() -> Any:
    java = DRIVERS[2]  # skipped when the worker is not built
    return pytest.param("java-hosted", marks=() if isinstance(java, str) else java.marks)


# java runs the idempotent queue hosted (the mode that reaches the others' rates); its
# own JVM per process runs the transactional, subscribe, copy and mixed runs
@pytest.mark.parametrize("driver", [DRIVERS[0], DRIVERS[1], java_hosted()])
def test_queue_idempotent_run_is_valid(local_cluster: Any, tmp_path: Path, driver: str) -> None:
    base = {"txn": False, "concurrency": 16, "crash_clients": 200}
    opts = hosted(base, driver, HOSTED["java"])
    out = run(local_cluster, tmp_path, "queue", opts, 30, {"send:ok": 2000, "poll:ok": 1000})
    assert out.results is not None and out.results["valid"] is True, explain(out)
    floor = 800
    assert n(out, "send", "ok") >= floor and n(out, "poll", "ok") >= floor, out.counts
    assert n(out, "send", "ok") + n(out, "poll", "ok") >= floor * 2.5, out.counts  # thousands
    assert n(out, "crash", "info") >= 1, out.counts
    assert_fully_drained(out)
    if driver == "java-hosted":
        assert_hosted(out, HOSTED["java"])


@pytest.mark.parametrize("driver", [*DRIVERS, java_hosted()])
def test_queue_txn_run_is_valid(local_cluster: Any, tmp_path: Path, driver: str) -> None:
    base = {"txn": True, "abort_p": 0.1, "concurrency": 16, "crash_clients": 150}
    opts = hosted(base, driver, 8)
    out = run(local_cluster, tmp_path, "queue", opts, 30, {"txn:ok": 1000, "txn:fail": 25})
    assert out.results is not None and out.results["valid"] is True, explain(out)
    if driver == "java-hosted":
        assert_hosted(out, 8)
    # a JVM per process is CPU-bound here (24-37 txn/s at 32, bench/RESULTS.md)
    assert n(out, "txn", "ok") >= (150 if driver == "java" else 500), out.counts
    assert n(out, "txn", "fail") >= 5, out.counts  # deliberate aborts, recorded as fail
    assert n(out, "crash", "info") >= 1, out.counts
    assert_fully_drained(out)
    # Aborted values were really written (offsets acknowledged), yet the checker found
    # no ok op reading them (valid above): read_committed held.
    ops = read_history(out.run_dir.history)
    aborted = {
        (m.key, m.value)
        for o in ops
        if o.type == "fail" and o.f == "txn"
        for m in o.value
        if type(m).__name__ == "Send" and m.offset is not None
    }
    assert aborted


@pytest.mark.skipif(
    any(not isinstance(d, str) for d in DRIVERS), reason="a worker driver is not built"
)
def test_queue_mixed_drivers_run_is_valid(local_cluster: Any, tmp_path: Path) -> None:
    """confluent, java and franz processes in one transactional run: each client's
    committed writes are read by the others' consumers, and the history is valid."""
    opts = {
        "txn": True,
        "abort_p": 0.1,
        "concurrency": 6,
        "driver_mix": ["confluent", "java", "franz"],
    }
    out = run(local_cluster, tmp_path, "queue", opts, 20, {"txn:ok": 300})
    assert out.results is not None and out.results["valid"] is True, explain(out)
    assert n(out, "txn", "ok") >= 60, out.counts
    assert_fully_drained(out)
    meta = load_json(out.run_dir.test_json)
    assert meta["driver_mix"] == opts["driver_mix"] and meta["slot_drivers"]["4"] == "java"
    drivers = {int(p): d for p, d in meta["workload_results"]["process_drivers"].items()}
    # who wrote each value, who read it: reads across clients
    ops = read_history(out.run_dir.history)
    writer = {
        (m.key, m.value): drivers[int(o.process)]
        for o in ops
        if o.type == "ok" and o.is_data
        for m in o.value
        if type(m).__name__ == "Send"
    }
    pairs = {
        (writer[(k, v)], drivers[int(o.process)])
        for o in ops
        if o.type == "ok" and o.is_data and o.process in drivers
        for m in o.value
        if type(m).__name__ == "Poll" and m.records
        for k, recs in m.records.items()
        for _, v in recs
        if (k, v) in writer
    }
    crossed = {(w, r) for w, r in pairs if w != r}
    assert {r for _, r in crossed} == {"confluent", "java", "franz"}, pairs


@pytest.mark.parametrize("driver", [*DRIVERS, java_hosted()])
def test_queue_subscribe_run_is_valid(local_cluster: Any, tmp_path: Path, driver: str) -> None:
    """Group consumers, offsets committed through the transaction with the member's
    group metadata; a worker driver's runs are shorter (broker-time budget). Hosted
    java crashes members inside their JVM: a crashed member stays in the group until
    its session times out, and its transaction is fenced by its successor."""
    base = {
        "txn": True,
        "sub_via": "subscribe",
        "concurrency": 4,
        "abort_p": 0.05,
        "reassign_p": 0.01,
        "n_keys": 8,
    }
    opts = hosted(base, driver, 4)
    seconds, target = (15, 200) if driver == "confluent" else (8, 120)
    if driver != "confluent":
        opts["reassign_p"] = 0.05  # some subscriptions change in a short run too
    if driver == "java-hosted":
        seconds, opts["crash_clients"] = 15, 40
    out = run(local_cluster, tmp_path, "queue", opts, seconds, {"txn:ok": target, "txn:fail": 3})
    assert out.results is not None and out.results["valid"] is True, explain(out)
    assert n(out, "subscribe", "ok") >= 4 and n(out, "txn", "ok") >= 40, out.counts
    assert n(out, "txn", "fail") >= 1, out.counts  # deliberate aborts
    assert_fully_drained(out)
    if driver == "java-hosted":
        assert n(out, "crash", "info") >= 1, out.counts
        assert_hosted(out, 4)
    if driver != "confluent":
        # the group really assigned, and changed subscriptions were taken
        ops = read_history(out.run_dir.history)
        assert any(o.type == "ok" and o.f == "txn" and o.extra.get("rebalance_log") for o in ops)
        assert n(out, "subscribe", "ok") > 4, out.counts


@pytest.mark.parametrize("driver", DRIVERS)
def test_copy_run_is_exactly_once(local_cluster: Any, tmp_path: Path, driver: str) -> None:
    opts = {"rate": 200, "copiers": 3, "crash_clients": 40, "abort_p": 0.05, "driver": driver}
    seconds, until, floor = 25, {"send:ok": 2000, "txn:ok": 300}, 50
    if driver != "confluent":
        # a worker driver's run is shorter (broker-time budget), crashes come sooner
        opts["crash_clients"] = 25
        seconds, until, floor = 12, {"send:ok": 1500, "txn:ok": 150}, 30
    out = run(local_cluster, tmp_path, "copy", opts, seconds, until)
    assert out.results is not None and out.results["valid"] is True, explain(out)
    assert not {"eos-duplicate", "eos-loss"} & set(out.results["anomalies"])
    assert n(out, "send", "ok") >= 500, out.counts
    assert n(out, "txn", "ok") >= floor and n(out, "crash", "info") >= 1, out.counts
    assert n(out, "txn", "fail") >= 1, out.counts
    assert out.drain["copy_caught_up"], explain(out)
    assert_fully_drained(out)
