"""Several logical processes in one worker program (its host mode), over one channel.

A worker that starts a runtime per logical process (a JVM each) spends two cores on
runtimes long before the brokers are busy. In host mode (docs/drivers.md, "Several
processes in one JVM") one program, started with ``--host``, serves up to `per_host`
logical processes: every request carries ``proc``, each process's calls run in order on
its own thread in the program, and replies come back in completion order, each with its
``id`` and ``proc``. A :class:`HostedProcess` is one logical process's end of that
channel, with :class:`.process.WorkerProcess`'s interface, so :class:`.driver.WorkerDriver`
uses either alike. A crash (``kill``) is the ``crash`` request: the program ends that
process's client at once (no goodbye), the other processes it hosts keep running.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..bounded import CallTimeout, Deadline
from .errors import WorkerError, worker_died
from .process import worker_log_path

if TYPE_CHECKING:
    from .driver import ClientFacts


class _Waiting:
    """One request's reply slot, under its request id."""

    __slots__ = ("done", "reply", "rid")

    def __init__(self, rid: int) -> None:
        self.rid = rid
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None


class WorkerHost:
    """One started worker program in host mode: writes requests, routes replies by id."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.name = name
        self.log_path = worker_log_path()
        self.procs: set[str] = set()  # the logical processes it serves now
        self._lock = threading.Lock()
        self._waiting: dict[int, _Waiting] = {}
        self._next_id = 0
        self.dead: str | None = None  # why the program is gone
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(
                [*argv, "--host"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
            )
        self._reader = threading.Thread(target=self._read, name=f"{name}-replies", daemon=True)
        self._reader.start()

    def send(self, proc: str, call: str, args: dict[str, Any]) -> _Waiting | None:
        """Write one request for `proc`; the slot its reply will fill (None for `crash`,
        which has no reply). Raises WorkerError when the program is gone."""
        with self._lock:
            if self.dead is not None:
                raise self._died(self.dead)
            self._next_id += 1
            rid = self._next_id
            slot = None if call == "crash" else _Waiting(rid)
            if slot is not None:
                self._waiting[rid] = slot
            data = json.dumps(
                {"id": rid, "proc": proc, "call": call, **args}, separators=(",", ":")
            )
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(data.encode() + b"\n")
                self.proc.stdin.flush()
            except (OSError, ValueError) as e:
                self._waiting.pop(rid, None)
                self._gone(f"writing {call}: {e}")
                raise self._died(self.dead or "") from None
            return slot

    def forget(self, slot: _Waiting) -> None:
        with self._lock:
            self._waiting.pop(slot.rid, None)

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        for line in out:
            try:
                reply = json.loads(line)
                rid = reply["id"]
            except (ValueError, KeyError, TypeError):
                self._gone(f"a reply is not JSON with an id: {line[:200]!r}")
                self.kill()
                return
            with self._lock:
                slot = self._waiting.pop(rid, None) if isinstance(rid, int) else None
            if slot is not None:  # else: the reply of a process that crashed or gave up
                slot.reply = reply
                slot.done.set()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5.0)
        self._gone(f"the program ended (exit status {self.proc.poll()})")

    def _gone(self, why: str) -> None:
        with self._lock:
            if self.dead is None:
                self.dead = why
            waiting, self._waiting = self._waiting, {}
        for slot in waiting.values():
            slot.done.set()  # reply None: the program is gone

    def _died(self, what: str) -> WorkerError:
        return worker_died(
            f"worker host {self.name}: {what} (exit status {self.proc.poll()};"
            f" its stderr is in {self.log_path})"
        )

    def kill(self) -> None:
        """End the program (every process it serves) now."""
        with contextlib.suppress(OSError):
            if self.proc.poll() is None:
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5.0)
        self._gone("killed")
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                with contextlib.suppress(OSError, ValueError):
                    f.close()


class HostedProcess:
    """One logical process served by a :class:`WorkerHost`; a WorkerProcess's interface."""

    def __init__(
        self,
        host: WorkerHost,
        proc: str,
        name: str,
        release: Callable[[HostedProcess], None],
    ) -> None:
        self.host = host
        self.proc_id = proc
        self.name = name
        self.log_path = host.log_path
        self.dead = False
        self._release = release  # frees its place in the host

    def request(self, call: str, args: dict[str, Any], dl: Deadline) -> dict[str, Any]:
        """One call, as WorkerProcess.request: the reply, CallTimeout (the process is
        crashed) or WorkerError (the program died)."""
        if self.dead:
            raise self._died("called after the process was stopped")
        try:
            slot = self.host.send(self.proc_id, call, args)
        except WorkerError:
            self._end()
            raise
        assert slot is not None
        while not slot.done.wait(dl.slice() or 0.001):
            if dl.expired():
                self.host.forget(slot)
                self.kill()
                raise CallTimeout(f"worker {self.name}: {call} did not answer in time (crashed)")
        if slot.reply is None:
            self._end()
            raise self._died(f"no reply to {call}: {self.host.dead}")
        if call == "close":
            self._end()  # the host has let it go
        return slot.reply

    def _died(self, what: str) -> WorkerError:
        return worker_died(
            f"worker {self.name} (in host {self.host.name}): {what};"
            f" the host's stderr is in {self.log_path}"
        )

    def _end(self) -> None:
        if not self.dead:
            self.dead = True
            self._release(self)

    def kill(self) -> None:
        """A crash: the host ends this process's client at once; the others run on."""
        if self.dead:
            return
        with contextlib.suppress(WorkerError):
            self.host.send(self.proc_id, "crash", {})
        self._end()

    def wait(self, timeout_s: float) -> None:
        """Nothing to wait for: a closed process has answered `close` already."""


class HostPool:
    """Worker hosts for one driver's logical processes, `per_host` processes each at most:
    `take()` gives a process a place in a host with room (a new host when none has),
    `close()` ends every host. The same interface as :class:`.process.Spares`."""

    def __init__(self, argv: list[str], per_host: int, observed: ClientFacts | None = None) -> None:
        if per_host < 1:
            raise ValueError(f"processes per host must be at least 1, got {per_host}")
        self.argv = argv
        self.per_host = per_host
        self._lock = threading.Lock()
        self._hosts: list[WorkerHost] = []
        self._started = 0
        self._next = 0
        self._closed = False
        self._observed = observed  # told how many hosts were started

    @property
    def started(self) -> int:
        """How many host programs this pool started (for test.json and the tests)."""
        return self._started

    def take(self, name: str) -> HostedProcess:
        with self._lock:
            if self._closed:
                raise worker_died("pool closed")
            host = next(
                (h for h in self._hosts if h.dead is None and len(h.procs) < self.per_host), None
            )
            if host is None:
                self._started += 1
                host = WorkerHost(self.argv, f"host{self._started}")
                self._hosts.append(host)
                if self._observed is not None:
                    self._observed.hosted(self.per_host, self._started)
            self._next += 1
            proc = f"p{self._next}"
            host.procs.add(proc)
        return HostedProcess(host, proc, name, self._release)

    def _release(self, p: HostedProcess) -> None:
        with self._lock:
            p.host.procs.discard(p.proc_id)
            gone = p.host.dead is not None and not p.host.procs and p.host in self._hosts
            if gone:
                self._hosts.remove(p.host)
        if gone:
            p.host.kill()  # reap the ended program

    def close(self) -> None:
        with self._lock:
            self._closed = True
            hosts, self._hosts = self._hosts, []
        for h in hosts:
            h.kill()
