"""The `ssh` backend: one broker per remote host, reached over SSH (Jepsen's control node).

ktrial runs on a control machine; each `--node` host gets, over one shared SSH
connection (clusters/sshconn.py):

- the installation the cluster's `BrokerSystem` runs, uploaded once and cached by
  content under ``<root>/programs/<digest>/`` (the directories and files its
  `program()` names; the launcher, e.g. java, must be on the host);
- a run directory ``<root>/runs/<runid>/n<i>/`` with the node's files, data and logs,
  and an ``owner`` file naming the control machine's process that owns the run;
- a memory cgroup ``ktrial-<runid>-n<i>`` at the root of its memory hierarchy;
- the broker, started detached in its own session with ``KTRIAL_RUN=<runid>``.

Faults act through the node, one SSH round trip per host and step: `exec_many` runs a
step's iptables commands on the host at once (the nemesis tags its rules as on the local
backend), kill/stop/pause find, check (the run marker) and signal the broker's pid in
one script, memory pressure squeezes the node's cgroup and runs a balloon
there, node stats are read from the host's /proc. Teardown undoes all of it; what a
killed ktrial leaves, ``ktrial cluster clean --cluster ssh --node ...`` removes
(clusters/sshclean.py). A host that stops answering is retried with backoff; each
outage and its end are recorded in the history once a recorder is attached, and an
operation that still fails is a ``harness-error`` (the run cannot be VALID).

A system already installed on the hosts (a node spec's ``[installed]`` table) is driven
by clusters/installed.py, whose node and cluster are these with its own pid lookup
(`SshNode._finder`), start, stop and teardown.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import secrets
import shlex
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import sshremote as R
from .admin import ClusterNotReady
from .base import ClientAdvertise, Unsupported
from .kafka_config import Ports
from .nodebase import BrokerNode, NodeStateError, OwnedCluster
from .sshconn import (
    HostSpec,
    HostUnreachable,
    RemoteError,
    SshHost,
    SshOptions,
    close_all,
    control_dir,
)
from .system import BrokerSystem, NodePaths

log = logging.getLogger(__name__)

PORTS = Ports(client=9092, replication=9093, controller=9094)
F_UNREACHABLE = "node-unreachable"
F_REACHABLE = "node-reachable"
F_HARNESS_ERROR = "harness-error"
# a node's state seen this recently answers the next process_state() (ensure_running
# asks is_running() and then process_state(): one round trip, not two)
STATE_REUSE_S = 0.5


# ---------------------------------------------------------------- program upload (pure-ish)


def program_parts(program: str) -> list[Path]:
    """The local directories and files a `BrokerSystem.program()` string names: each
    path-list entry, a trailing ``/*`` (a Java classpath wildcard) meaning its directory."""
    parts: list[Path] = []
    for entry in program.split(os.pathsep):
        if not entry:
            continue
        p = Path(entry[:-2] if entry.endswith("/*") else entry)
        if p not in parts:
            parts.append(p)
    return parts


def remote_program(program: str, base: str) -> str:
    """`program` with each part replaced by its copy ``<base>/<i>`` on the host (pure)."""
    parts = program_parts(program)
    out = []
    for entry in program.split(os.pathsep):
        if not entry:
            continue
        star = entry.endswith("/*")
        p = Path(entry[:-2] if star else entry)
        i = parts.index(p)
        remote = f"{base}/{i}" + (f"/{p.name}" if p.is_file() else "")
        out.append(remote + ("/*" if star else ""))
    return os.pathsep.join(out)


def content_digest(parts: Sequence[Path]) -> str:
    """A digest of the parts' contents (names, sizes and bytes of every file)."""
    h = hashlib.sha256()
    for i, part in enumerate(parts):
        files = [part] if part.is_file() else sorted(p for p in part.rglob("*") if p.is_file())
        for f in files:
            rel = f.name if part.is_file() else str(f.relative_to(part))
            h.update(f"{i}\0{rel}\0{f.stat().st_size}\0".encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:32]


def _tar_parts(parts: Sequence[Path]) -> Path:
    """The parts laid out as ``<i>/...`` in a temporary directory of symlinks, for tar -h."""
    d = Path(tempfile.mkdtemp(prefix="ktrial-upload-"))
    for i, part in enumerate(parts):
        if part.is_file():
            (d / str(i)).mkdir()
            (d / str(i) / part.name).symlink_to(part.resolve())
        else:
            (d / str(i)).symlink_to(part.resolve())
    return d


# ---------------------------------------------------------------- node


def require_root_and_iptables(h: SshHost) -> dict[str, str]:
    """The host's probe (clusters/sshremote.py); ClusterNotReady unless commands on `h`
    run as root and iptables is there (every node fault needs both)."""
    info = R.parse_probe(h.out(R.probe_script(), what="probe"))
    if info.get("uid") != "0":
        raise ClusterNotReady(
            f"{h.name}: commands run as uid {info.get('uid')}, not root: log in as "
            "root or as a user with password-less sudo"
        )
    if not info.get("iptables"):
        raise ClusterNotReady(f"{h.name}: no iptables (apt-get install iptables)")
    return info


class SshNode(BrokerNode):
    """One broker on one remote host. Implements clusters.base.Node."""

    def __init__(
        self, cluster: SshCluster, index: int, host: SshHost, address: str, work_dir: str
    ) -> None:
        self.cluster: SshCluster = cluster
        self._init_node(cluster, index, address, PORTS, Path(work_dir))
        self.ssh = host
        self.cgroup_path: str | None = None
        self._cg: R.RemoteMemoryCgroup | None = None  # made once the cgroup is
        self._pid: int | None = None
        self._seen: tuple[float, tuple[int, str] | None] | None = None  # (when, _status())
        self._frozen = False

    def __repr__(self) -> str:
        return f"<SshNode {self.name} {self.ssh.name} pid={self._pid}>"

    # ------------------------------------------------------------ remote calls

    def _finder(self) -> str | None:
        """The sh function ``kt_find`` finding the broker's pid on the host (None: this
        run's own, from its pid file and run marker; an installed system has its own)."""
        return None

    def _run(self, body: str, what: str, timeout: float = 60.0, check: bool = True) -> str:
        return self.ssh.out(body, timeout=timeout, check=check, what=f"{self.name}: {what}")

    def _status(self) -> tuple[int, str] | None:
        """The broker's pid and state (T once every thread stopped), None when it does not
        run: one round trip. Kept for a `process_state()` right after (ensure_running
        asks whether it runs, then whether it is paused) unless this node acted since."""
        st = R.parse_pid_state(
            self._run(
                R.node_state_script(str(self.work_dir), self.cluster.run_id, self._finder()),
                "state",
            )
        )
        if st is not None:
            self._pid = st[0]
        self._seen = (time.monotonic(), st)
        return st

    # ------------------------------------------------------------ introspection

    @property
    def pid(self) -> int | None:
        st = self._status()
        return st[0] if st else None

    @property
    def cgroup(self) -> str | None:
        return self.cgroup_path

    @property
    def returncode(self) -> int | None:
        return None  # the broker is not our child: its exit status is not known here

    def is_running(self) -> bool:
        return self._status() is not None

    def process_state(self) -> str | None:
        """The broker's state letter on its host (T: every thread stopped), None if gone:
        what `is_running()` saw less than STATE_REUSE_S ago, else asked again."""
        st = self._recent()
        if st is None:
            return None
        return "T" if st[1] in ("T", "t") else st[1]

    def _recent(self) -> tuple[int, str] | None:
        """`_status()` as seen less than STATE_REUSE_S ago with no action since, else now."""
        seen = self._seen
        if seen is not None and time.monotonic() - seen[0] < STATE_REUSE_S:
            return seen[1]
        return self._status()

    @property
    def paused(self) -> bool:
        return self._paused and self._recent() is not None

    def is_frozen(self) -> bool:
        """Whether the last pause reached every thread (pause waits for it on the host)."""
        return self._frozen

    # ------------------------------------------------------------ lifecycle

    def paths(self) -> NodePaths:
        c = self.cluster
        return NodePaths(
            runtime=c.runtimes.get(self.ssh.name, "java"),
            program=c.remote_program,
            work=str(self.work_dir),
            data=str(self.data_dir),
            logs=str(self.logs_dir),
        )

    def write_files(self) -> None:
        """The system's files of this node, written into its run directory on the host."""
        wd = shlex.quote(str(self.work_dir))
        self.ssh.run(f"mkdir -p {wd} && tar -C {wd} -xf -", input=self._files_tar(), what="files")

    def _files_tar(self) -> bytes:
        c = self.cluster
        files = c.system.node_files(
            self.nodeaddr(), [n.nodeaddr() for n in c.nodes], self.paths(), self.advertised_client()
        )
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    def start(self) -> None:
        """Write the node's files and start its broker: one round trip."""
        self._seen = None
        cmd = self.cluster.system.run_command(self.paths(), self.cluster.run_id, self.name)
        proc = self.ssh.run(
            R.start_script(
                str(self.work_dir),
                str(self.stdout_path),
                cmd,
                self.cluster.run_id,
                self.name,
                self.cgroup_path,
                unpack=True,
            ),
            input=self._files_tar(),
            check=False,
            what=f"{self.name}: start",
        )
        out = proc.stdout.decode(errors="replace").split()
        if proc.returncode == R.ALREADY_RUNNING:
            raise NodeStateError(f"{self.name} is already running (pid {out[-1]})")
        if proc.returncode != 0:
            raise RemoteError(
                self.ssh.name, f"{self.name}: start", proc.returncode, proc.stderr.decode()
            )
        self._pid = int(out[-1]) if out and out[-1].isdigit() else None
        self._paused = False
        log.info("started %s on %s pid %s", self.name, self.ssh.name, self._pid)
        self.cluster.save_state()

    def _signal(
        self, sig: str, wait: str = "", timeout: float = 30.0, cont_first: bool = False
    ) -> bool | None:
        """Signal the broker if it runs, in one round trip (node_signal_script): True if
        `wait` was reached (or nothing to wait for), False on a timeout, None if no
        broker of this run was running."""
        self._seen = None
        proc = self.ssh.run(
            R.node_signal_script(
                str(self.work_dir),
                self.cluster.run_id,
                sig,
                wait,
                timeout,
                cont_first,
                self._finder(),
            ),
            timeout=timeout + 30,
            check=False,
        )
        if proc.returncode == R.NOT_RUNNING:
            return None
        if proc.returncode not in (0, R.TIMED_OUT):
            raise RemoteError(self.ssh.name, f"kill -{sig}", proc.returncode, proc.stderr.decode())
        out = proc.stdout.split()
        if out and out[0].isdigit():
            self._pid = int(out[0])
        return proc.returncode == 0

    def stop(self, timeout: float = 30.0) -> None:
        """SIGCONT (a stopped broker ignores TERM), the system's stop signal and a wait,
        in one round trip; SIGKILL if it ignored the signal for `timeout` s."""
        sig = signal.Signals(getattr(self.cluster.system, "stop_signal", signal.SIGTERM))
        done = self._signal(sig.name.removeprefix("SIG"), "gone", timeout, cont_first=True)
        self._paused = self._frozen = False
        if done is None:
            return
        if not done:
            log.warning("%s ignored %s for %.0fs; SIGKILL", self.name, sig.name, timeout)
            self.kill()
        self.cluster.save_state()

    def kill(self) -> None:
        self._signal("KILL", "gone", 30, cont_first=True)
        self._paused = self._frozen = False
        self.cluster.save_state()

    def pause(self) -> None:
        """SIGSTOP, and wait (up to 5 s) until every thread of the broker is stopped."""
        self._paused = True
        done = self._signal("STOP", "stopped", 5.0)
        if done is None:
            self._paused = False
            raise NodeStateError(f"{self.name} is not running")
        self._frozen = done

    def resume(self) -> None:
        self._signal("CONT")
        self._paused = False
        self._frozen = False

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        """Run `cmd` on the node's host (as root); return stdout."""
        proc = self.ssh.run(shlex.join(cmd), timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise subprocess.CalledProcessError(
                proc.returncode, list(cmd), proc.stdout.decode(), proc.stderr.decode()
            )
        return proc.stdout.decode(errors="replace")

    def exec_many(
        self, cmds: Sequence[Sequence[str]], timeout: float = 30.0
    ) -> list[tuple[int, str, str]]:
        """Run each command on the node's host, one after another, in one round trip;
        (exit status, stdout, stderr) of each (nemesis/iptables.py applies a step's
        rules on a host this way)."""
        if not cmds:
            return []
        boundary = f"ktrial-{secrets.token_hex(8)}"
        proc = self.ssh.run(
            R.exec_many_script(cmds, boundary), timeout=timeout + len(cmds), check=False
        )
        if proc.returncode != 0:
            raise RemoteError(self.ssh.name, "commands", proc.returncode, proc.stderr.decode())
        return R.parse_exec_many(proc.stdout.decode(errors="replace"), boundary, len(cmds))

    # ------------------------------------------------------------ memory (nemesis hooks)

    def memory_cgroup(self) -> R.RemoteMemoryCgroup | None:
        """The node's cgroup (one object per node: its snapshot of the files is shared)."""
        if self._cg is None and self.cgroup_path:
            self._cg = R.remote_cgroup(self.ssh, self.cgroup_path)
        return self._cg

    def start_balloon(self, nbytes: int) -> R.RemoteBalloon:
        if not self.cgroup_path:
            raise Unsupported(f"{self.name} has no memory cgroup on {self.ssh.name}")
        proc = self.ssh.run(
            R.balloon_start_script(
                self.cgroup_path, nbytes, self.cluster.run_id, os.getpid(), self.name
            ),
            check=False,
        )
        if proc.returncode == 5:
            raise Unsupported(f"the memory balloon needs stress-ng on {self.ssh.name}")
        out = proc.stdout.decode().split()
        if proc.returncode != 0 or not out or not out[-1].isdigit():
            raise RemoteError(self.ssh.name, "balloon", proc.returncode, proc.stderr.decode())
        return R.RemoteBalloon(self.ssh, int(out[-1]), self.cgroup_path, self.cluster.run_id)

    def memory_sample(self) -> dict[str, int | None] | None:
        """The node-stats figures of the running broker, read on its host in one round
        trip (None: not running)."""
        script = R.node_sample_script(
            str(self.work_dir), self.cluster.run_id, self.cgroup_path, self._finder()
        )
        return R.parse_node_sample(self.ssh.out(script, timeout=30))

    def state(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node_id": self.node_id,
            "host": self.ssh.name,
            "address": self.host,
            "ports": [self.ports.client, self.ports.replication, self.ports.controller],
            "client_bootstrap": self.client_bootstrap,
            "cgroup": self.cgroup,
            "pid": self._pid,
            "work_dir": str(self.work_dir),
        }


# ---------------------------------------------------------------- cluster


class SshCluster(OwnedCluster[SshNode]):
    """One broker per `hosts` entry, over SSH. Implements clusters.base.Cluster."""

    kind = "ssh"

    def __init__(
        self,
        hosts: Sequence[HostSpec],
        ssh: SshOptions | None = None,
        root: str = R.DEFAULT_ROOT,
        profile: str = "safe",
        kafka_version: str | None = None,
        broker_config: Mapping[str, str] | None = None,
        heap_mb: int = 512,
        client_advertise: ClientAdvertise | None = None,
        run_id: str | None = None,
        ready_timeout: float = 180.0,
        auto_install: bool = True,
        system: BrokerSystem | None = None,
        transaction_version: int | None = None,
        retry_for: float = 20.0,
    ) -> None:
        super().__init__(
            nodes=len(hosts),
            profile=profile,
            kafka_version=kafka_version,
            broker_config=broker_config,
            heap_mb=heap_mb,
            run_id=run_id,
            ready_timeout=ready_timeout,
            auto_install=auto_install,
            client_advertise=client_advertise,
            system=system,
            transaction_version=transaction_version,
        )
        if not root.startswith("/") or any(c.isspace() for c in root) or root.rstrip("/") == "":
            raise ValueError(f"remote directory {root!r}: give an absolute path, not /")
        self.hosts = list(hosts)
        self.ssh_options = ssh or SshOptions()
        self.root = root.rstrip("/")
        self.retry_for = retry_for
        self.control_dir: str | None = None
        self.ssh_hosts: list[SshHost] = []
        self.runtimes: dict[str, str] = {}
        self.remote_program = ""
        self.program_digest = ""
        self.uploaded: dict[str, bool] = {}  # host -> uploaded now (False: was cached)
        self.cgroup_problems: dict[str, str] = {}
        self._recorder: Any = None
        self._say: Callable[[str], None] = lambda m: None
        self._events_lock = threading.Lock()
        self.events: list[dict[str, Any]] = []  # outages and harness errors, also unrecorded
        self._failed_hosts: set[str] = set()  # a harness error recorded for this outage

    # ------------------------------------------------------------ reporting

    def attach_recorder(self, recorder: Any, say: Callable[[str], None]) -> Callable[[], None]:
        """Record host outages and harness errors in this history from now on; returns
        the detach."""
        self._recorder, self._say = recorder, say

        def detach() -> None:
            self._recorder = None

        return detach

    def _event(self, f: str, value: dict[str, Any]) -> None:
        with self._events_lock:
            self.events.append({"f": f, **value})
        rec = self._recorder
        if rec is not None:
            with contextlib.suppress(Exception):
                rec.nemesis(f, value)

    def _host_event(self, host: str, outage: str | None) -> None:
        node = next((n.name for n in self._nodes if n.ssh.name == host), host)
        if outage is None:
            with self._events_lock:
                self._failed_hosts.discard(host)
            log.warning("host %s (%s) answers again", host, node)
            self._event(F_REACHABLE, {"node": node, "host": host})
        else:
            log.warning("host %s (%s) not answering over SSH: %s", host, node, outage)
            self._say(f"node {node} ({host}) not answering over SSH, retrying: {outage}")
            self._event(F_UNREACHABLE, {"node": node, "host": host, "error": outage})

    def _gave_up(self, host: str, why: str) -> None:
        """A command on a host was given up on (it stayed unreachable through the retries):
        once per outage, a harness error, since what ktrial meant to do or undo there (a
        fault, its heal) did not happen."""
        with self._events_lock:
            if host in self._failed_hosts:
                return
            self._failed_hosts.add(host)
        node = next((n.name for n in self._nodes if n.ssh.name == host), host)
        msg = (
            f"node {node} ({host}) unreachable over SSH after {self.retry_for:.0f}s of retries "
            f"({why}): what ktrial did there (a fault, its heal) may not be done or undone, so "
            "what follows says nothing about the system under test"
        )
        log.error("harness: %s", msg)
        self._say(f"HARNESS FAILURE: {msg}")
        self._event(F_HARNESS_ERROR, {"what": f"ssh to {host}", "node": node, "error": msg})

    # ------------------------------------------------------------ metadata

    def metadata(self) -> dict[str, object]:
        meta = super().metadata()
        meta["hosts"] = {n.name: n.ssh.name for n in self._nodes}
        meta["ssh"] = self.ssh_options.to_dict()
        meta["remote_root"] = self.root
        meta["program_digest"] = self.program_digest
        meta["uploaded"] = dict(self.uploaded)
        if self.cgroup_problems:
            meta["cgroup_problems"] = dict(self.cgroup_problems)
        return meta

    def _state_dict(self, status: str) -> dict[str, Any]:
        d = super()._state_dict(status)
        d["forward_rule"] = None
        d["hosts"] = [{"host": h.host, "user": h.user, "port": h.port} for h in self.hosts]
        d["remote_root"] = self.root
        return d

    def owner_line(self) -> str:
        """What the run directory's owner file says: the control machine and its process."""
        from . import state as statemod

        f = statemod.owner_fields()
        return f"{socket.gethostname()} {f['owner_pid']} {f['owner_start']}"

    # ------------------------------------------------------------ start

    def _connect_hosts(self, stack: contextlib.ExitStack) -> None:
        """One shared SSH connection per host (closed when `stack` unwinds), each
        reporting outages to the run and giving up through `_gave_up`."""
        self.control_dir = control_dir(self.run_id)
        self.ssh_hosts = [
            SshHost(h, self.ssh_options, self.control_dir, self.retry_for) for h in self.hosts
        ]
        stack.callback(close_all, self.ssh_hosts, self.control_dir)
        for h in self.ssh_hosts:
            h.on_unreachable = self._host_event
            h.on_gave_up = self._gave_up

    def _start(self, wait: bool) -> None:
        stack = self._stack
        if getattr(self.system, "one_process", False):
            raise Unsupported(
                f"{self.system.name} serves every node from one process: it cannot be spread "
                "over SSH hosts (use --cluster local)"
            )
        self.system.prepare(self.auto_install, log.info)
        self.state_file.write(self._state_dict("starting"))
        stack.callback(self.state_file.remove)
        self._connect_hosts(stack)
        for i, h in enumerate(self.ssh_hosts, start=1):
            wd = f"{R.run_dir(self.root, self.run_id)}/n{i}"
            self._nodes.append(SshNode(self, i, h, _address(h.name), wd))
        self._prepare_hosts()
        self.save_state("starting")
        self._format_storage()
        stack.callback(self._kill_all)
        for n in self._nodes:
            n.start()
        self.save_state("started")
        if wait:
            self.wait_ready(self.ready_timeout)

    def _each(self, fn: Callable[[SshNode], Any]) -> list[Any]:
        with ThreadPoolExecutor(max_workers=max(1, len(self._nodes))) as ex:
            return list(ex.map(fn, self._nodes))

    def _prepare_hosts(self) -> None:
        parts = program_parts(self.system.program())
        missing = [str(p) for p in parts if not p.exists()]
        if missing:
            raise ClusterNotReady(f"the installation to upload is missing: {', '.join(missing)}")
        self.program_digest = content_digest(parts)
        base = f"{self.root}/programs/{self.program_digest}"
        self.remote_program = remote_program(self.system.program(), base)
        launcher = (
            os.path.basename(self.system.runtime()) if _has_local_runtime(self.system) else "java"
        )
        owner = self.owner_line()

        def prepare(n: SshNode) -> None:
            h = n.ssh
            info = require_root_and_iptables(h)
            found = h.out(f"command -v {shlex.quote(launcher)} || true").strip()
            if not found:
                raise ClusterNotReady(f"{h.name}: {launcher} not found (the broker's launcher)")
            self.runtimes[h.name] = found
            # the run directory first (its owner file tells clean whose it is)
            self._stack.callback(self._remove_run_dir, h)
            names = [m.name for m in self._nodes if m.ssh is h]
            h.run(R.make_run_dir_script(self.root, self.run_id, owner, names), what="run dir")
            cached = h.run(R.program_ready_script(self.root, self.program_digest), check=False)
            self.uploaded[h.name] = cached.returncode != 0
            if cached.returncode != 0:
                tmp = _tar_parts(parts)
                try:
                    _upload(h, tmp, R.program_upload_script(self.root, self.program_digest))
                finally:
                    import shutil

                    shutil.rmtree(tmp, ignore_errors=True)
            if not info.get("memcg"):
                self.cgroup_problems[h.name] = "no memory cgroup hierarchy on the host"
                return
            self._stack.callback(self._remove_cgroup, n)
            made = R.parse_cgroup(h.out(R.make_cgroup_script(self.run_id, n.name), what="cgroup"))
            if made:
                n.cgroup_path = made[0]
                n._cg = R.remote_cgroup(h, made[0], made[1])
            else:
                self.cgroup_problems[h.name] = "could not create a memory cgroup"

        self._each(prepare)

    def _remove_run_dir(self, h: SshHost) -> None:
        try:
            h.run(R.remove_run_dir_script(self.root, self.run_id), what="removing the run dir")
        except (HostUnreachable, RemoteError) as e:
            log.error("teardown: %s", e)

    def _remove_cgroup(self, n: SshNode) -> None:
        if not n.cgroup_path:
            return
        try:
            n.ssh.run(R.remove_cgroup_script(n.cgroup_path, self.run_id), what="removing cgroup")
        except (HostUnreachable, RemoteError) as e:
            log.error("teardown: %s", e)

    def _format_storage(self) -> None:
        def fmt(n: SshNode) -> None:
            n.write_files()
            cmd = self.system.format_command(n.paths(), self.cluster_id)
            if cmd is None:
                return
            proc = n.ssh.run(shlex.join(cmd), timeout=180, check=False)
            if proc.returncode != 0:
                raise ClusterNotReady(
                    f"formatting storage of {n.name} on {n.ssh.name} failed "
                    f"(exit {proc.returncode}):\n{proc.stdout.decode()}{proc.stderr.decode()}"
                )

        self._each(fmt)

    def _kill_all(self) -> None:
        def kill(n: SshNode) -> None:
            try:
                n._signal("KILL", "gone", 30, cont_first=True)
            except (HostUnreachable, RemoteError) as e:
                log.error("teardown: killing %s: %s", n.name, e)
            n._paused = False

        self._each(kill)

    # ------------------------------------------------------------ heal, logs, failures

    def _heal_node(self, node: SshNode) -> None:
        """Resume a stopped broker, delete this process's tagged iptables rules on the host,
        lift the cgroup's memory limit (never flushes the host's own rules)."""
        from ..nemesis import iptables

        if node.process_state() == "T":
            node.resume()
        iptables.remove_tagged(node, iptables.comment_for("", os.getpid()))
        cg = node.memory_cgroup()
        if cg is not None:
            for name in ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes", "memory.max"):
                node.ssh.run(
                    f"[ -f {cg.path}/{name} ] && echo {'max' if name == 'memory.max' else -1} "
                    f"> {cg.path}/{name} || true",
                    check=False,
                )

    def collect_logs(self, dest: Path) -> None:
        """Copy every node's logs from its host into dest/<node>/."""
        for n in self._nodes:
            d = dest / n.name
            d.mkdir(parents=True, exist_ok=True)
            self._fetch(n, d, "")

    def fetch_logs(self, dest: Path) -> None:
        """A run's logs: every node's log files as dest/<node>-<file> (as `ktrial run`
        lays out the local backend's)."""
        dest.mkdir(parents=True, exist_ok=True)
        for n in self._nodes:
            self._fetch(n, dest, f"{n.name}-")

    def _fetch(self, n: SshNode, d: Path, prefix: str) -> None:
        """The files of the node's logs directory, as a tar over SSH, into `d`."""
        try:
            data = n.ssh.run(
                f"tar -C {shlex.quote(str(n.logs_dir))} -cf - .", timeout=120, check=False
            ).stdout
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                for m in tar.getmembers():
                    if m.isfile() and "/" not in m.name.removeprefix("./"):
                        src = tar.extractfile(m)
                        if src is not None:
                            (d / f"{prefix}{Path(m.name).name}").write_bytes(src.read())
        except (HostUnreachable, tarfile.TarError, OSError) as e:
            why = f"logs of {n.name} not collected: {e}\n"
            (d / f"{prefix}COLLECT-FAILED.txt").write_text(why)

    def _tail(self, n: SshNode, name: str, lines: int) -> str:
        try:
            path = shlex.quote(str(n.logs_dir / name))
            return n.ssh.out(f"tail -n {lines} {path} 2>&1 || true", retry=False)
        except HostUnreachable as e:
            return f"(no log: {e})"

    def _failure(self, what: str, nodes: Sequence[SshNode]) -> ClusterNotReady:
        parts = [f"cluster {self.run_id}: {what}"]
        for n in nodes:
            running = n.is_running()
            parts.append(
                f"--- {n.name} ({n.ssh.name}, {'running' if running else 'not running'}), "
                f"last lines of {n.log_path}:"
            )
            parts.append(self._tail(n, n.log_path.name, 30))
            if not running and n.stdout_path != n.log_path:
                parts.append(f"--- {n.stdout_path}:")
                parts.append(self._tail(n, n.stdout_path.name, 15))
        return ClusterNotReady("\n".join(parts))


def _has_local_runtime(system: BrokerSystem) -> bool:
    try:
        system.runtime()
        return True
    except Exception:
        return False


def _address(host: str) -> str:
    """The host's IPv4 address as the control machine resolves it: brokers listen and
    peers' partition rules match on it, so it must be the same from every node."""
    try:
        return socket.gethostbyname(host)
    except OSError as e:
        raise ClusterNotReady(f"cannot resolve host {host}: {e}") from e


def _upload(h: SshHost, local: Path, remote_script: str) -> None:
    with subprocess.Popen(
        ["tar", "-C", str(local), "-chf", "-", "."], stdout=subprocess.PIPE
    ) as tar:
        assert tar.stdout is not None
        proc = subprocess.run(
            h.argv(remote_script), stdin=tar.stdout, capture_output=True, timeout=900
        )
        tar.wait(60)
    if proc.returncode != 0:
        raise RemoteError(h.name, "program upload", proc.returncode, proc.stderr.decode())
