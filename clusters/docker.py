"""The `docker` backend: the local backend's nodes as containers, through the Docker SDK.

Each node is a container `kt-<runid>-n<i>` with a fixed address on a network of its
own. What runs in it is the cluster's `BrokerSystem` (clusters.system), which names
the image and says how to run a node (`BrokerSystem.container`): Apache Kafka's is
the locally built `ktrial-kafka:<version>` (clusters.docker_image); a node spec
(clusters.nodespec) describes any other image. Config, data and logs live in a host
directory bind-mounted at /ktrial, so the logs are readable from the host and teardown
removes them with the work dir. For a system ktrial configures itself the container's
init process is the broker (a generated start script formats the storage on first
start, then execs the run command), so the container's State.Pid is the broker's host
pid; an image's own program runs as the image says, with the node spec's command,
environment and data directory, and its output is kept from the engine's log.

Faults: kill = `docker kill` (SIGKILL), stop = `docker stop`, pause/resume = `docker
pause`/`unpause` (the cgroup freezer), exec = `exec_run` (with NET_ADMIN, so the
nemesis's iptables rules work inside), memory = the container's own memory cgroup.

Network: a Docker bridge network named `kt-<runid>` (so `cluster clean` knows its
bridge by name) with a /24 from 10.214.0.0/16, created `internal` (no NAT, no
gateway to the world); our dockerd runs with --iptables=false, so docker adds no
isolation rules and the host reaches the containers' addresses through the bridge's
gateway address. With bridge netfilter on, a FORWARD ACCEPT rule for the bridge
(comment `ktrial:<runid>`) keeps node-to-node traffic flowing whatever policy another
dockerd set. Everything carries the label `ktrial.run=<runid>`; one ExitStack undoes
it all, newest first.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cgroups, dockerd, netns
from . import state as statemod
from .base import Unsupported
from .nodebase import BrokerNode, NodeStateError, OwnedCluster
from .procs import process_state, wait_stopped
from .system import NODE_PORTS, BrokerSystem, Container, NodePaths

log = logging.getLogger(__name__)

LABEL = dockerd.LABEL
NODE_LABEL = "ktrial.node"
# "<pid>:<kernel start time>" of the process that created the container or network, so
# `cluster clean` can tell a dead run's leftovers from a live one's on a shared engine
OWNER_LABEL = "ktrial.owner"
POOLS = ("10.214.0.0/16",)
MOUNT = "/ktrial"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def container_name(run_id: str, index: int) -> str:
    return f"kt-{run_id}-n{index}"


def owner_labels(run_id: str) -> dict[str, str]:
    """The labels on everything of run `run_id`: its id and its owner (this process)."""
    owner = statemod.owner_fields()
    start = owner["owner_start"]
    return {LABEL: run_id, OWNER_LABEL: f"{owner['owner_pid']}:{'' if start is None else start}"}


def network_name(run_id: str) -> str:
    """Also the bridge's interface name (netns.bridge_name), so clean finds it as a link."""
    return netns.bridge_name(run_id)


def pick_subnet(
    used: Iterable[ipaddress.IPv4Network], reserved: Iterable[str] = ()
) -> ipaddress.IPv4Network:
    """A /24 of 10.214.0.0/16 clashing with nothing in use (local clusters use 10.213)."""
    return netns.pick_subnet(used, reserved, POOLS)


def memory_cgroup(proc_cgroup: str, root: Path = CGROUP_ROOT) -> Path | None:
    """The memory cgroup directory of a process from its /proc/<pid>/cgroup text (pure).

    v1: the line whose controller list has `memory` (mounted at <root>/memory);
    v2: the single `0::` line (the unified hierarchy at <root>).
    """
    unified = None
    for line in proc_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "memory" in controllers.split(","):
            return root / "memory" / path.lstrip("/")
        if controllers == "" and parts[0] == "0":
            unified = root / path.lstrip("/")
    return unified


def start_script(
    format_cmd: Sequence[str] | None,
    run_cmd: Sequence[str],
    formatted_marker: str | None = None,
    stdout: str = "stdout.log",
) -> str:
    """The container's entry script (pure): format the storage once (until the system's
    `formatted_marker` exists in the data dir), then exec the broker."""
    out = f"{MOUNT}/logs/{stdout}"
    lines = ["#!/bin/sh", "# written by ktrial; regenerated on every start", "set -e"]
    lines.append(f"mkdir -p {MOUNT}/logs {MOUNT}/data")
    if format_cmd:
        if formatted_marker:
            lines.append(f"if [ ! -f {MOUNT}/data/{formatted_marker} ]; then")
        else:
            lines.append(f'if [ -z "$(ls -A {MOUNT}/data)" ]; then')
        lines.append(f"  {shlex.join(format_cmd)} >> {out} 2>&1")
        lines.append("fi")
    lines.append(f'echo "=== ktrial: starting at $(date) ===" >> {out}')
    lines.append(f"exec {shlex.join(run_cmd)} >> {out} 2>&1")
    return "\n".join(lines) + "\n"


def signal_name(signum: int) -> str:
    """ "SIGTERM" for 15 (what the engine's stop_signal takes)."""
    import signal as _signal

    return _signal.Signals(signum).name


def _say(msg: str) -> None:
    print(f"[ktrial docker] {msg}", file=sys.stderr, flush=True)


class DockerNode(BrokerNode):
    """One broker in a container. Implements clusters.base.Node."""

    def __init__(self, cluster: DockerCluster, index: int, host: str, work_dir: Path) -> None:
        self.cluster: DockerCluster = cluster
        self._init_node(cluster, index, host, cluster.node_ports, work_dir)
        self.container_name = container_name(cluster.run_id, index)
        self.container_id: str | None = None
        self.plan: Container | None = None  # how the system runs this node (at create)
        self._cgroup: Path | None = None
        self._sigstopped = False  # paused with SIGSTOP (the engine could not freeze it)

    def __repr__(self) -> str:
        return f"<DockerNode {self.name} {self.container_name} {self.host}>"

    # ------------------------------------------------------------ introspection

    def _state(self) -> dict[str, Any]:
        if self.container_id is None:
            return {}
        try:
            info = self.cluster.client.api.inspect_container(self.container_id)
        except Exception:
            return {}
        st = info.get("State") or {}
        return st if isinstance(st, dict) else {}

    @property
    def pid(self) -> int | None:
        st = self._state()
        pid = st.get("Pid")
        return pid if st.get("Running") and isinstance(pid, int) and pid > 0 else None

    @property
    def cgroup(self) -> str | None:
        if self._cgroup is None:
            pid = self.pid
            if pid is None:
                return None
            try:
                found = memory_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
            except OSError:
                return None
            if found is None or not found.is_dir():
                return None
            self._cgroup = found  # fixed for the container's life
        return str(self._cgroup)

    def is_running(self) -> bool:
        return bool(self._state().get("Running"))

    @property
    def paused(self) -> bool:
        return bool(self._state().get("Paused"))

    def is_frozen(self) -> bool:
        """docker pause returns once the freezer reports FROZEN (threads then show D, not
        T); a SIGSTOP pause (engines that cannot freeze) is frozen once the broker shows T."""
        if self._sigstopped:
            pid = self.pid
            return pid is not None and process_state(pid) == "T"
        return self.paused

    @property
    def returncode(self) -> int | None:
        st = self._state()
        return None if not st or st.get("Running") else st.get("ExitCode")

    # ------------------------------------------------------------ lifecycle

    @property
    def own_program(self) -> bool:
        """The image runs its own program (a node spec), not ktrial's start script."""
        return self.plan is not None and self.plan.command is not None

    def paths(self) -> NodePaths:
        """Inside the container: the work dir is bind-mounted at /ktrial (data at the
        node spec's data directory, if it names one)."""
        p = self.plan
        data = p.data_dir if p and p.data_dir else f"{MOUNT}/data"
        return NodePaths(
            p.runtime if p else "", p.program if p else "", MOUNT, data, f"{MOUNT}/logs"
        )

    def write_config(self) -> None:
        c = self.cluster
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o777)  # an image may run its program as another user
        self.write_files()
        if self.own_program:
            return
        paths = self.paths()
        fmt = c.system.format_command(paths, c.cluster_id)
        run = c.system.run_command(paths, c.run_id, self.name)
        layout = c.system.layout
        script = start_script(fmt, run, layout.formatted_marker, layout.stdout)
        (self.work_dir / "start.sh").write_text(script)

    def create(self, plan: Container, network: str) -> None:
        self.plan = plan
        api = self.cluster.client.api
        binds = {str(self.work_dir): {"bind": MOUNT, "mode": "rw"}}
        if plan.data_dir and not plan.data_dir.startswith(f"{MOUNT}/"):
            binds[str(self.data_dir)] = {"bind": plan.data_dir, "mode": "rw"}
        host_config = api.create_host_config(
            binds=binds,
            cap_add=["NET_ADMIN"],
            network_mode=network,
            init=False,
        )
        net_config = api.create_networking_config(
            {network: api.create_endpoint_config(ipv4_address=self.host)}
        )
        own = self.own_program
        extra: dict[str, Any] = {}
        if own and plan.entrypoint is not None:
            extra["entrypoint"] = plan.entrypoint
        resp = api.create_container(
            plan.image,
            command=(plan.command or None) if own else ["/bin/sh", f"{MOUNT}/start.sh"],
            name=self.container_name,
            hostname=self.name,
            labels={**owner_labels(self.cluster.run_id), NODE_LABEL: self.name},
            environment={**plan.environment, "KTRIAL_RUN": self.cluster.run_id},
            host_config=host_config,
            networking_config=net_config,
            stop_signal=signal_name(self.cluster.system.stop_signal),
            **extra,
        )
        self.container_id = resp["Id"]

    def save_engine_log(self) -> None:
        """An image's own program logs to the engine: keep that log as the node's
        stdout file (before the container goes)."""
        if not self.own_program or self.container_id is None:
            return
        with contextlib.suppress(Exception):
            raw = self.cluster.client.api.logs(self.container_id, stdout=True, stderr=True)
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            self.stdout_path.write_bytes(raw if isinstance(raw, bytes) else bytes(raw))

    @property
    def log_paths(self) -> Sequence[Path]:
        self.save_engine_log()
        return super().log_paths

    def start(self) -> None:
        if self.is_running():
            raise NodeStateError(f"{self.name} is already running (pid {self.pid})")
        self.write_config()
        self.cluster.client.api.start(self.container_id)
        self._paused = False
        log.info("started %s (%s) pid %s", self.name, self.container_name, self.pid)
        self.cluster.save_state()

    def _wait_stopped(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.is_running():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        if not self.is_running():
            return
        if self.paused or self._sigstopped:
            self.resume()
        self.cluster.client.api.stop(self.container_id, timeout=int(timeout))
        self._wait_stopped(10)
        self.cluster.save_state()

    def kill(self) -> None:
        if not self.is_running():
            return
        was_paused = self.paused
        self.cluster.client.api.kill(self.container_id, signal="SIGKILL")
        if was_paused:  # a frozen task dies only once thawed
            with contextlib.suppress(Exception):
                self.cluster.client.api.unpause(self.container_id)
        self._wait_stopped(30)
        self._paused = self._sigstopped = False
        self.cluster.save_state()

    def pause(self) -> None:
        """`docker pause` (the cgroup freezer); where the engine cannot freeze a container
        (seen with cgroup v1: "OCI runtime pause failed: unable to freeze"), SIGSTOP to the
        broker, which is the container's PID 1 (start.sh execs it), as the local backend
        pauses, and wait until the kernel reports it stopped."""
        if not self.is_running():
            raise NodeStateError(f"{self.name} is not running")
        from docker.errors import APIError  # the Docker SDK, imported where it is used

        api = self.cluster.client.api
        try:
            api.pause(self.container_id)
            self._sigstopped = False
        except APIError as e:
            log.info("%s: docker pause failed (%s); pausing with SIGSTOP", self.name, e)
            api.kill(self.container_id, signal="SIGSTOP")
            self._sigstopped = True
            pid = self.pid
            if pid is not None:
                wait_stopped(pid, 5.0)
        self._paused = True

    def resume(self) -> None:
        if not self.is_running():
            raise NodeStateError(f"{self.name} is not running")
        if self.paused:
            self.cluster.client.api.unpause(self.container_id)
        if self._sigstopped:
            self.cluster.client.api.kill(self.container_id, signal="SIGCONT")
            self._sigstopped = False
        self._paused = False

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        """Run `cmd` inside the container; return stdout.

        A paused container refuses exec, so then the command runs in the container's
        network namespace with the host's tools (the same iptables, the same rules).
        """
        if not self.is_running():
            raise NodeStateError(f"{self.name} is not running: cannot exec {shlex.join(cmd)}")
        if self.paused or (self.plan is not None and self.plan.exec_in_host_tools):
            pid = self.pid
            proc = subprocess.run(
                ["nsenter", f"--net=/proc/{pid}/ns/net", *cmd],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        else:
            api = self.cluster.client.api
            ex = api.exec_create(self.container_id, ["timeout", str(max(1, int(timeout))), *cmd])
            res = api.exec_start(ex["Id"], demux=True)
            code = api.exec_inspect(ex["Id"]).get("ExitCode")
            out = (res[0] or b"").decode(errors="replace")
            err = (res[1] or b"").decode(errors="replace")
        if check and code != 0:
            raise subprocess.CalledProcessError(code or -1, list(cmd), out, err)
        return out

    def state(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node_id": self.node_id,
            "address": self.host,
            "ports": [self.ports.client, self.ports.replication, self.ports.controller],
            "client_bootstrap": self.client_bootstrap,
            "container": self.container_name,
            "container_id": self.container_id,
            "netns": None,
            "cgroup": str(self._cgroup) if self._cgroup else None,
            "pid": None,
            "work_dir": str(self.work_dir),
            "log": str(self.log_path),
        }


class DockerCluster(OwnedCluster[DockerNode]):
    """N broker nodes in containers. Implements clusters.base.Cluster.

    Readiness, topic creation and log collection are every owned cluster's
    (clusters.nodebase, clusters.admin: they use only the admin API and the node
    interface); making the nodes, their faults and teardown are this backend's.
    """

    kind = "docker"

    def __init__(
        self,
        nodes: int = 3,
        run_id: str | None = None,
        ready_timeout: float = 180.0,
        auto_install: bool = True,
        progress: Callable[[str], None] = _say,
        dockerd_paths: dockerd.DaemonPaths | None = None,
        system: BrokerSystem | None = None,
        **system_options: Any,
    ) -> None:
        """`system` runs in the containers; without one, the default system
        (clusters.system.default_system) made from `system_options`."""
        super().__init__(
            nodes=nodes,
            run_id=run_id,
            ready_timeout=ready_timeout,
            auto_install=auto_install,
            system=system,
            system_options=system_options,
        )
        if self.system.one_process:
            raise Unsupported(f"{self.system.name} is one process: it has no image per node")
        self.progress = progress
        self.dockerd_paths = dockerd_paths
        self.engine: dockerd.Engine | None = None
        self.image: str | None = None
        # the ports of every node (its own address): the system's, or the usual ones
        self.node_ports = getattr(self.system, "node_ports", NODE_PORTS)

    @property
    def client(self) -> Any:
        assert self.engine is not None, "cluster not started"
        return self.engine.client

    def unsupported_faults(self) -> dict[str, str]:
        """As every cluster's, once the containers exist (before, their cgroups are unknown)."""
        return super().unsupported_faults() if self._nodes else {}

    def metadata(self) -> dict[str, object]:
        meta = super().metadata()
        meta.update(
            {
                "netns": False,
                "image": self.image,
                "docker_engine": self.engine.base_url if self.engine else None,
                "dockerd_owned": bool(self.engine and self.engine.owned),
                "containers": {n.name: n.container_name for n in self._nodes},
            }
        )
        return meta

    # ------------------------------------------------------------ start

    def _start(self, wait: bool) -> None:
        stack = self._stack
        self.system.prepare(self.auto_install, log.info)
        self.state_file.write(self._state_dict("starting"))
        stack.callback(self.state_file.remove)
        self.work_dir = Path(tempfile.mkdtemp(prefix=f"ktrial-{self.run_id}-"))
        stack.callback(shutil.rmtree, self.work_dir, True)
        self.engine = dockerd.connect(self.run_id, self.dockerd_paths, self.progress)
        stack.callback(self.engine.close)
        self.save_state("starting")
        net = self._make_docker_network()
        stack.callback(self._remove_containers)
        for i in range(1, self.size + 1):
            assert self.subnet is not None
            wd = self.work_dir / f"n{i}"
            wd.mkdir()
            addr = netns.node_address(ipaddress.IPv4Network(self.subnet), i)
            self._nodes.append(DockerNode(self, i, addr, wd))
        peers = [n.nodeaddr() for n in self._nodes]
        for n in self._nodes:
            plan = self.system.container(
                n.nodeaddr(),
                peers,
                n.advertised_client(),
                self.cluster_id,
                self.client,
                self.progress,
            )
            self.image = plan.image
            n.create(plan, net)
        self.save_state("starting")
        for n in self._nodes:
            n.start()
        self.save_state("started")
        if wait:
            self.wait_ready(self.ready_timeout)

    def _make_docker_network(self) -> str:
        from docker.types import IPAMConfig, IPAMPool

        stack = self._stack
        name = network_name(self.run_id)
        reserved = [
            s["subnet"]
            for rid, s in statemod.all_states()
            if rid != self.run_id and s.get("subnet") and statemod.state_is_live(s)
        ]
        with netns.subnet_lock():
            used = netns.used_networks() + self._engine_subnets()
            sub = pick_subnet(used, reserved)
            self.subnet = str(sub)
            self.bridge = name
            self.save_state("starting")
            stack.callback(netns.delete_link, name)
            stack.callback(self._remove_network, name)
            ipam = IPAMConfig(
                pool_configs=[IPAMPool(subnet=str(sub), gateway=netns.host_address(sub))]
            )
            self.client.networks.create(
                name,
                driver="bridge",
                internal=True,
                ipam=ipam,
                labels=owner_labels(self.run_id),
                options={
                    "com.docker.network.bridge.name": name,
                    "com.docker.network.bridge.enable_ip_masquerade": "false",
                },
            )
        rule = netns.forward_rule(self.run_id)
        stack.callback(netns.delete_rule, rule)
        netns.add_rule(rule)
        return name

    def _engine_subnets(self) -> list[ipaddress.IPv4Network]:
        out: list[ipaddress.IPv4Network] = []
        for net in self.client.api.networks():
            for cfg in (net.get("IPAM") or {}).get("Config") or []:
                with contextlib.suppress(ValueError, TypeError):
                    n = ipaddress.ip_network(cfg.get("Subnet", ""))
                    if isinstance(n, ipaddress.IPv4Network):
                        out.append(n)
        return out

    def _remove_network(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.client.api.remove_network(name)

    def _remove_containers(self) -> None:
        """Remove every container of this run (by label: also half-created ones), keeping
        the engine's log of those that run an image's own program."""
        if self.engine is None:
            return
        for n in self._nodes:
            n.save_engine_log()
        for c in self.client.api.containers(all=True, filters={"label": f"{LABEL}={self.run_id}"}):
            with contextlib.suppress(Exception):
                self.client.api.remove_container(c["Id"], force=True, v=True)

    # ------------------------------------------------------------ state

    def _state_dict(self, status: str) -> dict[str, Any]:
        d = super()._state_dict(status)
        d["netns"] = False
        d["forward_rule"] = netns.forward_rule(self.run_id) if self.bridge else None
        d["docker_engine"] = self.engine.base_url if self.engine else None
        d["dockerd_owned"] = bool(self.engine and self.engine.owned)
        return d

    # ------------------------------------------------------------ healing

    def _heal_node(self, node: DockerNode) -> None:
        """Resume a paused container, flush iptables inside it, lift its memory limit."""
        if not node.is_running():
            return
        if node.paused:
            node.resume()
        for table in ("filter", "raw", "mangle"):
            node.exec(["iptables", "-w", "-t", table, "-F"], check=False)
        if node.cgroup:
            cgroups.unlimit(Path(node.cgroup))


# ---------------------------------------------------------------- leftovers (cluster clean)

RUN_LABEL_RE = re.compile(r"^[0-9a-f]{6}$")
OWNER_LABEL_RE = re.compile(r"^([1-9][0-9]*):([0-9]*)$")
CONTAINER_NAME_RE = re.compile(r"^kt-([0-9a-f]{6})-(n[0-9]{1,3})$")


@dataclass(frozen=True)
class DockerItem:
    """A container or network of some ktrial run, on one engine."""

    engine: str  # the engine's base url
    system: bool  # the system engine (shared with others), not ktrial's own dockerd
    kind: str  # "container" or "network"
    ident: str  # the engine's id
    name: str
    run_id: str
    owner: tuple[int, int | None] | None  # from the ktrial.owner label, if any

    @property
    def key(self) -> str:
        return f"{self.kind} {self.name} ({self.engine})"


def _owner_label(labels: Mapping[str, str]) -> tuple[bool, tuple[int, int | None] | None]:
    """(well-formed, (pid, start)) of the ktrial.owner label: (True, None) if absent."""
    raw = labels.get(OWNER_LABEL)
    if raw is None:
        return True, None
    m = OWNER_LABEL_RE.match(raw)
    if not m:
        return False, None
    return True, (int(m.group(1)), int(m.group(2)) if m.group(2) else None)


def classify(kind: str, raw: Mapping[str, Any], engine: str, system: bool) -> DockerItem | None:
    """The DockerItem of an engine's container/network record if its labels and name are
    exactly what ktrial gives its own (pure); None for anything else."""
    labels = raw.get("Labels") or {}
    rid = labels.get(LABEL, "")
    well_formed, owner = _owner_label(labels)
    if not RUN_LABEL_RE.match(rid) or not well_formed:
        return None
    if kind == "container":
        names = raw.get("Names") or []
        name = names[0].lstrip("/") if names else ""
        m = CONTAINER_NAME_RE.match(name)
        if not m or m.group(1) != rid or labels.get(NODE_LABEL) != m.group(2):
            return None
        ident = raw.get("Id", "")
    else:
        name = raw.get("Name", "")
        if name != network_name(rid):
            return None
        ident = raw.get("Id", "")
    if not ident:
        return None
    return DockerItem(engine, system, kind, ident, name, rid, owner)


def owner_alive(item: DockerItem, state: Mapping[str, Any] | None) -> bool | None:
    """Whether the run owning `item` is alive: from its owner label, else from the run's
    state record; None if neither says (unknown owner)."""
    if item.owner is not None:
        return statemod.is_alive(*item.owner)
    pid = (state or {}).get("owner_pid")
    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
        return statemod.state_is_live(dict(state or {}))
    return None


def _engines() -> list[tuple[str, bool, Any]]:
    """(base url, is the system engine, client) of every engine that answers."""
    out = []
    own = dockerd.default_paths().base_url
    for url, system in ((f"unix://{dockerd.SYSTEM_SOCKET}", True), (own, False)):
        client = dockerd.ping(url)
        if client is not None:
            out.append((url, system, client))
    return out


def scan_items() -> dict[str, DockerItem]:
    """Every container and network with ktrial's exact labels, on every engine, by key."""
    found: dict[str, DockerItem] = {}
    for url, system, client in _engines():
        with contextlib.suppress(Exception):
            raws = [
                ("container", c) for c in client.api.containers(all=True, filters={"label": LABEL})
            ] + [("network", n) for n in client.api.networks(filters={"label": LABEL})]
            for kind, raw in raws:
                item = classify(kind, raw, url, system)
                if item is not None:
                    found[item.key] = item
        client.close()
    return found


def remove_items(items: Iterable[DockerItem]) -> list[str]:
    """Remove exactly these containers, then these networks; returns problems."""
    todo = sorted(items, key=lambda i: i.kind != "container")
    problems: list[str] = []
    clients = {url: client for url, _, client in _engines()}
    for item in todo:
        client = clients.get(item.engine)
        if client is None:
            problems.append(f"{item.key}: the engine no longer answers")
            continue
        try:
            if item.kind == "container":
                client.api.remove_container(item.ident, force=True, v=True)
            else:
                client.api.remove_network(item.ident)
        except Exception as e:
            problems.append(f"{item.key}: {e}")
    for client in clients.values():
        client.close()
    return problems


def orphaned_dockerd(removing: Iterable[str] = ()) -> str | None:
    """A description of ktrial's own dockerd if a clean removing the item keys `removing`
    stops it: its owner died and no other ktrial container is left in it. None otherwise."""
    paths = dockerd.default_paths()
    if not dockerd.orphaned(paths):
        return None
    client = dockerd.ping(paths.base_url)
    if client is not None:
        gone = set(removing)
        left = [
            c
            for c in client.api.containers(all=True, filters={"label": LABEL})
            if (i := classify("container", c, paths.base_url, False)) is None or i.key not in gone
        ]
        client.close()
        if left:
            return None
    return f"dockerd of a dead run (pid from {paths.record}, owner dead)"


def stop_orphaned_dockerd() -> str | None:
    """Stop ktrial's dockerd if its owner died and no ktrial container is left in it."""
    what = orphaned_dockerd()
    if what is not None:
        dockerd.stop_daemon(dockerd.default_paths())
    return what


__all__ = ["DockerCluster", "DockerNode", "Unsupported"]
