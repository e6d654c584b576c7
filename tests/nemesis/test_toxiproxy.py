"""The Toxiproxy wrapper against a real toxiproxy-server: several servers at once, proxies,
toxics, request timeouts, and the server leaving nothing behind."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from ktrial.clusters.procs import wait_stopped
from ktrial.nemesis.clean import marked_processes
from ktrial.nemesis.proxies import plan_proxies
from ktrial.nemesis.toxiproxy import (
    ENV_MARK,
    NotFound,
    ProxyExists,
    ToxiproxyClient,
    ToxiproxyError,
    ToxiproxyServer,
    default_binary,
)

pytestmark = pytest.mark.skipif(
    not default_binary().exists(), reason="toxiproxy-server not installed (scripts/setup.sh)"
)


@pytest.fixture
def server() -> Iterator[ToxiproxyServer]:
    with ToxiproxyServer(timeout=2.0) as s:
        yield s


@pytest.fixture
def echo() -> Iterator[int]:
    """A TCP echo server on loopback (the proxies' upstream)."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen()
    lsock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except OSError:
                continue
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield lsock.getsockname()[1]
    stop.set()
    t.join(2)
    lsock.close()


def test_two_servers_are_independent(server: ToxiproxyServer, echo: int) -> None:
    with ToxiproxyServer() as other:
        a, b = server.client(), other.client()
        a.create_proxy("n1", "127.0.0.1:0", f"127.0.0.1:{echo}")
        assert set(a.proxies()) == {"n1"}
        assert b.proxies() == {}
        with pytest.raises(ProxyExists):
            a.create_proxy("n1", "127.0.0.1:0", f"127.0.0.1:{echo}")


def test_proxy_forwards_and_toxics_come_and_go(server: ToxiproxyServer, echo: int) -> None:
    api = server.client()
    plan = plan_proxies(["n1"])
    api.create_proxy("n1", plan.listen("n1"), f"127.0.0.1:{echo}")
    with socket.create_connection(("127.0.0.1", plan.ports["n1"]), timeout=5) as s:
        s.sendall(b"ping")
        assert s.recv(4) == b"ping"
    api.add_toxic("n1", "lat", "latency", {"latency": 100})
    assert [(t["name"], t["type"], t["attributes"]["latency"]) for t in api.toxics("n1")] == [
        ("lat", "latency", 100)
    ]
    api.remove_toxic("n1", "lat")
    assert api.toxics("n1") == []
    with pytest.raises(NotFound):
        api.remove_toxic("n1", "lat")
    api.add_toxic("n1", "cut", "timeout", {"timeout": 0})
    api.reset()
    assert api.toxics("n1") == []


def test_requests_time_out_when_the_server_hangs(server: ToxiproxyServer) -> None:
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        # SIGSTOP stops the threads one after another: wait for all of them
        assert wait_stopped(server.pid, 10.0)
        with pytest.raises(ToxiproxyError, match="timed out"):
            ToxiproxyClient(server.host, server.port or 0, timeout=0.5).proxies()
    finally:
        os.kill(server.pid, signal.SIGCONT)


def test_server_is_marked_and_stop_leaves_no_process() -> None:
    s = ToxiproxyServer()
    s.start()
    pid = s.pid
    assert (pid, os.getpid()) in set(marked_processes(ENV_MARK))
    s.stop()
    s.stop()  # idempotent
    assert pid not in {p for p, _ in marked_processes(ENV_MARK)}


def test_missing_binary_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(ToxiproxyError, match=r"scripts/setup\.sh"):
        ToxiproxyServer(binary=tmp_path / "nope").start()
