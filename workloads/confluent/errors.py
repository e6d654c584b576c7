"""librdkafka's error rules (confluent-kafka): the `ErrorRules` of the confluent driver.

The policy that turns these facts into completion types is client-independent
(:func:`ktrial.workloads.errors.classify`); this module only knows librdkafka:
which codes retire a client, which prove a write never happened, which poll events
are harmless, and how a :class:`confluent_kafka.KafkaError` is written into the
history. Pure: no Kafka calls.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException

from .. import errors
from ..errors import Phase, Verdict

E = KafkaError

# The producer instance can no longer be trusted: replace the whole process.
RETIRE_CODES = frozenset(
    {
        E._FATAL,
        E._FENCED,
        E.PRODUCER_FENCED,
        E.INVALID_PRODUCER_EPOCH,
        E.OUT_OF_ORDER_SEQUENCE_NUMBER,
        E.UNKNOWN_PRODUCER_ID,
        E.INVALID_PRODUCER_ID_MAPPING,
        E.TRANSACTION_COORDINATOR_FENCED,
        E._GAPLESS_GUARANTEE,
        E._INCONSISTENT,
        E.INVALID_TXN_STATE,
        E._STATE,
    }
)

# The request certainly did not append anything: refused locally before sending, or
# refused by the broker in a way that is never retried and never partially applied.
DEFINITE_REFUSAL_CODES = frozenset(
    {
        E._QUEUE_FULL,
        E.MSG_SIZE_TOO_LARGE,
        E.RECORD_LIST_TOO_LARGE,
        E.INVALID_RECORD,
        E.INVALID_MSG,
        E.INVALID_MSG_SIZE,
        E._UNKNOWN_PARTITION,
        E._UNKNOWN_TOPIC,
        E._INVALID_ARG,
        E.TOPIC_AUTHORIZATION_FAILED,
        E.CLUSTER_AUTHORIZATION_FAILED,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        E.GROUP_AUTHORIZATION_FAILED,
        E._PURGE_QUEUE,  # purged before it was ever sent
        E.CONCURRENT_TRANSACTIONS,  # begin/add-partitions refused: nothing written yet
        E._PREV_IN_PROGRESS,
        E._CONFLICT,
    }
)

# Consumer-side events librdkafka reports through poll() that say nothing about the
# records delivered with them: the op is still ok (the records are real).
BENIGN_CONSUMER_CODES = frozenset(
    {
        E._PARTITION_EOF,
        E._TRANSPORT,
        E._ALL_BROKERS_DOWN,
        E._RESOLVE,
        E._TIMED_OUT,
        E.NOT_LEADER_FOR_PARTITION,
        E.REQUEST_TIMED_OUT,
        E.NETWORK_EXCEPTION,
        E.LEADER_NOT_AVAILABLE,
        E.FENCED_LEADER_EPOCH,
        E.UNKNOWN_LEADER_EPOCH,
        E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_COORDINATOR,
        E.COORDINATOR_LOAD_IN_PROGRESS,
        E.REBALANCE_IN_PROGRESS,
        E._WAIT_COORD,
        E._MAX_POLL_EXCEEDED,
    }
)


def as_kafka_error(exc: BaseException | KafkaError) -> KafkaError | None:
    """The KafkaError inside a KafkaException (or the error itself); None for other errors."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def describe(exc: BaseException | KafkaError) -> dict[str, Any]:
    """A JSON-friendly error object for the history: name, code, flags and message."""
    ke = as_kafka_error(exc)
    if ke is None:
        return {"name": type(exc).__name__, "message": str(exc)}
    d: dict[str, Any] = {"name": ke.name(), "code": ke.code(), "message": ke.str()}
    if ke.fatal():
        d["fatal"] = True
    if ke.retriable():
        d["retriable"] = True
    if ke.txn_requires_abort():
        d["txn_requires_abort"] = True
    return d


def must_retire(exc: BaseException | KafkaError) -> bool:
    """True when the producer/consumer that raised `exc` cannot be used again."""
    ke = as_kafka_error(exc)
    if ke is None:
        return False
    return bool(ke.fatal()) or ke.code() in RETIRE_CODES


def is_definite_refusal(exc: BaseException | KafkaError) -> bool:
    """True when `exc` proves the write was never appended."""
    if isinstance(exc, BufferError):  # produce() refused: local queue full
        return True
    ke = as_kafka_error(exc)
    return ke is not None and ke.code() in DEFINITE_REFUSAL_CODES and not ke.fatal()


def consumer_event_is_benign(err: KafkaError) -> bool:
    """A poll() error event that does not invalidate the records the same poll returned."""
    return err.code() in BENIGN_CONSUMER_CODES and not err.fatal()


class LibrdkafkaRules:
    """Implements :class:`ktrial.workloads.errors.ErrorRules` for confluent-kafka."""

    call_errors: tuple[type[BaseException], ...] = (KafkaException, BufferError)

    def is_error(self, result: object) -> bool:
        return isinstance(result, KafkaError)

    def as_error(self, exc: BaseException) -> Any:
        return as_kafka_error(exc) or KafkaError(KafkaError._FAIL, str(exc))

    def describe(self, exc: Any) -> dict[str, Any]:
        return describe(exc)

    def must_retire(self, exc: Any) -> bool:
        return must_retire(exc)

    def is_definite_refusal(self, exc: Any) -> bool:
        return is_definite_refusal(exc)

    def consumer_event_is_benign(self, err: Any) -> bool:
        return consumer_event_is_benign(err)


RULES = LibrdkafkaRules()


def classify(exc: BaseException | KafkaError, phase: Phase) -> Verdict:
    """:func:`ktrial.workloads.errors.classify` under librdkafka's rules."""
    return errors.classify(RULES, exc, phase)
