"""The Node / Cluster interface every backend (local, docker, external) implements.

Workloads only need `bootstrap_servers` and `create_topics`; the nemesis needs the
node operations; the run orchestration needs the lifecycle (`start`, `wait_ready`,
`teardown`), `metadata` for test.json and `unsupported_faults`, the one question a
run asks before it starts faults. Operations a backend cannot perform raise
`Unsupported` with a sentence saying why (e.g. partitions without network namespaces).

The shared implementation of the admin-API part (readiness, topics, in-sync waits,
heal, node lookup) is `clusters.admin.AdminCluster`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable


class Unsupported(RuntimeError):
    """This backend cannot do that (the message says why and what would enable it)."""


@runtime_checkable
class Node(Protocol):
    name: str  # e.g. "n1"
    node_id: int  # KRaft node.id

    @property
    def address(self) -> str:
        """IP address of the node (its namespace/container address, or 127.0.0.1)."""

    @property
    def client_bootstrap(self) -> str:
        """host:port clients use to reach this broker (may be a Toxiproxy in front)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def cgroup(self) -> str | None:
        """Path of the node's memory cgroup directory, if any."""

    @property
    def log_paths(self) -> Sequence[Path]: ...

    def is_running(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, wait for exit (SIGKILL after timeout)."""

    def kill(self) -> None:
        """SIGKILL."""

    def pause(self) -> None:
        """SIGSTOP (or freezer)."""

    def resume(self) -> None:
        """SIGCONT (or thaw)."""

    def restart(self) -> None: ...

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        """Run a command inside the node (its netns / container); return stdout."""


# node -> the (host, port) its CLIENT listener advertises instead of its own (a proxy)
ClientAdvertise = Callable[[Node], "tuple[str, int] | None"]


@runtime_checkable
class Cluster(Protocol):
    kind: str  # "local", "docker", "external"
    # Set before start() to advertise other client addresses (Toxiproxy); backends whose
    # brokers advertise themselves (external) ignore it and refuse the "toxic" fault.
    client_advertise: ClientAdvertise | None

    @property
    def nodes(self) -> Sequence[Node]: ...

    @property
    def bootstrap_servers(self) -> str: ...

    def node(self, name: str) -> Node: ...

    def start(self, wait: bool = True) -> None:
        """Bring the brokers up (or discover them); with `wait`, also `wait_ready()`."""

    def wait_ready(self, timeout: float = 120.0) -> None: ...

    def create_topics(
        self,
        topics: Mapping[str, int],
        replication_factor: int = 3,
        config: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Create topics (name -> partitions) and wait until every replica is in sync."""

    def heal(self, timeout: float = 120.0) -> None:
        """Undo whatever faults left on the nodes, start stopped ones, wait until ready."""

    def unsupported_faults(self) -> dict[str, str]:
        """Fault family -> why this cluster cannot take it (empty: every family is fine).

        The one place a backend states its limits: the nemesis refuses these families
        before the run starts, and test.json lists them (`metadata()`).
        """

    def metadata(self) -> dict[str, object]:
        """Versions and config for test.json (kind, broker versions, profile, ...)."""

    def teardown(self) -> None: ...


SHARED_ADDRESS = "nodes share one address (no network namespaces; drop --no-netns)"
NO_CGROUPS = "nodes have no memory cgroups (needs root and a memory hierarchy)"


def node_fault_limits(nodes: Sequence[Node]) -> dict[str, str]:
    """Fault families the nodes themselves rule out (pure): network faults need one
    address per node, memory pressure needs a memory cgroup per node."""
    out: dict[str, str] = {}
    if len({n.address for n in nodes}) < len(nodes):
        out["partition"] = out["loss"] = SHARED_ADDRESS
    if not all(n.cgroup for n in nodes):
        out["memory"] = NO_CGROUPS
    return out
