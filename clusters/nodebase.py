"""What the backends that start their own brokers (local processes, docker containers) share.

`BrokerNode`: a node's identity, directories and client addressing: the broker's own
CLIENT listener, or another host:port advertised in front of it (a Toxiproxy), chosen
per node or by the cluster's ``client_advertise`` callback. Its files, commands, log
files and readiness come from the cluster's `BrokerSystem` (clusters.system); nothing
here knows which system that is.

`OwnedCluster`: the lifecycle of a cluster ktrial owns: one ExitStack that gets the
undo of every resource the moment it exists (so teardown, an exception and Ctrl-C
unwind the same way), the state file `cluster clean` reads, readiness as "every broker
registered, a test topic fully in sync (if the system replicates) and the system's own
check passes", failures that show the nodes' logs, and log collection. A backend
implements `_start` (make the nodes and start them) and `_heal_node`; everything done
through the admin API is `clusters.admin.AdminCluster`'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from . import netns
from . import state as statemod
from .admin import AdminCluster, ClusterNotReady, create_topics
from .base import ClientAdvertise
from .system import BrokerSystem, NodeAddr, NodePaths, Ports, default_system

log = logging.getLogger(__name__)

READY_TOPIC = "ktrial-ready"


class NodeStateError(RuntimeError):
    """A node operation that makes no sense in the node's current state."""


def tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a (log) file, or why there are none."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            text = fh.read().decode(errors="replace")
    except OSError as e:
        return f"(no log: {e})"
    return "\n".join(text.splitlines()[-lines:])


class BrokerNode(ABC):
    """Identity, directories and client addressing of one broker+controller.

    Implements clusters.base.Node together with a backend's process operations.
    """

    # the cluster that owns the node
    cluster: OwnedCluster[Any]

    def _init_node(
        self, cluster: OwnedCluster[Any], index: int, host: str, ports: Ports, work_dir: Path
    ) -> None:
        self.cluster = cluster
        self.index = index
        self.name = f"n{index}"
        self.node_id = index - 1 + cluster.system.first_node_id  # what metadata calls it
        self.host = host
        self.ports = ports
        self.work_dir = work_dir
        self.data_dir = work_dir / "data"
        self.logs_dir = work_dir / "logs"
        self._advertise: tuple[str, int] | None = None
        self._paused = False

    # ------------------------------------------------------------ what a backend provides

    @property
    @abstractmethod
    def pid(self) -> int | None: ...

    @property
    @abstractmethod
    def cgroup(self) -> str | None: ...

    @property
    @abstractmethod
    def returncode(self) -> int | None:
        """Exit code of the broker once it exited (None while it runs)."""

    @abstractmethod
    def is_running(self) -> bool: ...

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self, timeout: float = 30.0) -> None: ...

    @abstractmethod
    def kill(self) -> None: ...

    @abstractmethod
    def pause(self) -> None: ...

    @abstractmethod
    def resume(self) -> None: ...

    @abstractmethod
    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str: ...

    @abstractmethod
    def paths(self) -> NodePaths:
        """This node's files as its broker process sees them."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The node's record in the cluster's state file."""

    def restart(self) -> None:
        self.stop()
        self.start()

    # ------------------------------------------------------------ shared

    @property
    def address(self) -> str:
        return self.host

    @property
    def log_path(self) -> Path:
        """The system's main log file of this node."""
        return self.logs_dir / self.cluster.system.layout.log_files[0]

    @property
    def stdout_path(self) -> Path:
        """Where the node's process writes its stdout and stderr."""
        return self.logs_dir / self.cluster.system.layout.stdout

    @property
    def log_paths(self) -> Sequence[Path]:
        return [self.logs_dir / name for name in self.cluster.system.layout.log_files]

    @property
    def process_nodes(self) -> list[str]:
        """Every node a process fault on this one acts on: all of them when the system
        is one process (kfake), else none beyond this one (nemesis/process.py)."""
        if self.cluster.system.one_process:
            return [n.name for n in self.cluster.nodes]
        return []

    @property
    def direct_client(self) -> str:
        """host:port of the broker's own CLIENT listener (the upstream of a proxy)."""
        return f"{self.host}:{self.ports.client}"

    def advertised_client(self) -> tuple[str, int]:
        if self._advertise:
            return self._advertise
        advertise = self.cluster.client_advertise
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

    def write_files(self) -> None:
        """Write the system's files of this node (config, logging) into its work dir."""
        c = self.cluster
        files = c.system.node_files(
            self.nodeaddr(), [n.nodeaddr() for n in c.nodes], self.paths(), self.advertised_client()
        )
        for name, text in files.items():
            (self.work_dir / name).write_text(text)


BN = TypeVar("BN", bound=BrokerNode)


class OwnedCluster(AdminCluster[BN]):
    """N nodes ktrial starts and tears down itself; see the module docstring."""

    kind = "owned"

    def __init__(
        self,
        nodes: int,
        run_id: str | None,
        ready_timeout: float,
        auto_install: bool,
        client_advertise: ClientAdvertise | None = None,
        system: BrokerSystem | None = None,
        system_options: Mapping[str, Any] | None = None,
        **default_system_options: Any,
    ) -> None:
        """`system` runs on the nodes; without one, the default system (Apache Kafka)
        made from `system_options` and any other keyword (clusters.system.default_system:
        its version, profile, broker settings, heap, transaction protocol), which are
        ignored when a system is given."""
        super().__init__()
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        opts = {**dict(system_options or {}), **default_system_options}
        self.system: BrokerSystem = system or default_system(
            **{k: v for k, v in opts.items() if v is not None}
        )
        self.size = nodes
        self.client_advertise = client_advertise
        self.run_id = run_id or statemod.new_run_id()
        self.ready_timeout = ready_timeout
        self.auto_install = auto_install
        self.use_netns = False
        self.state_file = statemod.for_run(self.run_id)
        self.owner_kind = "library"
        self._stack = contextlib.ExitStack()
        self._started = False
        self.work_dir: Path | None = None
        self.subnet: str | None = None
        self.bridge: str | None = None
        self.cluster_id = self.system.new_cluster_id()
        self._state_lock = threading.Lock()
        self._pending: list[BN] = []
        self._ready_created = False

    @property
    def direct_bootstrap_servers(self) -> str:
        """The brokers' own CLIENT listeners, bypassing any proxy."""
        return ",".join(n.direct_client for n in self._nodes)

    @property
    def marker_env(self) -> dict[str, str]:
        """Put this in the environment of every process you start for this cluster
        (Toxiproxy, stress-ng, ...): `cluster clean` kills processes carrying it."""
        return {"KTRIAL_RUN": self.run_id}

    def metadata(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "run_id": self.run_id,
            **self.system.metadata(),
            "client_profile": self.system.client_profile().to_json(),
            "nodes": self.size,
            "netns": self.use_netns,
            "subnet": self.subnet,
            "addresses": {n.name: n.address for n in self._nodes},
            "bootstrap_servers": self.bootstrap_servers,
            "unavailable_faults": sorted(self.unsupported_faults()),
        }

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.teardown()

    def teardown(self) -> None:
        """Undo everything, newest first. Safe to call twice."""
        self._stack.close()

    def start(self, wait: bool = True) -> None:
        if self._started:
            raise RuntimeError(f"cluster {self.run_id} was already started")
        self._started = True
        try:
            self._start(wait)
        except BaseException:
            log.info("start of %s failed; tearing down", self.run_id)
            self.teardown()
            raise

    def _start(self, wait: bool) -> None:
        """Prepare the system, make the nodes, start them; then `wait_ready` if `wait`."""
        raise NotImplementedError

    def unsupported_faults(self) -> dict[str, str]:
        """What the nodes rule out, then what makes no sense for the system (its reason wins)."""
        return {**super().unsupported_faults(), **self.system.fault_limits()}

    def control_api(self) -> Any | None:
        """The system's control channel (nemesis/control.py), None if it has none."""
        return self.system.control_api()

    @property
    def offers_control(self) -> bool:
        """Whether the system has a control channel at all (the `control` fault family)."""
        return bool(self.system.has_control)

    def _replication(self, replication_factor: int) -> int:
        return self.system.replication(replication_factor, self.size)

    def collect_logs(self, dest: Path) -> None:
        """Copy every node's log files into dest/<node>/ (e.g. a run's logs/)."""
        for n in self._nodes:
            if not n.logs_dir.is_dir():
                continue
            d = dest / n.name
            d.mkdir(parents=True, exist_ok=True)
            for p in n.logs_dir.glob("*"):
                if p.is_file():
                    shutil.copy2(p, d / p.name)

    # ------------------------------------------------------------ state

    def _state_dict(self, status: str) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "kind": self.kind,
            "status": status,
            **statemod.owner_fields(),
            "owner_kind": self.owner_kind,
            "created": time.time(),
            "netns": self.use_netns,
            "subnet": self.subnet,
            "bridge": self.bridge,
            "forward_rule": netns.forward_rule(self.run_id) if self.use_netns else None,
            "work_dir": str(self.work_dir) if self.work_dir else None,
            "system": self.system.name,
            "version": self.system.version,
            "bootstrap_servers": self.bootstrap_servers if self._nodes else None,
            "nodes": [n.state() for n in self._nodes],
        }

    def save_state(self, status: str | None = None) -> None:
        """Rewrite state.json (node ops may run on several nemesis threads at once)."""
        with self._state_lock:
            self._save_state(status)

    def _save_state(self, status: str | None) -> None:
        old = self.state_file.read()
        if not old and status is None:
            return  # torn down (or never started): do not resurrect the record
        data = self._state_dict(status or old.get("status", "started"))
        data["created"] = old.get("created", data["created"])
        for k in ("owner_pid", "owner_start", "owner_kind"):
            if k in old:
                data[k] = old[k]
        self.state_file.write(data)

    # ------------------------------------------------------------ readiness

    def _failure(self, what: str, nodes: Sequence[BN]) -> ClusterNotReady:
        parts = [f"cluster {self.run_id}: {what}"]
        for n in nodes:
            if not n.log_paths:
                continue  # a listener of another node's process (one-process systems)
            rc = n.returncode
            state = "running" if n.is_running() else f"exited with code {rc}"
            parts.append(f"--- {n.name} ({n.host}, {state}), last lines of {n.log_path}:")
            parts.append(tail(n.log_path))
            if not n.is_running() and n.stdout_path != n.log_path:
                parts.append(f"--- {n.stdout_path}:")
                parts.append(tail(n.stdout_path, 15))
        return ClusterNotReady("\n".join(parts))

    def _check_alive(self) -> None:
        dead = [n for n in self._nodes if not n.is_running()]
        if dead:
            raise self._failure(
                f"{', '.join(n.name for n in dead)} not running while waiting for readiness", dead
            )

    def wait_ready(self, timeout: float = 120.0) -> None:
        """All brokers registered, a RF-3 test topic fully in sync (systems that
        replicate) and the system's own check passed, through the admin API."""
        self._pending, self._ready_created = list(self._nodes), False
        super().wait_ready(timeout)
        self.system.after_ready(self.direct_bootstrap_servers)

    def _ready_step(self, admin: Any) -> str:
        md = admin.list_topics(timeout=5)
        registered = set(md.brokers)
        self._pending = []
        if self.system.registers_brokers:
            self._pending = [n for n in self._nodes if n.node_id not in registered]
        if self._pending:
            return f"brokers not registered: {', '.join(n.name for n in self._pending)}"
        if self.system.probe_topic:
            if READY_TOPIC not in md.topics and not self._ready_created:
                create_topics(admin, {READY_TOPIC: self.size}, min(3, self.size))
                self._ready_created = True
                return f"{READY_TOPIC} just created"
            self._pending, why = self._out_of_sync(admin, [READY_TOPIC])
            if self._pending or why:
                return why or "replicas out of sync"
        for n in self._nodes:
            why = self.system.node_ready(n)
            if why:
                self._pending = [n]
                return f"{n.name}: {why}"
        self.save_state("ready")
        return ""

    def _not_ready(self, timeout: float, why: str) -> Exception:
        what = f"not ready after {timeout:.0f}s ({why})"
        return self._failure(what, self._pending or self._nodes)
