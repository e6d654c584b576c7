"""franz-go's kfake as a `BrokerSystem`: an in-memory Kafka cluster in one Go process.

kfake answers the Kafka protocol with idempotence, transactions (KIP-890 included),
read_committed and consumer groups, but it has no replication: its "brokers" are
listeners of one process. On the local backend (`ktrial run --system kfake`, or
`--cluster kfake`) the nodes n1..nN are those listeners (kfake's node ids 0..N-1) on
127.0.0.1: the system is `one_process`, so n1 runs the process and a process fault on
any node acts on all of them (each node says so, `process_nodes`, and the nemesis
records it). Network, memory and toxic faults need one process (or one address) per
broker and are refused (`fault_limits`). It has no image: the docker backend refuses it.

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
The process prints ``KFAKE-READY ...`` once it serves (the backend waits for that
line) and persists its state in the node's data directory (kfake's DataDir), so a
kill and a start bring the same topics back, as far as kfake's persistence holds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import Unsupported
from .install import cache_root
from .kafka_config import NodeAddr
from .system import Container, Layout, NodePaths, SystemDefaults

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


# ---------------------------------------------------------------- the system


def _free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Kfake(SystemDefaults):
    """Implements clusters.system.BrokerSystem for franz-go's kfake (local backend only).

    `persist` keeps kfake's state in the first node's data directory (so a killed
    process comes back with its topics); `sync` fsyncs every write there. `binary`
    defaults to the one scripts/setup.sh builds.
    """

    name = SYSTEM
    one_process = True
    first_node_id = 0  # kfake numbers its brokers 0..N-1
    ready_line: str | None = READY_PREFIX
    probe_topic = False  # nothing is replicated: readiness is metadata + the control channel
    has_control = True
    layout = Layout(stdout="kfake.log", log_files=("kfake.log",))

    def __init__(
        self,
        broker_config: Mapping[str, str] | None = None,
        persist: bool = True,
        sync: bool = False,
        binary: Path | str | None = None,
        log_level: str = "warn",
    ) -> None:
        self.broker_config = dict(broker_config or {})
        self.persist, self.sync = persist, sync
        self.binary = Path(binary) if binary else default_binary()
        self.log_level = log_level
        self.control: KfakeControl | None = None
        self._ports: list[int] = []
        self._control_port = 0

    def prepare(self, auto_install: bool, log: Callable[[str], None]) -> None:
        self.runtime()

    @staticmethod
    def new_cluster_id() -> str:
        return ""  # kfake makes its own

    @property
    def version(self) -> str | None:
        return kfake_version()

    def runtime(self) -> str:
        if not os.access(self.binary, os.X_OK):
            raise Unsupported(
                f"the kfake program {self.binary} is missing: run scripts/setup.sh "
                "(it builds systems/kfake with Go) or set $KTRIAL_CACHE"
            )
        return str(self.binary)

    def program(self) -> str:
        return str(self.binary)

    def metadata(self) -> dict[str, object]:
        return {
            "system": SYSTEM,
            "kfake_module": KFAKE_MODULE,
            "kfake_version": kfake_version(),
            "binary": str(self.binary),
            "one_process": True,
            "persist": self.persist,
            "sync_writes": self.sync,
            "broker_config": dict(self.broker_config),
            "control": f"127.0.0.1:{self._control_port}" if self._control_port else None,
            "process_faults": "a kill, stop, pause or restart of any node acts on all nodes",
        }

    def node_files(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        paths: NodePaths,
        client_advertised: tuple[str, int] | None,
    ) -> dict[str, str]:
        """No files: the ports of every listener (and the control channel, chosen once)
        go on the command line."""
        self._ports = [p.ports.client for p in peers]
        if not self._control_port:
            self._control_port = _free_port()
            self.control = KfakeControl("127.0.0.1", self._control_port)
        return {}

    def format_command(self, paths: NodePaths, cluster_id: str) -> None:
        return None

    def run_command(self, paths: NodePaths, run_id: str, node_name: str) -> list[str]:
        if not self._ports:
            raise RuntimeError("kfake: node_files() first (the listeners are not known yet)")
        cmd = [
            paths.runtime,
            "-ports",
            ",".join(str(p) for p in self._ports),
            "-control",
            f"127.0.0.1:{self._control_port}",
            "-log-level",
            self.log_level,
        ]
        if self.persist:
            cmd += ["-data-dir", paths.data]
        if self.sync:
            cmd.append("-sync")
        for k, v in self.broker_config.items():
            cmd += ["-c", f"{k}={v}"]
        return cmd

    def container(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        client_advertised: tuple[str, int] | None,
        cluster_id: str,
        engine: Any,
        say: Callable[[str], None],
    ) -> Container:
        raise Unsupported("kfake has no image: it runs on the local backend (--cluster local)")

    def node_ready(self, node: Any) -> str:
        if self.control is None or not self.control.ping():
            return "control channel not answering"
        return ""

    def fault_limits(self) -> dict[str, str]:
        return dict(LIMITS)

    def control_api(self) -> KfakeControl | None:
        return self.control

    def replication(self, requested: int, nodes: int) -> int:
        return min(requested, nodes)


def kfake_cluster(nodes: int = 3, **options: Any) -> Any:
    """A local cluster running kfake (`options`: the backend's and `Kfake`'s own)."""
    from .local import LocalCluster

    own = {k: options.pop(k) for k in ("persist", "sync", "binary", "log_level") if k in options}
    system = Kfake(broker_config=options.pop("broker_config", None), **own)
    return LocalCluster(nodes=nodes, system=system, **options)


def kfake_version() -> str | None:
    """The kfake module version systems/kfake pins (its go.mod), None if unreadable."""
    gomod = Path(__file__).resolve().parent.parent / "systems" / "kfake" / "go.mod"
    with contextlib.suppress(OSError):
        for line in gomod.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] in (KFAKE_MODULE, "require") and KFAKE_MODULE in line:
                return parts[-1]
    return None
