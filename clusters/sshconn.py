"""One SSH connection per remote host, through the OpenSSH client with connection sharing.

Why the OpenSSH client (``ssh``) and not a Python library (asyncssh, paramiko): it is
already on every control machine, needs no new dependency, and reads the user's own
``~/.ssh/config`` (ProxyJump, agents, certificates, per-host users) exactly as the
user's shell does. ``ControlMaster=auto`` with a ``ControlPath`` in a private
directory makes one TCP+auth handshake per host; every later command is a new channel
on it. A channel still costs a session on the host (0.13-0.2 s on a loaded 2-core
machine), so the backend runs one script per host and step (clusters/ssh.py).

Every command is a POSIX ``sh`` script run as root on the host: as is when the user is
root, else through ``sudo -n``. ssh's own failures (exit 255: the host did not
answer, the connection broke) are retried with backoff for `retry_for` seconds, then
raised as `HostUnreachable`; the listener (`on_unreachable`) hears of every outage
and its end, so a run can record them. A command that ran and failed is not retried.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

SSH_FAILED = 255  # ssh's own exit status: connection or authentication failed
HOST_KEY_POLICIES = ("yes", "accept-new", "no")


class HostUnreachable(RuntimeError):
    """The host did not answer over SSH (after the retries)."""

    def __init__(self, host: str, detail: str) -> None:
        super().__init__(f"host {host} unreachable over SSH: {detail}")
        self.host = host


class RemoteError(RuntimeError):
    """A command ran on the host and failed; the message has its exit status and stderr."""

    def __init__(self, host: str, what: str, returncode: int, stderr: str) -> None:
        tail = stderr.strip().splitlines()[-5:]
        super().__init__(f"{host}: {what} failed (exit {returncode}): {' | '.join(tail)}")
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class SshOptions:
    """How to reach the hosts: user, port, key, the host-key policy, extra -o options."""

    user: str = "root"
    port: int = 22
    identity: str | None = None  # a private key file (-i)
    known_hosts: str | None = None  # a known_hosts file (UserKnownHostsFile)
    host_key_check: str = "yes"  # StrictHostKeyChecking: yes | accept-new | no
    options: Mapping[str, str] = field(default_factory=dict)  # more -o KEY=VALUE
    connect_timeout: float = 5.0

    def __post_init__(self) -> None:
        if self.host_key_check not in HOST_KEY_POLICIES:
            raise ValueError(
                f"host key check {self.host_key_check!r}: use one of {', '.join(HOST_KEY_POLICIES)}"
            )
        if not 0 < self.port < 65536:
            raise ValueError(f"ssh port {self.port} is not a port number")

    def to_dict(self) -> dict[str, object]:
        """For test.json: everything but nothing secret (a key's path is not a secret)."""
        return {
            "user": self.user,
            "port": self.port,
            "identity": self.identity,
            "known_hosts": self.known_hosts,
            "host_key_check": self.host_key_check,
            "options": dict(self.options),
        }


@dataclass(frozen=True)
class HostSpec:
    """One `--node` entry: ``[user@]host[:port]``."""

    host: str
    user: str | None = None
    port: int | None = None


def parse_host(text: str) -> HostSpec:
    """``[user@]host[:port]`` -> HostSpec (pure); ValueError saying what is wrong."""
    raw = text.strip()
    if not raw:
        raise ValueError("an empty host name in --node")
    user = None
    if "@" in raw:
        user, _, raw = raw.rpartition("@")
        if not user:
            raise ValueError(f"host {text!r}: empty user before '@'")
    port = None
    if raw.count(":") == 1:
        raw, _, p = raw.partition(":")
        if not p.isdigit() or not 0 < int(p) < 65536:
            raise ValueError(f"host {text!r}: {p!r} is not a port number")
        port = int(p)
    if not raw or any(c.isspace() or c in "'\"`$;|&<>" for c in raw):
        raise ValueError(f"host {text!r}: not a host name or address")
    return HostSpec(raw, user, port)


def parse_hosts(text: str) -> list[HostSpec]:
    """``h1,h2,...`` -> host specs; refuses duplicates (one node per host)."""
    specs = [parse_host(t) for t in text.split(",") if t.strip()]
    if not specs:
        raise ValueError("--node needs at least one host")
    seen = set()
    for s in specs:
        if s.host in seen:
            raise ValueError(f"host {s.host} is given twice in --node (one node per host)")
        seen.add(s.host)
    return specs


def ssh_argv(spec: HostSpec, opts: SshOptions, control_dir: str | None, remote: str) -> list[str]:
    """The ssh command line running the shell command `remote` on the host (pure)."""
    argv = ["ssh", "-T", "-o", "BatchMode=yes"]
    argv += ["-o", f"ConnectTimeout={max(1, round(opts.connect_timeout))}"]
    argv += ["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
    argv += ["-o", f"StrictHostKeyChecking={opts.host_key_check}"]
    if opts.known_hosts:
        argv += ["-o", f"UserKnownHostsFile={opts.known_hosts}"]
    if control_dir:
        argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={control_dir}/%C"]
        argv += ["-o", "ControlPersist=120"]
    if opts.identity:
        argv += ["-i", opts.identity, "-o", "IdentitiesOnly=yes"]
    for k, v in sorted(opts.options.items()):
        argv += ["-o", f"{k}={v}"]
    argv += ["-p", str(spec.port or opts.port), "-l", spec.user or opts.user, spec.host]
    argv += ["--", remote]
    return argv


def as_root(script: str, user: str) -> str:
    """The remote command running `script` with sh, through ``sudo -n`` unless root (pure)."""
    sh = f"sh -c {shlex.quote(script)}"
    return sh if user == "root" else f"sudo -n {sh}"


# (host, outage text or None once it answers again)
Listener = Callable[[str, str | None], None]


class SshHost:
    """Commands on one host over a shared SSH connection (see the module docstring)."""

    def __init__(
        self,
        spec: HostSpec,
        opts: SshOptions,
        control_dir: str | None = None,
        retry_for: float = 20.0,
    ) -> None:
        self.spec = spec
        self.opts = opts
        self.control_dir = control_dir
        self.retry_for = retry_for
        self.on_unreachable: Listener | None = None
        # hears of every command given up on (the host stayed unreachable): (host, why)
        self.on_gave_up: Callable[[str, str], None] | None = None
        self._down: str | None = None  # the outage being reported, if any
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.spec.host

    @property
    def user(self) -> str:
        return self.spec.user or self.opts.user

    def argv(self, script: str) -> list[str]:
        return ssh_argv(self.spec, self.opts, self.control_dir, as_root(script, self.user))

    def _note(self, outage: str | None) -> None:
        with self._lock:
            changed = (outage is None) != (self._down is None)
            self._down = outage
        if changed and self.on_unreachable is not None:
            with contextlib.suppress(Exception):
                self.on_unreachable(self.name, outage)

    def _gave_up(self, why: str) -> None:
        if self.on_gave_up is not None:
            with contextlib.suppress(Exception):
                self.on_gave_up(self.name, why)

    def run(
        self,
        script: str,
        input: bytes | None = None,
        timeout: float = 30.0,
        check: bool = True,
        what: str | None = None,
        retry: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run `script` (sh) as root on the host; retry ssh's own failures with backoff."""
        deadline = time.monotonic() + (self.retry_for if retry else 0.0)
        delay = 0.25
        while True:
            try:
                proc = subprocess.run(
                    self.argv(script), input=input, capture_output=True, timeout=timeout
                )
            except subprocess.TimeoutExpired as e:
                self._gave_up(f"no answer within {timeout:.0f}s")
                raise HostUnreachable(self.name, f"no answer within {timeout:.0f}s") from e
            if proc.returncode != SSH_FAILED or _ran(proc.stderr):
                self._note(None)
                break
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            detail = err[-1] if err else "ssh exited with status 255"
            self._note(detail)
            if time.monotonic() + delay > deadline:
                self._gave_up(detail)
                raise HostUnreachable(self.name, detail)
            time.sleep(delay)
            delay = min(delay * 2, 4.0)
        if check and proc.returncode != 0:
            raise RemoteError(
                self.name,
                what or script.split("\n", 1)[0][:80],
                proc.returncode,
                proc.stderr.decode(errors="replace"),
            )
        return proc

    def out(self, script: str, **kw: object) -> str:
        """stdout of `script` as text."""
        return self.run(script, **kw).stdout.decode(errors="replace")  # type: ignore[arg-type]

    def close(self) -> None:
        """End the shared connection (no-op without one)."""
        if not self.control_dir:
            return
        argv = ssh_argv(self.spec, self.opts, self.control_dir, "true")
        argv.insert(1, "-O")
        argv.insert(2, "exit")
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv[: argv.index("--")], capture_output=True, timeout=10)


def _ran(stderr: bytes) -> bool:
    """Whether a 255 came from the remote command itself rather than from ssh: ssh
    prints its own failures, a remote `exit 255` prints nothing of ssh's."""
    text = stderr.decode(errors="replace").lower()
    markers = ("ssh:", "connection", "permission denied", "host key", "mux_client", "broken pipe")
    return not any(m in text for m in markers)


CONTROL_PREFIX = "ktrial-ssh-"


def control_dir(run_id: str = "") -> str:
    """A private, short directory for the control sockets (paths must stay < 108 bytes),
    ``/tmp/ktrial-ssh-<runid>-*`` for a run (so a clean finds a killed run's)."""
    prefix = f"{CONTROL_PREFIX}{run_id}-" if run_id else CONTROL_PREFIX
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


def close_all(hosts: Sequence[SshHost], directory: str | None) -> None:
    for h in hosts:
        h.close()
    if directory:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
