"""Each worker driver's real errors on the real local cluster, through the shared rules.

Provoked on purpose, a few seconds each: a producer fenced by its successor (the same
transactional id opened again: retire); a record too large for any broker (refused
inside kafka-clients' send(): fail; reported by franz-go's delivery: info); a send to a
partition that does not exist (kafka-clients knows it never left send(): fail;
franz-go cannot tell: info); and the transaction protocol each client used. The
clients' exceptions themselves are tested without brokers in
tests/workloads/worker/test_client_tables.py.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.worker import WorkerConfig, WorkerDriver, worker_program
from ktrial.workloads.worker.driver import ClientFacts
from ktrial.workloads.worker.errors import RETIRE_NAMES

pytestmark = pytest.mark.integration


def built(name: str) -> Any:
    try:
        worker_program(name)
    except ValueError as e:
        return pytest.param(name, marks=pytest.mark.skip(reason=str(e)))
    return name


WORKER_DRIVERS = [built("java"), built("franz")]


def config(cluster: Any, worker: str, txn: bool, **kw: Any) -> WorkerConfig:
    run = os.urandom(3).hex()
    topic = f"ktrial-errs-{run}"
    cluster.create_topics({topic: 1}, replication_factor=3)
    keys = KeyMap({0: TopicPartition(topic, 0), 1: TopicPartition(topic, 99)})
    return WorkerConfig(
        bootstrap=cluster.bootstrap_servers,
        keys=keys,
        group_id=f"ktrial-errs-{run}-g",
        txn=txn,
        txn_id_prefix=f"ktrial-errs-{run}",
        op_timeout_s=4.0,
        worker=worker,
        **kw,
    )


@pytest.mark.parametrize("worker", WORKER_DRIVERS)
def test_a_fenced_producer_retires(local_cluster: Any, worker: str) -> None:
    cfg = config(local_cluster, worker, txn=True)
    observed = ClientFacts()
    old = WorkerDriver(cfg, process=1, slot=0, observed=observed)
    try:
        c = old.execute("txn", [["send", 0, 1]])
        assert c.type == "ok", c
        new = WorkerDriver(cfg, process=2, slot=0)  # same transactional id: fences `old`
        try:
            c = old.execute("txn", [["send", 0, 2]])
            assert c.type in ("fail", "info") and c.retire, c
            err = c.error if "cause" not in (c.error or {}) else c.error["cause"]
            assert err["name"] in RETIRE_NAMES or err.get("fatal"), c.error
            assert new.execute("txn", [["send", 0, 3]]).type == "ok"
        finally:
            new.close()
    finally:
        old.close(abrupt=True)
    # Each worker says which transaction protocol its client runs: the brokers' (4.1.1,
    # formatted with transaction.version 2 by default), unless franz is told v1.
    brokers = local_cluster.metadata()["transactions"]["protocol"]
    assert brokers == "v2", local_cluster.metadata()["transactions"]
    assert observed.facts.get("txn_protocol") == brokers, observed.facts
    if worker == "franz":
        capped = config(
            local_cluster, worker, txn=True, producer_overrides={"transaction.version": 1}
        )
        facts = ClientFacts()
        WorkerDriver(capped, process=3, slot=1, observed=facts).close()
        assert facts.facts.get("txn_protocol") == "v1", facts.facts


@pytest.mark.parametrize("worker", WORKER_DRIVERS)
def test_refusals_fail_and_unknown_fates_are_info(local_cluster: Any, worker: str) -> None:
    cfg = config(local_cluster, worker, txn=False, producer_overrides=_short_block(worker))
    d = WorkerDriver(cfg, process=1, slot=0)
    try:
        big = "x" * 2_000_000  # above every client's and broker's limit
        c = d.execute("send", [["send", 0, big]])
        assert c.error["name"] == "MESSAGE_TOO_LARGE", c.error
        # kafka-clients refuses it inside send(): certainly never sent, fail. franz-go
        # reports it with the delivery (flush), after the record was handed over: the
        # rules cannot tell it was never sent, info.
        assert c.type == ("fail" if worker == "java" else "info"), c
        c = d.execute("send", [["send", 1, 5]])  # partition 99 does not exist
        if worker == "java":  # refused inside send(), waiting for the partition's metadata
            assert (c.type, c.error["name"], c.error.get("refused")) == ("fail", "Timeout", True)
        else:  # the send may be outstanding: its fate is unknown
            assert c.type == "info", c
    finally:
        d.close(abrupt=True)


def _short_block(worker: str) -> dict[str, Any]:
    return {"max.block.ms": 1500} if worker == "java" else {"delivery.timeout.ms": 3000}
