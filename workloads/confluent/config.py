"""The confluent-kafka (librdkafka) client settings of a run: defaults and `DriverConfig`.

`DriverConfig` carries two kinds of settings: the run's, which any driver needs
(bootstrap, key layout, group, txn, sub_via, time budgets: :class:`..ops.OpSettings`),
and librdkafka's own configuration (`producer_config()`, `consumer_config()`, written
to test.json), which only this driver understands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..driver import KeyMap

# Settings a careful tester chooses: durable acks, idempotence, read_committed,
# no auto-commit, and short timeouts so that faults surface as `info` ops within
# seconds instead of hanging workers. Every one is overridable and written to test.json.
DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 0,
    "max.in.flight.requests.per.connection": 5,
    "request.timeout.ms": 5000,
    "message.timeout.ms": 10000,
    "socket.timeout.ms": 5000,
    "socket.connection.setup.timeout.ms": 5000,
    "socket.nagle.disable": True,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "retry.backoff.ms": 20,
    # librdkafka backs retries off exponentially up to this; a txn producer retries
    # AddPartitionsToTxn (CONCURRENT_TRANSACTIONS) right after each commit.
    "retry.backoff.max.ms": 100,
    "metadata.max.age.ms": 10000,
    "topic.metadata.refresh.interval.ms": 5000,
    # ktrial creates its topics; a producer whose call returns after teardown (e.g. one
    # abandoned during a reset toxic) must not create a deleted topic again on a
    # cluster with auto.create.topics.enable (librdkafka's producer default is true).
    "allow.auto.create.topics": False,
}
DEFAULT_TXN_PRODUCER_CONFIG: dict[str, Any] = {
    # librdkafka requires message.timeout.ms <= transaction.timeout.ms.
    "transaction.timeout.ms": 10000,
}
DEFAULT_CONSUMER_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "enable.partition.eof": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "max.poll.interval.ms": 60000,
    # The broker answers a fetch as soon as data arrives; a long wait only spares
    # idle consumers (keys rotated out) from hammering the brokers with empty fetches.
    "fetch.wait.max.ms": 500,
    "socket.timeout.ms": 5000,
    "socket.connection.setup.timeout.ms": 5000,
    "socket.nagle.disable": True,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "metadata.max.age.ms": 10000,
    "topic.metadata.refresh.interval.ms": 5000,
}


@dataclass(frozen=True)
class DriverConfig:
    """Everything a confluent driver needs; shared by every process of a run."""

    bootstrap: str
    keys: KeyMap
    group_id: str
    txn: bool = False
    idempotence: bool = True
    sub_via: str = "assign"
    txn_id_prefix: str = "ktrial"
    poll_ms: int = 100
    max_poll_records: int = 500
    producer_overrides: dict[str, Any] = field(default_factory=dict)
    consumer_overrides: dict[str, Any] = field(default_factory=dict)
    # Time budget of one op's main path (flush, send_offsets, commit, together) and of
    # opening clients (init_transactions). A slower op completes info/fail, never hangs.
    op_timeout_s: float = 10.0
    # Budget of init_transactions when opening a process. Generous: right after a
    # cluster starts or a coordinator moves, it waits for __transaction_state to load,
    # and retrying with a fresh producer restarts that wait and fences the old one.
    init_timeout_s: float = 30.0
    # The least time commit_transaction gets, even when the steps before it used the
    # whole op budget (a commit cut short is an `info` op: unknown outcome).
    commit_min_s: float = 3.0
    # Budget of the abort that follows a failed txn step (on top of op_timeout_s).
    abort_timeout_s: float = 5.0
    # Once the run's `stop` is set, outstanding calls get this long, then give up.
    stop_grace_s: float = 2.0
    # How long a graceful close may take before it is left to finish in the background.
    close_wait_s: float = 3.0
    # Replace a transactional producer after aborting a transaction whose sends were not
    # all acknowledged. librdkafka (no KIP-890 epoch bump) keeps the producer epoch across
    # the abort and may reuse such a send's sequence number for the next record to that
    # partition; if the unacknowledged record did reach the log, the broker takes the new
    # record for a duplicate of it, acknowledges it at the old record's offset and drops
    # it: an acknowledged, committed write lost (seen in CI, traced with `ktrial trace`).
    # The successor's init_transactions bumps the epoch, which makes sequences safe again.
    # False reproduces the client bug.
    retire_after_unsure_abort: bool = True
    # Abort (never commit) a transaction one of whose sends the client reported delivered
    # without an offset: librdkafka does that when it infers a delivery from a later
    # batch's success, which the broker does not guarantee for a producer's first batch
    # on a partition (see workloads/ops.offsetless_failure). False reproduces the loss.
    abort_unknown_offset: bool = True

    def producer_config(self) -> dict[str, Any]:
        c = dict(DEFAULT_PRODUCER_CONFIG)
        c["enable.idempotence"] = self.idempotence
        if not self.idempotence:
            c.pop("max.in.flight.requests.per.connection", None)
        if self.txn:
            c.update(DEFAULT_TXN_PRODUCER_CONFIG)
        c.update(self.producer_overrides)
        c["bootstrap.servers"] = self.bootstrap
        return c

    def consumer_config(self) -> dict[str, Any]:
        c = dict(DEFAULT_CONSUMER_CONFIG)
        c.update(self.consumer_overrides)
        c["bootstrap.servers"] = self.bootstrap
        c["group.id"] = self.group_id
        return c
