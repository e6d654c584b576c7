"""A Toxiproxy server started by ktrial, and a per-server HTTP client with timeouts.

Why not toxiproxy-python directly: its ``APIConsumer`` keeps host and port as class
attributes, and ``Toxiproxy``/``Proxy`` call that module-level class by name, so two
servers (or two clusters) cannot be used at once without swapping a global under a
lock; and no call path through ``Proxy`` lets a request timeout through, so a hung
server would hang the nemesis and its heal. The Toxiproxy HTTP API is small (a few
JSON endpoints), so :class:`ToxiproxyClient` speaks it with ``http.client``, one
instance per server, every request bounded by a timeout. The exception types of
toxiproxy-python (``ProxyExists``, ``NotFound``, ``InvalidToxic``) are reused when it
is installed, so code written against it keeps catching the same errors.

The server binary is ``$KTRIAL_CACHE/bin/toxiproxy-server`` (default cache
``~/.cache/ktrial``), built by scripts/setup.sh from the Go module proxy. Every server
ktrial starts carries ``KTRIAL_TOXIPROXY=<owner pid>`` in its environment so
``ktrial cluster clean`` can find servers left by a killed ktrial, and nothing else.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_MARK = "KTRIAL_TOXIPROXY"

try:  # reuse the wrapper's exception types when it is installed
    from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists
except Exception:  # pragma: no cover - toxiproxy-python is a declared dependency
    ProxyExists = type("ProxyExists", (Exception,), {})
    NotFound = type("NotFound", (Exception,), {})
    InvalidToxic = type("InvalidToxic", (Exception,), {})


class ToxiproxyError(RuntimeError):
    """The Toxiproxy server failed or answered an unexpected status."""


def cache_dir() -> Path:
    return Path(os.environ.get("KTRIAL_CACHE") or Path.home() / ".cache" / "ktrial")


def default_binary() -> Path:
    return cache_dir() / "bin" / "toxiproxy-server"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ToxiproxyClient:
    """The Toxiproxy HTTP API of one server; each request times out after `timeout` s."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if payload else {}
            headers["User-Agent"] = "ktrial"
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except OSError as e:
            raise ToxiproxyError(
                f"Toxiproxy at {self.host}:{self.port}: {method} {path} failed: {e}"
            ) from e
        finally:
            conn.close()
        if resp.status == 409:
            raise ProxyExists(raw.decode(errors="replace"))
        if resp.status == 404:
            raise NotFound(raw.decode(errors="replace"))
        if resp.status == 400:
            raise InvalidToxic(raw.decode(errors="replace"))
        if resp.status >= 300:
            raise ToxiproxyError(
                f"Toxiproxy at {self.host}:{self.port}: {method} {path} -> {resp.status} "
                f"{raw.decode(errors='replace')[:200]}"
            )
        return json.loads(raw) if raw.strip() else None

    def version(self) -> str:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("GET", "/version")
            return conn.getresponse().read().decode().strip()
        finally:
            conn.close()

    def proxies(self) -> dict[str, dict[str, Any]]:
        return dict(self._request("GET", "/proxies") or {})

    def create_proxy(self, name: str, listen: str, upstream: str) -> dict[str, Any]:
        return dict(
            self._request(
                "POST",
                "/proxies",
                {"name": name, "listen": listen, "upstream": upstream, "enabled": True},
            )
        )

    def delete_proxy(self, name: str) -> None:
        self._request("DELETE", f"/proxies/{name}")

    def set_enabled(self, name: str, enabled: bool) -> None:
        self._request("POST", f"/proxies/{name}", {"enabled": enabled})

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return list(self._request("GET", f"/proxies/{proxy}/toxics") or [])

    def add_toxic(
        self,
        proxy: str,
        name: str,
        type_: str,
        attributes: dict[str, Any],
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> dict[str, Any]:
        body = {
            "name": name,
            "type": type_,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": attributes,
        }
        return dict(self._request("POST", f"/proxies/{proxy}/toxics", body))

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._request("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._request("POST", "/reset")


@dataclass
class ToxiproxyServer:
    """A toxiproxy-server process on the host, API on `host`:`port` (free port by default)."""

    binary: Path | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    log_path: Path | None = None
    timeout: float = 5.0
    _proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: float = 15.0) -> ToxiproxyClient:
        binary = Path(self.binary or default_binary())
        if not binary.exists():
            raise ToxiproxyError(
                f"no Toxiproxy server at {binary}; run scripts/setup.sh (it builds it from the "
                "Go module proxy) or set $KTRIAL_CACHE"
            )
        self.port = self.port or free_port(self.host)
        out: Any = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        env = dict(os.environ, **{ENV_MARK: str(os.getpid())})
        try:
            self._proc = subprocess.Popen(
                [str(binary), "-host", self.host, "-port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # Ctrl-C goes to ktrial, which stops us in order
            )
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        client = self.client()
        deadline = time.monotonic() + wait
        while True:
            if self._proc.poll() is not None:
                raise ToxiproxyError(
                    f"toxiproxy-server exited with {self._proc.returncode} at start "
                    f"(port {self.port}); see {self.log_path or 'its output'}"
                )
            try:
                client.version()
                return client
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ToxiproxyError(
                        f"toxiproxy-server did not answer on {self.host}:{self.port} "
                        f"within {wait} s"
                    ) from None
                time.sleep(0.1)

    def client(self) -> ToxiproxyClient:
        if self.port is None:
            raise ToxiproxyError("the Toxiproxy server is not started")
        return ToxiproxyClient(self.host, self.port, self.timeout)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def died(self) -> int | None:
        """The exit status if the server exited without `stop` (negative: the signal that
        killed it), else None (running, never started, or stopped by us)."""
        return None if self._proc is None else self._proc.poll()

    def stop(self) -> None:
        """Terminate the server (SIGKILL after 5 s); idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)

    def __enter__(self) -> ToxiproxyServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
