"""Network namespaces, a bridge and veth pairs for a local cluster, named so `clean` finds them.

Names: bridge `kt-<runid>`, namespace `kt-<runid>-<node>`, host end of a veth
`kt-<runid>-v<i>` (the namespace end is renamed `eth0`). Interface names must fit in
15 characters, so run ids are 6 hex digits. Host-side iptables rules carry the
comment `ktrial:<runid>`.

Address choice: a /24 from 10.213.0.0/16 (falling back to 172.29.0.0/16) that
overlaps no address or route on the host. Concurrent ktrial clusters serialise the
choice with a lock file held until the bridge owns its address, so two runs never
take the same subnet.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shlex
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

PREFIX = "kt-"
COMMENT_PREFIX = "ktrial:"
CANDIDATE_POOLS = ("10.213.0.0/16", "172.29.0.0/16")
LOCK_PATH = Path("/run/lock/ktrial-net.lock")


class NetError(RuntimeError):
    """An ip/iptables command failed; the message has the command and its stderr."""


def run(cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def bridge_name(run_id: str) -> str:
    return f"{PREFIX}{run_id}"


def netns_name(run_id: str, node: str) -> str:
    return f"{PREFIX}{run_id}-{node}"


def veth_name(run_id: str, index: int) -> str:
    name = f"{PREFIX}{run_id}-v{index}"
    if len(name) > 15:
        raise ValueError(f"interface name {name!r} is longer than 15 characters")
    return name


def rule_comment(run_id: str) -> str:
    return f"{COMMENT_PREFIX}{run_id}"


# ---------------------------------------------------------------- address selection


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the host has an address in or a route to."""
    nets: list[ipaddress.IPv4Network] = []
    for entry in json.loads(run(["ip", "-j", "-4", "addr", "show"]) or "[]"):
        for a in entry.get("addr_info", []):
            if a.get("family") == "inet":
                nets.append(ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False))
    for r in json.loads(run(["ip", "-j", "-4", "route", "show", "table", "all"]) or "[]"):
        dst = r.get("dst", "")
        if dst and dst != "default":
            with contextlib.suppress(ValueError):
                nets.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
    return nets


def pick_subnet(
    used: Iterable[ipaddress.IPv4Network],
    reserved: Iterable[str] = (),
    pools: Sequence[str] = CANDIDATE_POOLS,
) -> ipaddress.IPv4Network:
    """The first /24 of the pools that overlaps nothing in `used` or `reserved` (pure)."""
    taken = list(used) + [ipaddress.IPv4Network(r) for r in reserved]
    for pool in pools:
        for sub in ipaddress.IPv4Network(pool).subnets(new_prefix=24):
            if not any(sub.overlaps(t) for t in taken):
                return sub
    raise NetError(f"no free /24 in {', '.join(pools)}; run `ktrial cluster clean`")


def host_address(subnet: ipaddress.IPv4Network) -> str:
    return str(subnet.network_address + 1)


def node_address(subnet: ipaddress.IPv4Network, index: int) -> str:
    """Node i (1-based) gets .10+i, e.g. 10.213.0.11 for n1."""
    return str(subnet.network_address + 10 + index)


@contextlib.contextmanager
def subnet_lock() -> Iterator[None]:
    """Serialise subnet choice among concurrent ktrial processes on this machine."""
    path = LOCK_PATH if LOCK_PATH.parent.is_dir() else Path("/tmp/ktrial-net.lock")
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ---------------------------------------------------------------- create / delete


def create_bridge(run_id: str, subnet: ipaddress.IPv4Network) -> str:
    br = bridge_name(run_id)
    run(["ip", "link", "add", br, "type", "bridge"])
    run(["ip", "addr", "add", f"{host_address(subnet)}/{subnet.prefixlen}", "dev", br])
    run(["ip", "link", "set", br, "up"])
    return br


def delete_link(name: str) -> None:
    run(["ip", "link", "del", name], check=False)


def forward_rule(run_id: str) -> list[str]:
    """iptables arguments (after -I/-D) letting traffic cross our bridge.

    dockerd sets FORWARD's policy to DROP and turns on bridge netfilter, which
    would otherwise drop node-to-node traffic.
    """
    br = bridge_name(run_id)
    return [
        "FORWARD",
        "-i",
        br,
        "-o",
        br,
        "-m",
        "comment",
        "--comment",
        rule_comment(run_id),
        "-j",
        "ACCEPT",
    ]


def add_rule(rule: Sequence[str]) -> None:
    run(["iptables", "-w", "-I", *rule])


def delete_rule(rule: Sequence[str]) -> None:
    # delete every copy (a rule may have been inserted twice by a retried start)
    for _ in range(10):
        if subprocess.run(["iptables", "-w", "-D", *rule], capture_output=True).returncode != 0:
            return


def create_netns(
    run_id: str, node: str, index: int, subnet: ipaddress.IPv4Network
) -> tuple[str, str]:
    """Namespace + veth for one node; returns (netns name, host-side veth name)."""
    ns = netns_name(run_id, node)
    veth = veth_name(run_id, index)
    peer = veth_name(run_id, index) + "p" if len(veth) < 15 else veth[:-1] + "p"
    run(["ip", "netns", "add", ns])
    try:
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", peer])
        run(["ip", "link", "set", peer, "netns", ns])
        run(["ip", "link", "set", veth, "master", bridge_name(run_id)])
        run(["ip", "link", "set", veth, "up"])
        inside = ["ip", "netns", "exec", ns]
        run([*inside, "ip", "link", "set", peer, "name", "eth0"])
        addr = f"{node_address(subnet, index)}/{subnet.prefixlen}"
        run([*inside, "ip", "addr", "add", addr, "dev", "eth0"])
        run([*inside, "ip", "link", "set", "eth0", "up"])
        run([*inside, "ip", "link", "set", "lo", "up"])
        run([*inside, "ip", "route", "add", "default", "via", host_address(subnet)])
    except Exception:
        delete_netns(ns)
        delete_link(veth)
        raise
    return ns, veth


def delete_netns(ns: str) -> None:
    run(["ip", "netns", "del", ns], check=False)


def list_netns() -> list[str]:
    out = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def list_links() -> list[str]:
    out = run(["ip", "-j", "link", "show"], check=False)
    return [e["ifname"] for e in json.loads(out or "[]")]


def list_rules(table: str = "filter") -> list[list[str]]:
    """Host iptables rules of ktrial as argument lists ready for `-D`."""
    out = run(["iptables", "-w", "-t", table, "-S"], check=False)
    rules = []
    for line in out.splitlines():
        if line.startswith("-A ") and COMMENT_PREFIX in line:
            rules.append(shlex.split(line)[1:])
    return rules


def in_netns(ns: str, cmd: Sequence[str]) -> list[str]:
    """Command line running `cmd` in a namespace's network stack only.

    nsenter keeps the pid (it execs) and, unlike `ip netns exec`, leaves the mount
    namespace alone, so /sys/fs/cgroup stays visible to the process.
    """
    return ["nsenter", f"--net=/run/netns/{ns}", *cmd]


def is_root() -> bool:
    return os.geteuid() == 0
