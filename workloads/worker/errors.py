"""The error rules of worker drivers: error records onto :mod:`..errors`' classes.

A worker reports every failed call and every failed send as an *error record*
(docs/drivers.md): ``{name, code, message}`` plus the flags ``retriable``,
``fatal``, ``txn_requires_abort`` and ``refused``. ``name`` is the Kafka protocol's
error name when the broker answered (``PRODUCER_FENCED``, ``NOT_LEADER_OR_FOLLOWER``
...), the same in every client library, or the worker's own name for a client-side
failure (``Timeout``, ``RecordTimeout``, ``ClientClosed`` ...). So one set of rules
serves every worker: the protocol's names carry the facts, and a worker adds what
only it knows with the flags (``fatal``: this client cannot be used again;
``refused``: the write was certainly never sent). Pure: no Kafka calls.
"""

from __future__ import annotations

from typing import Any

# The producer can no longer be trusted: replace the whole process.
RETIRE_NAMES = frozenset(
    {
        "PRODUCER_FENCED",
        "INVALID_PRODUCER_EPOCH",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "UNKNOWN_PRODUCER_ID",
        "INVALID_PRODUCER_ID_MAPPING",
        "TRANSACTION_COORDINATOR_FENCED",
        "INVALID_TXN_STATE",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "WorkerDied",  # the process is gone: a fresh one is needed
        "CallTimeout",  # a call did not answer in time: the worker was killed
        "ClientClosed",
    }
)

# The broker refused the request before appending anything, and never partially.
REFUSAL_NAMES = frozenset(
    {
        "MESSAGE_TOO_LARGE",
        "RECORD_LIST_TOO_LARGE",
        "INVALID_RECORD",
        "CORRUPT_MESSAGE",
        "INVALID_REQUIRED_ACKS",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CONCURRENT_TRANSACTIONS",
    }
)


class WorkerError(Exception):
    """A worker's error record, raised for a failed call and used as a failed send's result."""

    def __init__(self, record: dict[str, Any]) -> None:
        rec = dict(record) if isinstance(record, dict) else {"message": str(record)}
        rec.setdefault("name", "WorkerError")
        rec.setdefault("message", "")
        self.record = rec
        super().__init__(f"{rec['name']}: {rec['message']}")

    @property
    def name(self) -> str:
        return str(self.record["name"])

    def flag(self, name: str) -> bool:
        return bool(self.record.get(name))


def worker_died(message: str) -> WorkerError:
    """The error of a worker that is gone (it died, was stopped, or its host was):
    fatal, so the process retires and its successor gets a new worker."""
    return WorkerError({"name": "WorkerDied", "fatal": True, "message": message})


def as_worker_error(exc: Any) -> WorkerError:
    if isinstance(exc, WorkerError):
        return exc
    return WorkerError({"name": type(exc).__name__, "message": str(exc)})


class WorkerRules:
    """Implements :class:`ktrial.workloads.errors.ErrorRules` for every worker driver."""

    call_errors: tuple[type[BaseException], ...] = (WorkerError,)

    def is_error(self, result: object) -> bool:
        return isinstance(result, WorkerError)

    def as_error(self, exc: BaseException) -> Any:
        return as_worker_error(exc)

    def describe(self, exc: Any) -> dict[str, Any]:
        return dict(as_worker_error(exc).record)

    def must_retire(self, exc: Any) -> bool:
        e = as_worker_error(exc)
        return e.flag("fatal") or e.name in RETIRE_NAMES

    def is_definite_refusal(self, exc: Any) -> bool:
        e = as_worker_error(exc)
        if e.flag("fatal"):
            return False
        return e.flag("refused") or e.name in REFUSAL_NAMES

    def consumer_event_is_benign(self, err: Any) -> bool:
        # A retriable fetch error (leader moved, broker unreachable, timeout) says
        # nothing about the records delivered with it; anything else (data loss, an
        # offset out of range, authorization) makes the poll's outcome unknown.
        e = as_worker_error(err)
        return e.flag("retriable") and not e.flag("fatal") and not self.must_retire(e)


RULES = WorkerRules()
