"""Worker drivers' settings: where a worker's program is, and each client's defaults.

A worker driver takes the run's settings (:class:`..ops.OpSettings`: keys, txn,
time budgets ...) from :class:`.WorkerConfig`, a :class:`..confluent.DriverConfig`
with the worker's own client settings instead of librdkafka's. The settings travel
to the worker in its ``open`` request under the names written to test.json (Kafka's
property names where one exists); the worker refuses a name it does not know.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..confluent.config import DriverConfig

# The drivers that run as worker processes, each built by scripts/setup.sh into
# workers/bin/ktrial-<name> (KTRIAL_WORKER_<NAME> names another program).
WORKERS = ("franz", "java")
BIN_DIR = Path(__file__).resolve().parents[2] / "workers" / "bin"
# worker -> (client library, its Go module), for the version test.json records
LIBRARIES = {"franz": ("franz-go", "github.com/twmb/franz-go")}
# how each worker is built, for the error when it was not
BUILT_WITH = {"franz": "Go", "java": "Maven and a JDK"}

# franz-go: the careful tester's choices of the confluent defaults, in the names the
# franz worker knows (workers/franz/settings.go).
FRANZ_PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 0,
    "request.timeout.ms": 5000,
    "delivery.timeout.ms": 10000,
    "retry.backoff.ms": 20,
    "socket.connection.setup.timeout.ms": 5000,
    "metadata.max.age.ms": 10000,
    # franz-go retries a produce refused with CONCURRENT_TRANSACTIONS (Kafka 4's
    # transactions v2: the previous transaction of this producer is still completing)
    # only after a metadata refresh, and refreshes at most every metadata.min.age.ms
    # (default 5 s): every transaction begun right after a commit stalled 5 s.
    "metadata.min.age.ms": 100,
    # The worker's Go scheduler threads (not a Kafka property): one worker per logical
    # process, and 64 of them at Go's default (one per CPU) ran 769-805 sends+polls/s,
    # at 1 1,071, same cluster (bench/RESULTS.md, TXNPERF).
    "gomaxprocs": 1,
}
FRANZ_TXN_PRODUCER_CONFIG: dict[str, Any] = {"transaction.timeout.ms": 10000}
FRANZ_CONSUMER_CONFIG: dict[str, Any] = {
    "gomaxprocs": 1,  # as the producer's: a consumer-only worker (the drain) has no producer
    "isolation.level": "read_committed",
    "auto.offset.reset": "earliest",
    "fetch.max.wait.ms": 500,
    "socket.connection.setup.timeout.ms": 5000,
    "metadata.max.age.ms": 10000,
}

# Java kafka-clients (workers/java): Kafka's own property names, passed through as they
# are; the same careful choices. max.block.ms bounds send() waiting for metadata and
# initTransactions/commitTransaction/abortTransaction, which take no timeout of their own
# (the worker answers a call after its timeout_ms anyway; ktrial retires such a process).
JAVA_PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 0,
    "request.timeout.ms": 5000,
    "delivery.timeout.ms": 10000,
    "retry.backoff.ms": 20,
    # kafka-clients backs off exponentially up to retry.backoff.max.ms (default 1 s) on
    # retriable answers, CONCURRENT_TRANSACTIONS included: the answer to a transaction's
    # first send while the previous transaction's markers are still being written.
    "retry.backoff.max.ms": 100,
    "socket.connection.setup.timeout.ms": 5000,
    "metadata.max.age.ms": 10000,
    "max.block.ms": 10000,
    # Logical processes per JVM (not a Kafka property; HOSTING): 1 runs a JVM per process,
    # so a crash is a real SIGKILL; more share a JVM (the worker's --host mode), where a
    # crash is a forced close of that process's clients (docs/drivers.md).
    "processes_per_jvm": 1,
}
JAVA_TXN_PRODUCER_CONFIG: dict[str, Any] = {"transaction.timeout.ms": 10000}
JAVA_CONSUMER_CONFIG: dict[str, Any] = {
    "isolation.level": "read_committed",
    "auto.offset.reset": "earliest",
    "fetch.max.wait.ms": 500,
    "socket.connection.setup.timeout.ms": 5000,
    "metadata.max.age.ms": 10000,
    "request.timeout.ms": 5000,
    "default.api.timeout.ms": 10000,
}
# A group consumer's settings (`--sub-via subscribe`, the copy workload's copiers): the
# confluent driver's choices, so that a crashed member leaves the group within seconds
# (franz-go's and kafka-clients' default session timeout is 45 s); max.poll.interval.ms
# is kafka-clients' rebalance timeout, which the franz worker maps to franz-go's.
GROUP_CONSUMER_CONFIG: dict[str, Any] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "max.poll.interval.ms": 60000,
}
# worker -> the setting that puts several logical processes in one worker program
# (hosted.py); ktrial reads it and does not pass it on to the worker.
HOSTING = {"java": "processes_per_jvm"}
# worker -> (producer defaults, transactional producer additions, consumer defaults)
DEFAULTS: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "franz": (FRANZ_PRODUCER_CONFIG, FRANZ_TXN_PRODUCER_CONFIG, FRANZ_CONSUMER_CONFIG),
    "java": (JAVA_PRODUCER_CONFIG, JAVA_TXN_PRODUCER_CONFIG, JAVA_CONSUMER_CONFIG),
}


def worker_program(name: str) -> Path:
    """The worker's executable; a clear error when it was not built."""
    if name not in WORKERS:
        raise ValueError(f"unknown worker driver {name!r}; choose one of {', '.join(WORKERS)}")
    env = os.environ.get(f"KTRIAL_WORKER_{name.upper()}")
    path = Path(env) if env else BIN_DIR / f"ktrial-{name}"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ValueError(
            f"the {name} driver's worker {path} is not built: run scripts/setup.sh"
            f" (it needs {BUILT_WITH.get(name, 'its toolchain')}), or set"
            f" KTRIAL_WORKER_{name.upper()} to the program"
        )
    return path


@dataclass(frozen=True)
class WorkerConfig(DriverConfig):
    """The run's settings plus the worker's: which worker, and its client settings."""

    worker: str = "franz"

    def producer_config(self) -> dict[str, Any]:
        producer, txn, _ = DEFAULTS[self.worker]
        c = dict(producer)
        c["enable.idempotence"] = self.idempotence
        if self.txn:
            c.update(txn)
        c.update(self.producer_overrides)
        c["bootstrap.servers"] = self.bootstrap
        return c

    def consumer_config(self) -> dict[str, Any]:
        c = dict(DEFAULTS[self.worker][2])
        if self.sub_via == "subscribe":
            c.update(GROUP_CONSUMER_CONFIG)
        c.update(self.consumer_overrides)
        c["bootstrap.servers"] = self.bootstrap
        c["group.id"] = self.group_id
        return c

    def settings(self, produce: bool, consume: bool) -> dict[str, Any]:
        """The worker's settings for a client that produces and/or consumes."""
        out: dict[str, Any] = {}
        if produce:
            out.update(self.producer_config())
        if consume:
            out.update(self.consumer_config())
        for k in ("bootstrap.servers", "group.id", HOSTING.get(self.worker)):
            out.pop(k or "", None)  # sent as fields of open, or ktrial's own
        return out

    def processes_per_host(self) -> int:
        """How many logical processes share one worker program (see `processes_per_host`)."""
        return processes_per_host(self.worker, {**self.consumer_config(), **self.producer_config()})


def processes_per_host(worker: str, settings: dict[str, Any]) -> int:
    """How many logical processes share one program of `worker`, from its `settings`
    (java's `processes_per_jvm`; 1 for workers without a host mode). A clear
    ValueError for anything but an integer >= 1."""
    name = HOSTING.get(worker)
    if name is None:
        return 1
    value = settings.get(name, 1)
    try:
        n = int(value)
        if str(n) != str(value).strip() or n < 1:
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be an integer >= 1 (logical processes per JVM), got {value!r}"
        ) from None
    return n


def library_version(name: str) -> str | None:
    """The worker's client library and the version its build pins ("franz-go v1.22.3"
    from go.mod, "kafka-clients 4.1.1" from workers/java/pom.xml), for test.json; None
    when unknown or unreadable."""
    if name == "java":
        return _pom_version(BIN_DIR.parent / "java" / "pom.xml")
    library = LIBRARIES.get(name)
    if library is None:
        return None
    gomod = BIN_DIR.parent / name / "go.mod"
    try:
        lines = gomod.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if library[1] in parts and parts[-1].startswith("v"):
            return f"{library[0]} {parts[-1]}"
    return None


def _pom_version(pom: Path) -> str | None:
    try:
        text = pom.read_text()
    except OSError:
        return None
    m = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", text)
    return f"kafka-clients {m.group(1)}" if m else None
