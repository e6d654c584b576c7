"""Find and remove what dead ktrial clusters left behind, by name.

Everything a local cluster creates carries its 6-hex-digit run id in a recognisable
form, so leftovers can be found without the (possibly lost) state file:

| resource | marker |
|---|---|
| network namespace | `kt-<runid>-<node>` |
| bridge / veth | `kt-<runid>` / `kt-<runid>-v<i>` |
| host iptables rule | comment `ktrial:<runid>` |
| memory cgroup | directory `ktrial-<runid>-<node>` anywhere in the hierarchy |
| broker JVM | `-Dktrial.run=<runid>` on its command line |
| helpers (Toxiproxy, stress-ng, ...) | `KTRIAL_RUN=<runid>` in their environment |
| work directory | from state.json, or `<tmp>/ktrial-<runid>-*` |
| docker container / network | label `ktrial.run=<runid>` (docker backend) |
| state | `<state root>/<runid>/` |

A run is left alone while the owner recorded in its state is alive, unless `all_`
(or its run id is named explicitly with `force`). Nothing without these markers is
ever touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cgroups, netns
from . import state as statemod

RUN_ID = r"[0-9a-f]{6}"
NETNS_RE = re.compile(rf"^{netns.PREFIX}({RUN_ID})-")
LINK_RE = re.compile(rf"^{netns.PREFIX}({RUN_ID})(?:-v\d+p?)?$")
CGROUP_RE = re.compile(rf"^{cgroups.PREFIX}({RUN_ID})-")
CMDLINE_RE = re.compile(rb"-Dktrial\.run=(" + RUN_ID.encode() + rb")(?:\x00|$)")
ENVIRON_RE = re.compile(rb"(?:^|\x00)KTRIAL_RUN=([^\x00]+)")
WORKDIR_RE = re.compile(rf"^ktrial-({RUN_ID})-")


@dataclass
class Leftovers:
    """What belongs to which run (found by scanning the machine)."""

    processes: dict[int, str] = field(default_factory=dict)  # pid -> run id
    netns: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    rules: list[tuple[list[str], str]] = field(default_factory=list)
    cgroups: dict[Path, str] = field(default_factory=dict)
    dirs: dict[Path, str] = field(default_factory=dict)
    states: dict[str, dict[str, object]] = field(default_factory=dict)
    docker: dict[str, str] = field(default_factory=dict)  # "container NAME" -> run id

    def run_ids(self) -> set[str]:
        ids = set(self.processes.values()) | set(self.netns.values()) | set(self.links.values())
        ids |= {r for _, r in self.rules} | set(self.cgroups.values()) | set(self.dirs.values())
        return ids | set(self.states) | set(self.docker.values())

    def only(self, keep: Iterable[str]) -> Leftovers:
        k = set(keep)
        return Leftovers(
            processes={p: r for p, r in self.processes.items() if r in k},
            netns={n: r for n, r in self.netns.items() if r in k},
            links={n: r for n, r in self.links.items() if r in k},
            rules=[(x, r) for x, r in self.rules if r in k],
            cgroups={d: r for d, r in self.cgroups.items() if r in k},
            dirs={d: r for d, r in self.dirs.items() if r in k},
            states={r: s for r, s in self.states.items() if r in k},
            docker={d: r for d, r in self.docker.items() if r in k},
        )

    def describe(self) -> list[str]:
        out = [f"process {p} (run {r})" for p, r in sorted(self.processes.items())]
        out += [f"netns {n}" for n in sorted(self.netns)]
        out += [f"link {n}" for n in sorted(self.links)]
        out += [f"iptables rule {' '.join(x)}" for x, _ in self.rules]
        out += [f"cgroup {d}" for d in sorted(self.cgroups)]
        out += [f"dir {d}" for d in sorted(self.dirs)]
        out += [f"state {statemod.state_root() / r}" for r in sorted(self.states)]
        out += [f"docker {d}" for d in sorted(self.docker)]
        return out

    def empty(self) -> bool:
        return not self.describe()


def _protected_pids() -> set[int]:
    """This process and its ancestors: never kill the hand that runs clean."""
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def scan_processes() -> dict[int, str]:
    found: dict[int, str] = {}
    protected = _protected_pids()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in protected:
            continue
        pid = int(entry.name)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            m = CMDLINE_RE.search(cmdline)
            if not m:
                m = ENVIRON_RE.search(Path(f"/proc/{pid}/environ").read_bytes())
        except OSError:
            continue
        if m:
            found[pid] = m.group(1).decode(errors="replace")
    return found


def scan() -> Leftovers:
    """Everything of every ktrial run on this machine, live or dead."""
    lo = Leftovers()
    lo.processes = scan_processes()
    lo.docker = _docker().scan_leftovers()
    for ns in netns.list_netns():
        if m := NETNS_RE.match(ns):
            lo.netns[ns] = m.group(1)
    for link in netns.list_links():
        if m := LINK_RE.match(link.split("@")[0]):
            lo.links[link.split("@")[0]] = m.group(1)
    for rule in netns.list_rules():
        for i, arg in enumerate(rule):
            nxt = rule[i + 1] if i + 1 < len(rule) else ""
            if arg == "--comment" and nxt.startswith(netns.COMMENT_PREFIX):
                lo.rules.append((rule, nxt.removeprefix(netns.COMMENT_PREFIX)))
    for d in cgroups.find_all():
        if m := CGROUP_RE.match(d.name):
            lo.cgroups[d] = m.group(1)
    for rid, st in statemod.all_states():
        lo.states[rid] = st
        wd = st.get("work_dir")
        if isinstance(wd, str) and Path(wd).is_dir():
            lo.dirs[Path(wd)] = rid
    with contextlib.suppress(OSError):
        for d in Path(tempfile.gettempdir()).iterdir():
            if (m := WORKDIR_RE.match(d.name)) and (d / "n1").is_dir():
                lo.dirs[d] = m.group(1)
    return lo


def live_run_ids(lo: Leftovers) -> set[str]:
    return {r for r, st in lo.states.items() if statemod.state_is_live(st)}


def _kill(pids: Iterable[int]) -> None:
    pids = list(pids)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)  # also ends stopped (paused) processes
    deadline = time.monotonic() + 15
    for pid in pids:
        while time.monotonic() < deadline and statemod.proc_start_time(pid) is not None:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)  # reap if it happens to be our child
            state = Path(f"/proc/{pid}/stat")
            try:
                if state.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            except OSError:
                break
            time.sleep(0.05)


def remove(lo: Leftovers) -> list[str]:
    """Remove the given leftovers, containers and processes first; returns what could not
    be removed."""
    problems: list[str] = []
    if lo.docker:  # through the engine first: killing its processes would strand its records
        problems += _docker().remove_leftovers(set(lo.docker.values()))
    _kill(lo.processes)
    for d in sorted(lo.cgroups, key=lambda p: len(p.parts), reverse=True):
        _kill(cgroups.pids(d))
        try:
            cgroups.remove(d)
        except cgroups.CgroupError as e:
            problems.append(str(e))
    for ns in lo.netns:
        out = netns.run(["ip", "netns", "pids", ns], check=False)
        _kill(int(p) for p in out.split() if p.isdigit())
        netns.delete_netns(ns)
    for link in lo.links:
        netns.delete_link(link)
    for rule, _ in lo.rules:
        netns.delete_rule(rule)
    for d in lo.dirs:
        shutil.rmtree(d, ignore_errors=True)
    for rid in lo.states:
        statemod.for_run(rid).remove()
    return problems


def stop_owner(state: dict[str, object], timeout: float = 60.0) -> bool:
    """SIGTERM a live owner (it tears its cluster down) and wait; True if it ended."""
    pid = state.get("owner_pid")
    if not isinstance(pid, int) or not statemod.state_is_live(state):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not statemod.state_is_live(state):
            return True
        time.sleep(0.2)
    return False


def clean(
    all_: bool = False,
    run_ids: Iterable[str] = (),
    dry_run: bool = False,
) -> tuple[Leftovers, list[str]]:
    """Remove leftovers of dead runs (every run with `all_`; only `run_ids` if given).

    Returns what was (or, with dry_run, would be) removed and any problems.
    """
    lo = scan()
    live = live_run_ids(lo)
    targets = set(run_ids) if run_ids else lo.run_ids()
    if not all_:
        targets -= live
    chosen = lo.only(targets)
    if dry_run:
        return chosen, []
    if all_:
        for rid in targets & live:
            if lo.states[rid].get("owner_kind") == "keeper":
                stop_owner(lo.states[rid], timeout=30)
        chosen = scan().only(targets)
    problems = remove(chosen)
    if _docker().stop_orphaned_dockerd() is not None:
        chosen.docker["dockerd of a dead run"] = ""
    return chosen, problems


def _docker() -> Any:
    """The docker backend's leftover helpers (imported late: the SDK is slow to import)."""
    from . import docker

    return docker
