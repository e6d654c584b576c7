"""The seam between a node backend and the system it runs: ktrial's counterpart of
Jepsen's `db`.

The local and docker backends run *a Kafka-protocol system on nodes*: they make the
nodes (processes in namespaces, containers) and do to them what faults do (kill,
pause, partition), and a `BrokerSystem` says everything about the software on them:

- **install** (`prepare`: find or fetch an installation, cached across runs;
  `runtime`/`program`: what to launch on this host; `container`: what to run in a
  container, and the image);
- **configure** a node (`node_files`, written before every start, given the node's
  address and ports, its peers and the client address to advertise);
- **start** (`format_command`, once on empty storage, then `run_command` in the
  foreground; `one_process`: one process serves every node, started from the first);
- **stop** (`stop_signal`, then SIGKILL after a grace period);
- **ready** (`ready_line` the process prints once it serves; `probe_topic`: readiness
  includes a replicated probe topic in sync; `node_ready`: a system's own check);
- **logs and data** (`layout`: the log files of a node, the file that says its storage
  is formatted, data files not worth keeping);
- **faults** (`fault_limits`: families that make no sense for it, and why;
  `control_api`: faults through the system's own control channel, if it has one);
- **its profile** (`client_profile`: client settings and checker options it needs).

Apache Kafka (`clusters.apache_kafka`), franz-go's kfake (`clusters.kfake`) and any
broker image described by a node spec (`clusters.nodespec`, docker only) implement
it; `system_for` picks one by name. Paths are given as the broker process sees them
(`NodePaths`): a host directory for the local backend, the bind mount inside a
container for docker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .kafka_config import NodeAddr, Ports  # a node's address and ports (any system)

# The ports of a node that has an address of its own (a namespace, a container):
# the client listener first; the other two are the system's own (Kafka: replication
# and controller listeners; others may leave them unused).
NODE_PORTS = Ports(client=9092, replication=9093, controller=9094)

SYSTEM_NAMES = ("kafka", "kfake")


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


@dataclass(frozen=True)
class Layout:
    """Where a node's logs and data are, relative to its logs and data directories."""

    stdout: str = "stdout.log"  # the process's stdout and stderr
    log_files: tuple[str, ...] = ("stdout.log",)  # collected after a run, main log first
    formatted_marker: str | None = None  # in the data dir once the storage is formatted
    data_skip: tuple[str, ...] = ()  # glob patterns of data files not worth keeping


@dataclass(frozen=True)
class ClientProfile:
    """What clients and the checker must be told about a system.

    `producer`/`consumer` are client settings (librdkafka names) a run starts from (the
    user's --producer-config/--consumer-config win); `checker` holds CheckOptions
    fields test.json's checker section carries; `notes` say, one sentence each, what
    the system does differently and how the history shows it.
    """

    name: str
    producer: Mapping[str, str] = field(default_factory=dict)
    consumer: Mapping[str, str] = field(default_factory=dict)
    checker: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "producer": dict(self.producer),
            "consumer": dict(self.consumer),
            "checker": dict(self.checker),
            "notes": list(self.notes),
        }


# Apache Kafka's clients need nothing changed: the profile every Kafka-like system has.
PLAIN_PROFILE = ClientProfile("kafka")


@dataclass(frozen=True)
class Container:
    """How the docker backend runs one node of a system.

    `command` None: ktrial's start script (format once, then `run_command` with the
    paths below). Otherwise the image's own program: `command` ([] = the image's
    default), `environment`, the data directory inside the container (`data_dir`,
    bind-mounted from the node's directory) and `exec_in_host_tools`: the image may
    lack iptables and a shell, so fault commands run in the container's network
    namespace with the host's tools.
    """

    image: str
    runtime: str = ""
    program: str = ""
    command: list[str] | None = None
    entrypoint: list[str] | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    data_dir: str | None = None
    exec_in_host_tools: bool = False


class BrokerSystem(Protocol):
    """A Kafka-protocol system as the node backends need it; see the module docstring."""

    name: str  # for test.json, e.g. "apache-kafka"
    one_process: bool  # every node is a listener of one process, started by the first node
    ready_line: str | None  # a line the process prints on stdout once it serves
    probe_topic: bool  # readiness: a probe topic replicated to every node, in sync
    registers_brokers: bool  # readiness: metadata lists every node by its node id
    first_node_id: int  # the node id of n1 (n2 has the next, ...): Kafka 1, kfake 0
    stop_signal: int  # what `stop` sends before SIGKILL
    layout: Layout

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
        """What test.json records of the system (name, versions, where it came from)."""

    def node_files(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        paths: NodePaths,
        client_advertised: tuple[str, int] | None,
    ) -> dict[str, str]:
        """File name (in `paths.work`) -> content, written before every start of the node.
        Called before `run_command`, so a system may keep what that command needs."""

    def format_command(self, paths: NodePaths, cluster_id: str) -> list[str] | None:
        """The command that initialises a node's empty storage (None: nothing to do)."""

    def run_command(self, paths: NodePaths, run_id: str, node_name: str) -> list[str]:
        """The command that runs the broker in the foreground; it carries the run marker."""

    def container(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        client_advertised: tuple[str, int] | None,
        cluster_id: str,
        engine: Any,
        say: Callable[[str], None],
    ) -> Container:
        """How the docker backend runs this node (building or finding the image through
        `engine`, a Docker client); raise `Unsupported` if the system has no image."""

    def node_ready(self, node: Any) -> str:
        """The system's own readiness check of a running node: '' when ready, else why not."""

    def after_ready(self, bootstrap: str) -> None:
        """Called once the cluster is ready (e.g. ask the brokers what they run)."""

    def fault_limits(self) -> dict[str, str]:
        """Fault family -> why it makes no sense for this system (on top of the backend's)."""

    def control_api(self) -> Any | None:
        """The system's control channel (nemesis/control.py's ControlAPI) once it runs;
        None if it has none or is not running."""

    @property
    def has_control(self) -> bool:
        """Whether the system offers a control channel at all."""

    def client_profile(self) -> ClientProfile:
        """The client settings and checker options this system needs."""

    def replication(self, requested: int, nodes: int) -> int:
        """The replication factor to ask for when `requested` is wanted on `nodes` nodes."""


class SystemDefaults:
    """What most systems answer; a system overrides what differs."""

    one_process = False
    ready_line: str | None = None
    probe_topic = True
    registers_brokers = True
    first_node_id = 1
    stop_signal = 15  # SIGTERM
    layout = Layout()
    has_control = False

    def node_ready(self, node: Any) -> str:
        return ""

    def after_ready(self, bootstrap: str) -> None:
        return None

    def fault_limits(self) -> dict[str, str]:
        return {}

    def control_api(self) -> Any | None:
        return None

    def client_profile(self) -> ClientProfile:
        return PLAIN_PROFILE

    def replication(self, requested: int, nodes: int) -> int:
        return requested


def default_system(
    profile: str = "safe",
    kafka_version: str | None = None,
    broker_config: Mapping[str, str] | None = None,
    heap_mb: int = 512,
    transaction_version: int | None = None,
) -> BrokerSystem:
    """The system a backend runs when given none: Apache Kafka, from the options the
    backends have always accepted (`LocalCluster(kafka_version=..., profile=...)`)."""
    return system_for(
        "kafka",
        version=kafka_version,
        profile=profile,
        broker_config=broker_config,
        heap_mb=heap_mb,
        transaction_version=transaction_version,
    )


def system_for(
    name: str = "kafka",
    spec_file: str | None = None,
    **options: Any,
) -> BrokerSystem:
    """The system called `name` ("kafka", "kfake"), or the one a node spec file describes.

    `options` are the system's own: Kafka's `version`, `profile`, `broker_config`,
    `heap_mb`, `transaction_version`; kfake's `broker_config`, `persist`, `sync`, `binary`.
    """
    if spec_file:
        from .nodespec import load_spec_system

        return load_spec_system(spec_file)
    if name == "kafka":
        from .apache_kafka import ApacheKafka

        return ApacheKafka(
            options.get("version"),
            options.get("profile", "safe"),
            options.get("broker_config"),
            options.get("heap_mb", 512),
            options.get("transaction_version"),
        )
    if name == "kfake":
        from .kfake import Kfake

        allowed = ("broker_config", "persist", "sync", "binary", "log_level")
        return Kfake(**{k: v for k, v in options.items() if k in allowed})
    raise ValueError(f"unknown system {name!r}: use one of {', '.join(SYSTEM_NAMES)}")


__all__ = [
    "NODE_PORTS",
    "BrokerSystem",
    "ClientProfile",
    "Container",
    "Layout",
    "NodeAddr",
    "NodePaths",
    "Ports",
    "SystemDefaults",
    "default_system",
    "system_for",
]
