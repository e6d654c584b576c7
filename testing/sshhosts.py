"""Remote hosts on this machine, for the ssh backend's tests and demos.

`SshHosts(n)` makes n "hosts": each a network namespace on a bridge of its own, with
its own address, and an sshd (Debian's openssh-server) running in it with its own
config, host key, log and pid file, listening only on that address, no PAM, root login
with a key only. The client key and a known_hosts file holding the hosts' keys are
generated per harness in a temporary directory. Each sshd also runs in a private mount
namespace in which a directory of the harness is bind-mounted on ``/var/tmp``, so every
host has a /var/tmp of its own (where the ssh backend keeps its files) and an upload to
one host is not seen by the others. ktrial, in the root namespace, reaches a host only
over SSH (the bridge gives the control machine the subnet's first address).

Names (none is ktrial's own `kt-`/`ktrial-<runid>` marker, so `cluster clean` never
takes the harness for a leftover): bridge ``ks-<id>``, namespaces ``ks-<id>-h<i>``,
veths ``ks-<id>-v<i>[p]``, a FORWARD rule commented ``ktrial-sshhosts:<id>``.
Everything is removed on exit (processes in the namespaces are killed first).

Demo: ``sudo python -m ktrial.testing.sshhosts 3`` prints the `ktrial run` flags
reaching the hosts and keeps them until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from ..clusters import netns

SSHD = "/usr/sbin/sshd"
PREFIX = "ks-"
RULE_COMMENT = "ktrial-sshhosts:"


@dataclass
class Host:
    name: str  # h1, h2, ...
    address: str
    netns: str
    dir: Path  # its config, keys, log, and the directory mounted on its /var/tmp
    proc: subprocess.Popen[bytes] | None = None

    @property
    def var_tmp(self) -> Path:
        return self.dir / "var-tmp"


def _run(cmd: list[str], check: bool = True) -> str:
    return netns.run(cmd, check=check)


class SshHosts:
    """n sshd hosts in namespaces; a context manager (see the module docstring)."""

    def __init__(self, n: int = 3) -> None:
        if not netns.is_root():
            raise PermissionError("the ssh test hosts need root (namespaces, a bridge, sshd)")
        if not Path(SSHD).exists():
            raise FileNotFoundError(f"{SSHD} missing: apt-get install openssh-server")
        self.n = n
        self.id = secrets.token_hex(3)
        self.bridge = f"{PREFIX}{self.id}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"ktrial-sshhosts-{self.id}."))
        self.hosts: list[Host] = []
        self.subnet = ""
        self._rule = [
            "FORWARD", "-i", self.bridge, "-o", self.bridge,
            "-m", "comment", "--comment", f"{RULE_COMMENT}{self.id}", "-j", "ACCEPT",
        ]  # fmt: skip

    # ------------------------------------------------------------ what tests use

    @property
    def identity(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def nodes(self) -> str:
        return ",".join(h.address for h in self.hosts)

    def cli_args(self) -> list[str]:
        """The `ktrial run` / `ktrial cluster clean` flags that reach these hosts."""
        return [
            "--cluster", "ssh", "--node", self.nodes,
            "--ssh-identity", str(self.identity), "--ssh-known-hosts", str(self.known_hosts),
        ]  # fmt: skip

    def ssh(self, host: Host, command: str) -> subprocess.CompletedProcess[str]:
        """Run `command` on a host over SSH (as a test would check something there)."""
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.known_hosts}"]
        argv += ["-o", "StrictHostKeyChecking=yes", "-i", str(self.identity), "-l", "root"]
        argv += [host.address, "--", command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"ktrial-sshhosts-{self.id}",
             "-f", str(self.identity)],
            check=True, capture_output=True,
        )  # fmt: skip
        with netns.subnet_lock():
            sub = netns.pick_subnet(netns.used_networks())
            self.subnet = str(sub)
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            _run(["ip", "addr", "add", f"{netns.host_address(sub)}/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])
        netns.add_rule(self._rule)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        known = []
        for i in range(1, self.n + 1):
            host = self._make_host(i, sub)
            self.hosts.append(host)
            pub = (host.dir / "ssh_host_ed25519_key.pub").read_text().split()
            known.append(f"{host.address} {pub[0]} {pub[1]}\n")
        self.known_hosts.write_text("".join(known))
        for h in self.hosts:
            self._wait_listening(h)

    def _make_host(self, i: int, sub: object) -> Host:
        name = f"h{i}"
        ns = f"{PREFIX}{self.id}-{name}"
        veth = f"{PREFIX}{self.id}-v{i}"
        address = netns.node_address(sub, i)  # type: ignore[arg-type]
        hdir = self.dir / name
        host = Host(name, address, ns, hdir)
        (host.var_tmp).mkdir(parents=True)
        host.var_tmp.chmod(0o1777)
        _run(["ip", "netns", "add", ns])
        _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "p"])
        _run(["ip", "link", "set", veth + "p", "netns", ns])
        _run(["ip", "link", "set", veth, "master", self.bridge])
        _run(["ip", "link", "set", veth, "up"])
        inside = ["ip", "netns", "exec", ns]
        _run([*inside, "ip", "link", "set", veth + "p", "name", "eth0"])
        _run([*inside, "ip", "addr", "add", f"{address}/24", "dev", "eth0"])
        _run([*inside, "ip", "link", "set", "eth0", "up"])
        _run([*inside, "ip", "link", "set", "lo", "up"])
        _run([*inside, "ip", "route", "add", "default", "via", netns.host_address(sub)])  # type: ignore[arg-type]
        key = hdir / "ssh_host_ed25519_key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}", "-f", str(key)],
            check=True, capture_output=True,
        )  # fmt: skip
        shutil.copy(self.identity.with_suffix(".pub"), hdir / "authorized_keys")
        config = hdir / "sshd_config"
        config.write_text(
            f"ListenAddress {address}\nPort 22\nHostKey {key}\nPidFile {hdir / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {hdir / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\nMaxSessions 64\nMaxStartups 64\nLogLevel ERROR\n"
            "Subsystem sftp internal-sftp\n"
        )
        # net namespace only (nsenter keeps /sys/fs/cgroup), plus a private mount
        # namespace with this host's own /var/tmp
        boot = 'mount --bind "$0" /var/tmp && exec "$1" -D -e -f "$2"'
        log = open(hdir / "sshd.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            host.proc = subprocess.Popen(
                [*netns.in_netns(ns, ["unshare", "--mount", "--propagation", "private"]),
                 "sh", "-c", boot, str(host.var_tmp), SSHD, str(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        finally:
            log.close()
        return host

    def _wait_listening(self, h: Host, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if h.proc is not None and h.proc.poll() is not None:
                raise RuntimeError(
                    f"sshd of {h.name} exited: {(h.dir / 'sshd.log').read_text()[-2000:]}"
                )
            with contextlib.suppress(OSError), socket.create_connection((h.address, 22), 1):
                return
            time.sleep(0.1)
        raise RuntimeError(f"sshd of {h.name} not listening on {h.address}:22 after {timeout}s")

    # ------------------------------------------------------------ checks

    def processes(self, h: Host) -> dict[int, str]:
        """pid -> command line of every process in the host's namespace except its sshds."""
        out = {}
        for pid in _run(["ip", "netns", "pids", h.netns], check=False).split():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm not in ("sshd", "unshare") and argv.strip():
                out[int(pid)] = argv.strip()
        return out

    def residue(self, run_id: str | None = None) -> list[str]:
        """What ktrial left on the hosts: processes, tagged iptables rules, memory cgroups
        of `run_id` (any ktrial run's when None) and files in /var/tmp other than the
        program cache (``ktrial/programs``, kept across runs on purpose)."""
        found = []
        for h in self.hosts:
            for pid, argv in self.processes(h).items():
                found.append(f"{h.name}: process {pid}: {argv[:160]}")
            save = _run(["ip", "netns", "exec", h.netns, "iptables-save"], check=False)
            found += [f"{h.name}: rule {line}" for line in save.splitlines() if "ktrial" in line]
            for p in sorted(h.var_tmp.rglob("*")):
                rel = p.relative_to(h.var_tmp)
                if rel.parts[:2] in (("ktrial",), ("ktrial", "programs")) and len(rel.parts) <= 2:
                    continue
                if rel.parts[:2] == ("ktrial", "programs"):
                    continue
                found.append(f"{h.name}: file /var/tmp/{rel}")
        mark = f"ktrial-{run_id}-" if run_id else "ktrial-"
        for root in (Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")):
            if root.is_dir():
                found += [f"cgroup {d}" for d in root.iterdir() if d.name.startswith(mark)]
        return found

    # ------------------------------------------------------------ teardown

    def close(self) -> None:
        for h in self.hosts:
            for pid in _run(["ip", "netns", "pids", h.netns], check=False).split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    import os

                    os.kill(int(pid), signal.SIGKILL)
            if h.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    h.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    h.proc.wait(10)
            _run(["ip", "netns", "del", h.netns], check=False)
        for i in range(1, self.n + 1):
            netns.delete_link(f"{PREFIX}{self.id}-v{i}")
        netns.delete_link(self.bridge)
        netns.delete_rule(self._rule)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.hosts = []


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 3
    # also when started in the background (SIGINT ignored) or ended with SIGTERM
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    with SshHosts(n) as hosts:
        print(f"{n} hosts up: {hosts.nodes}")
        print("ktrial run " + " ".join(hosts.cli_args()))
        print("Ctrl-C (or SIGTERM) removes them.", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
