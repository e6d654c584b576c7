"""Role targets (nemesis/roles.py): Java's hash, coordinator partitions, the partitions in
use, and what a resolution records — including the recorded fallback when the cluster
cannot say."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.clusters.base import Cluster
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.nemesis.base import Context
from ktrial.nemesis.process import KillFault
from ktrial.nemesis.roles import (
    PartitionState,
    RoleError,
    RoleSource,
    coordinator_partition,
    coordinators,
    in_use,
    java_hash,
    nodes_for,
    pick_partitions,
)
from ktrial.nemesis.targets import SPECS, check_spec


def java_hash_reference(s: str) -> int:
    """The textbook definition: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units, as int32."""
    data = s.encode("utf-16-be")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    h = sum(u * 31 ** (len(units) - 1 - k) for k, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_java_hash_matches_javas_string_hashcode() -> None:
    assert java_hash("") == 0
    assert java_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_hash("Aa") == java_hash("BB") == 2112
    assert java_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_hash("\U0001f600") == 1772899  # a surrogate pair: two UTF-16 units


@given(st.text(max_size=40))
def test_java_hash_is_the_polynomial_over_utf16_units(s: str) -> None:
    assert java_hash(s) == java_hash_reference(s)


def test_coordinator_partition_uses_kafkas_abs() -> None:
    # Utils.abs(Integer.MIN_VALUE) is 0 in Kafka, not MIN_VALUE
    assert coordinator_partition("polygenelubricants", 50) == 0
    assert coordinator_partition("hello", 3) == 99162322 % 3
    assert coordinator_partition("Aa", 50) == 2112 % 50
    assert coordinator_partition("neg", 7) == abs(java_hash("neg")) % 7
    with pytest.raises(ValueError):
        coordinator_partition("x", 0)


def S(
    topic: str, p: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]
) -> PartitionState:
    return PartitionState(topic, p, leader, replicas, isr)


STATES = {
    "t": [S("t", 0, 1, (1, 2, 3), (1, 2, 3)), S("t", 1, 2, (2, 3, 1), (2, 3))],
    "u": [S("u", 0, -1, (3, 1, 2), (3,))],
    "__transaction_state": [
        S("__transaction_state", p, p + 1, (1, 2, 3), (1, 2, 3)) for p in range(3)
    ],
}


def test_in_use_selects_topics_and_single_partitions_once() -> None:
    got = in_use(STATES, ["t", ("t", 1), ("u", 0), ("absent", None)])
    assert [s.name for s in got] == ["t/0", "t/1", "u/0"]


def test_pick_partitions_draws_one_led_partition_or_all_for_leaders() -> None:
    states = in_use(STATES, ["t", "u"])
    assert [s.name for s in pick_partitions("leaders", states, random.Random(1))] == ["t/0", "t/1"]
    drawn = {pick_partitions("isr", states, random.Random(i))[0].name for i in range(30)}
    assert drawn == {"t/0", "t/1"}  # never the leaderless u/0
    with pytest.raises(RoleError, match="has a leader"):
        pick_partitions("leader", in_use(STATES, ["u"]), random.Random(1))


def test_nodes_for_each_partition_role() -> None:
    t1 = [STATES["t"][1]]
    assert nodes_for("leader", t1) == {2}
    assert nodes_for("isr", t1) == {2, 3}
    assert nodes_for("followers", t1) == {3, 1}  # replicas, in sync or not
    with pytest.raises(RoleError, match="no followers"):
        nodes_for("followers", [S("x", 0, 1, (1,), (1,))])


def test_coordinators_follow_the_hash_and_refuse_what_is_unknown() -> None:
    found = coordinators(STATES, "__transaction_state", ["hello", "Aa"])
    assert found["hello"] == (99162322 % 3, 99162322 % 3 + 1)
    assert found["Aa"] == (2112 % 3, 2112 % 3 + 1)
    with pytest.raises(RoleError, match="does not exist yet"):
        coordinators(STATES, "__consumer_offsets", ["g"])
    leaderless = {"__consumer_offsets": [S("__consumer_offsets", 0, -1, (1,), ())]}
    with pytest.raises(RoleError, match="has no leader"):
        coordinators(leaderless, "__consumer_offsets", ["g"])


def test_every_role_is_a_target_spec() -> None:
    for role in ("leader", "isr", "followers", "txn-coordinator", "group-coordinator"):
        assert role in SPECS
        check_spec(role)


# ------------------------------------------------------------------ resolution in context


class FakeNode:
    def __init__(self, i: int) -> None:
        self.name, self.node_id = f"n{i}", i
        self.address, self.client_bootstrap, self.cgroup = f"10.0.0.{i}", f"10.0.0.{i}:9092", None
        self.killed = 0

    def kill(self) -> None:
        self.killed += 1

    def is_running(self) -> bool:
        return True


class FakeCluster:
    kind = "local"
    bootstrap_servers = "x:1"

    def __init__(self) -> None:
        self.nodes = [FakeNode(i) for i in (1, 2, 3)]


class Source(RoleSource):
    """A role source answering from fixed metadata (or failing like an unreachable admin)."""

    def __init__(self, cluster: Any, states: Any, **kw: Any) -> None:
        super().__init__(cluster, **kw)
        self._states = states

    def states(self, avoid: frozenset[int] = frozenset()) -> dict[str, list[PartitionState]]:
        if isinstance(self._states, Exception):
            raise self._states
        return cast(dict[str, list[PartitionState]], self._states)


def context(tmp_path: Path, roles: RoleSource) -> tuple[Context, Path]:
    path = tmp_path / "history.jsonl"
    rec = Recorder(HistoryWriter(path))
    ctx = Context(cast(Cluster, roles.cluster), rec, random.Random(3), roles=roles)
    return ctx, path


def test_a_role_resolution_is_recorded_in_the_start_op(tmp_path: Path) -> None:
    cluster = FakeCluster()
    src = Source(cluster, STATES, partitions=[("t", 1)], transactional_ids=["hello"])
    ctx, path = context(tmp_path, src)
    fault = KillFault(ctx)
    fault.start("isr")
    ctx.recorder.writer.close()
    start = next(op for op in read_history(path) if op.f == "kill")
    assert start.value["nodes"] == ["n2", "n3"]
    role = start.value["role"]
    assert role["asked"] == "isr" and role["nodes"] == ["n2", "n3"]
    assert role["partitions"] == [
        {"partition": "t/1", "leader": "n2", "replicas": ["n2", "n3", "n1"], "isr": ["n2", "n3"]}
    ]
    assert [n.killed for n in cluster.nodes] == [0, 1, 1]


def test_the_txn_coordinator_role_names_the_coordinator_and_its_partition(tmp_path: Path) -> None:
    src = Source(FakeCluster(), STATES, partitions=["t"], transactional_ids=["hello"])
    ctx, _ = context(tmp_path, src)
    nodes, res = ctx.resolve_role("txn-coordinator")
    p = 99162322 % 3
    assert nodes == [f"n{p + 1}"]
    assert res is not None and res.to_json()["coordinators"] == {
        "hello": {"partition": f"__transaction_state/{p}", "node": f"n{p + 1}"}
    }


def test_an_unresolved_role_falls_back_to_one_node_and_says_why(tmp_path: Path) -> None:
    src = Source(FakeCluster(), ConnectionError("admin unreachable"), partitions=["t"])
    ctx, path = context(tmp_path, src)
    KillFault(ctx).start("leader")
    ctx.recorder.writer.close()
    role = next(op for op in read_history(path) if op.f == "kill").value["role"]
    assert role["asked"] == "leader" and role["resolved"] is False
    assert "admin unreachable" in role["error"]
    assert role["fallback"] == "one" and len(role["nodes"]) == 1


def test_a_run_without_transactions_has_no_txn_coordinator(tmp_path: Path) -> None:
    ctx, _ = context(tmp_path, Source(FakeCluster(), STATES, partitions=["t"]))
    _, res = ctx.resolve_role("txn-coordinator")
    assert res is not None and res.error is not None and "no transactional ids" in res.error
    assert res.fallback == "one"


def test_the_controller_role_records_how_it_was_found(tmp_path: Path) -> None:
    src = Source(FakeCluster(), STATES, controller=lambda: ("n3", "quorum-state files"))
    ctx, _ = context(tmp_path, src)
    nodes, res = ctx.resolve_role("controller")
    assert nodes == ["n3"] and res is not None and res.to_json()["how"] == "quorum-state files"


def test_states_ask_again_when_a_cut_off_broker_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """An isolated broker answers metadata from a stale image: its answers are not used."""

    class Part:
        def __init__(self, leader: int) -> None:
            self.leader, self.replicas, self.isrs = leader, [1, 2, 3], [leader]

    class Topic:
        error = None

        def __init__(self, leader: int) -> None:
            self.partitions = {0: Part(leader)}

    class Md:
        def __init__(self, broker: int) -> None:
            self.orig_broker_id = broker
            self.topics = {"t": Topic(1 if broker == 1 else 2)}  # n1 still thinks it leads

    answers = iter([1, 1, 3])

    class Admin:
        def list_topics(self, timeout: float) -> Md:
            return Md(next(answers))

    from ktrial.nemesis import roles

    monkeypatch.setattr(roles, "admin_of", lambda cluster: Admin())
    src = RoleSource(cast(Cluster, FakeCluster()))
    assert src.states(avoid=frozenset({1}))["t"][0].leader == 2
    answers = iter([1] * 10)
    with pytest.raises(RoleError, match="stale metadata"):
        src.states(avoid=frozenset({1}))
