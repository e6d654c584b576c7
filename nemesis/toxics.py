"""Client link faults: Toxiproxy toxics on the proxies in front of the targets.

Toxiproxy is the only source of latency here (the kernel has no netem). Kinds and
default attributes (Toxiproxy's own names and units):

- ``latency``    — ``latency`` ms (+- ``jitter`` ms) added to data
- ``timeout``    — stop all data; close the connection after ``timeout`` ms (0: never)
- ``reset_peer`` — reset the connection (TCP RST) after ``timeout`` ms
- ``bandwidth``  — limit to ``rate`` KB/s
- ``slicer``     — cut data into ~``average_size``-byte pieces, ``delay`` µs apart
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from ..clusters.base import Unsupported
from . import params
from .base import Context, FaultBase, TargetSpec
from .toxiproxy import NotFound, ToxiproxyError

DEFAULTS: dict[str, dict[str, Any]] = {
    "latency": {"latency": 300, "jitter": 50},
    "timeout": {"timeout": 0},
    "reset_peer": {"timeout": 0},
    "bandwidth": {"rate": 64},
    "slicer": {"average_size": 64, "size_variation": 32, "delay": 2000},
}
KINDS = tuple(DEFAULTS)


class ToxicFault(FaultBase):
    """Add one toxic to the proxies of the targets (default: all nodes)."""

    name = "toxic"

    def __init__(
        self,
        ctx: Context,
        kind: str | None = None,
        attributes: dict[str, Any] | None = None,
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> None:
        super().__init__(ctx)
        self.validate(
            {"kind": kind, "attributes": attributes, "stream": stream, "toxicity": toxicity}
        )
        self.kind, self.attributes, self.stream, self.toxicity = kind, attributes, stream, toxicity
        self.applied: list[str] = []  # proxy names carrying our toxic

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        """Kind, stream and toxicity; attributes only with a kind, by that kind's names."""
        kind = p.get("kind")
        params.choice("toxic", "kind", kind, KINDS)
        params.choice("toxic", "stream", p.get("stream"), ("upstream", "downstream"))
        if "toxicity" in p:
            params.number("toxic", "toxicity", p["toxicity"], low=0, high=1)
        attrs = p.get("attributes")
        if attrs is None:
            return
        attrs = params.mapping("toxic", "attributes", attrs)
        if kind is None:
            raise params.ParamError(
                f"toxic.attributes={dict(attrs)!r} needs toxic.kind: the attributes differ "
                f"by kind ({', '.join(KINDS)})"
            )
        known = DEFAULTS[kind]
        for name, value in attrs.items():
            if name not in known:
                raise params.ParamError(
                    f"toxic.attributes: a {kind} toxic has no attribute {name!r}; "
                    f"it takes {', '.join(known)}"
                )
            params.number("toxic", f"attributes.{name}", value, low=0, integer=True)

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        proxies = self.ctx.proxies
        if proxies is None:
            raise Unsupported(
                "toxics need Toxiproxy in front of the brokers: start the cluster with the "
                "toxic fault enabled (plan_proxies + ClientProxies)"
            )
        chosen = self.resolve(targets, default="all")
        with self.ctx.lock:
            kind = self.kind or self.ctx.rng.choice(KINDS)
        attrs = {**DEFAULTS[kind], **(self.attributes or {})}
        value = {
            "toxic": kind,
            "nodes": chosen,
            "stream": self.stream,
            "attributes": attrs,
            "toxicity": self.toxicity,
        }
        self.info = value
        api = proxies.api()
        for node in chosen:
            proxy = proxies.proxy_for(node)
            self.applied.append(proxy)
            api.add_toxic(proxy, self.id, kind, attrs, self.stream, self.toxicity)
        counts = _connections(proxies, chosen)
        if counts is not None:
            value["connections"] = counts
        self.record("toxic-on", value)
        return value

    def _stop(self) -> None:
        errors = []
        api = self.ctx.proxies.api() if self.ctx.proxies is not None else None
        for proxy in self.applied:
            if api is None:
                break
            try:
                with contextlib.suppress(NotFound):
                    api.remove_toxic(proxy, self.id)
            except (ToxiproxyError, OSError) as e:
                errors.append(f"{proxy}: removing toxic {self.id}: {e}")
        value = {k: self.info.get(k) for k in ("toxic", "nodes", "stream")}
        counts = _connections(self.ctx.proxies, self.info.get("nodes") or [])
        if counts is not None:
            value["connections"] = counts
        if errors:
            value["errors"] = errors
        self.record("toxic-off", value)


def _connections(proxies: Any, nodes: list[str]) -> dict[str, int] | None:
    """Client connections made through each node's proxy so far, where the proxies can
    count them (an external cluster's link proxies: clusters/linkfront.py); else None."""
    count = getattr(proxies, "connections", None)
    return count(nodes) if callable(count) else None
