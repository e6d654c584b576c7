"""Drivers that run as worker processes speaking JSON lines (docs/drivers.md).

* :mod:`.process`: one worker process and its request/reply channel, bounded;
* :mod:`.errors`: the error rules over the workers' error records;
* :mod:`.config`: where a worker's program is, `WorkerConfig`, franz-go's defaults;
* :mod:`.driver`: `WorkerDriver`, the shared op flow (:mod:`..ops`) over worker calls.
"""

from __future__ import annotations

from .config import WORKERS, WorkerConfig, library_version, worker_program
from .driver import WorkerDriver, drain_clients, worker_factory
from .errors import RULES, WorkerError, WorkerRules

__all__ = [
    "RULES",
    "WORKERS",
    "WorkerConfig",
    "WorkerDriver",
    "WorkerError",
    "WorkerRules",
    "drain_clients",
    "library_version",
    "worker_factory",
    "worker_program",
]
