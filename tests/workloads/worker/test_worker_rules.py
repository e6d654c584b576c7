"""The worker drivers' error rules (workloads/worker/errors.py) under the shared policy
(workloads/errors.classify): an error record's name and flags decide the completion."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.workloads.errors import classify
from ktrial.workloads.worker.errors import REFUSAL_NAMES, RETIRE_NAMES, RULES, WorkerError


def err(name: str, **flags: Any) -> WorkerError:
    return WorkerError({"name": name, "message": "m", **flags})


@pytest.mark.parametrize("name", sorted(RETIRE_NAMES))
def test_fenced_and_fatal_names_retire(name: str) -> None:
    v = classify(RULES, err(name), "send")
    assert v.retire and v.error["name"] == name


def test_a_fatal_flag_retires_whatever_the_name() -> None:
    assert classify(RULES, err("ClientError", fatal=True), "poll").retire


@pytest.mark.parametrize("name", sorted(REFUSAL_NAMES - RETIRE_NAMES))
def test_definite_refusals_fail(name: str) -> None:
    v = classify(RULES, err(name), "send")
    assert (v.type, v.retire) == ("fail", False)


def test_refused_flag_is_a_refusal_unless_fatal() -> None:
    assert classify(RULES, err("MaxBuffered", refused=True), "send").type == "fail"
    assert classify(RULES, err("X", refused=True, fatal=True), "send").type == "info"


@pytest.mark.parametrize("name", ["NOT_LEADER_OR_FOLLOWER", "Timeout", "RecordTimeout", "DataLoss"])
def test_unknown_outcomes_are_info(name: str) -> None:
    assert classify(RULES, err(name, retriable=True), "send").type == "info"


@given(
    name=st.sampled_from(sorted(REFUSAL_NAMES | RETIRE_NAMES | {"Timeout", "X"})),
    flags=st.dictionaries(
        st.sampled_from(["retriable", "fatal", "refused", "txn_requires_abort"]), st.booleans()
    ),
    phase=st.sampled_from(["commit", "abort"]),
)
def test_anything_around_a_commit_or_abort_is_info_and_retires(
    name: str, flags: dict[str, bool], phase: Any
) -> None:
    v = classify(RULES, err(name, **flags), phase)
    assert (v.type, v.retire) == ("info", True)


def test_only_retriable_fetch_errors_are_benign() -> None:
    assert RULES.consumer_event_is_benign(err("NOT_LEADER_OR_FOLLOWER", retriable=True))
    assert not RULES.consumer_event_is_benign(err("DataLoss"))
    assert not RULES.consumer_event_is_benign(err("OFFSET_OUT_OF_RANGE"))
    assert not RULES.consumer_event_is_benign(err("X", retriable=True, fatal=True))


def test_foreign_exceptions_become_records() -> None:
    assert RULES.describe(ValueError("bad")) == {"name": "ValueError", "message": "bad"}
    assert RULES.is_error(err("X")) and not RULES.is_error(3)
    assert WorkerError("not a dict").record["name"] == "WorkerError"  # type: ignore[arg-type]
