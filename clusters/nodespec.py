"""Any broker image as a `BrokerSystem`, described by a node spec (a TOML file).

A node spec says how the docker backend runs one node of a system it knows nothing
else about: the image, its ports, the environment of each node (templates with
placeholders for the node's id, address and peers), the data directory, the start
command, how to tell a node is ready, the faults that make no sense for it and the
client profile it needs. `ktrial run --cluster docker --system-spec FILE` runs it;
systems/specs/ has the shipped specs (docs/systems.md, "Any broker image").

Placeholders are `{name}` with a lower-case name, so a shell's `${VAR}` and `$VAR`
pass through untouched (a lower-case `${var}` would not: spell it `$var`):

| placeholder | value |
|---|---|
| `{id}` | the node's id, 1..N (what metadata must list when `registers_brokers`) |
| `{index}` | 0..N-1 |
| `{name}` | n1..nN |
| `{address}` | the node's own IP address |
| `{port}` | the node's client port; `{port_NAME}` any port of `[ports]` |
| `{advertised}`, `{advertised_host}`, `{advertised_port}` | the client address to advertise |
| `{nodes}` | N |
| `{bootstrap}` | every node's `address:port`, comma-separated |
| `{cluster_id}` | a random id of the cluster (22 characters, base64url of a UUID) |
| `{token}` | a random secret shared by the nodes (32 hex digits) |
| `{data_dir}` | the data directory inside the container |
| `{LIST}` | each entry of `[lists]`: its template rendered for every node, joined with `,` |

(The advertised address is a Toxiproxy's when one fronts the node.) The spec is
checked when it is loaded (unknown keys, a missing image or client port,
unknown placeholders) and each problem names the file and the key.

A spec with an ``[installed]`` table and no image describes a system already installed
on `--cluster ssh` hosts instead (start/stop commands or a systemd unit, how to find the
pid, a memory cgroup, log files): that table is read and driven by clusters/installed.py,
with placeholders of its own; the container keys (command, environment, ...) are then
refused.
"""

from __future__ import annotations

import re
import secrets
import signal
import socket
import subprocess
import tomllib
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import Unsupported
from .kafka_config import NodeAddr, Ports, new_cluster_id
from .system import ClientProfile, Container, Layout, NodePaths, SystemDefaults

if TYPE_CHECKING:
    from .installed import InstalledSpec

PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
NODE_KEYS = (
    "id",
    "index",
    "name",
    "address",
    "port",
    "advertised",
    "advertised_host",
    "advertised_port",
    "nodes",
    "bootstrap",
    "cluster_id",
    "token",
    "data_dir",
)
TOP_KEYS = {
    "name": str,
    "description": str,
    "version": str,
    "image": str,
    "pull": bool,
    "not_run_here": str,
    "command": list,
    "entrypoint": list,
    "data_dir": str,
    "stop_signal": str,
    "exec": str,
    "ports": dict,
    "environment": dict,
    "lists": dict,
    "ready": dict,
    "faults": dict,
    "profile": dict,
    "installed": dict,
}
# what only a container image uses: refused in a spec of an installed system (no image)
IMAGE_KEYS = ("command", "entrypoint", "environment", "lists", "data_dir", "pull", "exec")
READY_KEYS = {
    "registers_brokers": bool,
    "probe_topic": bool,
    "tcp": int,
    "http": str,
    "command": list,
}
PROFILE_KEYS = {"name": str, "producer": dict, "consumer": dict, "checker": dict, "notes": list}


class SpecError(ValueError):
    """A node spec that cannot be used: the message names the file, the key and the fix."""


@dataclass(frozen=True)
class NodeSpec:
    """What a node spec file says (validated)."""

    path: str
    name: str
    image: str
    ports: Mapping[str, int]
    command: tuple[str, ...] | None = None  # None: the image's own command
    entrypoint: tuple[str, ...] | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    lists: Mapping[str, str] = field(default_factory=dict)
    data_dir: str = "/ktrial/data"
    version: str | None = None
    description: str = ""
    pull: bool = False
    not_run_here: str = ""
    stop_signal: int = signal.SIGTERM
    exec_in_host_tools: bool = True
    registers_brokers: bool = True
    probe_topic: bool = True
    ready_tcp: int | None = None
    ready_http: str | None = None  # a URL template answered 200 once the node is ready
    ready_command: tuple[str, ...] | None = None
    unsupported: Mapping[str, str] = field(default_factory=dict)
    profile: ClientProfile = field(default_factory=lambda: ClientProfile("plain"))
    # [installed]: how to drive a system already installed on SSH hosts (clusters/installed.py)
    installed: InstalledSpec | None = None

    @property
    def client_port(self) -> int:
        return self.ports["client"]


# ---------------------------------------------------------------- reading (pure but the file)


def load_spec(path: str | Path) -> NodeSpec:
    """Read and check a node spec file; SpecError says what is wrong, where."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text())
    except OSError as e:
        raise SpecError(f"node spec {p}: cannot read it: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"node spec {p}: not valid TOML: {e}") from None
    return parse_spec(raw, str(p))


def _typed(where: str, table: Mapping[str, Any], allowed: Mapping[str, type]) -> None:
    for k, v in table.items():
        if k not in allowed:
            raise SpecError(f"{where}: unknown key {k!r}; allowed: {', '.join(sorted(allowed))}")
        want = allowed[k]
        if not isinstance(v, want) or (want is int and isinstance(v, bool)):
            raise SpecError(f"{where}: {k} must be a {want.__name__}, not {type(v).__name__}")


def _strings(where: str, values: Any) -> tuple[str, ...]:
    if not all(isinstance(v, str) for v in values):
        raise SpecError(f"{where}: every entry must be a string")
    return tuple(values)


def _str_table(where: str, table: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in table.items():
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise SpecError(f"{where}.{k}: must be a string (or a number), not {type(v).__name__}")
        out[str(k)] = v if isinstance(v, str) else str(v)
    return out


def parse_spec(raw: Mapping[str, Any], path: str = "<spec>") -> NodeSpec:
    """A NodeSpec from a parsed TOML table (pure); SpecError on anything unusable."""
    _typed(f"node spec {path}", raw, TOP_KEYS)
    required = ("name",) if "installed" in raw else ("name", "image")
    for key in required:
        if not raw.get(key):
            hint = " or an [installed] table (a system installed on --cluster ssh hosts)"
            raise SpecError(
                f'node spec {path}: `{key}` is required (e.g. {key} = "...")'
                + (hint if key == "image" else "")
            )
    if "image" not in raw:
        for key in IMAGE_KEYS:
            if key in raw:
                raise SpecError(
                    f"node spec {path}: {key} describes a container image, and this spec has "
                    "none: an installed system is started by installed.start (or "
                    "installed.systemd_unit)"
                )
    ports_raw = raw.get("ports", {})
    ports: dict[str, int] = {}
    for k, v in ports_raw.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 65536:
            raise SpecError(f"node spec {path}: ports.{k} must be a port number (1..65535)")
        if not re.fullmatch(r"[a-z][a-z0-9_]*", k):
            raise SpecError(f"node spec {path}: ports.{k}: names are lower-case words")
        ports[k] = v
    if "client" not in ports:
        raise SpecError(f"node spec {path}: ports.client (the Kafka listener) is required")
    ready = raw.get("ready", {})
    _typed(f"node spec {path} [ready]", ready, READY_KEYS)
    faults = raw.get("faults", {})
    _typed(f"node spec {path} [faults]", faults, {"unsupported": dict})
    profile_raw = raw.get("profile", {})
    _typed(f"node spec {path} [profile]", profile_raw, PROFILE_KEYS)
    profile = ClientProfile(
        name=profile_raw.get("name", raw["name"]),
        producer=_str_table(f"node spec {path}: profile.producer", profile_raw.get("producer", {})),
        consumer=_str_table(f"node spec {path}: profile.consumer", profile_raw.get("consumer", {})),
        checker=dict(profile_raw.get("checker", {})),
        notes=_strings(f"node spec {path}: profile.notes", profile_raw.get("notes", [])),
    )
    exec_where = raw.get("exec", "host")
    if exec_where not in ("host", "container"):
        raise SpecError(f'node spec {path}: exec must be "host" or "container"')
    sig_name = raw.get("stop_signal", "SIGTERM")
    try:
        stop = int(signal.Signals[sig_name])
    except KeyError:
        raise SpecError(f"node spec {path}: stop_signal {sig_name!r} is not a signal") from None
    spec = NodeSpec(
        path=path,
        name=raw["name"],
        image=raw.get("image", ""),
        ports=ports,
        command=_strings(f"node spec {path}: command", raw["command"])
        if "command" in raw
        else None,
        entrypoint=_strings(f"node spec {path}: entrypoint", raw["entrypoint"])
        if "entrypoint" in raw
        else None,
        environment=_str_table(f"node spec {path}: environment", raw.get("environment", {})),
        lists=_str_table(f"node spec {path}: lists", raw.get("lists", {})),
        data_dir=raw.get("data_dir", "/ktrial/data"),
        version=raw.get("version"),
        description=raw.get("description", ""),
        pull=raw.get("pull", False),
        not_run_here=raw.get("not_run_here", ""),
        stop_signal=stop,
        exec_in_host_tools=exec_where == "host",
        registers_brokers=ready.get("registers_brokers", True),
        probe_topic=ready.get("probe_topic", True),
        ready_tcp=ready.get("tcp"),
        ready_http=ready.get("http"),
        ready_command=_strings(f"node spec {path}: ready.command", ready["command"])
        if "command" in ready
        else None,
        unsupported=_str_table(
            f"node spec {path}: faults.unsupported", faults.get("unsupported", {})
        ),
        profile=profile,
    )
    _check_placeholders(spec)
    if "installed" in raw:
        from dataclasses import replace

        from .installed import parse_installed

        spec = replace(spec, installed=parse_installed(raw["installed"], spec))
    return spec


def _templates(spec: NodeSpec) -> list[tuple[str, str]]:
    out = [(f"environment.{k}", v) for k, v in spec.environment.items()]
    out += [(f"lists.{k}", v) for k, v in spec.lists.items()]
    out += [(f"command[{i}]", v) for i, v in enumerate(spec.command or ())]
    out += [(f"ready.command[{i}]", v) for i, v in enumerate(spec.ready_command or ())]
    if spec.ready_http:
        out.append(("ready.http", spec.ready_http))
    return out


def known_placeholders(spec: NodeSpec) -> set[str]:
    return {*NODE_KEYS, *(f"port_{k}" for k in spec.ports), *spec.lists}


def _check_placeholders(spec: NodeSpec) -> None:
    every = known_placeholders(spec)
    ready = {"address", "name", "id", *(f"port_{k}" for k in spec.ports)}
    for where, text in _templates(spec):
        known = ready if where.startswith("ready.") else every
        if where.startswith("lists."):
            known = known - set(spec.lists)
        for m in PLACEHOLDER.finditer(text):
            name = m.group(1)
            if name not in known:
                raise SpecError(
                    f"node spec {spec.path}: {where}: unknown placeholder {{{name}}}; "
                    f"known: {', '.join('{' + k + '}' for k in sorted(known))}"
                )


# ---------------------------------------------------------------- rendering (pure)


def render(text: str, values: Mapping[str, str]) -> str:
    """`text` with every `{name}` of `values` replaced (others are left as they are)."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def node_values(
    spec: NodeSpec,
    me: NodeAddr,
    peers: Sequence[NodeAddr],
    advertised: tuple[str, int] | None,
    cluster_id: str,
    token: str,
) -> dict[str, str]:
    """Every placeholder's value for node `me` (pure)."""
    adv_host, adv_port = advertised or (me.host, spec.client_port)

    def base(n: NodeAddr) -> dict[str, str]:
        v = {
            "id": str(n.node_id),
            "index": str(n.node_id - 1),
            "name": f"n{n.node_id}",
            "address": n.host,
            "port": str(spec.client_port),
            "nodes": str(len(peers)),
            "bootstrap": ",".join(f"{p.host}:{spec.client_port}" for p in peers),
            "cluster_id": cluster_id,
            "token": token,
            "data_dir": spec.data_dir,
        }
        v.update({f"port_{k}": str(port) for k, port in spec.ports.items()})
        return v

    values = base(me)
    values.update(
        advertised=f"{adv_host}:{adv_port}",
        advertised_host=adv_host,
        advertised_port=str(adv_port),
    )
    for name, template in spec.lists.items():
        values[name] = ",".join(render(template, base(p)) for p in peers)
    return values


# ---------------------------------------------------------------- the system


class SpecSystem(SystemDefaults):
    """Implements clusters.system.BrokerSystem for an image described by a node spec
    (docker backend only)."""

    def __init__(self, spec: NodeSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.registers_brokers = spec.registers_brokers
        self.probe_topic = spec.probe_topic
        self.stop_signal = spec.stop_signal
        self.layout = Layout(stdout="stdout.log", log_files=("stdout.log",))
        self.node_ports = Ports(
            spec.client_port, spec.ports.get("replication", 0), spec.ports.get("controller", 0)
        )
        self.token = secrets.token_hex(16)
        self.image_id: str | None = None

    def prepare(self, auto_install: bool, log: Callable[[str], None]) -> None:
        return None  # the image is found (or pulled) when the containers are made

    def new_cluster_id(self) -> str:
        return new_cluster_id()

    @property
    def version(self) -> str | None:
        if self.spec.version:
            return self.spec.version
        tag = self.spec.image.rpartition("/")[2]
        return tag.partition(":")[2] or None

    def runtime(self) -> str:
        raise Unsupported(
            f"{self.spec.path} describes a container image ({self.spec.image}): "
            "run it with --cluster docker"
        )

    def program(self) -> str:
        return self.runtime()

    def metadata(self) -> dict[str, object]:
        return {
            "system": self.name,
            "system_spec": self.spec.path,
            "image": self.spec.image,
            "image_id": self.image_id,
            "broker_versions": [self.version] if self.version else [],
        }

    def node_files(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        paths: NodePaths,
        client_advertised: tuple[str, int] | None,
    ) -> dict[str, str]:
        return {}

    def format_command(self, paths: NodePaths, cluster_id: str) -> None:
        return None

    def run_command(self, paths: NodePaths, run_id: str, node_name: str) -> list[str]:
        raise Unsupported(f"{self.name}: the image runs its own program")

    def container(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        client_advertised: tuple[str, int] | None,
        cluster_id: str,
        engine: Any,
        say: Callable[[str], None],
    ) -> Container:
        self.image_id = find_image(engine, self.spec, say)
        values = node_values(self.spec, me, peers, client_advertised, cluster_id, self.token)
        return Container(
            image=self.spec.image,
            command=[render(a, values) for a in self.spec.command or ()],
            entrypoint=list(self.spec.entrypoint) if self.spec.entrypoint is not None else None,
            environment={k: render(v, values) for k, v in self.spec.environment.items()},
            data_dir=self.spec.data_dir,
            exec_in_host_tools=self.spec.exec_in_host_tools,
        )

    def node_ready(self, node: Any) -> str:
        if self.spec.ready_tcp is not None:
            try:
                with socket.create_connection((node.address, self.spec.ready_tcp), timeout=2):
                    pass
            except OSError as e:
                return f"port {self.spec.ready_tcp} not accepting connections ({e})"
        values = {"address": node.address, "name": node.name, "id": str(node.node_id)}
        values.update({f"port_{k}": str(p) for k, p in self.spec.ports.items()})
        if self.spec.ready_http:
            url = render(self.spec.ready_http, values)
            try:
                with urllib.request.urlopen(url, timeout=3) as resp:
                    if resp.status != 200:
                        return f"{url} answered {resp.status}"
            except (OSError, ValueError) as e:
                return f"{url}: {e}"
        if self.spec.ready_command:
            cmd = [render(a, values) for a in self.spec.ready_command]
            try:
                node.exec(cmd, check=True, timeout=10)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
                return f"ready command {cmd[0]} failed ({e})"
        return ""

    def fault_limits(self) -> dict[str, str]:
        out = dict(self.spec.unsupported)
        if self.spec.exec_in_host_tools:
            out.setdefault(
                "memory",
                f"{self.name}'s image may lack stress-ng: fault commands run with the host's "
                'tools in the container\'s network namespace only (exec = "host")',
            )
        return out

    def client_profile(self) -> ClientProfile:
        return self.spec.profile

    def replication(self, requested: int, nodes: int) -> int:
        return min(requested, nodes)


def find_image(engine: Any, spec: NodeSpec, say: Callable[[str], None]) -> str:
    """The id of the spec's image in the engine; pulled only when the spec allows it.
    Unsupported (saying how to get it) when it is not there."""
    import docker

    try:
        return str(engine.images.get(spec.image).id)
    except docker.errors.ImageNotFound:
        pass
    if not spec.pull:
        raise Unsupported(
            f"image {spec.image} (node spec {spec.path}) is not in the Docker engine and the "
            "spec says pull = false: load it first (docker load / docker pull into ktrial's "
            "engine) or set pull = true"
        )
    say(f"pulling {spec.image}")
    try:
        return str(engine.images.pull(spec.image).id)
    except docker.errors.APIError as e:
        raise Unsupported(
            f"image {spec.image} (node spec {spec.path}) could not be pulled: {e}"
        ) from None


def load_spec_system(path: str | Path) -> SpecSystem:
    return SpecSystem(load_spec(path))
