"""What the error codes in a history mean, in a few words, for the report's readers.

Histories keep errors as the client library named them: librdkafka's local codes
(a leading underscore, `_TIMED_OUT`) and Kafka's protocol errors (`NOT_LEADER_OR_FOLLOWER`).
The report shows each with its meaning and what it says about the op's outcome. The
table covers the codes ktrial's drivers classify (workloads/confluent/errors.py) and
the ones seen most in runs; an unknown code is shown as it is.
"""

from __future__ import annotations

import re

# code -> meaning (what happened, and what it implies for the op's outcome)
CODE_MEANINGS: dict[str, str] = {
    # librdkafka's local errors
    "_TIMED_OUT": (
        "the client gave up waiting for a reply; whether the request took effect is unknown"
    ),
    "_MSG_TIMED_OUT": (
        "a record was not acknowledged within message.timeout.ms; it may or may not have "
        "been written"
    ),
    "_TRANSPORT": "the connection to a broker broke (broker down, partitioned or restarting)",
    "_ALL_BROKERS_DOWN": "the client could reach no broker at all",
    "_RESOLVE": "a broker's address could not be resolved",
    "_QUEUE_FULL": "the client's local send queue was full; the record was never sent",
    "_PURGE_QUEUE": "the record was dropped from the local queue before it was sent",
    "_PARTITION_EOF": "the consumer reached the end of a partition (informational)",
    "_UNKNOWN_PARTITION": "the client does not know this partition; nothing was sent",
    "_UNKNOWN_TOPIC": "the client does not know this topic; nothing was sent",
    "_FATAL": "the client hit a fatal error and cannot be used again (ktrial replaces it)",
    "_FENCED": "a newer producer with the same transactional id fenced this one",
    "_STATE": "the call is not allowed in the client's current state",
    "_INCONSISTENT": "the client's state became inconsistent; it is replaced",
    "_GAPLESS_GUARANTEE": "the idempotent producer could not keep its ordering guarantee",
    "_PREV_IN_PROGRESS": "a previous call of the same kind is still in progress",
    "_CONFLICT": "the call conflicts with one in progress",
    "_WAIT_COORD": "waiting for the group or transaction coordinator",
    "_MAX_POLL_EXCEEDED": (
        "the consumer did not poll within max.poll.interval.ms and left its group"
    ),
    "_INVALID_ARG": "an invalid argument was refused locally; nothing was sent",
    "_FAIL": "a generic client failure (see the message)",
    "_DESTROY": "the client was being closed",
    # Kafka protocol errors
    "REQUEST_TIMED_OUT": (
        "the broker did not complete the request in time (e.g. replicas unreachable); the "
        "outcome is unknown"
    ),
    "NOT_LEADER_FOR_PARTITION": (
        "the broker is no longer the partition's leader (leadership moved); retried elsewhere"
    ),
    "NOT_LEADER_OR_FOLLOWER": (
        "the broker is no longer the partition's leader (leadership moved); retried elsewhere"
    ),
    "LEADER_NOT_AVAILABLE": "the partition has no leader right now (an election is under way)",
    "NETWORK_EXCEPTION": (
        "the broker connection failed while the request was in flight; the outcome is unknown"
    ),
    "NOT_ENOUGH_REPLICAS": "fewer in-sync replicas than min.insync.replicas: the write was refused",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": (
        "written to the leader, but too few replicas confirmed it: not acknowledged"
    ),
    "COORDINATOR_NOT_AVAILABLE": "the group or transaction coordinator is unavailable",
    "NOT_COORDINATOR": "the broker asked is no longer the coordinator",
    "COORDINATOR_LOAD_IN_PROGRESS": "the coordinator is still loading its state",
    "CONCURRENT_TRANSACTIONS": "the previous transaction of this producer is still being completed",
    "INVALID_TXN_STATE": (
        "the transaction is in a state that does not allow the call; the producer is replaced"
    ),
    "INVALID_PRODUCER_EPOCH": "the producer was fenced by a newer one; it is replaced",
    "PRODUCER_FENCED": (
        "the producer was fenced by a newer one with the same transactional id; it is replaced"
    ),
    "UNKNOWN_PRODUCER_ID": "the broker no longer knows this producer id; the producer is replaced",
    "OUT_OF_ORDER_SEQUENCE_NUMBER": (
        "the broker saw a gap in the producer's sequence numbers; the producer is replaced"
    ),
    "TRANSACTION_COORDINATOR_FENCED": "the transaction coordinator was replaced by a newer one",
    "FENCED_LEADER_EPOCH": "the client's view of the leader epoch is stale; it refreshes metadata",
    "UNKNOWN_LEADER_EPOCH": "the broker does not know the leader epoch yet",
    "REBALANCE_IN_PROGRESS": "the consumer group is rebalancing",
    "UNKNOWN_TOPIC_OR_PART": "the broker does not know this topic or partition",
    "UNKNOWN_TOPIC_OR_PARTITION": "the broker does not know this topic or partition",
    "MSG_SIZE_TOO_LARGE": "the record is larger than the broker accepts; nothing was written",
    "TOPIC_AUTHORIZATION_FAILED": "the client is not allowed to use this topic",
    "KAFKA_STORAGE_ERROR": "the broker could not write to its disk",
    # ktrial's own causes
    "never completed": "the op was still running when the history ended (its outcome is unknown)",
}

_CODE = re.compile(r"\b_?[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b_[A-Z]+\b")


def code_meaning(cause: object) -> str | None:
    """The meaning of an error code, or of the first known code inside an error text
    (`KafkaError{code=_TIMED_OUT,...}`); None when it names no code the table knows."""
    text = str(cause).strip()
    if text in CODE_MEANINGS:
        return CODE_MEANINGS[text]
    for m in _CODE.finditer(text):
        found = CODE_MEANINGS.get(m.group(0))
        if found is not None:
            return found
    return None
