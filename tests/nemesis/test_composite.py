"""Composite faults (nemesis/composite.py) against a fake cluster whose metadata reacts to
what the fault does: the steps happen in order, each is recorded, what the admin API
said is in the ops, and stop/heal undo everything (rules, killed and paused nodes)."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from ktrial.clusters.base import Cluster, Unsupported
from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.model import FAULT_START_F
from ktrial.histories.recorder import Recorder
from ktrial.nemesis import Nemesis
from ktrial.nemesis.composite import COMPOSITES, refusal
from ktrial.nemesis.export import export_faults
from ktrial.nemesis.roles import PartitionState, RoleSource
from ktrial.nemesis.schedule import format_script, parse_script


class Ports:
    def __init__(self, i: int) -> None:
        self.client, self.replication, self.controller = 9092, 9093, 9094


class World:
    """The fake cluster's state: which replication links are cut, who is alive."""

    def __init__(self) -> None:
        self.rules: dict[str, list[list[str]]] = {}
        self.alive = {"n1": True, "n2": True, "n3": True}
        self.paused: set[str] = set()
        self.restarts: list[str] = []


class FakeNode:
    def __init__(self, i: int, world: World) -> None:
        self.name, self.node_id, self.world = f"n{i}", i, world
        self.address, self.client_bootstrap, self.cgroup = f"10.0.0.{i}", "127.0.0.1:1", None
        self.ports = Ports(i)
        self.pid = None

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        rules = self.world.rules.setdefault(self.name, [])
        if list(cmd[:3]) == ["iptables", "-w", "-A"]:
            rules.append(list(cmd[3:]))
        elif list(cmd[:3]) == ["iptables", "-w", "-D"] and list(cmd[3:]) in rules:
            rules.remove(list(cmd[3:]))
        return ""

    def is_running(self) -> bool:
        return self.world.alive[self.name]

    def kill(self) -> None:
        self.world.alive[self.name] = False

    stop = kill

    def start(self) -> None:
        self.world.alive[self.name] = True
        self.world.restarts.append(self.name)

    def pause(self) -> None:
        self.world.paused.add(self.name)

    def resume(self) -> None:
        self.world.paused.discard(self.name)


class FakeCluster:
    kind = "local"
    bootstrap_servers = "127.0.0.1:1"

    def __init__(self) -> None:
        self.world = World()
        self.nodes = [FakeNode(i, self.world) for i in (1, 2, 3)]

    def unsupported_faults(self) -> dict[str, str]:
        return {}


class Metadata(RoleSource):
    """t/0 led by n1; cutting n1's replication port shrinks its ISR to [1]; killing n1
    elects n2 (unclean, ISR [2]); isolating n1 fully moves the leadership to n2."""

    def states(self, avoid: frozenset[int] = frozenset()) -> dict[str, list[PartitionState]]:
        w = cast(FakeCluster, self.cluster).world
        cut = any("--dport" in r for r in w.rules.get("n1", []))
        isolated = any("--dport" not in r for r in w.rules.get("n1", []))
        if not w.alive["n1"]:
            t0 = PartitionState("t", 0, 2, (1, 2, 3), (2,))
        elif isolated:
            t0 = PartitionState("t", 0, 2, (1, 2, 3), (2, 3))
        elif cut:
            t0 = PartitionState("t", 0, 1, (1, 2, 3), (1,))
        else:
            t0 = PartitionState("t", 0, 1, (1, 2, 3), (1, 2, 3))
        txn = [PartitionState("__transaction_state", p, 3, (1, 2, 3), (1, 2, 3)) for p in range(3)]
        t1 = PartitionState("t", 1, 3, (3, 1, 2), (3, 1, 2))
        return {"t": [t0, t1], "__transaction_state": txn}


@pytest.fixture
def setup(tmp_path: Path) -> Any:
    cluster = FakeCluster()
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    nem = Nemesis(
        cast(Cluster, cluster),
        Recorder(writer),
        rng=random.Random(5),
        partitions=["t"],
        transactional_ids=["hello", "w1"],
    )
    nem.ctx.roles = Metadata(cast(Cluster, cluster), ["t"], ["hello", "w1"])
    yield cluster, nem, path
    nem.heal_all()
    writer.close()


def nemesis_ops(path: Path) -> list[Any]:
    return [op for op in read_history(path) if op.process == "nemesis"]


def test_partition_then_kill_shrinks_the_isr_then_kills_the_last_replica(setup: Any) -> None:
    cluster, nem, path = setup
    fault = nem.start("partition-then-kill", partition="t/0", hold=0, isr_wait=2, elect_wait=2)
    w = cluster.world
    assert not w.alive["n1"]  # the last in-sync replica is dead
    nem.stop(fault)
    assert w.alive["n1"] and w.rules["n1"] == []  # healed: restarted, rules gone
    ops = nemesis_ops(path)
    fs = [op.f for op in ops]
    assert fs == [
        "start-partition-then-kill",
        "cut-replication",
        "isr-shrunk",
        "kill-last-isr",
        "leader-elected",
        "stop-partition-then-kill",
    ]
    start = ops[0].value
    assert start["leader"] == "n1" and start["followers"] == ["n2", "n3"]
    assert start["role"]["asked"] == "leader" and start["role"]["nodes"] == ["n1"]
    assert start["params"]["partition"] == "t/0"
    assert ops[2].value["seen"]["isr"] == ["n1"]  # the admin API said: ISR of one
    assert ops[4].value["seen"]["leader"] == "n2" and ops[4].value["unclean"] is True
    assert ops[-1].value["started"] == ["n1"] and ops[-1].value["rules_removed"] == 2
    assert all(op.extra["fault"] == "partition-then-kill" for op in ops)
    assert len({op.extra["fault_id"] for op in ops}) == 1


def test_the_replication_cut_drops_only_the_replication_port_from_the_followers(
    setup: Any,
) -> None:
    cluster, nem, _ = setup
    fault = nem.start("partition-then-kill", partition="t/0", hold=0, isr_wait=0, elect_wait=0)
    on_n1 = list(cluster.world.rules["n1"])
    nem.stop(fault)
    assert sorted(r[:7] for r in on_n1) == [
        ["INPUT", "-s", "10.0.0.2", "-p", "tcp", "--dport", "9093"],
        ["INPUT", "-s", "10.0.0.3", "-p", "tcp", "--dport", "9093"],
    ]
    assert all(fault.comment in r for r in on_n1)  # cluster clean finds them by comment
    assert cluster.world.rules.get("n2", []) == [] and cluster.world.rules["n1"] == []


def test_a_heal_during_the_sequence_restarts_the_killed_leader(setup: Any) -> None:
    cluster, nem, path = setup
    fault = nem.make("partition-then-kill", partition="t/0", hold=0, isr_wait=2, elect_wait=30)
    cluster.nodes[0].kill = lambda: None  # n1 survives the kill: no election ever shows
    t = threading.Thread(target=fault.start, args=(None,))
    t.start()
    t.join(1.0)  # waiting for a new leader (elect_wait=30)
    nem.heal_all()  # sets halting: the wait ends at its next poll
    t.join(10)
    assert not t.is_alive()
    assert cluster.world.rules["n1"] == []
    ops = nemesis_ops(path)
    stop = next(op for op in ops if op.f == "stop-partition-then-kill")
    assert stop.value["aborted"] is True and stop.value["rules_removed"] == 2


def test_kill_during_commit_waits_for_a_transaction_in_flight(setup: Any) -> None:
    cluster, nem, path = setup
    rec = nem.recorder
    inv = rec.invoke(0, "txn", [["send", "k", 1]])
    fault = nem.start("kill-during-commit", commit_wait=1)
    rec.complete(inv, "ok", [["send", "k", [0, 1]]])
    assert not cluster.world.alive["n3"]  # n3 coordinates every transactional id here
    nem.stop(fault)
    assert cluster.world.alive["n3"]
    ops = nemesis_ops(path)
    assert [op.f for op in ops] == [
        "start-kill-during-commit",
        "kill-coordinator",
        "stop-kill-during-commit",
    ]
    assert ops[0].value["role"]["asked"] == "txn-coordinator"
    assert ops[0].value["transactional_id"] in ("hello", "w1")
    assert ops[0].value["partition"].startswith("__transaction_state/")
    assert ops[1].value["txn_in_flight"] == 1


def test_kill_during_commit_can_pause_instead(setup: Any) -> None:
    cluster, nem, path = setup
    fault = nem.start("kill-during-commit", action="pause", commit_wait=0)
    assert cluster.world.paused == {"n3"}
    nem.stop(fault)
    assert cluster.world.paused == set()
    assert [op.f for op in nemesis_ops(path)][1] == "pause-coordinator"


def test_rolling_isr_restart_restarts_followers_first_then_the_leader(setup: Any) -> None:
    cluster, nem, path = setup
    nem.ctx.halting.clear()
    fault = nem.start("rolling-isr-restart", partition="t/1", settle=0, wait=0.1)
    nem.stop(fault)
    assert cluster.world.restarts == ["n1", "n2", "n3"]  # ISR (3,1,2), leader 3 last
    fs = [op.f for op in nemesis_ops(path)]
    assert fs.count("restart-replica") == 3 and fs.count("replica-restarted") == 3


def test_isolate_leader_then_restart_the_stale_replica(setup: Any) -> None:
    cluster, nem, path = setup
    fault = nem.start("isolate-leader-restart-stale", partition="t/0", isolate=0.6, wait=0.1)
    nem.stop(fault)
    ops = nemesis_ops(path)
    fs = [op.f for op in ops]
    assert fs[:4] == [
        "start-isolate-leader-restart-stale",
        "isolate-leader",
        "leader-moved",
        "heal-isolation",
    ]
    heal = ops[3].value
    assert heal["stale"] == ["n1"] and heal["rules_removed"] == 4  # n1<->n2, n1<->n3
    assert cluster.world.restarts == ["n1"] and cluster.world.rules["n1"] == []
    assert fs[4] == "restart-stale"


def test_asymmetric_link_slows_a_leader_that_is_not_the_coordinator(setup: Any) -> None:
    _cluster, nem, path = setup

    class Api:
        def __init__(self) -> None:
            self.toxics: dict[str, list[str]] = {}

        def add_toxic(self, proxy: str, name: str, *a: Any) -> None:
            self.toxics.setdefault(proxy, []).append(name)

        def remove_toxic(self, proxy: str, name: str) -> None:
            self.toxics[proxy].remove(name)

        def proxies(self) -> list[str]:
            return list(self.toxics)

        def toxics_of(self, proxy: str) -> list[str]:
            return self.toxics[proxy]

    class Proxies:
        client = None

        def __init__(self) -> None:
            self._api = Api()

        def api(self) -> Api:
            return self._api

        def proxy_for(self, node: str) -> str:
            return node

    proxies = Proxies()
    nem.ctx.proxies = proxies
    fault = nem.start("asymmetric-link", attributes={"latency": 2000})
    assert proxies._api.toxics == {"n1": [fault.id]}  # t/0's leader; n3 coordinates
    nem.stop(fault)
    assert proxies._api.toxics == {"n1": []}
    start = nemesis_ops(path)[0].value
    assert start["nodes"] == ["n1"] and start["fast"] == ["n3"]
    assert start["attributes"]["latency"] == 2000


def test_every_composite_has_a_start_op_the_checker_counts() -> None:
    for name in COMPOSITES:
        assert FAULT_START_F[f"start-{name}"] == name


def test_composites_are_refused_where_the_backend_cannot_do_them() -> None:
    nodes: list[Any] = [FakeNode(i, World()) for i in (1, 2, 3)]
    assert refusal("partition-then-kill", {}, nodes) is None
    ext = {"partition": "ktrial cannot reach an external cluster's network (no namespaces)"}
    why = refusal("partition-then-kill", ext, nodes)
    assert why is not None and "needs partition" in why and "external" in why
    assert refusal("kill-during-commit", {"kill": "add --hook kill"}, nodes) is not None
    for n in nodes:
        n.process_nodes = ["n1", "n2", "n3"]  # kfake: one process
    why = refusal("kill-during-commit", {}, nodes)
    assert why is not None and "one process" in why


def test_nemesis_refuses_an_asymmetric_link_without_toxiproxy(setup: Any) -> None:
    _, nem, _ = setup
    assert "toxic" in nem.unsupported(["asymmetric-link"])["asymmetric-link"]
    nem.faults = ["asymmetric-link"]
    with pytest.raises(Unsupported):
        nem.check_supported()


def test_an_exported_composite_replays_with_its_parameters(setup: Any) -> None:
    _, nem, path = setup
    nem.stop(nem.start("partition-then-kill", partition="t/0", hold=0, isr_wait=1, elect_wait=1))
    exported = export_faults(read_history(path), {})
    (entry,) = exported.entries
    assert entry.fault == "partition-then-kill" and entry.targets is None
    assert entry.params == {
        "partition": "t/0",
        "isr_wait": 1,
        "hold": 0,
        "elect_wait": 1,
        "require_shrink": False,
    }
    (again,) = parse_script(__import__("tomllib").loads(format_script(exported.entries)))
    assert again.params == entry.params


def test_partition_then_kill_goes_on_when_another_partition_of_the_leader_shrinks(
    setup: Any,
) -> None:
    """A follower only falls behind a partition that is written: the drawn partition may
    keep its ISR while another one the same leader leads is down to the leader alone."""
    cluster, nem, path = setup

    class Idle(Metadata):
        def states(self, avoid: frozenset[int] = frozenset()) -> dict[str, list[PartitionState]]:
            out = super().states(avoid)
            t0 = out["t"][0]
            if t0.isr == (1,):  # the drawn t/0 is idle: its followers stay in sync
                out["t"][0] = PartitionState("t", 0, 1, (1, 2, 3), (1, 2, 3))
                out["t"].append(PartitionState("t", 2, 1, (1, 2, 3), (1,)))
            return out

    nem.ctx.roles = Idle(cast(Cluster, cluster), ["t"], [])
    nem.stop(nem.start("partition-then-kill", partition="t/0", hold=0, isr_wait=2, elect_wait=1))
    shrunk = by_f(nemesis_ops(path), "isr-shrunk").value
    assert shrunk["partition"] == "t/2" and shrunk["alone"] == ["t/2"]
    assert shrunk["seen"]["isr"] == ["n1"]
    assert by_f(nemesis_ops(path), "kill-last-isr").value["partition"] == "t/2"


def by_f(ops: list[Any], f: str) -> Any:
    return next(op for op in ops if op.f == f)


def test_cluster_clean_finds_a_replication_cut_rule_by_its_comment() -> None:
    """`ktrial cluster clean` reads iptables-save: a port rule is found like any other."""
    from ktrial.nemesis.iptables import DropRule, owner_of, parse_tagged

    rule = DropRule("n1", "10.0.0.2", "ktrial-nemesis:4242:abc-1-partition-then-kill", dport=9093)
    line = "-A " + " ".join(f'"{a}"' if a.startswith("ktrial-nemesis:") else a for a in rule.spec())
    save = f"*filter\n:INPUT ACCEPT [0:0]\n{line}\nCOMMIT\n"
    (found,) = parse_tagged(save)
    assert found[1:] == rule.spec()
    assert owner_of(found[found.index("--comment") + 1]) == 4242


def test_kill_during_commit_can_cut_the_coordinators_replication_first(setup: Any) -> None:
    """The coordinator's followers are cut off its replication listener while a
    transaction is in flight, then it is killed and the cut healed at once (the rules
    must not outlive the kill: the restarted coordinator's followers must reach it)."""
    cluster, nem, path = setup
    rec = nem.recorder
    inv = rec.invoke(0, "txn", [["send", "k", 1]])
    seen: dict[str, list[list[str]]] = {}
    kill = cluster.nodes[2].kill

    def kill_and_look() -> None:  # the rules in force when the coordinator dies
        seen.update({k: list(v) for k, v in cluster.world.rules.items()})
        kill()

    cluster.nodes[2].kill = kill_and_look
    fault = nem.start("kill-during-commit", commit_wait=1, cut_replication=0.2)
    rec.complete(inv, "ok", [["send", "k", [0, 1]]])
    assert not cluster.world.alive["n3"]
    assert len(seen["n3"]) == 2 and all("--dport" in r and "9093" in r for r in seen["n3"])
    assert cluster.world.rules["n3"] == []  # healed right after the kill, not at the end
    nem.stop(fault)
    assert cluster.world.alive["n3"]
    ops = nemesis_ops(path)
    assert [op.f for op in ops] == [
        "start-kill-during-commit",
        "cut-coordinator-replication",
        "kill-coordinator",
        "heal-replication",
        "stop-kill-during-commit",
    ]
    cut = ops[1].value
    assert cut["node"] == "n3" and sorted(cut["from"]) == ["n1", "n2"] and cut["rules"] == 2
    assert cut["txn_in_flight"] == 1 and ops[3].value["rules_removed"] == 2
    assert ops[0].value["params"]["cut_replication"] == 0.2


def test_kill_during_commit_refuses_a_negative_cut() -> None:
    from ktrial.nemesis.composite import KillDuringCommit
    from ktrial.nemesis.params import ParamError

    with pytest.raises(ParamError, match="cut_replication"):
        KillDuringCommit.validate({"action": "kill", "cut_replication": -1})
