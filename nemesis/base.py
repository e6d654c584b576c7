"""The fault interface and the context every fault family acts through.

A fault object is one *activation* of a fault family: ``start(targets)`` applies it,
records a nemesis op and returns what it did; ``stop()`` undoes exactly that and
records the end op. A fault registers itself as active *before* touching anything, so
a heal that races with (or follows a failure in) ``start`` still undoes whatever part
was applied. ``stop()`` is idempotent.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..clusters.base import Cluster, Node
from ..histories.recorder import Recorder
from . import iptables, targets
from .roles import Resolution, RoleSource

log = logging.getLogger("ktrial.nemesis")

TargetSpec = str | Sequence[str] | None


@runtime_checkable
class Fault(Protocol):
    name: str

    def start(self, targets: TargetSpec) -> dict[str, Any]: ...

    def stop(self) -> None: ...


@dataclass
class Context:
    """What faults share: the cluster, the recorder, the seeded rng, who owns the rules."""

    cluster: Cluster
    recorder: Recorder
    rng: random.Random
    controller: Callable[[], str | None] = lambda: None
    leaders: Callable[[], list[str]] = lambda: []
    proxies: Any = None  # ClientProxies when Toxiproxy fronts the brokers
    roles: RoleSource | None = None  # resolves role targets (leader, isr, coordinators...)
    uid: str = field(default_factory=lambda: f"{random.SystemRandom().getrandbits(24):06x}")
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    active: list[FaultBase] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)  # rng and active list
    # held for a whole start or stop, so a heal never interleaves with a half-applied fault
    apply_lock: threading.RLock = field(default_factory=threading.RLock)
    halting: threading.Event = field(default_factory=threading.Event)
    closed: bool = False  # set by Nemesis.close(): no fault may start any more
    touched: set[str] = field(default_factory=set)  # nodes process/memory faults acted on

    def nodes(self) -> dict[str, Node]:
        return {n.name: n for n in self.cluster.nodes}

    def node_names(self) -> list[str]:
        return [n.name for n in self.cluster.nodes]

    def resolve(self, spec: TargetSpec, default: str = "one") -> list[str]:
        """Node names for a target spec, asking the cluster for roles now."""
        return self.resolve_role(spec, default)[0]

    def resolve_role(
        self, spec: TargetSpec, default: str = "one", partition: str | None = None
    ) -> tuple[list[str], Resolution | None]:
        """Node names for a target spec and, for a role (leader, isr, txn-coordinator,
        ...), the Resolution to record: what the cluster said, or why it could not say
        and the random node hit instead (``fallback: "one"``, logged and recorded —
        never silently)."""
        spec = default if spec is None else spec
        if not (isinstance(spec, str) and spec in targets.AT_FAULT_TIME):
            with self.lock:  # the rng is shared by the schedule thread and callers
                return targets.select(spec, self.node_names(), self.rng), None
        if self.roles is None:  # a bare Context: the controller/leaders callables
            ctrl = self.controller() if spec == "controller" else None
            lead = self.leaders() if spec == "leaders" else []
            with self.lock:
                return targets.select(spec, self.node_names(), self.rng, ctrl, lead), None
        with self.lock:  # a partition drawn for leader/isr/followers comes from the rng
            rng = random.Random(self.rng.getrandbits(64))
        res = self.roles.resolve(spec, rng, partition)
        if res.error is not None:
            with self.lock:
                nodes = targets.select("one", self.node_names(), self.rng)
            log.warning(
                "nemesis: role %s not resolved (%s); hitting %s instead", spec, res.error, nodes
            )
            res.fell_back("one", nodes)
        return list(res.nodes), res

    def next_id(self, family: str) -> str:
        return f"{self.uid}-{next(self._seq)}-{family}"

    @property
    def rule_prefix(self) -> str:
        """Comment prefix of every iptables rule this nemesis adds."""
        return iptables.comment_for(f"{self.uid}-", os.getpid())

    def record(self, f: str, value: Any) -> None:
        self.recorder.nemesis(f, value)


class FaultBase:
    """Common bookkeeping: active registration, idempotent stop, live-view updates."""

    name = "fault"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.id = ctx.next_id(self.name)
        self.started = False
        self.stopped = False
        self.info: dict[str, Any] = {}
        self.role: dict[str, Any] | None = None  # the role resolution, for the start op
        self._role_recorded = False

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        """Refuse bad parameter values before the run (pure; raises params.ParamError).
        Families with parameters override it; names are checked by core.check_params."""

    def resolve(self, spec: TargetSpec, default: str = "one") -> list[str]:
        """Node names for `spec`; a role's resolution is kept for the start op."""
        nodes, res = self.ctx.resolve_role(spec, default)
        if res is not None:
            self.role = res.to_json()
        return nodes

    def record(self, f: str, value: Any) -> None:
        """Record one of this fault's nemesis ops, tagged with its family and id (extra
        fields `fault` and `fault_id`), so a reader pairs its start and end exactly. The
        first op after a role was resolved (the start op) carries it as ``role``: the
        role asked for, the nodes it resolved to and what the cluster said."""
        if self.role is not None and not self._role_recorded and isinstance(value, dict):
            value = {**value, "role": self.role}
            self._role_recorded = True
        self.ctx.recorder.nemesis(f, value, fault=self.name, fault_id=self.id)

    def start(self, targets: TargetSpec = None) -> dict[str, Any]:
        with self.ctx.apply_lock:
            return self._locked_start(targets)

    def _locked_start(self, targets: TargetSpec) -> dict[str, Any]:
        if self.ctx.closed:
            raise RuntimeError(f"the nemesis is closed (the run is ending): {self.id} not started")
        with self.ctx.lock:
            if self.started:
                raise RuntimeError(f"fault {self.id} was already started; make a new one")
            self.started = True
            self.ctx.active.append(self)
        try:
            self.info = self._start(targets)
        except BaseException:
            log.warning("fault %s failed while starting; undoing what it applied", self.id)
            self.stop()
            raise
        self.ctx.recorder.fault_started(self.id, self.info)
        return self.info

    def stop(self) -> None:
        with self.ctx.apply_lock:
            self._locked_stop()

    def _locked_stop(self) -> None:
        with self.ctx.lock:
            if self.stopped or not self.started:
                return
            self.stopped = True
        try:
            self._stop()
        finally:
            with self.ctx.lock:
                if self in self.ctx.active:
                    self.ctx.active.remove(self)
            self.ctx.recorder.fault_ended(self.id)

    # subclasses
    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {self.info}>"
