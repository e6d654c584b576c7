"""The control fault family (nemesis/control.py): its parameters are refused before a
run, its draws, and what it records and undoes through a control API — here a fake
API that keeps what it was told, as kfake's control channel would."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.clusters.base import Unsupported
from ktrial.histories.model import FAULT_START_F, Op
from ktrial.nemesis import NemesisOptionError, NemesisOptions, parse_faults, parse_params
from ktrial.nemesis.control import (
    ACTIONS,
    APIS,
    DRAWS,
    ERRORS,
    NO_CONTROL,
    ControlFault,
    draw,
    matching_draws,
)
from ktrial.nemesis.core import Nemesis, check_params
from ktrial.nemesis.export import export_faults
from ktrial.nemesis.params import ParamError
from ktrial.nemesis.schedule import FaultPlanner


class FakeControl:
    """Keeps the installed faults; `down` makes every call fail like a dead process."""

    def __init__(self) -> None:
        self.faults: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.down = False

    def _call(self, what: str, arg: Any = None) -> None:
        if self.down:
            raise OSError("connection refused")
        self.calls.append((what, arg))

    def inject(
        self,
        fault_id: str,
        api: str,
        error: str,
        count: int = -1,
        nodes: Sequence[int] | None = None,
        topic: str | None = None,
    ) -> Mapping[str, str]:
        self._call("inject", fault_id)
        self.faults[fault_id] = {"api": api, "error": error, "nodes": nodes, "count": count}
        applied = api == "produce" and error == "REQUEST_TIMED_OUT"
        return {"id": fault_id, "code": "7", "applied": str(applied).lower()}

    def clear(self, fault_id: str) -> Mapping[str, str]:
        self._call("clear", fault_id)
        gone = self.faults.pop(fault_id, None)
        return {"cleared": "1" if gone else "0", "hits": "4" if gone else "0"}

    def clear_prefix(self, prefix: str) -> Mapping[str, str]:
        self._call("clear_prefix", prefix)
        ids = [f for f in self.faults if f.startswith(prefix)]
        for f in ids:
            del self.faults[f]
        return {"cleared": str(len(ids)), "hits": "0"}

    def shuffle_leaders(self) -> Mapping[str, str]:
        self._call("shuffle")
        return {}

    def rehash_coordinators(self) -> Mapping[str, str]:
        self._call("rehash")
        return {}


class Node:
    def __init__(self, i: int) -> None:
        self.name, self.node_id = f"n{i + 1}", i  # kfake numbers its brokers from 0
        self.address, self.client_bootstrap, self.cgroup, self.pid = "127.0.0.1", "x:1", None, 1
        self.log_paths: list[str] = []

    def is_running(self) -> bool:
        return True


class ControlCluster:
    kind = "fake"

    def __init__(self) -> None:
        self.nodes = [Node(i) for i in range(3)]
        self.api = FakeControl()

    def control_api(self) -> FakeControl:
        return self.api

    def unsupported_faults(self) -> dict[str, str]:
        return {}


class PlainCluster(ControlCluster):
    control_api = None  # type: ignore[assignment]


class Rec:
    def __init__(self) -> None:
        self.ops: list[tuple[str, Any, dict[str, Any]]] = []

    def nemesis(self, f: str, value: Any, **extra: Any) -> None:
        self.ops.append((f, value, extra))

    def fault_started(self, fid: str, info: Any) -> None: ...

    def fault_ended(self, fid: str) -> None: ...


def _nemesis(cluster: Any, **params: Any) -> tuple[Nemesis, Rec]:
    rec = Rec()
    nem = Nemesis(cluster, rec, ["control"], random.Random(3), params={"control": params})  # type: ignore[arg-type]
    return nem, rec


# ------------------------------------------------------------ parameters


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"action": "explode"}, ["control.action='explode'", "error, leaders, coordinators"]),
        ({"api": "telepathy"}, ["control.api='telepathy'", "produce", "end_txn"]),
        ({"error": "OOPS"}, ["control.error='OOPS'", "REQUEST_TIMED_OUT"]),
        ({"error": "request_timed_out"}, ["control.error='request_timed_out'"]),
        ({"count": 0}, ["control.count=0", ">= 1, or -1"]),
        ({"count": -2}, ["control.count=-2", ">= -1"]),
        ({"count": 1.5}, ["control.count=1.5", "an integer"]),
        ({"topic": "a b"}, ["control.topic='a b'", "not a Kafka topic name"]),
        ({"action": "leaders", "api": "produce"}, ["action=leaders takes no control.api"]),
        ({"action": "coordinators", "count": 3}, ["takes no control.count"]),
        (
            {"api": "heartbeat"},
            ["control.api=heartbeat", "name both control.api and control.error"],
        ),
        ({"error": "UNKNOWN_MEMBER_ID"}, ["name both control.api and control.error"]),
    ],
)
def test_bad_parameters_are_refused_before_the_run(
    params: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(ValueError) as e:
        check_params("control", params)
    for w in words:
        assert w in str(e.value), str(e.value)
    pairs = [f"control.{k}={v}" for k, v in params.items()]
    if all(" " not in p for p in pairs):
        with pytest.raises(NemesisOptionError):
            parse_params(pairs)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"action": "leaders"},
        {"action": "coordinators"},
        {"api": "produce"},  # the error is drawn among produce's
        {"error": "REQUEST_TIMED_OUT"},
        {"api": "heartbeat", "error": "REBALANCE_IN_PROGRESS"},  # both named: no draw
        {"action": "error", "count": 5, "topic": "ktrial-queue", "targets": "one"},
    ],
)
def test_good_parameters_pass(params: dict[str, Any]) -> None:
    check_params("control", params)
    NemesisOptions(faults=("control",), params={"control": params}).validate(["n1", "n2", "n3"])


def test_all_does_not_bring_in_control_but_naming_it_does() -> None:
    assert "control" not in parse_faults("all")
    assert parse_faults("kill,control") == ("kill", "control")


def test_the_draws_use_only_known_names() -> None:
    for action, api, error in DRAWS:
        assert action in ACTIONS
        assert api is None or api in APIS
        assert error is None or error in ERRORS


@given(
    st.sampled_from([None, *ACTIONS]),
    st.sampled_from([None, "produce", "fetch", "end_txn"]),
    st.sampled_from([None, "REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER"]),
    st.integers(0, 2**32),
)
def test_a_draw_keeps_what_is_fixed_and_is_valid(
    action: str | None, api: str | None, error: str | None, seed: int
) -> None:
    p = {"action": action, "api": api, "error": error}
    try:
        ControlFault.validate(p)
    except ParamError:
        return  # refused up front: never drawn from
    got = draw(p, random.Random(seed))
    assert got == draw(p, random.Random(seed))  # a function of the rng alone
    assert got["action"] == (action or ("error" if api or error else got["action"]))
    if got["action"] == "error":
        assert (api is None or got["api"] == api) and (error is None or got["error"] == error)
        assert got["api"] in APIS and got["error"] in ERRORS
    else:
        assert "api" not in got and "error" not in got
    if not (api and error):
        assert (got["action"], got.get("api"), got.get("error")) in matching_draws(p)


def test_the_planner_draws_the_action_from_the_run_seed() -> None:
    plans = [
        FaultPlanner(["control"], random.Random(9), ["n1", "n2", "n3"]).plan("control")
        for _ in range(2)
    ]
    assert plans[0] == plans[1]
    assert plans[0].params["action"] in ACTIONS
    fixed = FaultPlanner(
        ["control"], random.Random(9), ["n1"], {"control": {"action": "leaders"}}
    ).plan("control")
    assert fixed.params == {"action": "leaders"}


# ------------------------------------------------------------ faults


def test_an_error_fault_is_recorded_injected_on_the_targets_and_cleared() -> None:
    cluster = ControlCluster()
    nem, rec = _nemesis(cluster, api="produce", error="REQUEST_TIMED_OUT")
    fault = nem.start("control", ["n2", "n3"])
    ((fid, spec),) = cluster.api.faults.items()
    assert fid == fault.id and spec["nodes"] == [1, 2] and spec["count"] == -1
    f, value, extra = rec.ops[-1]
    assert f == "start-control" and FAULT_START_F[f] == "control"
    assert extra == {"fault": "control", "fault_id": fault.id}
    assert value["nodes"] == ["n2", "n3"] and value["node_ids"] == [1, 2]
    assert value["applied"] is True and value["code"] == 7
    nem.stop(fault)
    assert cluster.api.faults == {}
    f, value, _ = rec.ops[-1]
    assert f == "stop-control"
    assert value == {
        "action": "error",
        "api": "produce",
        "error": "REQUEST_TIMED_OUT",
        "nodes": ["n2", "n3"],
        "hits": 4,
        "cleared": 1,
    }


def test_an_error_fault_on_every_node_names_no_nodes_to_the_api() -> None:
    cluster = ControlCluster()
    nem, _ = _nemesis(cluster, api="fetch", error="NOT_LEADER_OR_FOLLOWER", count=3)
    nem.start("control", "all")
    (spec,) = cluster.api.faults.values()
    assert spec["nodes"] is None and spec["count"] == 3


@pytest.mark.parametrize(("action", "call"), [("leaders", "shuffle"), ("coordinators", "rehash")])
def test_instant_actions_act_once_and_end_with_nothing_to_undo(action: str, call: str) -> None:
    cluster = ControlCluster()
    nem, rec = _nemesis(cluster, action=action)
    fault = nem.start("control", "one")
    nem.stop(fault)
    assert [c for c, _ in cluster.api.calls] == [call]
    assert [(f, v) for f, v, _ in rec.ops] == [
        ("start-control", {"action": action, "nodes": ["n1", "n2", "n3"]}),
        ("stop-control", {"action": action, "nodes": ["n1", "n2", "n3"]}),
    ]


def test_heal_clears_what_is_left_and_survives_a_dead_control_channel() -> None:
    cluster = ControlCluster()
    nem, rec = _nemesis(cluster, api="end_txn", error="NOT_COORDINATOR")
    nem.start("control")
    cluster.api.faults[f"{nem.ctx.uid}-99-control"] = {}  # one no active fault owns
    cluster.api.faults["other-nemesis-1-control"] = {}
    nem.heal_all()
    assert list(cluster.api.faults) == ["other-nemesis-1-control"]
    nem.start("control")
    cluster.api.down = True
    nem.heal_all()  # never raises
    stop = [v for f, v, _ in rec.ops if f == "stop-control"][-1]
    assert "connection refused" in stop["errors"][0]


def test_a_cluster_without_a_control_api_refuses_the_family() -> None:
    nem, _ = _nemesis(PlainCluster())
    assert nem.unsupported() == {"control": NO_CONTROL}
    with pytest.raises(Unsupported, match="no control API"):
        nem.check_supported()
    with pytest.raises(Unsupported, match="--cluster kfake"):
        nem.start("control")


def test_export_writes_control_faults_back_as_script_entries() -> None:
    cluster = ControlCluster()
    nem, rec = _nemesis(cluster, api="produce", error="NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    nem.stop(nem.start("control", ["n1"]))
    ops = [
        Op(i, i * 10**9, "nemesis", "info", f, v, extra=extra)
        for i, (f, v, extra) in enumerate(rec.ops)
    ]
    (entry,) = export_faults(ops, {"schedule_start_s": 0}).entries
    assert entry.fault == "control" and entry.targets == ["n1"] and entry.duration == 1.0
    assert entry.params == {
        "action": "error",
        "api": "produce",
        "error": "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "count": -1,
    }


def test_a_start_the_system_refuses_leaves_no_stop_op_and_nothing_installed() -> None:
    cluster = ControlCluster()

    def refuse(*a: Any, **k: Any) -> Mapping[str, str]:
        cluster.api.faults["x"] = {}  # as if installed before the reply was lost
        raise RuntimeError("unknown Kafka error")

    cluster.api.inject = refuse  # type: ignore[method-assign]
    cluster.api.faults.clear()
    nem, rec = _nemesis(cluster, api="produce", error="REQUEST_TIMED_OUT")
    with pytest.raises(RuntimeError, match="unknown Kafka error"):
        nem.start("control")
    assert rec.ops == []
    assert [c for c, _ in cluster.api.calls] == ["clear"]  # cleared all the same
