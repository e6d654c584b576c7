"""The seam between a node backend and the broker software it runs.

The local and docker backends run *a Kafka-protocol system on nodes*: they make the
nodes (processes in namespaces, containers), and a `BrokerSystem` says what to put
on a node and how to start it: the installation to use, the files a node needs, the
command that formats its storage once and the command that runs it. Apache Kafka
(KRaft, combined broker+controller) is the one system today
(`clusters.apache_kafka`); another Kafka-protocol broker plugs in here without the
backends changing. Paths are given as the broker process sees them (`NodePaths`): a
host directory for the local backend, the bind mount inside a container for docker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .kafka_config import NodeAddr


@dataclass(frozen=True)
class NodePaths:
    """Where one node's files are, as its broker process sees them."""

    runtime: str  # the interpreter or launcher (Kafka: the java binary)
    program: str  # the system's program files (Kafka: a classpath of jars)
    work: str  # the directory holding the files of `node_files`
    data: str
    logs: str

    def file(self, name: str) -> str:
        return f"{self.work}/{name}"


class BrokerSystem(Protocol):
    """A Kafka-protocol broker as the node backends need it."""

    name: str  # for test.json, e.g. "apache-kafka"

    def prepare(self, auto_install: bool, log: Callable[[str], None]) -> None:
        """Find (or, with `auto_install`, fetch) the installation; raise saying what is missing."""

    def new_cluster_id(self) -> str:
        """An id for a new cluster's storage (Kafka: the KRaft cluster id)."""

    @property
    def version(self) -> str | None:
        """The prepared installation's version (None before `prepare`)."""

    def runtime(self) -> str:
        """The launcher on this host (checked to exist), for backends running host processes."""

    def program(self) -> str:
        """The prepared installation's program files on this host (Kafka: a classpath)."""

    def metadata(self) -> dict[str, object]:
        """What test.json records of the broker (name, versions, where it came from)."""

    def node_files(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        paths: NodePaths,
        client_advertised: tuple[str, int] | None,
    ) -> dict[str, str]:
        """File name (in `paths.work`) -> content, written before every start of the node."""

    def format_command(self, paths: NodePaths, cluster_id: str) -> list[str] | None:
        """The command that initialises a node's empty storage (None: nothing to do)."""

    def run_command(self, paths: NodePaths, run_id: str, node_name: str) -> list[str]:
        """The command that runs the broker in the foreground; it carries the run marker."""
