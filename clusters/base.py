"""The Node / Cluster interface every backend (local, docker, external) implements.

Workloads only need `bootstrap_servers`; the nemesis needs the node operations.
Operations a backend cannot perform raise `Unsupported` with a sentence saying
why (e.g. partitions without network namespaces).
"""

from __future__ import annotations

from collections.abc import Sequence
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


@runtime_checkable
class Cluster(Protocol):
    kind: str  # "local", "docker", "external"

    @property
    def nodes(self) -> Sequence[Node]: ...

    @property
    def bootstrap_servers(self) -> str: ...

    def node(self, name: str) -> Node: ...

    def create_topics(self, topics: dict[str, int], replication_factor: int = 3) -> None:
        """Create topics (name -> partitions) and wait until every replica is in sync."""

    def wait_ready(self, timeout: float = 120.0) -> None: ...

    def metadata(self) -> dict[str, object]:
        """Versions and config for test.json (kind, broker versions, profile, ...)."""

    def teardown(self) -> None: ...
