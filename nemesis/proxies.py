"""Toxiproxy in front of every broker's client listener.

The brokers must *advertise* the proxy address, or clients would learn the direct
addresses from metadata and bypass the proxies; so the listen ports are chosen
before the cluster starts (:func:`plan_proxies`) and handed to the cluster through
its ``client_advertise`` hook. Order for the local backend::

    plan = plan_proxies(3)                                   # ports for n1..n3
    cluster = LocalCluster(3, client_advertise=plan.advertise)
    cluster.start(wait=False)                                # brokers launch
    proxies = stack.enter_context(ClientProxies(plan, log_path=...).attach(cluster))
    cluster.wait_ready()                                     # through the proxies

Proxies are named after nodes; the upstream of each is the broker's own CLIENT
listener (``node.direct_client``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clusters.base import Cluster, Node
from .toxiproxy import NotFound, ToxiproxyClient, ToxiproxyServer, free_port

log = logging.getLogger("ktrial.nemesis")


@dataclass(frozen=True)
class ProxyPlan:
    """Where each node's proxy listens (host:port on the host, reachable by clients)."""

    host: str
    ports: dict[str, int]

    def advertise(self, node: Node) -> tuple[str, int] | None:
        """The ``client_advertise`` hook of LocalCluster: node -> advertised (host, port)."""
        port = self.ports.get(node.name)
        return (self.host, port) if port else None

    def listen(self, name: str) -> str:
        return f"{self.host}:{self.ports[name]}"


def plan_proxies(nodes: int | Sequence[str], host: str = "127.0.0.1") -> ProxyPlan:
    """Pick a free port per node (n1..nN when given a count) for its client proxy."""
    names = [f"n{i}" for i in range(1, nodes + 1)] if isinstance(nodes, int) else list(nodes)
    ports: dict[str, int] = {}
    while len(ports) < len(names):
        p = free_port(host)
        if p not in ports.values():
            ports[names[len(ports)]] = p
    return ProxyPlan(host, ports)


def upstream_of(node: Node) -> str:
    direct = getattr(node, "direct_client", None)
    if not direct:
        raise ValueError(
            f"node {node.name} does not expose its direct client listener (direct_client); "
            "this backend cannot sit behind Toxiproxy"
        )
    return str(direct)


@dataclass
class ClientProxies:
    """One Toxiproxy server and one proxy per node, torn down together."""

    plan: ProxyPlan
    log_path: Path | None = None
    binary: Path | None = None
    timeout: float = 5.0
    server: ToxiproxyServer = field(init=False)
    client: ToxiproxyClient | None = None
    names: dict[str, str] = field(default_factory=dict)  # node -> proxy name

    def __post_init__(self) -> None:
        self.server = ToxiproxyServer(self.binary, log_path=self.log_path, timeout=self.timeout)

    def attach(self, cluster: Cluster) -> ClientProxies:
        """Start the server and create a proxy for every node of `cluster`."""
        try:
            self.client = self.server.start()
            for node in cluster.nodes:
                self.client.create_proxy(node.name, self.plan.listen(node.name), upstream_of(node))
                self.names[node.name] = node.name
        except BaseException:
            self.close()
            raise
        log.info("toxiproxy %s:%s fronts %s", self.server.host, self.server.port, self.plan.ports)
        return self

    def proxy_for(self, node: str) -> str:
        if node not in self.names:
            raise KeyError(f"no Toxiproxy in front of node {node!r} (have {sorted(self.names)})")
        return self.names[node]

    def api(self) -> ToxiproxyClient:
        if self.client is None:
            raise RuntimeError("the Toxiproxy server is not started (call attach first)")
        return self.client

    def metadata(self) -> dict[str, Any]:
        return {"api": f"{self.server.host}:{self.server.port}", "listen": dict(self.plan.ports)}

    def close(self) -> None:
        """Stop the server (its proxies and toxics die with it); idempotent."""
        if self.client is not None:
            for name in list(self.names.values()):
                with contextlib.suppress(NotFound, OSError, RuntimeError):
                    self.client.delete_proxy(name)
        self.names.clear()
        self.client = None
        self.server.stop()

    def __enter__(self) -> ClientProxies:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
