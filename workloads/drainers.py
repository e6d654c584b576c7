"""The drain's clients for a run's driver: librdkafka's or a worker's (copy and queue)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .confluent import DriverConfig, drain_clients
from .driver import KeyMap
from .worker import WorkerConfig
from .worker import drain_clients as worker_drain_clients


def drain_clients_for(cfg: DriverConfig, keys: KeyMap, run_id: str) -> Callable[[int], Any]:
    """Fresh read-only clients of the same library as the run's (its first, for a mix)."""
    if isinstance(cfg, WorkerConfig):
        return worker_drain_clients(cfg.worker, cfg.bootstrap, keys, run_id, cfg.consumer_overrides)
    return drain_clients(cfg.bootstrap, keys, run_id, cfg.consumer_overrides)
