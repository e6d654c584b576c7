"""The drain's clients follow the run's driver (queue and copy share this choice)."""

from __future__ import annotations

from typing import Any

import pytest
from ktrial.workloads.confluent import ConfluentDriver, DriverConfig
from ktrial.workloads.drainers import drain_clients_for
from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.worker import WorkerConfig

KEYS = KeyMap({0: TopicPartition("t", 0)})


def test_librdkafka_runs_drain_with_librdkafka_read_only_clients() -> None:
    cfg = DriverConfig(bootstrap="127.0.0.1:1", keys=KEYS, group_id="g", txn=True)
    d = drain_clients_for(cfg, KEYS, "r1")(99)
    try:
        assert isinstance(d, ConfluentDriver)
        assert d.cfg.group_id == "ktrial-r1-drain" and d.cfg.txn is False
        assert d.producer is None  # read-only
    finally:
        d.close()


def test_worker_runs_drain_with_their_own_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def fake(
        worker: str, bootstrap: str, keys: KeyMap, run_id: str, overrides: dict[str, Any]
    ) -> str:
        seen.update(worker=worker, bootstrap=bootstrap, run_id=run_id, overrides=overrides)
        return "factory"

    monkeypatch.setattr("ktrial.workloads.drainers.worker_drain_clients", fake)
    cfg = WorkerConfig(
        bootstrap="b:9", keys=KEYS, group_id="g", worker="franz", consumer_overrides={"x": 1}
    )
    assert drain_clients_for(cfg, KEYS, "r2") == "factory"
    assert seen == {"worker": "franz", "bootstrap": "b:9", "run_id": "r2", "overrides": {"x": 1}}
