"""One worker process and its JSON-lines channel: a request out, its reply back, bounded.

A worker (docs/drivers.md) reads one request per line on its stdin and answers each
with one reply line on its stdout, in order. This module only moves those lines:
it starts the process, writes a request, waits for the reply until a
:class:`..bounded.Deadline` passes (then kills the process: a worker that does not
answer in time is abandoned, like a blocked librdkafka call) and reports a process
that died. What the calls mean is :mod:`.driver`'s business.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..bounded import CallTimeout, Deadline
from .errors import WorkerError, worker_died

# The workers' stderr (panics, startup failures) goes here, one file per ktrial process.
LOG_ENV = "KTRIAL_WORKER_LOG"


def worker_log_path() -> Path:
    given = os.environ.get(LOG_ENV)
    if given:
        return Path(given)
    return Path(tempfile.gettempdir()) / f"ktrial-workers-{os.getpid()}.log"


class Spares:
    """Worker processes started ahead of need, so that a new logical process does not wait
    for its worker's runtime to start (a JVM takes about a second, many seconds when 16
    start at once on two cores). A spare has received nothing: the process that takes it
    still opens its own client with `open`, exactly as with a process started for it.
    Not started beyond `count` at once; `close()` kills those never taken."""

    def __init__(self, argv: list[str], count: int) -> None:
        self.argv = argv
        self.count = count
        self._lock = threading.Lock()
        self._idle: list[WorkerProcess] = []
        self._closed = False

    def take(self, name: str) -> WorkerProcess:
        """A started worker (a spare when one is ready), and a new spare in its place."""
        with self._lock:
            w = self._idle.pop(0) if self._idle else None
            refill = not self._closed and self.count > 0
        if w is None or w.proc.poll() is not None:
            w = WorkerProcess(self.argv, name)
        w.name = name
        if refill:
            self._fill()
        return w

    def _fill(self) -> None:
        while True:
            with self._lock:
                if self._closed or len(self._idle) >= self.count:
                    return
            spare = WorkerProcess(self.argv, "spare")
            with self._lock:
                if self._closed:
                    spare.kill()
                    return
                self._idle.append(spare)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()


class WorkerProcess:
    """A started worker; `request()` is one call, `kill()` a crash, `wait()` its end."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.name = name
        self.log_path = worker_log_path()
        self._buf = bytearray()
        self._next_id = 0
        self.dead = False
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._poller = select.poll()
        self._poller.register(self._out, select.POLLIN | select.POLLHUP | select.POLLERR)

    def request(self, call: str, args: dict[str, Any], dl: Deadline) -> dict[str, Any]:
        """Send one request and return its reply object (``ok`` true or false).

        Raises :class:`CallTimeout` (the process is killed) when `dl` passes first,
        and :class:`WorkerError` (fatal) when the process died or answered garbage.
        """
        if self.dead:
            raise self._died("called after the worker was stopped")
        self._next_id += 1
        msg = {"id": self._next_id, "call": call, **args}
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._in, view)
                view = view[n:]
        except OSError as e:
            raise self._died(f"writing {call}: {e}") from None
        line = self._readline(call, dl)
        try:
            reply = json.loads(line)
        except ValueError:
            self.kill()
            raise self._died(f"{call}: reply is not JSON: {line[:200]!r}") from None
        if not isinstance(reply, dict) or reply.get("id") != self._next_id:
            self.kill()
            raise self._died(f"{call}: reply out of order or malformed: {line[:200]!r}")
        return reply

    def _readline(self, call: str, dl: Deadline) -> bytes:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return line
            if dl.expired():
                self.kill()
                raise CallTimeout(f"worker {self.name}: {call} did not answer in time (killed)")
            if not self._poller.poll(int(dl.slice() * 1000) + 1):
                continue
            try:
                chunk = os.read(self._out, 1 << 16)
            except OSError as e:
                raise self._died(f"reading the reply to {call}: {e}") from None
            if not chunk:
                raise self._died(f"no reply to {call}")
            self._buf += chunk

    def _died(self, what: str) -> WorkerError:
        self.kill()
        code = self.proc.returncode
        return worker_died(
            f"worker {self.name}: {what} (exit status {code}; its stderr is in {self.log_path})"
        )

    def kill(self) -> None:
        """Stop the process now (SIGKILL): a client crash, nothing flushed."""
        self.dead = True
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()
        self.wait(5.0)

    def wait(self, timeout_s: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout_s)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
