"""ktrial.workloads: op generators and client drivers (docs/design.md, Workloads and drivers).

A workload has three phases, each a method, so the run orchestration (trial.py)
can put a nemesis, a heal and a wait around them:

* ``setup(cluster)`` creates the topics (replication factor explicit) and returns
  the test.json fragment: workload options, key -> {topic, partition} map,
  producer/consumer configs, ``sub_via``, ``ww_deps``, ``txn``, ``idempotence``;
* ``run(recorder, stop)`` drives worker threads until ``stop`` is set and returns
  once every worker has completed its outstanding op;
* ``drain(recorder, timeout_s)`` reads every key back from the beginning with
  fresh clients and returns ``{"caught_up": bool, "lagging_keys": {...}, ...}``.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ..clusters.base import Cluster
from ..histories.recorder import Recorder

WORKLOADS = ("queue", "copy", "txn-cost")


class Workload(Protocol):
    name: str

    def setup(self, cluster: Cluster) -> dict[str, Any]: ...

    def run(self, recorder: Recorder, stop: threading.Event) -> None: ...

    def drain(self, recorder: Recorder, timeout_s: float) -> dict[str, Any]: ...


def make_workload(name: str, opts: dict[str, Any], seed: int) -> Workload:
    """Build workload `name` from CLI/test.json options (unknown options are an error)."""
    if name == "queue":
        from .queue import QueueOptions, QueueWorkload

        return QueueWorkload(QueueOptions.from_dict(opts), seed)
    if name == "copy":
        from .copy import CopyOptions, CopyWorkload

        return CopyWorkload(CopyOptions.from_dict(opts), seed)
    if name == "txn-cost":
        from .txn_cost import TxnCostOptions, TxnCostWorkload

        return TxnCostWorkload(TxnCostOptions.from_dict(opts), seed)
    raise ValueError(f"unknown workload {name!r}; choose one of {', '.join(WORKLOADS)}")
