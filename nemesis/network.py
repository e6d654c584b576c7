"""Partitions and packet loss between nodes: iptables DROP rules in node namespaces."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..clusters.base import Unsupported
from . import iptables, params, shapes
from .base import Context, FaultBase, TargetSpec


def _addresses(ctx: Context) -> dict[str, str]:
    nodes = ctx.nodes()
    addrs = {name: n.address for name, n in nodes.items()}
    if len(set(addrs.values())) < len(addrs):
        raise Unsupported(
            "partitions and packet loss need every node at its own address (network "
            f"namespaces); these nodes share addresses {sorted(set(addrs.values()))} — "
            "start the cluster without --no-netns"
        )
    return addrs


class _RuleFault(FaultBase):
    start_f = "start-?"
    stop_f = "stop-?"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.comment = iptables.comment_for(self.id, os.getpid())
        self.rules: list[iptables.DropRule] = []

    def _apply(self, rules: list[iptables.DropRule]) -> None:
        self.rules = rules  # remember before applying: a partial apply is still healed
        iptables.apply_rules(self.ctx.nodes(), rules)

    def _stop(self) -> None:
        errors = iptables.remove_rules(self.ctx.nodes(), self.rules)
        value = {k: v for k, v in self.info.items() if k != "grudge"}
        value["rules_removed"] = len(self.rules)
        if errors:
            value["errors"] = errors
        self.record(self.stop_f, value)


class PartitionFault(_RuleFault):
    """Cut links between nodes in a given shape (see :mod:`.shapes`)."""

    name = "partition"
    start_f, stop_f = "start-partition", "stop-partition"

    def __init__(self, ctx: Context, shape: str | None = None, direction: str = "in") -> None:
        super().__init__(ctx)
        self.validate({"shape": shape, "direction": direction})
        self.shape, self.direction = shape, direction

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        """Refuse a bad shape or direction (pure); with the cluster's size, a shape that
        cannot be drawn on it (a ring needs 4 nodes, a bridge 3)."""
        params.choice("partition", "shape", p.get("shape"), shapes.SHAPES)
        params.choice("partition", "direction", p.get("direction"), ("in", "out"))
        shape = p.get("shape")
        if shape is not None and n_nodes is not None:
            fits = shapes.applicable_shapes(n_nodes)
            if shape not in fits:
                raise params.ParamError(
                    f"partition.shape={shape!r} does not fit {n_nodes} node(s); "
                    f"choose one of {', '.join(fits)}"
                )

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        addrs = _addresses(self.ctx)
        names = self.ctx.node_names()
        with self.ctx.lock:
            shape = self.shape or self.ctx.rng.choice(shapes.applicable_shapes(len(names)))
        chosen: list[str] = []
        if shape in ("isolate", "one-way"):
            chosen = self.resolve(targets, default="one")
        elif shape == "split" and targets is not None:
            chosen = self.resolve(targets)
        with self.ctx.lock:
            grudge = shapes.make_grudge(shape, names, chosen, self.ctx.rng, self.direction)
        value: dict[str, Any] = {
            "shape": shape,
            "targets": chosen,
            "grudge": {k: sorted(v) for k, v in grudge.items() if v},
            "sees": shapes.components_seen(grudge),
        }
        if shape == "one-way":
            value["direction"] = self.direction
        self.info = value
        self._apply(iptables.rules_for_grudge(grudge, addrs, self.comment))
        self.record(self.start_f, value)
        return value


class LossFault(_RuleFault):
    """Drop a random fraction of packets on every link touching the targets."""

    name = "loss"
    start_f, stop_f = "start-loss", "stop-loss"

    def __init__(self, ctx: Context, probability: float = 0.2) -> None:
        super().__init__(ctx)
        self.validate({"probability": probability})
        self.probability = probability

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        if "probability" in p:
            params.number("loss", "probability", p["probability"], low=0, high=1, low_open=True)

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        addrs = _addresses(self.ctx)
        names = self.ctx.node_names()
        chosen = self.resolve(targets, default="all")
        grudge: dict[str, set[str]] = {n: set() for n in names}
        for t in chosen:
            grudge[t] |= set(names) - {t}
            for other in names:
                if other != t:
                    grudge[other].add(t)
        value = {"targets": chosen, "probability": self.probability}
        self.info = value
        self._apply(iptables.rules_for_grudge(grudge, addrs, self.comment, self.probability))
        self.record(self.start_f, value)
        return value
