"""The `docker` backend: the local backend's nodes as containers, through the Docker SDK.

Each node is a container `kt-<runid>-n<i>` of the locally built `ktrial-kafka:<version>`
image (clusters.docker_image) with a fixed address on a network of its own. Config,
data and logs live in a host directory bind-mounted at /ktrial, so the broker logs are
readable from the host and teardown removes them with the work dir. The container's
init process is the broker JVM itself (a generated start script formats the storage on
first start, then execs Java), so the container's State.Pid is the broker's host pid.

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
from pathlib import Path
from typing import Any

from . import cgroups, dockerd, netns
from . import state as statemod
from .apache_kafka import ApacheKafka
from .base import Unsupported
from .docker_image import ensure_image
from .local import NETNS_PORTS
from .nodebase import BrokerNode, NodeStateError, OwnedCluster
from .system import NodePaths

log = logging.getLogger(__name__)

LABEL = dockerd.LABEL
POOLS = ("10.214.0.0/16",)
MOUNT = "/ktrial"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def container_name(run_id: str, index: int) -> str:
    return f"kt-{run_id}-n{index}"


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


def start_script(format_cmd: Sequence[str] | None, run_cmd: Sequence[str]) -> str:
    """The container's entry script (pure): format the storage once, then exec the broker."""
    lines = ["#!/bin/sh", "# written by ktrial; regenerated on every start", "set -e"]
    lines.append(f"mkdir -p {MOUNT}/logs {MOUNT}/data")
    if format_cmd:
        lines.append(f"if [ ! -f {MOUNT}/data/meta.properties ]; then")
        lines.append(f"  {shlex.join(format_cmd)} >> {MOUNT}/logs/stdout.log 2>&1")
        lines.append("fi")
    lines.append(f'echo "=== ktrial: starting at $(date) ===" >> {MOUNT}/logs/stdout.log')
    lines.append(f"exec {shlex.join(run_cmd)} >> {MOUNT}/logs/stdout.log 2>&1")
    return "\n".join(lines) + "\n"


def _say(msg: str) -> None:
    print(f"[ktrial docker] {msg}", file=sys.stderr, flush=True)


class DockerNode(BrokerNode):
    """One broker+controller in a container. Implements clusters.base.Node."""

    def __init__(self, cluster: DockerCluster, index: int, host: str, work_dir: Path) -> None:
        self.cluster: DockerCluster = cluster
        self._init_node(cluster, index, host, NETNS_PORTS, work_dir)
        self.container_name = container_name(cluster.run_id, index)
        self.container_id: str | None = None
        self._cgroup: Path | None = None

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
        """docker pause returns once the freezer reports FROZEN (threads then show D, not T)."""
        return self.paused

    @property
    def returncode(self) -> int | None:
        st = self._state()
        return None if not st or st.get("Running") else st.get("ExitCode")

    # ------------------------------------------------------------ lifecycle

    def paths(self) -> NodePaths:
        """Inside the container: the work dir is bind-mounted at /ktrial."""
        c = self.cluster
        return NodePaths("java", f"{c.kafka_lib}/*", MOUNT, f"{MOUNT}/data", f"{MOUNT}/logs")

    def write_config(self) -> None:
        c = self.cluster
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.write_files()
        paths = self.paths()
        fmt = c.system.format_command(paths, c.cluster_id)
        run = c.system.run_command(paths, c.run_id, self.name)
        (self.work_dir / "start.sh").write_text(start_script(fmt, run))

    def create(self, image: str, network: str) -> None:
        api = self.cluster.client.api
        host_config = api.create_host_config(
            binds={str(self.work_dir): {"bind": MOUNT, "mode": "rw"}},
            cap_add=["NET_ADMIN"],
            network_mode=network,
            init=False,
        )
        net_config = api.create_networking_config(
            {network: api.create_endpoint_config(ipv4_address=self.host)}
        )
        resp = api.create_container(
            image,
            command=["/bin/sh", f"{MOUNT}/start.sh"],
            name=self.container_name,
            hostname=self.name,
            labels={LABEL: self.cluster.run_id, "ktrial.node": self.name},
            environment={"KTRIAL_RUN": self.cluster.run_id},
            host_config=host_config,
            networking_config=net_config,
            stop_signal="SIGTERM",
        )
        self.container_id = resp["Id"]

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
        if self.paused:
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
        self._paused = False
        self.cluster.save_state()

    def pause(self) -> None:
        if not self.is_running():
            raise NodeStateError(f"{self.name} is not running")
        self.cluster.client.api.pause(self.container_id)
        self._paused = True

    def resume(self) -> None:
        if not self.is_running():
            raise NodeStateError(f"{self.name} is not running")
        if self.paused:
            self.cluster.client.api.unpause(self.container_id)
        self._paused = False

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        """Run `cmd` inside the container; return stdout.

        A paused container refuses exec, so then the command runs in the container's
        network namespace with the host's tools (the same iptables, the same rules).
        """
        if not self.is_running():
            raise NodeStateError(f"{self.name} is not running: cannot exec {shlex.join(cmd)}")
        if self.paused:
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
        profile: str = "safe",
        kafka_version: str | None = None,
        broker_config: Mapping[str, str] | None = None,
        heap_mb: int = 512,
        run_id: str | None = None,
        ready_timeout: float = 180.0,
        auto_install: bool = True,
        progress: Callable[[str], None] = _say,
        dockerd_paths: dockerd.DaemonPaths | None = None,
    ) -> None:
        # The image is built from Apache Kafka's jars (clusters.docker_image).
        self.kafka_system = ApacheKafka(kafka_version, profile, broker_config, heap_mb)
        super().__init__(
            nodes=nodes,
            profile=profile,
            kafka_version=kafka_version,
            broker_config=broker_config,
            heap_mb=heap_mb,
            run_id=run_id,
            ready_timeout=ready_timeout,
            auto_install=auto_install,
            system=self.kafka_system,
        )
        self.progress = progress
        self.dockerd_paths = dockerd_paths
        self.engine: dockerd.Engine | None = None
        self.image: str | None = None
        self.kafka_lib = "/opt/kafka/lib"

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
        self.image = ensure_image(self.client, self.kafka, self.progress)
        net = self._make_docker_network()
        stack.callback(self._remove_containers)
        for i in range(1, self.size + 1):
            assert self.subnet is not None
            wd = self.work_dir / f"n{i}"
            wd.mkdir()
            addr = netns.node_address(ipaddress.IPv4Network(self.subnet), i)
            self._nodes.append(DockerNode(self, i, addr, wd))
        for n in self._nodes:
            n.create(self.image, net)
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
                labels={LABEL: self.run_id},
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
        """Remove every container of this run (by label: also half-created ones)."""
        if self.engine is None:
            return
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


def _engines() -> list[Any]:
    out = []
    for url in (f"unix://{dockerd.SYSTEM_SOCKET}", dockerd.default_paths().base_url):
        client = dockerd.ping(url)
        if client is not None:
            out.append(client)
    return out


def scan_leftovers() -> dict[str, str]:
    """'container NAME' / 'network NAME' -> run id, for everything labelled ktrial.run."""
    found: dict[str, str] = {}
    for client in _engines():
        with contextlib.suppress(Exception):
            for c in client.api.containers(all=True, filters={"label": LABEL}):
                rid = (c.get("Labels") or {}).get(LABEL, "")
                if RUN_LABEL_RE.match(rid):
                    found[f"container {c['Names'][0].lstrip('/')}"] = rid
            for net in client.api.networks(filters={"label": LABEL}):
                rid = (net.get("Labels") or {}).get(LABEL, "")
                if RUN_LABEL_RE.match(rid):
                    found[f"network {net['Name']}"] = rid
        client.close()
    return found


def remove_leftovers(run_ids: Iterable[str]) -> list[str]:
    """Remove the containers, then the networks, of `run_ids`; returns problems."""
    ids, problems = set(run_ids), []
    for client in _engines():
        for c in client.api.containers(all=True, filters={"label": LABEL}):
            if (c.get("Labels") or {}).get(LABEL) in ids:
                try:
                    client.api.remove_container(c["Id"], force=True, v=True)
                except Exception as e:
                    problems.append(f"container {c['Names'][0]}: {e}")
        for net in client.api.networks(filters={"label": LABEL}):
            if (net.get("Labels") or {}).get(LABEL) in ids:
                try:
                    client.api.remove_network(net["Id"])
                except Exception as e:
                    problems.append(f"network {net['Name']}: {e}")
        client.close()
    return problems


def stop_orphaned_dockerd() -> str | None:
    """Stop ktrial's dockerd if its owner died and no ktrial container is left in it."""
    paths = dockerd.default_paths()
    if not dockerd.orphaned(paths):
        return None
    client = dockerd.ping(paths.base_url)
    if client is not None:
        left = client.api.containers(all=True, filters={"label": LABEL})
        client.close()
        if left:
            return None
    dockerd.stop_daemon(paths)
    return f"dockerd (pid from {paths.record}, owner dead)"


__all__ = ["DockerCluster", "DockerNode", "Unsupported"]
