"""What every node ktrial starts itself (local JVM, docker container) has in common.

Its identity, its directories and how clients reach it: the broker's own CLIENT
listener, or another host:port advertised in front of it (a Toxiproxy), chosen per
node or by the cluster's ``client_advertise`` callback.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .kafka_config import NodeAddr, Ports


class BrokerNode:
    """Identity, directories and client addressing of one broker+controller."""

    # the cluster that owns the node; its `client_advertise` may be None
    cluster: Any

    def _init_node(self, cluster: Any, index: int, host: str, ports: Ports, work_dir: Path) -> None:
        self.cluster = cluster
        self.index = index
        self.name = f"n{index}"
        self.node_id = index
        self.host = host
        self.ports = ports
        self.work_dir = work_dir
        self.data_dir = work_dir / "data"
        self.logs_dir = work_dir / "logs"
        self.config_path = work_dir / "server.properties"
        self._advertise: tuple[str, int] | None = None
        self._paused = False

    @property
    def address(self) -> str:
        return self.host

    @property
    def direct_client(self) -> str:
        """host:port of the broker's own CLIENT listener (the upstream of a proxy)."""
        return f"{self.host}:{self.ports.client}"

    def advertised_client(self) -> tuple[str, int]:
        if self._advertise:
            return self._advertise
        advertise: Callable[[Any], tuple[str, int] | None] | None = self.cluster.client_advertise
        if advertise:
            adv = advertise(self)
            if adv:
                return adv
        return (self.host, self.ports.client)

    @property
    def client_bootstrap(self) -> str:
        h, p = self.advertised_client()
        return f"{h}:{p}"

    def set_client_advertise(self, host_port: tuple[str, int] | None) -> None:
        """Advertise another host:port for CLIENT (e.g. a Toxiproxy); applies at next start."""
        self._advertise = host_port

    def nodeaddr(self) -> NodeAddr:
        return NodeAddr(self.node_id, self.host, self.ports)
