"""The client-independent driver parts: the op flow (workloads/ops.py), the rewind rules
(workloads/rewind.py) and the error-classification policy (workloads/errors.py).

A scripted client stands in for a Kafka client library, so these tests pin what any
driver (confluent today, a Java or Go worker later) must do, with no broker: the
confluent side is tests/workloads/test_txn_abort.py and tests/integration/.
"""

from __future__ import annotations

from typing import Any

import pytest
from ktrial.workloads import errors
from ktrial.workloads.bounded import Deadline
from ktrial.workloads.confluent import DriverConfig
from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.ops import Fetched, Last, OpDriver, send_result, send_runs, txn_value
from ktrial.workloads.rewind import Plan, ReadPositions


class Boom(Exception):
    """The scripted client's error (its `call_errors`)."""

    def __init__(self, name: str, fatal: bool = False, refusal: bool = False) -> None:
        super().__init__(name)
        self.name, self.fatal, self.refusal = name, fatal, refusal


class Rules:
    """ErrorRules of the scripted client."""

    call_errors: tuple[type[BaseException], ...] = (Boom,)

    def is_error(self, result: object) -> bool:
        return isinstance(result, Boom)

    def as_error(self, exc: BaseException) -> Any:
        return exc if isinstance(exc, Boom) else Boom(type(exc).__name__)

    def describe(self, exc: Any) -> dict[str, Any]:
        return {"name": getattr(exc, "name", type(exc).__name__)}

    def must_retire(self, exc: Any) -> bool:
        return bool(getattr(exc, "fatal", False))

    def is_definite_refusal(self, exc: Any) -> bool:
        return bool(getattr(exc, "refusal", False))

    def consumer_event_is_benign(self, err: Any) -> bool:
        return getattr(err, "name", "") == "benign"


KEYS = KeyMap({0: TopicPartition("t", 0), 1: TopicPartition("t", 1)})


class Scripted(OpDriver):
    """Sends are acknowledged at increasing offsets unless told otherwise; polls return
    the scripted batches; every client call is logged."""

    rules = Rules()

    def __init__(self, sub_via: str = "assign", **cfg: Any) -> None:
        self.cfg = DriverConfig("unused:1", KEYS, "g", sub_via=sub_via, op_timeout_s=0.2, **cfg)
        self.process, self.stop = 1, None
        self.reads = ReadPositions()
        self.calls: list[Any] = []
        self.batches: list[tuple[list[Fetched], list[Any]]] = []
        self.delivery: list[Any] = []  # per send: an offset, a Boom, or None (no report)
        self.refuse_at: int | None = None
        self.unreported = 0
        self.fail: dict[str, Boom] = {}
        self.group_keys: list[int] = [0, 1]

    def _produce(self, mops: list[Any], idx: list[int], results: list[Any]) -> None:
        for i in idx:
            if self.refuse_at == i:
                raise Boom("queue full", refusal=True)
            results[i] = self.delivery[i] if i < len(self.delivery) else 100 + i
            self.unreported += results[i] is None
            self.calls.append(("produce", mops[i][1]))

    def _flush(self, dl: Deadline) -> int:
        n, self.unreported = self.unreported, 0
        return n

    def _fetch(self) -> tuple[list[Fetched], list[Any]]:
        if "poll" in self.fail:
            raise self.fail["poll"]
        return self.batches.pop(0) if self.batches else ([], [])

    def _commit_progress(self, last: Last) -> None:
        self.calls.append(("progress", dict(last)))

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]

    def _begin(self) -> None:
        self._step("begin")

    def _send_offsets(self, last: Last, budget_s: float) -> None:
        self._step("send_offsets")

    def _commit(self, budget_s: float) -> None:
        self._step("commit")

    def _abort(self, budget_s: float) -> None:
        self._step("abort")

    def _has_consumer(self) -> bool:
        return True

    def _assign_at(self, plan: Plan) -> None:
        self.calls.append(("assign", list(plan)))

    def _seek(self, key: int, offset: int) -> None:
        self.calls.append(("seek", key, offset))

    def _current_keys(self) -> list[int]:
        return list(self.group_keys)


def rec(part: int, off: int, value: int) -> Fetched:
    return ("t", part, off, str(value).encode())


def test_sends_complete_ok_with_offsets_or_fail_when_refused_before_any_was_sent() -> None:
    d = Scripted()
    c = d.execute("send", [["send", 0, 5], ["send", 1, 6]])
    assert (c.type, c.value) == ("ok", [["send", 0, [100, 5]], ["send", 1, [101, 6]]])
    d.refuse_at = 0
    c = d.execute("send", [["send", 0, 7]])
    assert (c.type, c.error, c.value) == ("fail", {"name": "queue full"}, [["send", 0, 7]])


def test_a_send_refused_after_another_was_sent_makes_the_op_unknown() -> None:
    d = Scripted()
    d.refuse_at = 1
    c = d.execute("send", [["send", 0, 5], ["send", 1, 6]])
    assert c.type == "info" and c.value == [["send", 0, [100, 5]], ["send", 1, 6]]


def test_an_unreported_send_is_info_and_a_fatal_delivery_error_retires() -> None:
    d = Scripted()
    d.delivery = [None]
    assert d.execute("send", [["send", 0, 5]]).error["name"] == "FlushTimeout"
    d.delivery = [Boom("fenced", fatal=True)]
    c = d.execute("send", [["send", 0, 5]])
    assert (c.type, c.retire) == ("info", True)


def test_a_poll_records_values_and_positions_and_a_bad_event_rewinds_to_the_op_start() -> None:
    d = Scripted()
    d.reads.assigned_to([0, 1], {})
    d.batches = [([rec(0, 0, 10), rec(0, 1, 11)], [Boom("benign")])]
    c = d.execute("poll", [["poll"]])
    assert c.type == "ok" and c.value == [["poll", {"0": [[0, 10], [1, 11]]}]]
    assert d.reads.pos == {0: 2} and c.extra == {"poll_ms": 100}
    d.batches = [([rec(0, 2, 12), rec(1, 7, 1)], [Boom("broken")])]
    c = d.execute("poll", [["poll"]])
    assert c.type == "info" and c.error == {"name": "broken"} and not c.retire
    # key 0 goes back to where the op began (2), key 1 to the first offset it read (7)
    assert d.calls[-1] == ("assign", [(0, 2), (1, 7)]) and d.reads.pos == {0: 2, 1: 7}


def test_subscribe_mode_rewinds_by_seeking_the_keys_still_ours_and_commits_progress() -> None:
    d = Scripted(sub_via="subscribe")
    d.batches = [([rec(0, 4, 1)], [])]
    d.execute("poll", [["poll"]])
    assert d.calls == [("progress", {("t", 0): 4})]
    d.group_keys = [1]
    d.batches = [([rec(0, 5, 2), rec(1, 9, 3)], [Boom("broken")])]
    d.execute("poll", [["poll"]])
    assert d.calls[-1] == ("seek", 1, 9) and ("seek", 0, 5) not in d.calls


def test_a_transaction_commits_or_fails_by_whether_commit_was_ever_called() -> None:
    d = Scripted()
    ok = d.execute("txn", [["send", 0, 1], ["poll"]])
    assert ok.type == "ok" and d.calls == ["begin", ("produce", 0), "commit"]
    assert ok.value == [["send", 0, [100, 1]], ["poll", {}]]
    d.calls, d.fail = [], {"commit": Boom("timeout")}
    unknown = d.execute("txn", [["send", 0, 1]])
    assert (unknown.type, unknown.retire) == ("info", True) and "abort" not in d.calls
    d.calls, d.fail = [], {"begin": Boom("busy")}
    assert d.execute("txn", [["send", 0, 1]]).type == "fail"
    d.calls, d.fail = [], {}
    d.delivery = [None]
    unsure = d.execute("txn", [["send", 0, 1]])
    assert unsure.type == "fail" and d.calls[-1] == "abort" and unsure.retire  # unsure abort


def test_copy_reads_then_writes_in_one_transaction_with_the_offsets() -> None:
    d = Scripted()
    d.reads.assigned_to([0], {})
    d.batches = [([rec(0, 3, 40)], [])]
    c = d.copy_txn({0: 1}, 1000)
    assert c.type == "ok" and c.value == [["poll", {"0": [[3, 40]]}], ["send", 1, [100, 1040]]]
    assert d.calls == ["begin", ("produce", 1), "send_offsets", "commit"]
    d.fail = {"poll": Boom("broken")}
    assert d.copy_txn({0: 1}, 1000).type == "fail"


def test_the_completion_values_any_driver_produces() -> None:
    assert send_result(["send", 3, 9], 0) == ["send", 3, [0, 9]]
    assert send_result(["send", 3, 9], -1) == ["send", 3, [None, 9]]
    assert send_result(["send", 3, 9], True) == ["send", 3, 9]  # not an offset
    assert txn_value([["send", 0, 1], ["poll"], ["poll"]], [5, None, None], {1: {}}) == [
        ["send", 0, [5, 1]],
        ["poll", {}],
        ["poll"],  # never reached: stays in its invoke form
    ]


@pytest.mark.parametrize(
    ("phase", "exc", "want"),
    [
        ("commit", Boom("x"), ("info", True)),
        ("abort", Boom("x", refusal=True), ("info", True)),
        ("begin", Boom("x"), ("fail", True)),  # nothing sent; a fresh producer all the same
        ("begin", Boom("x", fatal=True), ("info", True)),
        ("send", Boom("x", refusal=True), ("fail", False)),
        ("send", Boom("x", fatal=True, refusal=True), ("fail", True)),
        ("send", Boom("x"), ("info", False)),
    ],
)
def test_the_classification_policy_is_the_same_under_any_clients_rules(
    phase: Any, exc: Boom, want: tuple[str, bool]
) -> None:
    v = errors.classify(Rules(), exc, phase)
    assert (v.type, v.retire) == want and v.error == {"name": "x"}


def test_read_positions_plans() -> None:
    r = ReadPositions()
    plan, pos = r.assign_plan([0, 1])
    assert plan == [(0, 0), (1, 0)]  # new keys start at 0, never a logical offset
    r.assigned_to([0, 1], pos)
    r.read(0, 0)
    r.read(0, 1)
    plan, pos = r.assign_plan([0, 2])
    assert plan == [(0, 2), (2, 0)] and pos == {0: 2}  # kept key keeps its position
    r.rebalanced("revoked", [0])
    assert r.pos == {} and r.rebalance_log == [{"type": "revoked", "keys": [0]}]
    assert r.known([0, 1], {0: 5, 1: -1001}) == {0: 5, 1: -1}


def test_the_json_line_contract_of_a_worker_process_driver() -> None:
    import json

    from ktrial.workloads.driver import Completion, invoke_json

    assert invoke_json("txn", [["send", 0, 1]], abort=True) == {
        "f": "txn",
        "value": [["send", 0, 1]],
        "abort": True,
    }
    d = Scripted()
    d.delivery = [Boom("fenced", fatal=True)]
    c = d.execute("send", [["send", 0, 5]])
    line = json.dumps(c.to_json())
    assert Completion.from_json(json.loads(line)) == c
    assert Completion.from_json({"type": "ok", "value": []}).retire is False
    with pytest.raises(ValueError, match=r"ok\|fail\|info"):
        Completion.from_json({"type": "maybe", "value": []})
    with pytest.raises(ValueError, match="needs a value"):
        Completion.from_json({"type": "ok"})


def test_send_runs_group_consecutive_sends_and_keep_polls_alone() -> None:
    s, p = ["send", 0, 1], ["poll"]
    assert send_runs([]) == []
    assert send_runs([s, s, p, s, s, s, p, p]) == [[0, 1], [2], [3, 4, 5], [6], [7]]
    assert send_runs([p, s]) == [[0], [1]]


class Batching(Scripted):
    """Records each _produce call's indexes (a worker's call carries them all)."""

    def __init__(self) -> None:
        super().__init__()
        self.produce_calls: list[list[int]] = []

    def _produce(self, mops: list[Any], idx: list[int], results: list[Any]) -> None:
        self.produce_calls.append(list(idx))
        super()._produce(mops, idx, results)


def test_a_txns_consecutive_sends_are_one_produce_call() -> None:
    d = Batching()
    d.batches = [([rec(0, 0, 1)], [])]
    c = d.execute("txn", [["send", 0, 5], ["send", 1, 6], ["poll"], ["send", 1, 7]])
    assert c.type == "ok", c
    assert d.produce_calls == [[0, 1], [3]]


@pytest.mark.parametrize(("mops", "retired"), [(1, False), (2, True)])
def test_a_refused_run_of_sends_aborts_and_retires_only_when_its_fate_is_unknown(
    mops: int, retired: bool
) -> None:
    """A refused lone send was never handed over: the abort leaves the producer usable.
    In a refused run of several, which were handed over is unknown: retire after abort."""
    d = Batching()
    d.refuse_at = mops - 1
    c = d.execute("txn", [["send", k % 2, 10 + k] for k in range(mops)])
    assert c.type == "fail" and c.error == {"name": "queue full"}, c
    assert "abort" in d.calls and "commit" not in d.calls
    assert c.retire is retired
