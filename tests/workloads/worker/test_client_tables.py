"""Each worker's own error mapping, on its client library's real error values.

`ktrial-java --classify-table` and `ktrial-franz --classify-table` print the error record
each worker writes for the errors a run meets (kafka-clients exceptions, franz-go's kerr
and kgo errors), built from the libraries' own classes. Here each record goes through
the shared rules (workloads/worker/errors.py under workloads/errors.classify): timeouts
and leader moves are ``info``, definite refusals ``fail``, fenced/fatal producers retire,
anything around a commit is ``info`` and retires. A worker that is not built is skipped.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from ktrial.workloads.errors import classify
from ktrial.workloads.worker import RULES, WorkerError, worker_program

INFO, FAIL = ("info", False), ("fail", False)
RETIRE = {"info": ("info", True), "fail": ("fail", True)}

# case -> (completion type, retire) of a send that met it
SEND: dict[str, tuple[str, bool]] = {
    "not_leader": INFO,
    "not_enough_replicas": INFO,
    "delivery_timeout": INFO,
    "retries_exhausted": INFO,
    "call_timeout": INFO,
    "coordinator": INFO,
    "interrupted": INFO,
    "txn_aborted": INFO,
    "aborting": INFO,
    "abortable": INFO,  # the op flow aborts the transaction
    "abortable_state": INFO,
    "metadata_timeout_in_send": FAIL,  # kafka-clients: never left send()
    "concurrent_transactions": FAIL,
    "too_large": FAIL,
    "topic_authorization": FAIL,
    "max_buffered": FAIL,
    "wrong_state": FAIL,
    "not_in_txn": FAIL,
    "epoch": RETIRE["info"],
    "out_of_order": RETIRE["info"],
    "unknown_producer": RETIRE["info"],
    "invalid_txn_state": RETIRE["info"],
    "fenced": RETIRE["info"],
    "fatal_state": RETIRE["info"],
    "fatal_wrapped": RETIRE["info"],
    "client_closed": RETIRE["info"],
}
# kafka-clients marks a transactional-id authorization failure fatal (the producer is
# unusable), which hides the refusal: info; franz-go reports the broker's refusal: fail.
# Both retire.
PER_CLIENT = {("java", "txn_id_authorization"): RETIRE["info"]}
PER_CLIENT[("franz", "txn_id_authorization")] = RETIRE["fail"]


def table(worker: str) -> dict[str, dict[str, Any]]:
    try:
        prog = worker_program(worker)
    except ValueError as e:
        pytest.skip(str(e))
    out = subprocess.run(
        [str(prog), "--classify-table"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {r["case"]: r["record"] for r in rows}


@pytest.mark.parametrize("worker", ["java", "franz"])
def test_each_client_error_gets_the_rules_completion(worker: str) -> None:
    t = table(worker)
    assert len(t) >= 15
    for case, record in t.items():
        want = PER_CLIENT.get((worker, case)) or SEND.get(case)
        if case == "commit_timeout":
            continue  # below
        assert want is not None, f"{worker}: case {case} has no expected verdict"
        v = classify(RULES, WorkerError(record), "send")
        assert (v.type, v.retire) == want, (worker, case, record)


@pytest.mark.parametrize("worker", ["java", "franz"])
@pytest.mark.parametrize("phase", ["commit", "abort"])
def test_every_client_error_around_a_commit_is_info_and_retires(worker: str, phase: Any) -> None:
    for case, record in table(worker).items():
        v = classify(RULES, WorkerError(record), phase)
        assert (v.type, v.retire) == ("info", True), (worker, case)


def test_a_begin_refused_by_a_live_producer_fails_and_retires() -> None:
    """Nothing was sent (fail), and the producer is replaced: kafka-clients stuck in an
    epoch bump refused every begin for 45 s, and a kept process failed 221,726 ops."""
    t = table("java")
    v = classify(RULES, WorkerError(t["wrong_state"]), "begin")
    assert (v.type, v.retire) == ("fail", True)
    v = classify(RULES, WorkerError(t["fenced"]), "begin")
    assert v.retire


def test_broker_errors_have_one_name_in_every_client() -> None:
    """The protocol's error names are the contract: the same broker answer reads the
    same in every worker (franz-go's kerr keeps NOT_LEADER_FOR_PARTITION; the franz
    worker writes the current name)."""
    java, franz = table("java"), table("franz")
    shared = [c for c in java if c in franz and "code" in java[c] and "code" in franz[c]]
    assert len(shared) >= 10
    for case in shared:
        assert (java[case]["name"], java[case]["code"]) == (
            franz[case]["name"],
            franz[case]["code"],
        ), case
