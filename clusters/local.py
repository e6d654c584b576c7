"""The `local` backend: N nodes of a broker system on this machine, as host processes.

What runs on the nodes is the cluster's `BrokerSystem` (clusters.system: Apache Kafka
by default, or kfake); this module only makes nodes and acts on their processes.
Each node gets its own network namespace on a bridge the cluster creates and its own
memory cgroup beneath ours, so the nemesis can partition (iptables inside a
namespace), kill, pause and squeeze one node at a time. Without root, or with
`netns=False`, the brokers share 127.0.0.1 on distinct ports and namespace-based
faults raise `Unsupported`. A system that is one process for every node (kfake) runs
on 127.0.0.1: the first node runs the process, the others are its listeners and pass
every process operation to it.

Cleanup is structural: one ExitStack owned by the cluster gets the undo of every
resource the moment the resource exists (state file, work dir, bridge, iptables rule,
namespaces, cgroups, processes), so teardown, an exception and Ctrl-C all unwind the
same way. What a SIGKILLed owner leaves behind, `ktrial cluster clean` finds by name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import cgroups, netns
from . import state as statemod
from .admin import ClusterNotReady
from .base import SHARED_ADDRESS, ClientAdvertise, Unsupported
from .nodebase import READY_TOPIC, BrokerNode, NodeStateError, OwnedCluster, tail
from .procs import process_state, wait_stopped
from .system import NODE_PORTS, BrokerSystem, NodePaths, Ports

log = logging.getLogger(__name__)

NETNS_PORTS = NODE_PORTS


def _free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A base port such that base..base+count-1 are all free on `host` right now."""
    import random

    for _ in range(200):
        base = random.randrange(20000, 40000 - count)
        socks = []
        try:
            for p in range(base, base + count):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                socks.append(s)
                s.bind((host, p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no block of {count} free ports on {host}")


class LocalNode(BrokerNode):
    """One node's broker process. Implements clusters.base.Node."""

    def __init__(
        self,
        cluster: LocalCluster,
        index: int,
        host: str,
        ports: Ports,
        netns_name: str | None,
        work_dir: Path,
    ) -> None:
        self.cluster: LocalCluster = cluster
        self._init_node(cluster, index, host, ports, work_dir)
        self.netns = netns_name
        self.cgroup_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"<LocalNode {self.name} {self.host} pid={self.pid}>"

    # ------------------------------------------------------------ introspection

    @property
    def owner(self) -> LocalNode:
        """The node whose process serves this one: itself, or the first node when the
        system is one process for every node."""
        nodes = self.cluster._nodes
        if self.cluster.system.one_process and nodes and nodes[0] is not self:
            return nodes[0]
        return self

    @property
    def pid(self) -> int | None:
        o = self.owner
        return o._proc.pid if o.is_running() and o._proc else None

    @property
    def cgroup(self) -> str | None:
        return str(self.cgroup_dir) if self.cgroup_dir else None

    def is_running(self) -> bool:
        o = self.owner
        return o._proc is not None and o._proc.poll() is None

    @property
    def paused(self) -> bool:
        o = self.owner
        return o._paused and o.is_running()

    @property
    def returncode(self) -> int | None:
        o = self.owner
        return o._proc.returncode if o._proc else None

    @property
    def log_paths(self) -> Sequence[Path]:
        return super().log_paths if self.owner is self else []

    # ------------------------------------------------------------ lifecycle

    def paths(self) -> NodePaths:
        return NodePaths(
            runtime=self.cluster.runtime,
            program=self.cluster.system.program(),
            work=str(self.work_dir),
            data=str(self.data_dir),
            logs=str(self.logs_dir),
        )

    def write_config(self) -> None:
        self.write_files()

    def wrap(self, cmd: Sequence[str], join_cgroup: bool = True) -> list[str]:
        """`cmd` placed in this node's namespace and (optionally) its cgroup."""
        out = netns.in_netns(self.netns, cmd) if self.netns else list(cmd)
        if join_cgroup and self.cgroup_dir:
            procs = str(self.cgroup_dir / "cgroup.procs")
            out = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *out]
        return out

    def start(self) -> None:
        """Start the node's process (for a listener of another node's process: that
        one, unless it runs); wait for the system's ready line if it prints one."""
        if self.owner is not self:
            if not self.owner.is_running():
                self.owner.start()
            return
        if self.is_running():
            raise NodeStateError(f"{self.name} is already running (pid {self.pid})")
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        system = self.cluster.system
        cmd = system.run_command(self.paths(), self.cluster.run_id, self.name)
        out = open(self.stdout_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            out.write(f"\n=== ktrial: starting {self.name} at {time.ctime()} ===\n".encode())
            out.flush()
            offset = out.tell()
            self._proc = subprocess.Popen(
                self.wrap(cmd),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                env={**os.environ, **self.cluster.marker_env},
                start_new_session=True,  # no Ctrl-C from our terminal; survives our exit
            )
        finally:
            out.close()
        self._paused = False
        if system.ready_line:
            self._wait_ready_line(system.ready_line, offset, self.cluster.start_timeout)
        log.info("started %s pid %s", self.name, self._proc.pid)
        self.cluster.save_state()

    def _wait_ready_line(self, prefix: str, offset: int, timeout: float) -> None:
        """Until the process prints a line starting with `prefix` past `offset` of its
        stdout; ClusterNotReady (with the last lines) if it exits or takes too long."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.stdout_path, "rb") as fh:
                fh.seek(offset)
                text = fh.read().decode(errors="replace")
            if any(line.startswith(prefix) for line in text.splitlines()):
                return
            if not self.is_running() or time.monotonic() > deadline:
                rc = self.returncode
                state = "still starting" if rc is None else f"exited with code {rc}"
                raise ClusterNotReady(
                    f"{self.name}: no {prefix} line after {timeout:.0f}s ({state}); last "
                    f"lines of {self.stdout_path}:\n{tail(self.stdout_path)}"
                )
            time.sleep(0.05)

    def _signal(self, sig: int) -> None:
        o = self.owner
        if o._proc is None or o._proc.poll() is not None:
            raise NodeStateError(f"{self.name} is not running")
        os.kill(o._proc.pid, sig)

    def wait_exit(self, timeout: float) -> bool:
        if self.owner is not self:
            return self.owner.wait_exit(timeout)
        if self._proc is None:
            return True
        try:
            self._proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, timeout: float = 30.0) -> None:
        if self.owner is not self:
            self.owner.stop(timeout)
            return
        if not self.is_running():
            return
        if self._paused:
            self.resume()
        self._signal(self.cluster.system.stop_signal)
        if not self.wait_exit(timeout):
            log.warning("%s ignored SIGTERM for %.0fs; SIGKILL", self.name, timeout)
            self.kill()
        self.cluster.save_state()

    def kill(self) -> None:
        if self.owner is not self:
            self.owner.kill()
            return
        if not self.is_running():
            return
        self._signal(signal.SIGKILL)
        self.wait_exit(30)
        self._paused = False
        self.cluster.save_state()

    def pause(self) -> None:
        """SIGSTOP, and wait (up to 5 s) until the kernel reports every thread stopped."""
        if self.owner is not self:
            self.owner.pause()
            return
        self._signal(signal.SIGSTOP)
        self._paused = True
        assert self._proc is not None
        wait_stopped(self._proc.pid, 5.0)

    def resume(self) -> None:
        if self.owner is not self:
            self.owner.resume()
            return
        self._signal(signal.SIGCONT)
        self._paused = False

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        """Run `cmd` in the node's network namespace (not its cgroup); return stdout."""
        if not self.netns:
            raise Unsupported(
                f"{self.name} has no network namespace (cluster started without netns, "
                "e.g. not root or --no-netns): exec and partitions are unavailable"
            )
        proc = subprocess.run(
            self.wrap(cmd, join_cgroup=False), capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise subprocess.CalledProcessError(
                proc.returncode, list(cmd), proc.stdout, proc.stderr
            )
        return proc.stdout

    def popen_in_cgroup(self, cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start `cmd` inside this node's namespace AND memory cgroup (e.g. a stress-ng balloon).

        The process carries the run marker, so teardown/clean kill it with the node.
        """
        env = {**os.environ, **self.cluster.marker_env, **kwargs.pop("env", {})}
        proc = subprocess.Popen(self.wrap(cmd), env=env, start_new_session=True, **kwargs)
        if self.cgroup_dir:  # return only once it is charged to the node's cgroup
            deadline = time.monotonic() + 5
            while proc.pid not in cgroups.pids(self.cgroup_dir) and proc.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
        return proc

    def state(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node_id": self.node_id,
            "address": self.host,
            "ports": [self.ports.client, self.ports.replication, self.ports.controller],
            "client_bootstrap": self.client_bootstrap,
            "netns": self.netns,
            "cgroup": self.cgroup,
            "pid": self.pid,
            "work_dir": str(self.work_dir),
            "log": str(self.log_path),
        }


class LocalCluster(OwnedCluster[LocalNode]):
    """N broker nodes on this machine. Implements clusters.base.Cluster.

    Use as a context manager (`with LocalCluster() as c:`), or call `start()` and
    `teardown()` yourself. `start(wait=False)` returns once the brokers are launched,
    e.g. to put Toxiproxies in front of them before `wait_ready()`. The nodes run
    `system`; without one, the default system (clusters.system.default_system) made
    from `system_options` (e.g. ``LocalCluster(kafka_version="3.9.2", profile="unsafe")``).
    """

    kind = "local"

    def __init__(
        self,
        nodes: int = 3,
        use_netns: bool | None = None,
        use_cgroups: bool | None = None,
        client_advertise: ClientAdvertise | None = None,
        work_root: Path | str | None = None,
        run_id: str | None = None,
        ready_timeout: float = 180.0,
        auto_install: bool = True,
        keep_work_dir: bool = False,
        save_data_to: Path | str | None = None,
        system: BrokerSystem | None = None,
        start_timeout: float = 30.0,
        **system_options: Any,
    ) -> None:
        super().__init__(
            nodes=nodes,
            run_id=run_id,
            ready_timeout=ready_timeout,
            auto_install=auto_install,
            client_advertise=client_advertise,
            system=system,
            system_options=system_options,
        )
        root = netns.is_root()
        one = self.system.one_process
        if use_netns and (not root or one):
            why = (
                f"{self.system.name} is one process for every node, on 127.0.0.1"
                if one
                else "network namespaces need root; run as root or pass use_netns=False"
            )
            raise Unsupported(why)
        self.use_netns = root and not one if use_netns is None else use_netns
        self.use_cgroups = root and not one if use_cgroups is None else use_cgroups
        # how long a start waits for the system's ready line (systems that print one)
        self.start_timeout = start_timeout
        self.work_root = Path(work_root) if work_root else None
        self.keep_work_dir = keep_work_dir
        # Where each node's data directory is copied at teardown, once its broker is
        # stopped (for kafka-dump-log after an anomaly); None: not kept.
        self.save_data_to = Path(save_data_to) if save_data_to else None
        self.runtime = ""  # the system's launcher on this host, found at start
        self.cgroup_problem: str | None = None

    def unsupported_faults(self) -> dict[str, str]:
        """What the nodes rule out, and network faults whenever namespaces are off
        (even a single node: partitions and packet loss work inside a namespace)."""
        out = super().unsupported_faults()
        if not self.use_netns:  # (the system's own reason, if it gave one, stays)
            out.setdefault("partition", SHARED_ADDRESS)
            out.setdefault("loss", SHARED_ADDRESS)
        return out

    def _state_dict(self, status: str) -> dict[str, Any]:
        d = super()._state_dict(status)
        if self.work_root is not None:  # `cluster clean` removes work dirs only in their root
            d["work_root"] = str(self.work_root.resolve())
        return d

    # ------------------------------------------------------------ start

    def _start(self, wait: bool) -> None:
        stack = self._stack
        self.runtime = self.system.runtime()
        self.system.prepare(self.auto_install, log.info)
        # 1. the record first, so `clean` can find whatever follows
        self.state_file.write(self._state_dict("starting"))
        stack.callback(self.state_file.remove)
        # 2. work dir for configs, data and logs
        root = self.work_root
        if root:
            root.mkdir(parents=True, exist_ok=True)
        self.work_dir = Path(tempfile.mkdtemp(prefix=f"ktrial-{self.run_id}-", dir=root))
        if not self.keep_work_dir:
            stack.callback(shutil.rmtree, self.work_dir, True)
        self.save_state("starting")
        # 3. network
        if self.use_netns:
            self._make_network()
        else:
            base = _free_port_block(3 * self.size)
            for i in range(1, self.size + 1):
                p = base + 3 * (i - 1)
                self._add_node(i, "127.0.0.1", Ports(p, p + 1, p + 2), None)
        self.save_state("starting")
        # 4. cgroups
        if self.use_cgroups:
            self._make_cgroups()
        # 5. storage, then processes
        self._format_storage()
        if self.save_data_to is not None:
            stack.callback(self._save_data)  # runs after _kill_all, before the rmtree
        stack.callback(self._kill_all)
        for n in self._nodes:
            n.start()
        self.save_state("started")
        if wait:
            self.wait_ready(self.ready_timeout)

    def _add_node(self, i: int, host: str, ports: Ports, ns: str | None) -> LocalNode:
        assert self.work_dir is not None
        wd = self.work_dir / f"n{i}"
        wd.mkdir()
        node = LocalNode(self, i, host, ports, ns, wd)
        self._nodes.append(node)
        return node

    def _make_network(self) -> None:
        stack = self._stack
        reserved = [
            s["subnet"]
            for rid, s in statemod.all_states()
            if rid != self.run_id and s.get("subnet") and statemod.state_is_live(s)
        ]
        with netns.subnet_lock():
            sub = netns.pick_subnet(netns.used_networks(), reserved)
            self.subnet = str(sub)
            self.save_state("starting")
            br = netns.bridge_name(self.run_id)
            stack.callback(netns.delete_link, br)
            netns.create_bridge(self.run_id, sub)
            self.bridge = br
        rule = netns.forward_rule(self.run_id)
        stack.callback(netns.delete_rule, rule)
        netns.add_rule(rule)
        for i in range(1, self.size + 1):
            name = f"n{i}"
            ns_name = netns.netns_name(self.run_id, name)
            stack.callback(netns.delete_link, netns.veth_name(self.run_id, i))
            stack.callback(_delete_netns_and_procs, ns_name)
            netns.create_netns(self.run_id, name, i, sub)
            self._add_node(i, netns.node_address(sub, i), NETNS_PORTS, ns_name)

    def _make_cgroups(self) -> None:
        """One memory cgroup per node; without them the cluster still runs (no memory faults)."""
        h = cgroups.memory_hierarchy()
        if h is None:
            self.cgroup_problem = "no memory cgroup hierarchy found"
            log.warning("%s: memory faults unavailable", self.cgroup_problem)
            return
        try:
            for n in self._nodes:
                d = h.own / cgroups.cgroup_name(self.run_id, n.name)
                self._stack.callback(_remove_cgroup_and_procs, d)
                n.cgroup_dir = cgroups.create(h, self.run_id, n.name)
        except cgroups.CgroupError as e:
            self.cgroup_problem = str(e)
            log.warning("memory faults unavailable: %s", e)
            for n in self._nodes:
                n.cgroup_dir = None
        self.save_state("starting")

    def _format_storage(self) -> None:
        def fmt(n: LocalNode) -> None:
            n.logs_dir.mkdir(parents=True, exist_ok=True)
            n.write_config()
            cmd = self.system.format_command(n.paths(), self.cluster_id)
            if cmd is None:
                return
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                raise ClusterNotReady(
                    f"formatting storage of {n.name} failed (exit {proc.returncode}), "
                    f"files in {n.work_dir}:\n{proc.stdout}{proc.stderr}\n{tail(n.log_path)}"
                )

        with ThreadPoolExecutor(max_workers=len(self._nodes)) as ex:
            list(ex.map(fmt, self._nodes))

    def _save_data(self) -> None:
        """Copy each node's data directory to ``save_data_to/<node>`` (brokers stopped)."""
        assert self.save_data_to is not None
        for n in self._nodes:
            if n.data_dir.is_dir():
                try:
                    shutil.copytree(
                        n.data_dir,
                        self.save_data_to / n.name,
                        ignore=shutil.ignore_patterns(*self.system.layout.data_skip),
                        dirs_exist_ok=True,
                    )
                except OSError as e:
                    log.warning("could not keep the data of %s: %s", n.name, e)

    def _kill_all(self) -> None:
        for n in self._nodes:
            if n.is_running():
                with contextlib.suppress(ProcessLookupError, NodeStateError):
                    n._signal(signal.SIGKILL)
        for n in self._nodes:
            n.wait_exit(30)
            n._paused = False

    # ------------------------------------------------------------ heal

    def _heal_node(self, node: LocalNode) -> None:
        """Resume a paused node, flush iptables inside its namespace, lift its memory limit."""
        # Also a node another process SIGSTOPped (a test's child, a killed ktrial):
        # the kernel, not our flag, says whether it is stopped.
        if node.paused or (node.pid is not None and process_state(node.pid) in ("T", "t")):
            node.resume()
        if node.netns:
            for table in ("filter", "raw", "mangle"):
                node.exec(["iptables", "-w", "-t", table, "-F"], check=False)
        if node.cgroup_dir:
            cgroups.unlimit(node.cgroup_dir)


def _delete_netns_and_procs(ns: str) -> None:
    """Kill whatever still runs in the namespace (e.g. an exec'd helper), then delete it."""
    out = netns.run(["ip", "netns", "pids", ns], check=False)
    for pid in out.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    netns.delete_netns(ns)


def _remove_cgroup_and_procs(d: Path) -> None:
    """Kill what is left in the cgroup (its processes are ours by construction), rmdir it."""
    for pid in cgroups.pids(d):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    cgroups.remove(d)


__all__ = [
    "READY_TOPIC",
    "ClusterNotReady",
    "LocalCluster",
    "LocalNode",
    "NodeStateError",
    "Unsupported",
    "tail",
]
