"""Find a Docker engine, or run ktrial's own dockerd for the lifetime of a cluster.

If an engine answers on the system socket it is used and left alone. Otherwise ktrial
starts its own dockerd with its own data root (under the cache, so built images
persist across runs), exec root, pidfile and socket, and with `--iptables=false
--ip6tables=false --bridge=none`: such a daemon adds no iptables chains, never turns
the FORWARD policy to DROP and creates no default bridge, so stopping it leaves the
host's network as it found it. A small record next to its pidfile names the run that
started it, so `ktrial cluster clean` can stop a daemon whose owner died.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import state as statemod
from .install import cache_root

SYSTEM_SOCKET = Path("/var/run/docker.sock")
LABEL = "ktrial.run"


class EngineError(RuntimeError):
    """No Docker engine could be reached or started; the message says why and what to do."""


@dataclass(frozen=True)
class DaemonPaths:
    """Where ktrial's own dockerd keeps its state."""

    data_root: Path  # images and containers; persists so the image cache survives
    exec_root: Path  # runtime state (short path: unix sockets live below it)
    pidfile: Path
    socket: Path
    log: Path

    @property
    def record(self) -> Path:
        return self.exec_root.parent / "owner.json"

    @property
    def base_url(self) -> str:
        return f"unix://{self.socket}"


def default_paths(cache: Path | None = None, run_dir: Path | None = None) -> DaemonPaths:
    docker_cache = (cache or cache_root()) / "docker"
    if run_dir is None:
        root_run = Path("/run")
        run_dir = (
            root_run / "ktrial" / "docker"
            if os.geteuid() == 0 and root_run.is_dir()
            else docker_cache / "run"
        )
    return DaemonPaths(
        data_root=docker_cache / "data",
        exec_root=run_dir / "exec",
        pidfile=run_dir / "dockerd.pid",
        socket=run_dir / "docker.sock",
        log=docker_cache / "dockerd.log",
    )


def dockerd_args(paths: DaemonPaths, binary: str = "dockerd") -> list[str]:
    """The daemon's command line (pure): its own roots, no iptables, no default bridge."""
    return [
        binary,
        "--data-root",
        str(paths.data_root),
        "--exec-root",
        str(paths.exec_root),
        "--pidfile",
        str(paths.pidfile),
        "--host",
        paths.base_url,
        "--iptables=false",
        "--ip6tables=false",
        "--ip-masq=false",
        "--bridge=none",
        "--userland-proxy=false",
        "--log-level=warn",
    ]


def ping(base_url: str, timeout: float = 5.0) -> Any | None:
    """A connected DockerClient if an engine answers at base_url, else None."""
    import docker

    if base_url.startswith("unix://") and not Path(base_url[7:]).exists():
        return None
    try:
        client = docker.DockerClient(base_url=base_url, timeout=timeout)
        client.ping()
    except Exception:
        return None
    client.api.timeout = 300  # image builds and imports take long
    return client


@dataclass
class Engine:
    """A connected client; `owned` if ktrial started the daemon for this cluster."""

    client: Any
    base_url: str
    owned: bool = False
    pid: int | None = None
    paths: DaemonPaths | None = None

    def close(self) -> None:
        """Disconnect; stop the daemon if we started it and no other run has containers in it."""
        others = False
        if self.owned:
            with contextlib.suppress(Exception):
                others = bool(self.client.containers.list(all=True, filters={"label": LABEL}))
        with contextlib.suppress(Exception):
            self.client.close()
        if self.owned and self.paths is not None and not others:
            stop_daemon(self.paths)


def connect(
    run_id: str,
    paths: DaemonPaths | None = None,
    say: Callable[[str], None] = lambda m: None,
    timeout: float = 60.0,
) -> Engine:
    """The system engine if one answers; else ours if running (another run's); else start ours."""
    client = ping(f"unix://{SYSTEM_SOCKET}")
    if client is not None:
        return Engine(client, f"unix://{SYSTEM_SOCKET}")
    paths = paths or default_paths()
    client = ping(paths.base_url)
    if client is not None:
        return Engine(client, paths.base_url, paths=paths)
    return start_daemon(run_id, paths, say, timeout)


def start_daemon(
    run_id: str, paths: DaemonPaths, say: Callable[[str], None], timeout: float = 60.0
) -> Engine:
    import shutil

    binary = shutil.which("dockerd")
    if binary is None:
        raise EngineError(
            "no Docker engine on /var/run/docker.sock and no dockerd to start: "
            "apt-get install docker.io (or run scripts/setup.sh)"
        )
    if os.geteuid() != 0:
        raise EngineError("starting dockerd needs root (or start a Docker engine yourself)")
    for d in (paths.data_root, paths.exec_root, paths.socket.parent, paths.log.parent):
        d.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        paths.socket.unlink()  # stale socket of a daemon that died
    say(f"starting dockerd (data root {paths.data_root}, log {paths.log})")
    with open(paths.log, "ab") as out:
        proc = subprocess.Popen(
            dockerd_args(paths, binary),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C goes to us; teardown stops it in order
        )
    write_record(paths, proc.pid, run_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        client = ping(paths.base_url)
        if client is not None:
            return Engine(client, paths.base_url, owned=True, pid=proc.pid, paths=paths)
        time.sleep(0.3)
    stop_daemon(paths)
    raise EngineError(
        f"dockerd did not answer on {paths.socket} within {timeout:.0f}s; see {paths.log}"
    )


def write_record(paths: DaemonPaths, pid: int, run_id: str) -> None:
    rec = {
        "pid": pid,
        "start": statemod.proc_start_time(pid),
        "run_id": run_id,
        **statemod.owner_fields(),
    }
    paths.record.parent.mkdir(parents=True, exist_ok=True)
    paths.record.write_text(json.dumps(rec))


def read_record(paths: DaemonPaths) -> dict[str, Any]:
    try:
        data = json.loads(paths.record.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def daemon_pid(paths: DaemonPaths) -> int | None:
    """The pid of our running dockerd (from the record, checked against pid reuse)."""
    rec = read_record(paths)
    pid = rec.get("pid")
    if isinstance(pid, int) and statemod.is_alive(pid, rec.get("start")):
        return pid
    return None


def stop_daemon(paths: DaemonPaths, timeout: float = 30.0) -> None:
    """SIGTERM our dockerd (it stops its containerd), SIGKILL after timeout; drop its files."""
    pid = daemon_pid(paths)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while statemod.is_alive(pid, None) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)
        if statemod.is_alive(pid, None):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for f in (paths.record, paths.socket, paths.pidfile):
        with contextlib.suppress(OSError):
            f.unlink()
    if pid is None or not statemod.is_alive(pid, None):
        import shutil  # runtime state only (empty dirs once the daemon is gone)

        shutil.rmtree(paths.exec_root, ignore_errors=True)


def orphaned(paths: DaemonPaths) -> bool:
    """Our dockerd runs but the run that started it is gone."""
    rec = read_record(paths)
    return daemon_pid(paths) is not None and not statemod.is_alive(
        rec.get("owner_pid"), rec.get("owner_start")
    )
