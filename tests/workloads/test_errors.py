"""Error classification against real confluent_kafka KafkaError codes."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from ktrial.workloads.confluent.errors import (
    classify,
    consumer_event_is_benign,
    describe,
    must_retire,
)

E = KafkaError


@pytest.mark.parametrize(
    "code",
    [
        E._MSG_TIMED_OUT,
        E._TIMED_OUT,
        E.REQUEST_TIMED_OUT,
        E._TRANSPORT,
        E.NETWORK_EXCEPTION,
        E.NOT_LEADER_FOR_PARTITION,
        E.UNKNOWN,
        E._ALL_BROKERS_DOWN,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.LEADER_NOT_AVAILABLE,
        E._PURGE_INFLIGHT,
    ],
)
def test_indefinite_send_errors_are_info(code: int) -> None:
    v = classify(KafkaError(code), "send")
    assert v.type == "info"
    assert not v.retire


@pytest.mark.parametrize(
    "code",
    [
        E._QUEUE_FULL,
        E.MSG_SIZE_TOO_LARGE,
        E.INVALID_RECORD,
        E.TOPIC_AUTHORIZATION_FAILED,
        E._UNKNOWN_PARTITION,
        E._PURGE_QUEUE,
    ],
)
def test_definite_refusals_are_fail(code: int) -> None:
    v = classify(KafkaError(code), "send")
    assert v.type == "fail"
    assert not v.retire


def test_buffer_error_from_produce_is_fail() -> None:
    v = classify(BufferError("Local: Queue full"), "send")
    assert v.type == "fail"
    assert v.error["name"] == "BufferError"


@pytest.mark.parametrize(
    "code",
    [
        E.OUT_OF_ORDER_SEQUENCE_NUMBER,
        E.PRODUCER_FENCED,
        E._FENCED,
        E.INVALID_PRODUCER_EPOCH,
        E.UNKNOWN_PRODUCER_ID,
        E._FATAL,
        E.TRANSACTION_COORDINATOR_FENCED,
    ],
)
def test_fenced_and_sequence_errors_retire_the_process(code: int) -> None:
    v = classify(KafkaError(code), "send")
    assert v.retire
    assert v.type == "info"
    assert must_retire(KafkaException(KafkaError(code)))


def test_fatal_flag_retires_even_for_a_timeout_code() -> None:
    err = KafkaError(E._TIMED_OUT, "fatal idempotence", fatal=True)
    assert classify(err, "send").retire
    assert describe(err)["fatal"] is True


@pytest.mark.parametrize(
    "err",
    [
        KafkaError(E._TIMED_OUT, retriable=True),
        KafkaError(E.INVALID_TXN_STATE),
        KafkaError(E.CONCURRENT_TRANSACTIONS),
        KafkaError(E._QUEUE_FULL),
        KafkaError(E.UNKNOWN, txn_requires_abort=True),
    ],
)
def test_anything_around_commit_is_info_and_replaces_the_producer(err: KafkaError) -> None:
    # Even a code that is a definite refusal elsewhere: the commit's outcome is unknown,
    # and the producer is replaced instead of aborted.
    v = classify(KafkaException(err), "commit")
    assert (v.type, v.retire) == ("info", True)


def test_a_failed_abort_is_info() -> None:
    v = classify(KafkaException(KafkaError(E._TIMED_OUT)), "abort")
    assert (v.type, v.retire) == ("info", True)


def test_begin_errors_are_fail_because_nothing_was_sent() -> None:
    assert classify(KafkaException(KafkaError(E._STATE)), "begin").retire
    assert classify(KafkaException(KafkaError(E._TIMED_OUT)), "begin").type == "fail"


def test_describe_names_the_error() -> None:
    d = describe(KafkaException(KafkaError(E.NOT_LEADER_FOR_PARTITION, "moved", retriable=True)))
    assert d["name"] == "NOT_LEADER_FOR_PARTITION"  # librdkafka's name for NOT_LEADER_OR_FOLLOWER
    assert d["code"] == E.NOT_LEADER_FOR_PARTITION
    assert d["retriable"] is True
    assert d["message"] == "moved"
    assert describe(ValueError("x")) == {"name": "ValueError", "message": "x"}


def test_consumer_events() -> None:
    assert consumer_event_is_benign(KafkaError(E._TRANSPORT))
    assert consumer_event_is_benign(KafkaError(E._PARTITION_EOF))
    assert not consumer_event_is_benign(KafkaError(E.OFFSET_OUT_OF_RANGE))
    assert not consumer_event_is_benign(KafkaError(E._TRANSPORT, fatal=True))
