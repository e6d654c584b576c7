"""Composite faults: named sequences aimed at the roles that matter, each step an op.

Random faults on random nodes rarely produce the sequences that lose data. Each class
here is one fault family (``--nemesis partition-then-kill`` or a script entry) whose
start runs a short sequence against the roles the admin API names at that moment:

- ``partition-then-kill``: cut the followers of a partition off its leader's
  replication listener (the leader still reaches the controller quorum, so it can
  shrink the ISR), wait until the admin API reports the ISR as the leader alone, let
  it acknowledge writes alone for ``hold`` s, kill it, and wait for the controller to
  elect another leader (an out-of-sync one: unclean election) — the sequence in which
  ``min.insync.replicas=1`` with unclean election loses acknowledged writes;
- ``kill-during-commit``: kill (or pause) the transaction coordinator of one of the
  run's transactional ids at a moment a transaction is in flight (with
  ``cut_replication``, after its followers were cut off it for that long);
- ``rolling-isr-restart``: restart the in-sync replicas of a partition one by one
  (followers first, the leader last), recording the ISR before and after each;
- ``isolate-leader-restart-stale``: isolate a partition's leader from every other node,
  heal, then restart the replicas the admin API then reports out of sync;
- ``asymmetric-link``: a toxic on the client's link (Toxiproxy) to a partition leader
  that is not the transaction coordinator, whose link stays fast.

Bookkeeping is the one every fault shares (:class:`~.base.FaultBase`): the start op is
``start-<name>``, every step is its own op tagged with the fault's family and id, the
end op ``stop-<name>`` records what was undone. Whatever a step applied is remembered
before it is applied (rules with the fault's comment, toxics named by its id, killed
or paused nodes), so the end, a heal, Ctrl-C and ``ktrial cluster clean`` undo it
like any other fault's. A step waits on ``ctx.halting``, so a heal or the end of the
run cuts a sequence short (``aborted`` in its ops).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..clusters.base import Node, Unsupported
from . import iptables, params, shapes
from .base import Context, FaultBase, TargetSpec
from .process import ensure_running, wait_port
from .roles import TXN_TOPIC, PartitionState, RoleError, coordinators
from .toxiproxy import NotFound, ToxiproxyError

POLL_S = 0.5
# how a composite restarts a node: SIGTERM and a clean shutdown, or SIGKILL
HOW = ("stop", "kill")


def _partition_param(name: str, p: Mapping[str, Any]) -> None:
    v = p.get("partition")
    if v is None:
        return
    topic, slash, part = str(v).rpartition("/") if isinstance(v, str) else ("", "", "")
    if not slash or not topic or not part.isdigit():
        raise params.ParamError(f"{name}.partition={v!r}: write it topic/partition, e.g. t/0")


class CompositeFault(FaultBase):
    """What every composite shares: the state it applied and its undo, the step ops, the
    admin polls. Subclasses implement :meth:`_sequence`."""

    name = "composite"
    needs: tuple[str, ...] = ()  # the plain families whose means it uses (for refusals)

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.comment = iptables.comment_for(self.id, os.getpid())
        self.rules: list[iptables.DropRule] = []
        self.killed: list[str] = []
        self.paused: list[str] = []
        self.toxic_proxies: list[str] = []
        self.steps: list[str] = []
        self.aborted = False
        # brokers whose metadata answers are stale while they are cut off (not asked)
        self.avoid: frozenset[int] = frozenset()

    # ---------------------------------------------------------------- helpers

    def step(self, f: str, value: dict[str, Any]) -> None:
        self.steps.append(f)
        self.record(f, value)

    def hold(self, seconds: float) -> bool:
        """Wait `seconds`; True when a heal or the run's end asks to stop (aborted)."""
        if self.ctx.halting.wait(max(0.0, seconds)):
            self.aborted = True
        return self.aborted

    def source(self) -> Any:
        if self.ctx.roles is None:
            raise Unsupported(f"{self.name} needs the admin API (a Nemesis with roles)")
        return self.ctx.roles

    def names(self) -> dict[int, str]:
        return {n.node_id: n.name for n in self.ctx.cluster.nodes}

    def state_of(self, partition: str) -> PartitionState | None:
        """The partition as the admin API shows it now (None: not in the metadata)."""
        topic, _, p = partition.rpartition("/")
        for s in self.source().states(avoid=self.avoid).get(topic, ()):
            if s.partition == int(p):
                return s  # type: ignore[no-any-return]
        return None

    def poll(
        self, partition: str, done: Callable[[PartitionState], bool], timeout: float
    ) -> tuple[PartitionState | None, float, int]:
        """Poll the partition's state until `done` or `timeout` s (or a heal): the last
        state seen, the seconds waited and the number of polls."""
        t0, polls, last = time.monotonic(), 0, None
        while True:
            polls += 1
            with contextlib.suppress(Exception):  # a broker down: ask again
                last = self.state_of(partition) or last
            if last is not None and done(last):
                break
            if time.monotonic() - t0 >= timeout or self.hold(POLL_S):
                break
        return last, round(time.monotonic() - t0, 3), polls

    def pjson(self, s: PartitionState | None) -> dict[str, Any] | None:
        return None if s is None else s.to_json(self.names())

    def leader_partition(self, partition: str | None) -> tuple[str, PartitionState]:
        """Resolve the ``leader`` role (of `partition`, or one drawn) through the context,
        so the start op records the role; RoleError when the cluster cannot say."""
        _nodes, res = self.ctx.resolve_role("leader", partition=partition)
        if res is None or res.error is not None or not res.seen.get("partitions"):
            why = res.error if res is not None else "no role source"
            raise RoleError(f"{self.name}: the leader of a partition is unknown ({why})")
        self.role = res.to_json()
        chosen = res.seen["partitions"][0]["partition"]
        state = self.state_of(chosen)
        if state is None or state.leader < 0:
            raise RoleError(f"{self.name}: {chosen} has no leader now")
        return chosen, state

    def node(self, name: str) -> Node:
        return self.ctx.nodes()[name]

    def kill(self, name: str, graceful: bool = False) -> None:
        self.killed.append(name)  # before: a heal racing the kill still starts it
        self.ctx.touched.add(name)
        node = self.node(name)
        node.stop() if graceful else node.kill()

    def pause(self, name: str) -> None:
        self.paused.append(name)
        self.ctx.touched.add(name)
        self.node(name).pause()

    def add_rules(self, rules: list[iptables.DropRule]) -> None:
        self.rules += rules  # remember before applying: a partial apply is still healed
        iptables.apply_rules(self.ctx.nodes(), rules)

    def remove_rules(self, errors: list[str]) -> int:
        n = len(self.rules)
        errors += iptables.remove_rules(self.ctx.nodes(), self.rules)
        self.rules = []
        return n

    def start_again(self, names: Sequence[str], errors: list[str]) -> list[str]:
        started = []
        for name in names:
            try:
                if ensure_running(self.node(name)) is not None:
                    started.append(name)
            except Exception as e:
                errors.append(f"{name}: start failed: {e}")
        return started

    # ---------------------------------------------------------------- the fault interface

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        self.info = {"params": self.params()}
        self._sequence(targets)
        if self.aborted:
            self.info["aborted"] = True
        return self.info

    def _sequence(self, targets: TargetSpec) -> None:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        """The fault's parameters (the start op records them; `faults export` replays them)."""
        return {}

    def _stop(self) -> None:
        errors: list[str] = []
        removed = self.remove_rules(errors)
        api = (
            self.ctx.proxies.api() if self.ctx.proxies is not None and self.toxic_proxies else None
        )
        for proxy in self.toxic_proxies:
            try:
                with contextlib.suppress(NotFound):
                    api.remove_toxic(proxy, self.id)  # type: ignore[union-attr]
            except (ToxiproxyError, OSError) as e:
                errors.append(f"{proxy}: removing toxic {self.id}: {e}")
        resumed = []
        for name in self.paused:
            try:
                self.node(name).resume()
                resumed.append(name)
            except Exception as e:
                errors.append(f"{name}: resume failed: {e}")
        started = self.start_again(self.killed, errors)
        value: dict[str, Any] = {
            "steps": list(self.steps),
            "rules_removed": removed,
            "toxics_removed": len(self.toxic_proxies),
            "resumed": resumed,
            "started": started,
        }
        if self.aborted:
            value["aborted"] = True
        if errors:
            value["errors"] = errors
        self.record(f"stop-{self.name}", value)


def _errors(errors: list[str]) -> dict[str, Any]:
    return {"errors": errors} if errors else {}


def _number(name: str, p: Mapping[str, Any], key: str, low: float = 0, open_: bool = False) -> None:
    if key in p and p[key] is not None:
        params.number(name, key, p[key], low=low, low_open=open_)


class PartitionThenKill(CompositeFault):
    """Shrink a partition's ISR to its leader, then kill that last in-sync replica."""

    name = "partition-then-kill"
    needs = ("partition", "kill")

    def __init__(
        self,
        ctx: Context,
        partition: str | None = None,
        isr_wait: float = 20.0,
        hold: float = 3.0,
        elect_wait: float = 20.0,
        require_shrink: bool = False,
    ) -> None:
        super().__init__(ctx)
        self.validate(
            {"partition": partition, "isr_wait": isr_wait, "hold": hold, "elect_wait": elect_wait}
        )
        self.partition, self.isr_wait, self.hold_s = partition, isr_wait, hold
        self.elect_wait, self.require_shrink = elect_wait, require_shrink

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        _partition_param("partition-then-kill", p)
        for k in ("isr_wait", "hold", "elect_wait"):
            _number("partition-then-kill", p, k)
        if "require_shrink" in p:
            params.boolean("partition-then-kill", "require_shrink", p["require_shrink"])

    def params(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "isr_wait": self.isr_wait,
            "hold": self.hold_s,
            "elect_wait": self.elect_wait,
            "require_shrink": self.require_shrink,
        }

    def _sequence(self, targets: TargetSpec) -> None:
        part, before = self.leader_partition(self.partition)
        names = self.names()
        leader = names[before.leader]
        followers = [names[i] for i in before.replicas if i != before.leader and i in names]
        self.info.update({"partition": part, "nodes": [leader], "leader": leader})
        self.step(
            f"start-{self.name}",
            {**self.info, "before": self.pjson(before), "followers": followers},
        )
        if not followers:
            raise RoleError(f"{part} has no followers to cut off (replication factor 1)")
        port = getattr(getattr(self.node(leader), "ports", None), "replication", None)
        if not isinstance(port, int):
            raise Unsupported(f"{self.name}: node {leader} does not expose its replication port")
        nodes = self.ctx.nodes()
        self.add_rules(
            [
                iptables.DropRule(leader, nodes[f].address, self.comment, dport=port)
                for f in followers
            ]
        )
        self.step(
            "cut-replication",
            {"leader": leader, "followers": followers, "port": port, "rules": len(self.rules)},
        )
        # Every partition the leader leads shrinks once its followers fall behind, but a
        # follower only falls behind a partition that is being written: watch all the
        # workload's partitions it leads and go on when any of them is down to it alone.
        lone = (before.leader,)
        watched, waited, polls = self.poll_led(part, before.leader, self.isr_wait)
        alone = [s for s in watched if s.isr == lone]
        shrunk = next((s for s in alone if s.name == part), alone[0] if alone else None)
        ok = shrunk is not None
        self.step(
            "isr-shrunk" if ok else "isr-not-shrunk",
            {
                "partition": shrunk.name if shrunk is not None else part,
                "seen": self.pjson(shrunk) if shrunk is not None else self.pjson(before),
                "alone": [s.name for s in alone],  # every partition whose ISR is the leader
                "led": [self.pjson(s) for s in watched],
                "waited_s": waited,
                "polls": polls,
            },
        )
        self.info["isr_shrunk"] = ok
        if self.aborted or (not ok and self.require_shrink):
            return
        if self.hold(self.hold_s):
            return
        target = shrunk.name if shrunk is not None else part
        self.kill(leader)
        self.step(
            "kill-last-isr",
            {
                "node": leader,
                "nodes": [leader],
                "partition": target,
                "isr_was": [leader] if ok else None,
            },
        )
        after, waited, polls = self.poll(
            target, lambda s: s.leader >= 0 and s.leader != before.leader, self.elect_wait
        )
        elected = after is not None and after.leader >= 0 and after.leader != before.leader
        value: dict[str, Any] = {
            "partition": target,
            "seen": self.pjson(after),
            "waited_s": waited,
            "polls": polls,
        }
        if elected and after is not None:
            # unclean: the new leader was not in the ISR the admin API last reported
            isr_then = shrunk.isr if shrunk is not None else before.isr
            value["unclean"] = after.leader not in isr_then
        if self.aborted:
            value["aborted"] = True  # the run ended (or a heal came) before an election
        self.step("leader-elected" if elected else "no-leader", value)
        self.info["elected"] = value

    def poll_led(
        self, part: str, leader: int, timeout: float
    ) -> tuple[list[PartitionState], float, int]:
        """Poll the workload's partitions `leader` leads (with `part` first) until one has
        an ISR of the leader alone, or `timeout` s: the last states seen, seconds, polls."""
        from .roles import in_use, partition_refs

        src = self.source()
        t0, polls, last = time.monotonic(), 0, []
        while True:
            polls += 1
            with contextlib.suppress(Exception):
                states = in_use(src.states(), partition_refs(src, None))
                led = [s for s in states if s.leader == leader]
                last = sorted(led, key=lambda s: s.name != part)
            if any(s.isr == (leader,) for s in last):
                break
            if time.monotonic() - t0 >= timeout or self.hold(POLL_S):
                break
        return last, round(time.monotonic() - t0, 3), polls


class KillDuringCommit(CompositeFault):
    """Kill or pause the coordinator of one transactional id while a transaction is in
    flight (a ``txn`` op invoked and not completed, from the run's own recorder).

    With ``cut_replication`` > 0 the other nodes' packets to the coordinator's
    replication listener are dropped for that many seconds first, so the
    ``PREPARE_COMMIT`` records it writes meanwhile stay on its disk alone when it dies
    (the rules go right after the kill). The window of the torn transaction in
    bench/findings/2026-12-02-ssh-torn-txn, which is otherwise a few milliseconds."""

    name = "kill-during-commit"
    needs = ("kill",)

    def __init__(
        self,
        ctx: Context,
        action: str = "kill",
        commit_wait: float = 10.0,
        cut_replication: float = 0.0,
    ) -> None:
        super().__init__(ctx)
        self.validate(
            {"action": action, "commit_wait": commit_wait, "cut_replication": cut_replication}
        )
        self.action, self.commit_wait = action, commit_wait
        self.cut_replication = cut_replication

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        params.choice("kill-during-commit", "action", p.get("action"), ("kill", "pause"))
        _number("kill-during-commit", p, "commit_wait")
        _number("kill-during-commit", p, "cut_replication")

    def params(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "commit_wait": self.commit_wait,
            "cut_replication": self.cut_replication,
        }

    def cut(self, coord: str) -> bool:
        """Drop the other nodes' packets to `coord`'s replication listener; True when a
        heal or the run's end came during the hold."""
        port = getattr(getattr(self.node(coord), "ports", None), "replication", None)
        if not isinstance(port, int):
            raise Unsupported(f"{self.name}: node {coord} does not expose its replication port")
        nodes = self.ctx.nodes()
        others = [n for n in nodes if n != coord]
        self.add_rules(
            [iptables.DropRule(coord, nodes[o].address, self.comment, dport=port) for o in others]
        )
        self.step(
            "cut-coordinator-replication",
            {
                "node": coord,
                "from": others,
                "port": port,
                "rules": len(self.rules),
                "seconds": self.cut_replication,
                "txn_in_flight": self.in_flight(),
            },
        )
        return self.hold(self.cut_replication)

    def in_flight(self) -> int:
        counts = getattr(self.ctx.recorder, "counts", None)
        if counts is None:
            return 0
        done = sum(counts.get(("txn", t), 0) for t in ("ok", "fail", "info"))
        return int(counts.get(("txn", "invoke"), 0)) - int(done)

    def _sequence(self, targets: TargetSpec) -> None:
        _nodes, res = self.ctx.resolve_role("txn-coordinator")
        if res is None or res.error is not None:
            why = res.error if res is not None else "no role source"
            raise RoleError(f"{self.name}: no transaction coordinator ({why})")
        coords: dict[str, Any] = res.seen.get("coordinators", {})
        with self.ctx.lock:
            txn_id = self.ctx.rng.choice(sorted(coords))
        coord = str(coords[txn_id]["node"])
        self.role = res.to_json()
        self.info.update({"nodes": [coord], "transactional_id": txn_id, **coords[txn_id]})
        self.step(f"start-{self.name}", dict(self.info))
        t0 = time.monotonic()
        while self.in_flight() <= 0 and time.monotonic() - t0 < self.commit_wait:
            if self.hold(0.01):
                return
        if self.cut_replication > 0 and self.cut(coord):
            return
        flying = self.in_flight()
        (self.pause if self.action == "pause" else self.kill)(coord)
        self.step(
            "kill-coordinator" if self.action == "kill" else "pause-coordinator",
            {
                "node": coord,
                "nodes": [coord],
                "txn_in_flight": flying,
                "waited_s": round(time.monotonic() - t0, 3),
            },
        )
        self.info["txn_in_flight"] = flying
        if self.rules:  # the coordinator is down: let its followers reach it when it is back
            errors: list[str] = []
            removed = self.remove_rules(errors)
            self.step("heal-replication", {"rules_removed": removed, **_errors(errors)})


class RollingIsrRestart(CompositeFault):
    """Restart a partition's in-sync replicas one after another, followers first."""

    name = "rolling-isr-restart"
    needs = ("restart",)

    def __init__(
        self,
        ctx: Context,
        partition: str | None = None,
        settle: float = 5.0,
        wait: float = 60.0,
        how: str = "stop",
    ) -> None:
        super().__init__(ctx)
        self.validate({"partition": partition, "settle": settle, "wait": wait, "how": how})
        self.partition, self.settle, self.wait, self.how = partition, settle, wait, how

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        _partition_param("rolling-isr-restart", p)
        _number("rolling-isr-restart", p, "settle")
        _number("rolling-isr-restart", p, "wait", open_=True)
        params.choice("rolling-isr-restart", "how", p.get("how"), HOW)

    def params(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "settle": self.settle,
            "wait": self.wait,
            "how": self.how,
        }

    def _sequence(self, targets: TargetSpec) -> None:
        part, before = self.leader_partition(self.partition)
        names = self.names()
        order = [i for i in before.isr if i != before.leader] + [before.leader]
        chosen = [names[i] for i in order if i in names]
        self.info.update({"partition": part, "nodes": chosen})
        self.step(f"start-{self.name}", {**self.info, "before": self.pjson(before)})
        for name in chosen:
            if self.ctx.halting.is_set():
                self.aborted = True
                self.info["skipped"] = chosen[chosen.index(name) :]
                return
            seen = self.state_of(part)
            self.step("restart-replica", {"node": name, "seen": self.pjson(seen)})
            t0 = time.monotonic()
            self.kill(name, graceful=self.how == "stop")
            node = self.node(name)
            node.start()
            self.killed.remove(name)
            listener = str(getattr(node, "direct_client", None) or node.client_bootstrap)
            host, _, port = listener.rpartition(":")
            up = wait_port(host, int(port), self.wait)
            node_id = node.node_id

            def rejoined(s: PartitionState, i: int = node_id) -> bool:
                return i in s.isr

            back, _waited, _ = self.poll(part, rejoined, max(0.0, self.wait))
            self.step(
                "replica-restarted",
                {
                    "node": name,
                    "listening": up,
                    "seconds": round(time.monotonic() - t0, 3),
                    "in_sync_again": back is not None and node.node_id in back.isr,
                    "seen": self.pjson(back),
                },
            )
            if self.hold(self.settle):
                return


class IsolateLeaderRestartStale(CompositeFault):
    """Isolate a partition's leader from every other node for `isolate` s, heal, then
    restart the replicas the admin API reports out of the ISR (the stale ones)."""

    name = "isolate-leader-restart-stale"
    needs = ("partition", "kill")

    def __init__(
        self,
        ctx: Context,
        partition: str | None = None,
        isolate: float = 12.0,
        how: str = "kill",
        wait: float = 60.0,
    ) -> None:
        super().__init__(ctx)
        self.validate({"partition": partition, "isolate": isolate, "how": how, "wait": wait})
        self.partition, self.isolate, self.how, self.wait = partition, isolate, how, wait

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        _partition_param("isolate-leader-restart-stale", p)
        _number("isolate-leader-restart-stale", p, "isolate", open_=True)
        _number("isolate-leader-restart-stale", p, "wait", open_=True)
        params.choice("isolate-leader-restart-stale", "how", p.get("how"), HOW)

    def params(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "isolate": self.isolate,
            "how": self.how,
            "wait": self.wait,
        }

    def _sequence(self, targets: TargetSpec) -> None:
        part, before = self.leader_partition(self.partition)
        names = self.names()
        leader = names[before.leader]
        self.info.update({"partition": part, "nodes": [leader], "leader": leader})
        self.step(f"start-{self.name}", {**self.info, "before": self.pjson(before)})
        nodes = self.ctx.nodes()
        addrs = {n: nodes[n].address for n in nodes}
        if len(set(addrs.values())) < len(addrs):
            raise Unsupported(f"{self.name}: the nodes share an address (no network namespaces)")
        grudge = shapes.isolate(list(nodes), [leader])
        self.avoid = frozenset({before.leader})  # cut off from the quorum: a stale image
        self.add_rules(iptables.rules_for_grudge(grudge, addrs, self.comment))
        self.step("isolate-leader", {"node": leader, "nodes": [leader], "rules": len(self.rules)})
        moved, waited, polls = self.poll(
            part, lambda s: s.leader >= 0 and s.leader != before.leader, self.isolate
        )
        if self.hold(self.isolate - waited):
            return
        seen = self.state_of(part) or moved
        self.step(
            "leader-moved" if seen is not None and seen.leader != before.leader else "leader-kept",
            {"partition": part, "seen": self.pjson(seen), "waited_s": waited, "polls": polls},
        )
        errors: list[str] = []
        removed = self.remove_rules(errors)
        self.avoid = frozenset()
        stale_ids = [
            i
            for i in (seen.replicas if seen else before.replicas)
            if seen is None or i not in seen.isr
        ]
        stale = [names[i] for i in stale_ids if i in names] or [leader]
        self.step(
            "heal-isolation",
            {
                "rules_removed": removed,
                "stale": stale,
                "seen": self.pjson(seen),
                **({"errors": errors} if errors else {}),
            },
        )
        self.info["stale"] = stale
        for name in stale:
            t0 = time.monotonic()
            self.kill(name, graceful=self.how == "stop")
            self.node(name).start()
            self.killed.remove(name)
            node = self.node(name)
            listener = str(getattr(node, "direct_client", None) or node.client_bootstrap)
            host, _, port = listener.rpartition(":")
            up = wait_port(host, int(port), self.wait)
            self.step(
                "restart-stale",
                {
                    "node": name,
                    "nodes": [name],
                    "listening": up,
                    "seconds": round(time.monotonic() - t0, 3),
                },
            )


class AsymmetricLink(CompositeFault):
    """A toxic on the client link to a partition leader that is not a transaction
    coordinator; the coordinators' links stay as they are (fast)."""

    name = "asymmetric-link"
    needs = ("toxic",)

    def __init__(
        self,
        ctx: Context,
        kind: str = "latency",
        attributes: dict[str, Any] | None = None,
        stream: str = "upstream",
    ) -> None:
        super().__init__(ctx)
        self.validate({"kind": kind, "attributes": attributes, "stream": stream})
        self.kind, self.attributes, self.stream = kind, attributes, stream

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        from .toxics import ToxicFault

        try:
            ToxicFault.validate({**p, "kind": p.get("kind") or "latency"}, n_nodes)
        except params.ParamError as e:  # the same checks, named as the user wrote them
            raise params.ParamError(str(e).replace("toxic.", "asymmetric-link.")) from None

    def params(self) -> dict[str, Any]:
        return {"kind": self.kind, "attributes": self.attributes, "stream": self.stream}

    def _sequence(self, targets: TargetSpec) -> None:
        from .toxics import DEFAULTS

        proxies = self.ctx.proxies
        if proxies is None:
            raise Unsupported(f"{self.name} needs Toxiproxy in front of the brokers")
        src = self.source()
        states = src.states()
        names = self.names()
        keys = src._list(src.transactional_ids)
        found = coordinators(states, TXN_TOPIC, keys) if keys else {}
        coord_ids = {lead for _, lead in found.values()}
        from .roles import in_use, partition_refs

        parts = [s for s in in_use(states, partition_refs(src, None)) if s.leader >= 0]
        slow = [s for s in parts if s.leader not in coord_ids]
        if not parts:
            raise RoleError(f"{self.name}: none of the workload's partitions has a leader")
        with self.ctx.lock:
            chosen = self.ctx.rng.choice(slow or parts)
        leader = names[chosen.leader]
        fast = sorted({names[i] for i in coord_ids if i in names})
        attrs = {**DEFAULTS[self.kind], **(self.attributes or {})}
        self.role = {
            "asked": "leader (not a transaction coordinator)",
            "nodes": [leader],
            "partitions": [chosen.to_json(names)],
            "coordinators": {
                k: {"partition": f"{TXN_TOPIC}/{p}", "node": names.get(lead, lead)}
                for k, (p, lead) in found.items()
            },
        }
        if not slow:
            self.role["note"] = (
                "every partition leader is also a coordinator: the link is not asymmetric"
            )
        self.info.update(
            {
                "partition": chosen.name,
                "nodes": [leader],
                "fast": fast,
                "toxic": self.kind,
                "attributes": attrs,
            }
        )
        self.step(f"start-{self.name}", dict(self.info))
        proxy = proxies.proxy_for(leader)
        self.toxic_proxies.append(proxy)
        proxies.api().add_toxic(proxy, self.id, self.kind, attrs, self.stream, 1.0)
        self.step(
            "toxic-leader-link", {"node": leader, "nodes": [leader], "proxy": proxy, "fast": fast}
        )


COMPOSITES: dict[str, type[CompositeFault]] = {
    c.name: c
    for c in (
        PartitionThenKill,
        KillDuringCommit,
        RollingIsrRestart,
        IsolateLeaderRestartStale,
        AsymmetricLink,
    )
}
# The ops that begin and end each composite (histories/model.py lists the starts too).
START_OPS = {f"start-{n}": n for n in COMPOSITES}
END_OPS = {f"stop-{n}": (n,) for n in COMPOSITES}


def refusal(
    name: str,
    refused: Mapping[str, str],
    nodes: Sequence[Node] = (),
    one_process: bool = False,
) -> str | None:
    """Why composite `name` cannot run on this cluster (None: it can): a plain family it
    needs is refused (`refused`: family -> why, every family the cluster refuses), or
    every node is one process (kfake: no leader, replica or coordinator to aim at)."""
    cls = COMPOSITES[name]
    for family in cls.needs:
        if family in refused:
            return f"needs {family}, which this cluster refuses: {refused[family]}"
    if one_process or any(len(getattr(n, "process_nodes", ()) or ()) > 1 for n in nodes):
        return (
            "every node is one process here (a one-process system): there is no leader, "
            "replica or coordinator to aim at"
        )
    return None


def refusals(
    families: Sequence[str], refused: Mapping[str, str], one_process: bool = False
) -> dict[str, str]:
    """composite -> why not, for the composites among `families` (before a run starts)."""
    out = {}
    for name in families:
        if name in COMPOSITES:
            why = refusal(name, refused, one_process=one_process)
            if why:
                out[name] = why
    return out
