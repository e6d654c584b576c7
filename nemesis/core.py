"""The Nemesis of one run: makes faults, tracks the active ones, heals everything.

``heal_all`` is the cleanup guarantee: it stops every active fault (newest first),
sweeps any iptables rule, toxic or control-API fault still tagged with this nemesis'
id, resumes paused nodes and starts dead ones. It records what it did, never raises
(errors are logged and recorded), and is idempotent, so a run may call it from its
schedule thread, its ExitStack and its Ctrl-C handler alike.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

from ..clusters.base import Cluster, Unsupported
from ..histories.recorder import Recorder
from . import composite, control, discovery, iptables, toxics
from .base import Context, FaultBase, TargetSpec
from .memory import MemoryFault
from .network import LossFault, PartitionFault
from .process import KillFault, PauseFault, RollingRestart, ensure_running
from .roles import RoleSource
from .targets import check_spec
from .toxiproxy import NotFound

log = logging.getLogger("ktrial.nemesis")


def _stop_fault(ctx: Context) -> KillFault:
    return KillFault(ctx, graceful=True)


FAMILIES: dict[str, Any] = {
    "partition": PartitionFault,
    "loss": LossFault,
    "kill": KillFault,
    "stop": _stop_fault,
    "pause": PauseFault,
    "restart": RollingRestart,
    "memory": MemoryFault,
    "toxic": toxics.ToxicFault,
    "control": control.ControlFault,
    **composite.COMPOSITES,
}
FAULT_NAMES = tuple(FAMILIES)
COMPOSITE_NAMES = tuple(composite.COMPOSITES)

# Target specs a random activation draws from, per family (leaders only with partitions).
RANDOM_TARGETS: dict[str, tuple[str, ...]] = {
    "partition": ("one", "minority", "controller"),
    "loss": ("all", "one"),
    "kill": ("one", "minority", "majority", "controller"),
    "stop": ("one", "minority", "controller"),
    "pause": ("one", "minority", "majority", "controller"),
    "restart": ("all",),
    "memory": ("one", "minority"),
    "toxic": ("all", "one"),
    "control": ("all", "one"),
    # composites resolve their own roles when they fire; the spec only describes them
    **{name: ("leader",) for name in composite.COMPOSITES},
    "kill-during-commit": ("txn-coordinator",),
}


def random_target_specs(name: str, with_leaders: bool = True) -> tuple[str, ...]:
    """Target specs a random activation of `name` draws from (leaders: only when the
    workload's partitions are known, and never for restart, loss, toxic and control)."""
    specs = RANDOM_TARGETS.get(name, ("one",))
    if name in composite.COMPOSITES:
        return specs
    if with_leaders and name not in ("restart", "loss", "toxic", "control"):
        specs = (*specs, "leaders")
    return specs


def fault_params(name: str) -> list[str]:
    """Keyword parameters a fault family accepts (for validating scripts and CLI params)."""
    factory = FAMILIES[name]
    if name == "stop":
        factory = KillFault
    sig = inspect.signature(factory.__init__ if inspect.isclass(factory) else factory)
    return [p for p in sig.parameters if p not in ("self", "ctx", "graceful")]


def family_class(name: str) -> type[FaultBase]:
    """The class implementing family `name` ("stop" is a graceful kill)."""
    factory = FAMILIES[name]
    return KillFault if name == "stop" else factory  # type: ignore[no-any-return]


def check_params(
    name: str,
    params: Mapping[str, Any],
    where: str = "",
    nodes: Sequence[str] | None = None,
) -> None:
    """Refuse (ValueError) an unknown family, a parameter it does not take, a bad value
    (the family's own ``validate``) or a bad ``targets`` spec — all before a run starts.
    With the cluster's node names, targets and shapes are checked against them too."""
    if name not in FAMILIES:
        raise ValueError(f"{where}unknown fault {name!r}; choose among {', '.join(FAULT_NAMES)}")
    bad = sorted(set(params) - set(fault_params(name)) - {"targets"})
    if bad:
        raise ValueError(
            f"{where}fault {name!r} takes no parameter(s) {bad}; it accepts {fault_params(name)}"
        )
    try:
        if params.get("targets") is not None:
            check_spec(params["targets"], nodes, where=f"{name}.targets")
        family_class(name).validate(params, None if nodes is None else len(nodes))
    except ValueError as e:
        raise ValueError(f"{where}{e}") from None


class Nemesis:
    """All faults of a run. `faults` are the families schedules may pick from."""

    def __init__(
        self,
        cluster: Cluster,
        recorder: Recorder,
        faults: Sequence[str] = (),
        rng: random.Random | None = None,
        *,
        partitions: discovery.Partitions = None,
        proxies: Any = None,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        transactional_ids: Any = None,
        groups: Any = None,
    ) -> None:
        self.cluster, self.recorder = cluster, recorder
        self.faults = list(faults)
        self.params = {k: dict(v) for k, v in (params or {}).items()}
        for name in self.faults:
            check_params(name, self.params.get(name, {}), "--nemesis: ")
        for name, p in self.params.items():
            check_params(name, p, "nemesis params: ")
        self.partitions = partitions
        self.ctx = Context(
            cluster=cluster,
            recorder=recorder,
            rng=rng or random.Random(),
            controller=lambda: discovery.controller(cluster),
            leaders=lambda: discovery.leaders(cluster, partitions),
            proxies=proxies,
            # roles (leader, isr, coordinators, ...) are asked of the cluster at fault time
            roles=RoleSource(cluster, partitions, transactional_ids, groups),
        )

    @property
    def rng(self) -> random.Random:
        return self.ctx.rng

    def choice(self, seq: Sequence[Any]) -> Any:
        with self.ctx.lock:
            return self.ctx.rng.choice(list(seq))

    # ------------------------------------------------------------ capabilities

    def unsupported(self, names: Sequence[str] | None = None) -> dict[str, str]:
        """Fault family -> why this cluster cannot run it (empty: all fine)."""
        out: dict[str, str] = {}
        # The cluster states its limits (clusters.base.Cluster.unsupported_faults); only
        # Toxiproxy is the run's own business.
        refused = self.cluster.unsupported_faults()
        for name in names if names is not None else self.faults:
            if name in refused:
                out[name] = refused[name]
            elif name == "toxic" and self.ctx.proxies is None:
                out[name] = "no Toxiproxy in front of the brokers (plan_proxies/ClientProxies)"
            elif name == "control" and not control.has_control(self.cluster):
                out[name] = control.NO_CONTROL
            elif name in composite.COMPOSITES:
                limits = dict(refused)
                if self.ctx.proxies is None:
                    limits.setdefault("toxic", "no Toxiproxy in front of the brokers")
                why = composite.refusal(name, limits, self.cluster.nodes)
                if why:
                    out[name] = why
        return out

    def check_supported(self) -> None:
        bad = self.unsupported()
        if bad:
            raise Unsupported("; ".join(f"{k}: {v}" for k, v in bad.items()))

    # ------------------------------------------------------------ making faults

    def make(self, name: str, **params: Any) -> FaultBase:
        """A fresh (not started) fault of family `name`; `params` override the run's."""
        merged = {**self.params.get(name, {}), **params}
        merged.pop("targets", None)  # a default target spec, used by start_random
        check_params(name, merged)
        fault: FaultBase = FAMILIES[name](self.ctx, **merged)
        return fault

    def start(self, name: str, targets: TargetSpec = None, **params: Any) -> FaultBase:
        fault = self.make(name, **params)
        fault.start(targets)
        return fault

    def start_random(self, name: str) -> FaultBase:
        """Start `name` on targets drawn from its usual specs (seeded)."""
        specs = list(random_target_specs(name, self.partitions is not None))
        targets = self.params.get(name, {}).get("targets") or self.choice(specs)
        return self.start_planned(name, targets)

    def start_planned(self, name: str, targets: TargetSpec, **params: Any) -> FaultBase:
        """Start `name` on `targets` as a schedule planned it. A role (controller, leaders,
        ...) is resolved by the fault when it fires and recorded in its start op; a random
        activation aimed at ``leaders`` hits the leader of one partition (``leader``), not
        the whole cluster. If the cluster cannot name the role, the fault hits a random
        node and its op says so (``role.fallback``)."""
        if targets == "leaders":
            targets = "leader"
        return self.start(name, targets, **params)

    def stop(self, fault: FaultBase) -> None:
        fault.stop()

    def active(self) -> list[FaultBase]:
        with self.ctx.lock:
            return list(self.ctx.active)

    # ------------------------------------------------------------ healing

    def heal_all(self) -> None:
        """Undo every active fault and bring every node back; never raises (but re-raises a
        KeyboardInterrupt that arrived meanwhile, after finishing)."""
        interrupted: BaseException | None = None
        self.ctx.halting.set()
        try:
            with self.ctx.apply_lock:
                stopped, errors = [], []
                for fault in reversed(self.active()):
                    try:
                        fault.stop()
                        stopped.append(fault.id)
                    except KeyboardInterrupt as e:
                        interrupted = e
                    except Exception as e:
                        log.exception("heal: stopping %s failed", fault.id)
                        errors.append(f"{fault.id}: {e}")
                swept = self._sweep(errors)
                actions: dict[str, list[str]] = {}
                for node in self.cluster.nodes:
                    if node.name not in self.ctx.touched:
                        continue  # never start what the nemesis did not stop (e.g. torn down)
                    try:
                        done = ensure_running(node)
                    except KeyboardInterrupt as e:
                        interrupted = e
                        continue
                    except Exception as e:
                        log.exception("heal: bringing %s back failed", node.name)
                        errors.append(f"{node.name}: {e}")
                        continue
                    if done:
                        actions.setdefault(done, []).append(node.name)
                if stopped or swept or actions or errors:
                    value: dict[str, Any] = {"stopped": stopped, "swept": swept, **actions}
                    if errors:
                        value["errors"] = errors
                    try:
                        self.ctx.record("heal", value)
                    except Exception:
                        log.exception("heal: could not record the heal op")
        finally:
            self.ctx.halting.clear()
        if interrupted is not None:
            raise interrupted

    def _sweep(self, errors: list[str]) -> int:
        """Remove rules and toxics tagged with this nemesis that no active fault owns."""
        n = 0
        for node in self.cluster.nodes:
            try:
                n += iptables.remove_tagged(node, self.ctx.rule_prefix)
            except Unsupported:
                continue
            except Exception as e:
                errors.append(f"{node.name}: sweeping iptables rules: {e}")
        n += control.sweep(self.cluster, self.ctx.uid + "-")
        proxies = self.ctx.proxies
        if proxies is not None and getattr(proxies, "client", None) is not None:
            api = proxies.api()
            try:
                for proxy in api.proxies():
                    for t in api.toxics(proxy):
                        if str(t.get("name", "")).startswith(self.ctx.uid + "-"):
                            with contextlib.suppress(NotFound):
                                api.remove_toxic(proxy, t["name"])
                            n += 1
            except Exception as e:
                errors.append(f"sweeping toxics: {e}")
        return n

    def close(self) -> None:
        """Refuse every later fault start (a schedule thread still running after Ctrl-C
        cannot fault the cluster again), then heal everything. Idempotent."""
        self.ctx.closed = True  # checked under apply_lock by every start
        self.heal_all()

    def __enter__(self) -> Nemesis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
