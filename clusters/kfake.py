"""The `kfake` backend: franz-go's kfake, an in-memory Kafka cluster in one Go process.

kfake answers the Kafka protocol with idempotence, transactions (KIP-890 included),
read_committed and consumer groups, but it has no replication: its "brokers" are
listeners of one process. The nodes n1..nN of this cluster are those listeners
(kfake's node ids 0..N-1), so a process fault on any node acts on the whole process;
each node says so (`process_nodes`), and the nemesis records it with the fault.
Network, memory and toxic faults need one process (or one address) per broker and
are refused (`unsupported_faults`).

What kfake has instead is a control API: the program ktrial runs (systems/kfake, built
by scripts/setup.sh into ``$KTRIAL_CACHE/bin/ktrial-kfake``) serves it on a loopback
port as one command per line, answered by one line (``OK k=v ...`` or ``ERR why``):

- ``FAULT id=ID api=API error=NAME [count=N] [nodes=0,2] [topic=T]`` — answer the
  next N (-1: every) matching requests with the error; kfake still applies a produce
  answered REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND (``applied=true``);
- ``CLEAR id=ID`` / ``CLEAR prefix=P`` — remove faults (idempotent; says their hits);
- ``SHUFFLE`` (move every partition's leader), ``MOVE topic=T partition=P node=N``,
  ``REHASH`` (move every group and transaction coordinator), ``LEADER``, ``FAULTS``,
  ``PING``.

`KfakeControl` speaks it; the ``control`` fault family (nemesis/control.py) uses it.
The process persists its state in the work directory (kfake's DataDir), so a kill
and a start bring the same topics back, as far as kfake's persistence holds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import state as statemod
from .admin import AdminCluster, ClusterNotReady
from .base import Unsupported
from .install import cache_root
from .nodebase import tail
from .procs import process_state, wait_stopped

log = logging.getLogger(__name__)

SYSTEM = "franz-go-kfake"
# The kfake module the program is built from (systems/kfake/go.mod).
KFAKE_MODULE = "github.com/twmb/franz-go/pkg/kfake"
READY_PREFIX = "KFAKE-READY"
ONE_PROCESS = "kfake is one process on 127.0.0.1"
LIMITS: dict[str, str] = {
    "partition": f"{ONE_PROCESS}: its brokers share one address, nothing to partition",
    "loss": f"{ONE_PROCESS}: its brokers share one address, nothing to drop packets between",
    "memory": f"{ONE_PROCESS} without a memory cgroup of its own",
    "toxic": f"{ONE_PROCESS} advertising its own listeners: no Toxiproxy can sit in front",
}
_TOKEN = re.compile(r"^[A-Za-z0-9._,:/-]+$")


class ControlError(RuntimeError):
    """The control channel refused a command (ERR) or could not be reached."""


def default_binary() -> Path:
    return cache_root() / "bin" / "ktrial-kfake"


# ---------------------------------------------------------------- the protocol (pure)


@dataclass(frozen=True)
class Ready:
    """What the program's ready line says."""

    brokers: tuple[str, ...]  # host:port of each broker, kfake node 0 first
    control: tuple[str, int]  # the control channel
    nodes: tuple[int, ...]  # kfake's node ids


def parse_ready(line: str) -> Ready:
    """``KFAKE-READY brokers=H:P,... control=H:P nodes=0,1,...`` -> Ready (ValueError if not)."""
    words = line.split()
    if not words or words[0] != READY_PREFIX:
        raise ValueError(f"not a ready line: {line!r}")
    fields = _pairs(words[1:], line)
    try:
        brokers = tuple(b for b in fields["brokers"].split(",") if b)
        host, _, port = fields["control"].rpartition(":")
        nodes = tuple(int(n) for n in fields["nodes"].split(","))
        control = (host, int(port))
    except (KeyError, ValueError) as e:
        raise ValueError(f"malformed ready line {line!r}: {e}") from None
    if not brokers or len(brokers) != len(nodes) or not host:
        raise ValueError(f"malformed ready line {line!r}: brokers and nodes do not match")
    return Ready(brokers, control, nodes)


def _pairs(words: Sequence[str], line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for w in words:
        k, sep, v = w.partition("=")
        if not sep or not k:
            raise ValueError(f"malformed ready line {line!r}: {w!r} is not key=value")
        out[k] = v
    return out


def format_command(verb: str, **args: Any) -> str:
    """One command line; None arguments are left out, lists joined by commas.
    Refuses (ValueError) a value that would break the line (spaces, '=', newlines)."""
    if not verb.isalpha():
        raise ValueError(f"control verb {verb!r}: letters only")
    parts = [verb.upper()]
    for k, v in args.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        text = str(v).lower() if isinstance(v, bool) else str(v)
        if not _TOKEN.match(text):
            raise ValueError(f"control argument {k}={text!r}: only A-Z a-z 0-9 . _ , : / -")
        parts.append(f"{k}={text}")
    return " ".join(parts)


def parse_reply(line: str) -> dict[str, str]:
    """``OK k=v ...`` -> {k: v} (a bare word w -> {"reply": w}); ``ERR why`` raises
    ControlError(why); anything else is a protocol error (ControlError too)."""
    text = line.strip()
    word, _, rest = text.partition(" ")
    if word == "ERR":
        raise ControlError(rest or "refused (no reason given)")
    if word != "OK":
        raise ControlError(f"unexpected reply from the control channel: {text!r}")
    out: dict[str, str] = {}
    for w in rest.split():
        k, sep, v = w.partition("=")
        if sep:
            out[k] = v
        else:
            out["reply"] = w
    return out


# ---------------------------------------------------------------- the client


class KfakeControl:
    """The control channel of one kfake process (one short connection per command)."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout

    def call(self, verb: str, **args: Any) -> dict[str, str]:
        line = format_command(verb, **args)
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout) as s:
                s.sendall(line.encode() + b"\n")
                reply = s.makefile("r", encoding="utf-8").readline()
        except OSError as e:
            raise ControlError(f"control channel {self.host}:{self.port}: {e}") from e
        if not reply:
            raise ControlError(f"control channel {self.host}:{self.port} closed without a reply")
        return parse_reply(reply)

    def ping(self) -> bool:
        try:
            return self.call("PING").get("reply") == "pong"
        except ControlError:
            return False

    def inject(
        self,
        fault_id: str,
        api: str,
        error: str,
        count: int = -1,
        nodes: Sequence[int] | None = None,
        topic: str | None = None,
    ) -> dict[str, str]:
        return self.call(
            "FAULT", id=fault_id, api=api, error=error, count=count, nodes=nodes, topic=topic
        )

    def clear(self, fault_id: str) -> dict[str, str]:
        return self.call("CLEAR", id=fault_id)

    def clear_prefix(self, prefix: str) -> dict[str, str]:
        return self.call("CLEAR", prefix=prefix)

    def shuffle_leaders(self) -> dict[str, str]:
        return self.call("SHUFFLE")

    def rehash_coordinators(self) -> dict[str, str]:
        return self.call("REHASH")

    def move_leader(self, topic: str, partition: int, node: int) -> dict[str, str]:
        return self.call("MOVE", topic=topic, partition=partition, node=node)


# ---------------------------------------------------------------- nodes


class KfakeNode:
    """One kfake broker (a listener of the shared process). Implements clusters.base.Node;
    every process operation acts on the whole process."""

    def __init__(self, cluster: KfakeCluster, index: int, port: int) -> None:
        self.cluster = cluster
        self.name = f"n{index + 1}"
        self.node_id = index  # kfake's own id: what metadata and leaders name
        self.port = port

    def __repr__(self) -> str:
        return f"<KfakeNode {self.name} port={self.port} pid={self.pid}>"

    @property
    def address(self) -> str:
        return "127.0.0.1"

    @property
    def client_bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    direct_client = client_bootstrap

    @property
    def process_nodes(self) -> list[str]:
        """Every node a process fault on this one acts on (all of them: one process)."""
        return [n.name for n in self.cluster.nodes]

    @property
    def pid(self) -> int | None:
        return self.cluster.process_pid()

    @property
    def cgroup(self) -> str | None:
        return None

    @property
    def log_paths(self) -> Sequence[Path]:
        first = self.cluster.nodes[0] is self if self.cluster.nodes else False
        return [self.cluster.log_path] if first and self.cluster.work_dir else []

    @property
    def paused(self) -> bool:
        return self.cluster.paused

    def is_running(self) -> bool:
        return self.cluster.process_running()

    def start(self) -> None:
        """Start the process unless it runs (another node's start may have done it)."""
        if not self.cluster.process_running():
            self.cluster.start_process()

    def stop(self, timeout: float = 30.0) -> None:
        self.cluster.stop_process(timeout)

    def kill(self) -> None:
        self.cluster.kill_process()

    def pause(self) -> None:
        self.cluster.pause_process()

    def resume(self) -> None:
        self.cluster.resume_process()

    def restart(self) -> None:
        self.cluster.stop_process()
        self.cluster.start_process()

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        raise Unsupported(f"{self.name} is a listener of the kfake process: no node to exec in")


# ---------------------------------------------------------------- the cluster


def _free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 right now (released before returning)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class KfakeCluster(AdminCluster[KfakeNode]):
    """N kfake brokers in one process on this machine. Implements clusters.base.Cluster.

    `persist` keeps kfake's state in the work directory (so a killed process comes back
    with its topics); `sync` fsyncs every write there. `binary` defaults to the one
    scripts/setup.sh builds.
    """

    kind = "kfake"

    def __init__(
        self,
        nodes: int = 3,
        run_id: str | None = None,
        binary: Path | str | None = None,
        persist: bool = True,
        sync: bool = False,
        broker_config: Mapping[str, str] | None = None,
        ready_timeout: float = 60.0,
        log_level: str = "warn",
    ) -> None:
        super().__init__()
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.size = nodes
        self.run_id = run_id or statemod.new_run_id()
        self.binary = Path(binary) if binary else default_binary()
        self.persist, self.sync = persist, sync
        self.broker_config = dict(broker_config or {})
        self.ready_timeout = ready_timeout
        self.log_level = log_level
        self.state_file = statemod.for_run(self.run_id)
        self.work_dir: Path | None = None
        self.control: KfakeControl | None = None
        self.paused = False
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._control_port = 0
        self._stack = contextlib.ExitStack()
        self._started = False

    # ------------------------------------------------------------ what the nemesis asks

    def control_api(self) -> KfakeControl | None:
        """The control channel (None before start): the `control` fault family's way in."""
        return self.control

    def unsupported_faults(self) -> dict[str, str]:
        return dict(LIMITS)

    @property
    def process_dir(self) -> Path:
        assert self.work_dir is not None, "not started"
        return self.work_dir / "n1"  # `cluster clean` recognises node directories only

    @property
    def log_path(self) -> Path:
        return self.process_dir / "logs" / "kfake.log"

    def metadata(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "system": SYSTEM,
            "run_id": self.run_id,
            "kfake_module": KFAKE_MODULE,
            "kfake_version": kfake_version(),
            "binary": str(self.binary),
            "nodes": self.size,
            "one_process": True,
            "persist": self.persist,
            "sync_writes": self.sync,
            "broker_config": dict(self.broker_config),
            "addresses": {n.name: n.address for n in self._nodes},
            "node_ids": {n.name: n.node_id for n in self._nodes},
            "bootstrap_servers": self.bootstrap_servers,
            "control": f"127.0.0.1:{self._control_port}" if self._control_port else None,
            "unavailable_faults": sorted(self.unsupported_faults()),
            "process_faults": "a kill, stop, pause or restart of any node acts on all nodes",
        }

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> KfakeCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def start(self, wait: bool = True) -> None:
        if self._started:
            raise RuntimeError(f"cluster {self.run_id} was already started")
        self._started = True
        try:
            self._start(wait)
        except BaseException:
            self.teardown()
            raise

    def _start(self, wait: bool) -> None:
        if not os.access(self.binary, os.X_OK):
            raise Unsupported(
                f"the kfake program {self.binary} is missing: run scripts/setup.sh "
                "(it builds systems/kfake with Go) or set $KTRIAL_CACHE"
            )
        stack = self._stack
        self.state_file.write(self._state_dict("starting"))
        stack.callback(self.state_file.remove)
        self.work_dir = Path(tempfile.mkdtemp(prefix=f"ktrial-{self.run_id}-"))
        stack.callback(shutil.rmtree, self.work_dir, True)
        (self.process_dir / "logs").mkdir(parents=True)
        *ports, self._control_port = _free_ports(self.size + 1)
        self._nodes = [KfakeNode(self, i, p) for i, p in enumerate(ports)]
        self.control = KfakeControl("127.0.0.1", self._control_port)
        stack.callback(self._kill_quietly)
        self.start_process()
        self.save_state("started")
        if wait:
            self.wait_ready(self.ready_timeout)

    def teardown(self) -> None:
        """Stop the process, remove the work directory and the state record. Idempotent."""
        self._stack.close()

    def _command(self) -> list[str]:
        cmd = [
            str(self.binary),
            "-ports",
            ",".join(str(n.port) for n in self._nodes),
            "-control",
            f"127.0.0.1:{self._control_port}",
            "-log-level",
            self.log_level,
        ]
        if self.persist:
            cmd += ["-data-dir", str(self.process_dir / "data")]
        if self.sync:
            cmd.append("-sync")
        for k, v in self.broker_config.items():
            cmd += ["-c", f"{k}={v}"]
        return cmd

    def process_pid(self) -> int | None:
        return self._proc.pid if self.process_running() and self._proc else None

    def process_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start_process(self, timeout: float = 30.0) -> None:
        """Start the process and wait for its ready line."""
        if self.process_running():
            raise RuntimeError("the kfake process is already running")
        self.starts += 1
        with open(self.log_path, "ab") as out:
            out.write(f"\n=== ktrial: start {self.starts} at {time.ctime()} ===\n".encode())
            out.flush()
            offset = out.tell()
            self._proc = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "KTRIAL_RUN": self.run_id},
                start_new_session=True,
            )
        self.paused = False
        self._wait_ready_line(offset, timeout)
        self.save_state()
        log.info("kfake started, pid %s", self._proc.pid)

    def _wait_ready_line(self, offset: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                for raw in fh.read().decode(errors="replace").splitlines():
                    if raw.startswith(READY_PREFIX):
                        parse_ready(raw)  # a malformed one is a bug of systems/kfake
                        return
            if not self.process_running() or time.monotonic() > deadline:
                rc = self._proc.poll() if self._proc else None
                state = "still starting" if rc is None else f"exited with code {rc}"
                raise ClusterNotReady(
                    f"kfake {self.run_id}: no ready line ({state}); last lines of "
                    f"{self.log_path}:\n{tail(self.log_path)}"
                )
            time.sleep(0.05)

    def stop_process(self, timeout: float = 30.0) -> None:
        if not self.process_running():
            return
        assert self._proc is not None
        if self.paused:
            self.resume_process()
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("kfake ignored SIGTERM for %.0fs; SIGKILL", timeout)
            self.kill_process()
        self.save_state()

    def kill_process(self) -> None:
        if not self.process_running():
            return
        assert self._proc is not None
        self._proc.kill()
        self._proc.wait(30)
        self.paused = False
        self.save_state()

    def pause_process(self) -> None:
        if not self.process_running():
            raise RuntimeError("the kfake process is not running")
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGSTOP)
        self.paused = True
        wait_stopped(self._proc.pid, 5.0)

    def resume_process(self) -> None:
        if self.process_running():
            assert self._proc is not None
            os.kill(self._proc.pid, signal.SIGCONT)
        self.paused = False

    def _kill_quietly(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(30)

    # ------------------------------------------------------------ state, readiness, heal

    def _state_dict(self, status: str) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "kind": self.kind,
            "status": status,
            **statemod.owner_fields(),
            "owner_kind": "library",
            "created": time.time(),
            "netns": False,
            "work_dir": str(self.work_dir) if self.work_dir else None,
            "bootstrap_servers": self.bootstrap_servers if self._nodes else None,
            "nodes": [
                {"name": n.name, "node_id": n.node_id, "client_bootstrap": n.client_bootstrap}
                for n in self._nodes
            ],
            "pid": self.process_pid(),
        }

    def save_state(self, status: str | None = None) -> None:
        old = self.state_file.read()
        if not old and status is None:
            return  # torn down: do not resurrect the record
        data = self._state_dict(status or old.get("status", "started"))
        for k in ("created", "owner_pid", "owner_start"):
            if k in old:
                data[k] = old[k]
        self.state_file.write(data)

    def _check_alive(self) -> None:
        if not self.process_running():
            raise ClusterNotReady(
                f"kfake {self.run_id} is not running; last lines of {self.log_path}:\n"
                f"{tail(self.log_path)}"
            )

    def _ready_step(self, admin: Any) -> str:
        md = admin.list_topics(timeout=5)
        missing = [n.name for n in self._nodes if n.node_id not in md.brokers]
        if missing:
            return f"brokers not in metadata: {', '.join(missing)}"
        if self.control is None or not self.control.ping():
            return "control channel not answering"
        return ""

    def _replication(self, replication_factor: int) -> int:
        return min(replication_factor, self.size)

    def _heal_node(self, node: KfakeNode) -> None:
        if self.paused or (self._proc is not None and process_state(self._proc.pid) in ("T", "t")):
            self.resume_process()

    def collect_logs(self, dest: Path) -> None:
        if self.work_dir and self.log_path.exists():
            (dest / "n1").mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.log_path, dest / "n1" / self.log_path.name)


def kfake_version() -> str | None:
    """The kfake module version systems/kfake pins (its go.mod), None if unreadable."""
    gomod = Path(__file__).resolve().parent.parent / "systems" / "kfake" / "go.mod"
    with contextlib.suppress(OSError):
        for line in gomod.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] in (KFAKE_MODULE, "require") and KFAKE_MODULE in line:
                return parts[-1]
    return None
