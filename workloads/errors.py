"""Error classification: which completion type an error earns, and whether the client survives.

A history is only as honest as its completion types. ``ok`` claims the op took
effect, ``fail`` claims it certainly did not, ``info`` admits we do not know. The
rules (DESIGN.md section 4):

* timeouts, transport errors, NOT_LEADER_OR_FOLLOWER, unknown server errors and
  *anything* around a transaction commit -> ``info`` (the write may have landed);
* definite refusals (the request was never sent, or the broker refused it before
  appending) and successful aborts -> ``fail``; so is a transaction whose commit was
  never attempted even if its abort failed or timed out (Kafka commits only on the
  producer's EndTxn(commit); the successor's init_transactions or the coordinator's
  transaction timeout aborts it) — decided in the driver, not here;
* fatal producer errors, fencing, out-of-order sequence numbers and unknown
  producer ids -> the client is retired and replaced by a new process with fresh
  clients (``retire=True``); the op itself is ``info`` unless it was certainly not
  applied.

Pure: no Kafka calls, only inspection of :class:`confluent_kafka.KafkaError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException

Phase = Literal["send", "poll", "begin", "commit", "abort", "send_offsets", "init", "flush"]
Completion = Literal["fail", "info"]

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


@dataclass(frozen=True, slots=True)
class Verdict:
    """How an op that hit `error` completes, and whether its process must be replaced."""

    type: Completion
    retire: bool
    error: dict[str, Any]


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


def classify(exc: BaseException | KafkaError, phase: Phase) -> Verdict:
    """Classify an error raised during `phase` of a non-transactional op or a txn step.

    * ``commit``: always ``info``; and the producer is retired, because after a
      commit whose outcome is unknown the only safe move is a fresh producer (whose
      init_transactions fences the old one) — never an abort.
    * ``abort``: an abort that itself failed leaves the transaction's fate unknown:
      ``info`` and retire.
    * otherwise: fatal/fenced/sequence errors retire (``info``, or ``fail`` when the
      error is also a definite refusal); definite refusals are ``fail``; the rest
      (timeouts, transport, NOT_LEADER, unknown server errors...) are ``info``.
    """
    d = describe(exc)
    if phase in ("commit", "abort"):
        return Verdict("info", True, d)
    retire = must_retire(exc)
    if phase in ("begin", "init") and not retire:
        # Nothing was sent yet in this transaction: the op certainly had no effect.
        return Verdict("fail", False, d)
    if is_definite_refusal(exc):
        return Verdict("fail", retire, d)
    return Verdict("info", retire, d)


def consumer_event_is_benign(err: KafkaError) -> bool:
    """A poll() error event that does not invalidate the records the same poll returned."""
    return err.code() in BENIGN_CONSUMER_CODES and not err.fatal()
