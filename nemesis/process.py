"""Process faults: kill (SIGKILL), stop (SIGTERM), pause (SIGSTOP / freezer), rolling restart.

The undo of kill and stop is a start; the delay before the restart is how long the
schedule holds the fault.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Mapping
from typing import Any

from ..clusters import procs
from ..clusters.base import Node
from . import params
from .base import Context, FaultBase, TargetSpec

log = logging.getLogger("ktrial.nemesis")


def process_state(pid: int | None) -> str | None:
    """The state letter (R, S, D, T, Z, ...) of the whole process, None if gone.

    'T' only once every thread stopped (see :func:`ktrial.clusters.procs.process_state`).
    """
    if pid is None:
        return None
    return procs.process_state(pid) or None


def wait_state(pid: int | None, state: str, timeout: float) -> bool:
    """Wait until /proc/<pid>/stat shows `state`; False on timeout or if the pid is gone."""
    deadline = time.monotonic() + timeout
    while True:
        s = process_state(pid)
        if s == state:
            return True
        if s is None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def is_paused(node: Node) -> bool:
    flag = getattr(node, "paused", None)
    if isinstance(flag, bool) and flag:
        return True
    remote = getattr(node, "process_state", None)  # a node on another host (ssh)
    if callable(remote):
        return bool(remote() == "T")
    return process_state(node.pid) == "T"


def ensure_running(node: Node) -> str | None:
    """Resume a paused node, start a dead one; return what was done (None: nothing)."""
    if node.is_running():
        if is_paused(node):
            node.resume()
            return "resume"
        return None
    node.start()
    return "start"


def process_scope(nodes: Mapping[str, Node], chosen: list[str]) -> list[str]:
    """Every node a process fault on `chosen` acts on: more than `chosen` when nodes
    share one process (kfake's brokers: a node's ``process_nodes``)."""
    scope = list(chosen)
    for name in chosen:
        for other in getattr(nodes[name], "process_nodes", ()) or ():
            if other not in scope:
                scope.append(other)
    return scope


def note_scope(ctx: Context, value: dict[str, Any], chosen: list[str]) -> None:
    """Record (``affects``) and remember for the heal the nodes a shared process adds."""
    scope = process_scope(ctx.nodes(), chosen)
    ctx.touched.update(scope)
    if scope != chosen:
        value["affects"] = scope


class KillFault(FaultBase):
    """SIGKILL (or, with graceful=True, SIGTERM and wait) the targets; stop restarts them."""

    name = "kill"

    def __init__(self, ctx: Context, graceful: bool = False) -> None:
        self.name = "stop" if graceful else "kill"
        super().__init__(ctx)
        self.graceful = graceful
        self.nodes: list[str] = []

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        chosen = self.resolve(targets)
        nodes = self.ctx.nodes()
        self.nodes = chosen
        self.ctx.touched.update(chosen)
        value = {"nodes": chosen, "signal": "SIGTERM" if self.graceful else "SIGKILL"}
        note_scope(self.ctx, value, chosen)
        self.info = value
        for name in chosen:
            if self.graceful:
                nodes[name].stop()
            else:
                nodes[name].kill()
        self.record("stop" if self.graceful else "kill", value)
        return value

    def _stop(self) -> None:
        nodes = self.ctx.nodes()
        started, errors = [], []
        for name in self.nodes:
            try:
                if ensure_running(nodes[name]) is not None:
                    started.append(name)
            except Exception as e:
                errors.append(f"{name}: start failed: {e}")
        value: dict[str, Any] = {"nodes": started}
        if errors:
            value["errors"] = errors
        self.record("start", value)


class PauseFault(FaultBase):
    """Freeze the targets (SIGSTOP or the cgroup freezer, as the node implements pause)."""

    name = "pause"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.nodes: list[str] = []

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        chosen = self.resolve(targets)
        nodes = self.ctx.nodes()
        self.nodes = chosen
        self.ctx.touched.update(chosen)
        self.info = {"nodes": chosen}
        note_scope(self.ctx, self.info, chosen)
        for name in chosen:
            nodes[name].pause()
        self.info["frozen"] = [n for n in chosen if _frozen(nodes[n])]
        self.record("pause", self.info)
        return self.info

    def _stop(self) -> None:
        nodes = self.ctx.nodes()
        errors = []
        for name in self.nodes:
            try:
                nodes[name].resume()
            except Exception as e:
                errors.append(f"{name}: resume failed: {e}")
        value: dict[str, Any] = {"nodes": self.nodes}
        if errors:
            value["errors"] = errors
        self.record("resume", value)


def _frozen(node: Node) -> bool:
    """Whether `node` is frozen now, so that the pause op is stamped when it really froze.

    A backend whose pause() returns only once the node is frozen says so with
    ``is_frozen()`` (docker: the freezer reports FROZEN, and its threads then show
    state D, not T; external: the hook returned). Otherwise SIGSTOP takes effect
    asynchronously (every thread must reach the group stop): wait up to 5 s for T.
    """
    is_frozen = getattr(node, "is_frozen", None)
    if callable(is_frozen):
        return bool(is_frozen())
    return wait_state(node.pid, "T", 5.0)


def wait_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError:
            time.sleep(0.3)
    return False


class RollingRestart(FaultBase):
    """Restart the targets (default: all) one after another, waiting for each to listen."""

    name = "restart"

    def __init__(self, ctx: Context, settle: float = 5.0, wait: float = 60.0) -> None:
        super().__init__(ctx)
        self.validate({"settle": settle, "wait": wait})
        self.settle, self.wait = settle, wait
        self.nodes: list[str] = []

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        if "settle" in p:
            params.number("restart", "settle", p["settle"], low=0)
        if "wait" in p:
            params.number("restart", "wait", p["wait"], low=0, low_open=True)

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        chosen = self.resolve(targets, default="all")
        nodes = self.ctx.nodes()
        self.nodes = chosen
        self.ctx.touched.update(chosen)
        self.info = {"nodes": chosen}
        note_scope(self.ctx, self.info, chosen)
        self.record("start-rolling-restart", self.info)
        for name in chosen:
            if self.ctx.halting.is_set():  # a heal or the schedule's end is waiting
                self.info["skipped"] = chosen[chosen.index(name) :]
                break
            node = nodes[name]
            self.record("restart", {"node": name})
            t0 = time.monotonic()
            node.restart()
            # the broker's own listener: a Toxiproxy in front would accept at once
            listener = str(getattr(node, "direct_client", None) or node.client_bootstrap)
            host, _, port = listener.rpartition(":")
            up = wait_port(host, int(port), self.wait)
            self.record(
                "restarted",
                {"node": name, "listening": up, "seconds": round(time.monotonic() - t0, 3)},
            )
            self.ctx.halting.wait(self.settle)
        return self.info

    def _stop(self) -> None:
        nodes = self.ctx.nodes()
        for name in self.nodes:
            try:
                ensure_running(nodes[name])
            except Exception as e:
                log.warning("rolling restart: %s did not come back: %s", name, e)
        value: dict[str, Any] = {"nodes": self.nodes}
        if self.info.get("skipped"):
            value["skipped"] = self.info["skipped"]
        self.record("stop-rolling-restart", value)
