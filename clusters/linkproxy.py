"""Link faults for brokers ktrial did not start: the run's clients redirected through
one Toxiproxy listener per broker.

An external broker advertises its own address, so a client that bootstraps through a
proxy learns the real addresses from metadata and bypasses it. Instead of changing
what the brokers advertise, ktrial changes where the *run's own* connections to those
addresses go: one iptables rule per broker address in the ``nat`` table's ``OUTPUT``
chain of this machine,

    -A OUTPUT -d <broker ip>/32 -p tcp --dport <broker port>
       -m owner --gid-owner <G> --suppl-groups
       -m comment --comment ktrial-link:<owner pid>:<owner start>
       -j REDIRECT --to-ports <that broker's proxy port>

and the ktrial process takes the supplementary group ``G`` (``GID_BASE`` + its pid,
a group no account uses) once the Toxiproxy server is running. So:

- every connection the run opens afterwards to a broker (its producers, consumers,
  admin clients, the drain, worker drivers and hooks: children inherit the group)
  goes to the broker's proxy, whatever address metadata named, and TLS still checks
  the broker's own name (the client never learns it was redirected);
- the Toxiproxy server, started before the group was taken, reaches the brokers
  directly, and no other program on the machine is redirected;
- the rules count the connections they redirect (the nat table sees the first packet
  of each), which the toxic fault records as evidence that the clients reconnected
  through the proxies (``connections`` in ``toxic-on``/``toxic-off``).

Why not a network namespace whose hosts file maps each broker's name to its proxy:
the clients are threads of the ktrial process itself (librdkafka), which cannot move
into a namespace alone; a hosts file cannot redirect brokers that advertise IP
addresses; and every broker on the same port would need its own proxy address. The
rules need root and IPv4 broker addresses (a name resolving to an IPv6 address is
refused: clients might connect over IPv6 and bypass the proxy).

Everything is removed on exit and on Ctrl-C (the run's ExitStack); a killed ktrial
leaves rules whose comment names a dead process, which ``ktrial cluster clean``
removes (:func:`find_leftovers`): only rules in ``nat OUTPUT`` whose comment is
exactly ``ktrial-link:<pid>:<start time>`` and whose process is gone (or started at
another time: a reused pid). Its Toxiproxy server carries ``KTRIAL_TOXIPROXY`` like
every other (nemesis/clean.py). The proxies themselves, and what a run does with
them: clusters/linkfront.py.
"""

from __future__ import annotations

import contextlib
import grp
import ipaddress
import logging
import os
import re
import shlex
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .state import proc_start_time

log = logging.getLogger("ktrial.clusters.linkproxy")

PREFIX = "ktrial-link:"
COMMENT_RE = re.compile(r"^ktrial-link:([1-9][0-9]{0,9}):([0-9]{1,20})$")
# Supplementary group of a run's clients: GID_BASE + the owner's pid (pids stay below
# 2^22), far above the ids accounts and system groups use.
GID_BASE = 2_000_000_000
CHAIN = "OUTPUT"
HOW = "iptables nat OUTPUT REDIRECT of this run's connections (owner group) to the proxies"

Run = Callable[[list[str]], "subprocess.CompletedProcess[str]"]
Resolver = Callable[[str, int], list[str]]


class LinkError(RuntimeError):
    """The redirect through the proxies cannot be set up or does not work."""


def link_gid(pid: int) -> int:
    return GID_BASE + pid


def comment_for(pid: int, start: int) -> str:
    """The comment tagging every redirect rule of the ktrial process `pid` (started at
    `start`, kernel clock ticks since boot: a reused pid has another)."""
    return f"{PREFIX}{pid}:{start}"


def parse_comment(comment: str) -> tuple[int, int] | None:
    """(owner pid, owner start) of a ktrial link rule's comment; None if not exactly ours."""
    m = COMMENT_RE.match(comment)
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Redirect:
    """Connections of the run to `address`:`port` (broker `node`) go to 127.0.0.1:`proxy_port`."""

    node: str
    address: str
    port: int
    proxy_port: int

    def spec(self, gid: int, comment: str) -> list[str]:
        """The rule after ``-I``/``-D`` (iptables arguments, nat table)."""
        return [
            CHAIN,
            "-d",
            f"{self.address}/32",
            "-p",
            "tcp",
            "--dport",
            str(self.port),
            "-m",
            "owner",
            "--gid-owner",
            str(gid),
            "--suppl-groups",
            "-m",
            "comment",
            "--comment",
            comment,
            "-j",
            "REDIRECT",
            "--to-ports",
            str(self.proxy_port),
        ]


def resolve_ipv4(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, which must all be IPv4 (sorted, unique)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise LinkError(f"cannot resolve broker address {host}: {e}") from None
    return check_ipv4(host, [str(info[4][0]) for info in infos])


def check_ipv4(host: str, addresses: Iterable[str]) -> list[str]:
    """The addresses, refused if any is not IPv4 or there are none (pure)."""
    out: set[str] = set()
    for a in addresses:
        ip = ipaddress.ip_address(a)
        if ip.version != 4:
            raise LinkError(
                f"broker address {host} resolves to the IPv6 address {a}: link faults redirect "
                "IPv4 connections only (clients could reach the broker over IPv6, past the "
                "proxy); give the brokers IPv4-only names"
            )
        out.add(str(ip))
    if not out:
        raise LinkError(f"broker address {host} resolves to no address")
    return sorted(out, key=ipaddress.ip_address)


def plan_redirects(
    brokers: Mapping[str, tuple[str, int]],
    proxy_ports: Mapping[str, int],
    resolve: Resolver = resolve_ipv4,
) -> list[Redirect]:
    """One redirect per (broker, address it resolves to), to that broker's proxy (pure but
    for `resolve`). Two brokers at the same address and port cannot be told apart."""
    out: list[Redirect] = []
    seen: dict[tuple[str, int], str] = {}
    for node in sorted(brokers, key=_node_order):
        host, port = brokers[node]
        if node not in proxy_ports:
            raise LinkError(f"no proxy planned for broker {node}")
        for address in resolve(host, port):
            other = seen.setdefault((address, port), node)
            if other != node:
                raise LinkError(
                    f"brokers {other} and {node} both resolve to {address}:{port}; "
                    "their connections cannot be told apart"
                )
            out.append(Redirect(node, address, port, proxy_ports[node]))
    return out


def _node_order(name: str) -> tuple[int, str]:
    digits = name[1:]
    return (int(digits), name) if digits.isdigit() else (1 << 30, name)


def _save_line(line: str) -> tuple[int, list[str]] | None:
    """(packets, argv) of an ``iptables-save -c`` rule line, None for other lines."""
    counters = 0
    if line.startswith("["):
        head, _, line = line.partition("] ")
        with contextlib.suppress(ValueError):
            counters = int(head[1:].split(":", 1)[0])
    if not line.startswith("-A "):
        return None
    try:
        return counters, shlex.split(line)
    except ValueError:
        return None


def _arg(argv: Sequence[str], flag: str) -> str | None:
    try:
        return argv[list(argv).index(flag) + 1]
    except (ValueError, IndexError):
        return None


def connection_counts(save: str, redirects: Sequence[Redirect], comment: str) -> dict[str, int]:
    """Per broker, the connections its rules redirected so far (nat rules count the
    first packet of each connection), from ``iptables-save -c -t nat`` (pure)."""
    by_dest = {(f"{r.address}/32", str(r.port)): r.node for r in redirects}
    counts = {r.node: 0 for r in redirects}
    for line in save.splitlines():
        parsed = _save_line(line)
        if parsed is None:
            continue
        packets, argv = parsed
        if _arg(argv, "--comment") != comment:
            continue
        node = by_dest.get((_arg(argv, "-d") or "", _arg(argv, "--dport") or ""))
        if node is not None:
            counts[node] += packets
    return counts


def leftover_rules(
    save: str, alive: Callable[[int, int], bool], all: bool = False
) -> list[list[str]]:
    """The ``-A`` lines (argv) of ktrial link rules in nat ``OUTPUT`` to remove: exactly
    our comment, a REDIRECT, and an owner that is not alive (every one with `all`)
    (pure but for `alive`)."""
    found = []
    for line in save.splitlines():
        parsed = _save_line(line)
        if parsed is None:
            continue
        argv = parsed[1]
        owner = parse_comment(_arg(argv, "--comment") or "")
        if owner is None or argv[1] != CHAIN or _arg(argv, "-j") != "REDIRECT":
            continue
        if all or not alive(*owner):
            found.append(argv)
    return found


def owner_alive(pid: int, start: int) -> bool:
    """The ktrial process that made a rule still runs: pid exists with that start time."""
    return proc_start_time(pid) == start


def unavailable() -> str | None:
    """Why link faults cannot be set up on this machine, or None."""
    if os.geteuid() != 0:
        return (
            "link faults on an external cluster redirect the clients with iptables: run "
            "ktrial as root"
        )
    for tool in ("iptables", "iptables-save"):
        if shutil.which(tool) is None:
            return f"link faults on an external cluster need `{tool}` (Debian: iptables)"
    return None


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def nat_save(run: Run = _run) -> str:
    p = run(["iptables-save", "-c", "-t", "nat"])
    if p.returncode != 0:
        raise LinkError(f"iptables-save -t nat failed: {(p.stderr or p.stdout).strip()[-300:]}")
    return p.stdout


def find_leftovers(all: bool = False, run: Run = _run) -> list[tuple[str, Callable[[], bool]]]:
    """(what, remove) of every link rule a killed ktrial left (`all`: of live ones too)."""
    if shutil.which("iptables-save") is None:
        return []
    p = run(["iptables-save", "-t", "nat"])
    if p.returncode != 0:
        return []
    found: list[tuple[str, Callable[[], bool]]] = []
    for argv in leftover_rules(p.stdout, owner_alive, all):
        delete = ["iptables", "-w", "-t", "nat", "-D", *argv[1:]]
        found.append((f"iptables nat rule: {shlex.join(argv)}", _deleter(run, delete)))
    return found


def _deleter(run: Run, cmd: list[str]) -> Callable[[], bool]:
    return lambda: run(cmd).returncode == 0


@dataclass
class LinkRedirect:
    """The rules and the group that send this process's broker connections to the proxies."""

    redirects: list[Redirect]
    run: Run = _run
    pid: int = field(default_factory=os.getpid)
    get_groups: Callable[[], list[int]] = os.getgroups
    set_groups: Callable[[list[int]], None] = os.setgroups
    installed: list[list[str]] = field(default_factory=list)
    group_added: bool = False

    def __post_init__(self) -> None:
        start = proc_start_time(self.pid)
        if start is None:
            raise LinkError(f"cannot read the start time of pid {self.pid}")
        self.gid = link_gid(self.pid)
        self.comment = comment_for(self.pid, start)

    def install(self) -> None:
        """Add the rules, then join the group (rules first: no connection escapes)."""
        try:
            grp.getgrgid(self.gid)
        except KeyError:
            pass
        else:
            raise LinkError(f"group id {self.gid} belongs to a group of this machine")
        try:
            self._remove_stale()
            for r in self.redirects:
                spec = r.spec(self.gid, self.comment)
                p = self.run(["iptables", "-w", "-t", "nat", "-I", *spec])
                if p.returncode != 0:
                    raise LinkError(
                        f"iptables could not add the redirect of {r.node} "
                        f"({r.address}:{r.port}): {(p.stderr or p.stdout).strip()[-300:]}"
                    )
                self.installed.append(spec)
            self.set_groups([*self.get_groups(), self.gid])
            self.group_added = True
        except BaseException:
            self.remove()
            raise

    def _remove_stale(self) -> None:
        """Rules of a dead ktrial that had this pid (same group id) would catch our clients."""
        for argv in leftover_rules(nat_save(self.run), owner_alive):
            m = parse_comment(_arg(argv, "--comment") or "")
            if m is not None and m[0] == self.pid:
                self.run(["iptables", "-w", "-t", "nat", "-D", *argv[1:]])

    def counts(self) -> dict[str, int]:
        return connection_counts(nat_save(self.run), self.redirects, self.comment)

    def verify(self, timeout: float = 10.0) -> dict[str, int]:
        """Open one connection per broker address and check that its rule redirected it."""
        for r in self.redirects:
            with contextlib.suppress(OSError):
                socket.create_connection((r.address, r.port), timeout=timeout).close()
        counts = self.counts()
        missed = sorted({r.node for r in self.redirects if counts.get(r.node, 0) < 1})
        if missed:
            raise LinkError(
                f"connections to {', '.join(missed)} did not pass the redirect rules "
                f"(counts {counts}); is the iptables `owner` match available?"
            )
        return counts

    def remove(self) -> None:
        """Leave the group and delete the rules; idempotent, never raises."""
        if self.group_added:
            with contextlib.suppress(OSError):
                self.set_groups([g for g in self.get_groups() if g != self.gid])
            self.group_added = False
        for spec in reversed(self.installed):
            try:
                p = self.run(["iptables", "-w", "-t", "nat", "-D", *spec])
                if p.returncode != 0:
                    log.warning("could not delete link rule %s: %s", spec, p.stderr.strip())
            except (OSError, subprocess.SubprocessError) as e:
                log.warning("could not delete link rule %s: %s", spec, e)
        self.installed.clear()


def groups_of(pid: int) -> set[int]:
    """The supplementary groups of a process (from /proc), empty if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Groups:"):
                return {int(g) for g in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return set()
