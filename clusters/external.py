"""The `external` backend: brokers ktrial did not start (MSK, Redpanda, a staging cluster).

ktrial knows only the bootstrap servers. The brokers are discovered through the admin
API (one node per broker id: ``n<id>``). Process faults run the user's *hooks*: shell
commands for kill / start / stop / pause / resume, e.g.

    --hook kill='ssh {host} sudo systemctl kill -s KILL kafka'
    --hook start='ssh {host} sudo systemctl start kafka'

Placeholders ``{name}`` (n1), ``{id}`` (broker id), ``{host}`` and ``{port}`` (the
broker's advertised client address) are filled in shell-quoted (a host name from
broker metadata can never inject a command; a placeholder inside quotes is refused),
and the same values are in the environment as KTRIAL_NODE, KTRIAL_NODE_ID,
KTRIAL_HOST, KTRIAL_PORT (quote those yourself: "$KTRIAL_HOST"). A fault whose
hooks are missing is refused before the run starts, naming the flag to add.
Partitions, packet loss and memory pressure need access to the brokers' network and
cgroups: unavailable here. Link faults (toxic) work through Toxiproxy listeners the
run's own connections are redirected to (clusters/linkproxy.py), when ktrial runs as
root with iptables.

Teardown deletes the topics this run created (unless ``keep_topics``): nothing is
left behind on somebody else's cluster.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import linkproxy
from .admin import AdminCluster
from .base import Unsupported
from .security import Security

log = logging.getLogger(__name__)

HOOKS = ("kill", "start", "stop", "pause", "resume")
# Fault family -> the hooks it needs (its start and its undo).
FAMILY_HOOKS: dict[str, tuple[str, ...]] = {
    "kill": ("kill", "start"),
    "stop": ("stop", "start"),
    "restart": ("stop", "start"),
    "pause": ("pause", "resume"),
}
NO_ACCESS = {
    "partition": "ktrial cannot reach an external cluster's network (no namespaces)",
    "loss": "ktrial cannot reach an external cluster's network (no namespaces)",
    "memory": "ktrial cannot reach an external cluster's memory cgroups",
}


SAMPLE_FIELDS: dict[str, Any] = {"name": "n1", "id": 1, "host": "h", "port": 9092}


class HookError(RuntimeError):
    """A user hook failed; the message names the hook, the node and the command's output."""


def parse_hooks(pairs: Sequence[str]) -> dict[str, str]:
    """`action=command` strings (from --hook) into a dict; errors name the bad item."""
    out: dict[str, str] = {}
    for pair in pairs:
        action, sep, cmd = pair.partition("=")
        action = action.strip()
        if not sep or not cmd.strip():
            raise ValueError(f"--hook expects ACTION=COMMAND, got {pair!r}")
        if action not in HOOKS:
            raise ValueError(f"--hook {action!r}: unknown action; known: {', '.join(HOOKS)}")
        render_hook(cmd, SAMPLE_FIELDS)  # a bad or quoted placeholder: refused here
        out[action] = cmd
    return out


def render_hook(template: str, fields: Mapping[str, Any]) -> str:
    """Fill {name} {id} {host} {port} into a hook command (pure), each value shell-quoted.

    The values come from broker metadata, which ktrial does not control: a host name
    such as ``h1;touch pwned`` must reach the command as one word, never as shell
    syntax. So every value is passed through shlex.quote, and a placeholder written
    inside quotes (where that quoting would be undone) is refused, as is a bad one.
    """
    if "\x00" in template:
        raise ValueError(f"hook {template!r}: holds a NUL character")
    marks = {k: f"\x00{i}\x00" for i, k in enumerate(fields)}
    try:
        marked = template.format(**marks)
    except (KeyError, IndexError, ValueError, AttributeError) as e:
        raise ValueError(
            f"hook {template!r}: bad placeholder ({e}); use {{name}} {{id}} {{host}} {{port}} "
            "(double the braces for literal ones)"
        ) from None
    quoted = _quoted_placeholder(marked, list(marks))
    if quoted is not None:
        raise ValueError(
            f"hook {template!r}: placeholder {{{quoted}}} is inside quotes; write it bare "
            "(ktrial shell-quotes every value it fills in)"
        )
    out = marked
    for k, mark in marks.items():
        out = out.replace(mark, shlex.quote(str(fields[k])))
    return out


def _quoted_placeholder(text: str, names: list[str]) -> str | None:
    """The first placeholder mark (\\0<i>\\0) in `text` that stands inside single or double
    quotes or after a backslash, as sh reads it; None if all stand bare."""
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\x00":
            end = text.index("\x00", i + 1)
            if quote:
                return names[int(text[i + 1 : end])]
            i = end + 1
            continue
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            if i + 1 < len(text) and text[i + 1] == "\x00":
                end = text.index("\x00", i + 2)
                return names[int(text[i + 2 : end])]
            i += 1  # the escaped character
        elif quote == '"':
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote = c
        i += 1
    return None


class ExternalNode:
    """One broker of an external cluster; process operations go through hooks."""

    def __init__(self, cluster: ExternalCluster, node_id: int, host: str, port: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.name = f"n{node_id}"
        self.host, self.port = host, port
        # What ktrial last did to it: an external broker is assumed running until then.
        self.state = "running"

    @property
    def address(self) -> str:
        return self.host

    @property
    def client_bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def direct_client(self) -> str:
        """Where a Toxiproxy in front of this broker connects (clusters/linkproxy.py)."""
        return self.client_bootstrap

    @property
    def pid(self) -> int | None:
        return None

    @property
    def cgroup(self) -> str | None:
        return None

    @property
    def paused(self) -> bool:
        return self.state == "paused"

    @property
    def log_paths(self) -> Sequence[Path]:
        return []

    def is_frozen(self) -> bool:
        """Paused as far as ktrial knows: the pause hook returned successfully."""
        return self.state == "paused"

    def is_running(self) -> bool:
        return self.state != "stopped"

    def fields(self) -> dict[str, Any]:
        return {"name": self.name, "id": self.node_id, "host": self.host, "port": self.port}

    def _hook(self, action: str, timeout: float = 120.0) -> str:
        template = self.cluster.hooks.get(action)
        if template is None:
            raise Unsupported(
                f"external cluster: no {action} hook for {self.name}; add "
                f"--hook {action}='COMMAND' (placeholders {{name}} {{id}} {{host}} {{port}})"
            )
        cmd = render_hook(template, self.fields())
        env = dict(
            os.environ,
            KTRIAL_NODE=self.name,
            KTRIAL_NODE_ID=str(self.node_id),
            KTRIAL_HOST=self.host,
            KTRIAL_PORT=str(self.port),
        )
        log.info("%s: %s hook: %s", self.name, action, cmd)
        try:
            p = subprocess.run(
                ["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise HookError(
                f"{action} hook for {self.name} did not finish within {timeout:.0f}s: {cmd}"
            ) from None
        if p.returncode != 0:
            raise HookError(
                f"{action} hook for {self.name} exited with {p.returncode}: {cmd}\n"
                f"{(p.stderr or p.stdout).strip()[-500:]}"
            )
        return p.stdout

    def start(self) -> None:
        self._hook("start")
        self.state = "running"

    def stop(self, timeout: float = 30.0) -> None:
        self._hook("stop", timeout=max(timeout, 1.0) + 30.0)
        self.state = "stopped"

    def kill(self) -> None:
        self._hook("kill")
        self.state = "stopped"

    def pause(self) -> None:
        self._hook("pause")
        self.state = "paused"

    def resume(self) -> None:
        self._hook("resume")
        self.state = "running"

    def restart(self) -> None:
        self.stop()
        self.start()

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        raise Unsupported(f"external cluster: cannot run commands inside {self.name}")


class ExternalCluster(AdminCluster[ExternalNode]):
    """Brokers at `bootstrap`, discovered through the admin API; faults through hooks."""

    kind = "external"
    admin_logger = "ktrial.clusters.external"
    ready_poll_s = 1.0

    def __init__(
        self,
        bootstrap: str,
        hooks: Mapping[str, str] | None = None,
        keep_topics: bool = False,
        admin_config: Mapping[str, Any] | None = None,
        security: Security | None = None,
    ) -> None:
        super().__init__()
        if not bootstrap.strip():
            raise ValueError("external cluster: --bootstrap HOST:PORT[,HOST:PORT...] is required")
        self._bootstrap = bootstrap.strip()
        self.hooks = dict(hooks or {})
        for action, template in self.hooks.items():
            if action not in HOOKS:
                raise ValueError(f"external cluster: unknown hook {action!r}")
            render_hook(template, SAMPLE_FIELDS)
        self.keep_topics = keep_topics
        self.admin_config = dict(admin_config or {})
        self.security = security or Security()
        self.created_topics: list[str] = []
        self.client_advertise = None  # brokers advertise themselves (linkproxy redirects)
        self.link: dict[str, Any] | None = None  # the link proxies' metadata, when in front
        self.broker_versions: list[str] = []

    # ------------------------------------------------------------ Cluster interface
    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    def _admin_config(self) -> Mapping[str, Any]:
        return {**self.security.librdkafka(), **self.admin_config}

    def start(self, wait: bool = True, timeout: float = 60.0) -> None:
        """Nothing to start: discover the brokers (waiting up to `timeout` if asked)."""
        if wait:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the admin API answers with the brokers and a controller; nodes discovered."""
        super().wait_ready(timeout)

    def _ready_step(self, admin: Any) -> str:
        desc = admin.describe_cluster(request_timeout=5).result(10)
        brokers = sorted(desc.nodes, key=lambda n: n.id)
        if not brokers:
            return "no brokers in the cluster description"
        old = {n.node_id: n for n in self._nodes}
        self._nodes = [old.get(b.id) or ExternalNode(self, b.id, b.host, b.port) for b in brokers]
        return ""

    def _not_ready(self, timeout: float, why: str) -> Exception:
        return RuntimeError(
            f"external cluster at {self._bootstrap} not reachable within "
            f"{timeout:.0f}s ({why}); check --bootstrap and that this machine can "
            "reach every broker's advertised address"
        )

    def _replication(self, replication_factor: int) -> int:
        """Capped at the broker count (an external cluster may be smaller than 3)."""
        return max(1, min(replication_factor, len(self._nodes) or replication_factor))

    def _created(self, topics: list[str]) -> None:
        self.created_topics += topics

    def unsupported_faults(self) -> dict[str, str]:
        """Fault family -> why it cannot run here (the nemesis refuses it before the run)."""
        out = dict(NO_ACCESS)
        link = linkproxy.unavailable()
        if link:
            out["toxic"] = link
        for family, needed in FAMILY_HOOKS.items():
            missing = [h for h in needed if h not in self.hooks]
            if missing:
                out[family] = "external cluster: add " + " ".join(
                    f"--hook {h}='COMMAND'" for h in missing
                )
        return out

    def _heal_node(self, node: ExternalNode) -> None:
        """Resume what ktrial paused (what it stopped is started by `heal`)."""
        if node.state == "paused":
            node.resume()

    def metadata(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "bootstrap_servers": self._bootstrap,
            "nodes": len(self._nodes),
            "addresses": {n.name: n.client_bootstrap for n in self._nodes},
            "hooks": dict(self.hooks),
            "broker_versions": self.broker_versions,
            "unavailable_faults": sorted(self.unsupported_faults()),
            **({"link_proxies": self.link} if self.link else {}),
        }

    def collect_logs(self, dest: Path) -> None:
        """External brokers' logs are not ktrial's to copy."""

    def teardown(self) -> None:
        """Delete the topics this run created (unless keep_topics); safe to call twice."""
        topics, self.created_topics = self.created_topics, []
        if not topics or self.keep_topics:
            return
        try:
            admin = self._admin()  # referenced until the futures resolve
            futures = admin.delete_topics(topics, operation_timeout=30)
            for t, fut in futures.items():
                try:
                    fut.result(60)
                except Exception as e:
                    log.warning("could not delete topic %s: %s", t, e)
            # Deletion is asynchronous on the brokers: wait (bounded) until it shows.
            # Every broker's metadata cache must drop them: three clean answers in a row.
            deadline, clean = time.monotonic() + 30, 0
            while time.monotonic() < deadline:
                clean = 0 if set(topics) & set(admin.list_topics(timeout=10).topics) else clean + 1
                if clean >= 3:
                    return
                time.sleep(0.5)
            log.warning("topics %s still listed 30 s after their deletion", topics)
        except Exception as e:
            log.warning("could not delete this run's topics %s: %s", topics, e)

    def __enter__(self) -> ExternalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()
