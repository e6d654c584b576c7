"""Find and remove what dead ktrial clusters left behind, and nothing else.

Everything a local cluster creates carries its run id, exactly six lowercase hex digits
(``state.new_run_id``), in a recognisable form, so leftovers can be found even without
the state file:

| resource | marker (matched whole, nothing looser) |
|---|---|
| network namespace | `kt-<runid>-n<i>` |
| bridge / veth | `kt-<runid>` / `kt-<runid>-v<i>[p]` |
| host iptables rule | comment exactly `ktrial:<runid>` |
| memory cgroup | directory `ktrial-<runid>-n<i>` anywhere in the hierarchy |
| broker JVM | the argument `-Dktrial.run=<runid>` on its command line |
| helpers (Toxiproxy, stress-ng, ...) | `KTRIAL_RUN=<runid>` in their environment |
| work directory | `ktrial-<runid>-*` holding only node directories `n<i>` |
| docker container / network | labels `ktrial.run=<runid>` (+ `ktrial.node`, `ktrial.owner`) |
| state | `<state root>/<runid>/` |

Ownership decides what may go. A run with a state record is dead when the owner the
record names (pid and kernel start time) is gone. A run without one (its record lost)
has no owner to ask: its processes are removed only if they carry the broker JVM's
exact marker and were orphaned (their owner, the parent, is gone); a process marked
only in its environment is then left alone, since anybody can set a variable. The
process running `clean` and its ancestors are never signalled, wherever they are. A
work directory is removed only if it sits in the temp dir (or the run's recorded work
root), is named for the run and holds nothing but node directories. Containers on the
system Docker engine are removed only with ktrial's exact labels and a dead owner.

A run is left alone while its owner is alive, unless `all_`. A dry run reports exactly
the plan a real clean carries out: the same items, the processes inside the cgroups
and namespaces about to go, and what is left alone and why (`Leftovers.refused`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cgroups, netns
from . import state as statemod

RUN_ID = r"[0-9a-f]{6}"
NODE = r"n[0-9]{1,3}"
RUN_ID_RE = re.compile(RUN_ID)
NETNS_RE = re.compile(rf"^{netns.PREFIX}({RUN_ID})-{NODE}$")
LINK_RE = re.compile(rf"^{netns.PREFIX}({RUN_ID})(?:-v\d+p?)?$")
CGROUP_RE = re.compile(rf"^{cgroups.PREFIX}({RUN_ID})-{NODE}$")
CMDLINE_RE = re.compile(rb"(?:^|\x00)-Dktrial\.run=(" + RUN_ID.encode() + rb")(?:\x00|$)")
ENVIRON_RE = re.compile(rb"(?:^|\x00)KTRIAL_RUN=(" + RUN_ID.encode() + rb")(?:\x00|$)")
WORKDIR_RE = re.compile(rf"^ktrial-({RUN_ID})-[A-Za-z0-9_]+$")
NODE_DIR_RE = re.compile(rf"^{NODE}$")
RULE_COMMENT_RE = re.compile(rf"^{re.escape(netns.COMMENT_PREFIX)}({RUN_ID})$")


def rule_run_id(comment: str) -> str | None:
    """The run id of a host rule's comment `ktrial:<runid>`, None for any other comment."""
    m = RULE_COMMENT_RE.match(comment)
    return m.group(1) if m else None


@dataclass(frozen=True)
class Marked:
    """A process carrying a run's marker."""

    pid: int
    run_id: str
    jvm: bool  # the exact `-Dktrial.run=` argument (else only the environment variable)
    ppid: int


@dataclass
class Leftovers:
    """What belongs to which run (found by scanning the machine), and the plan for it."""

    processes: dict[int, str] = field(default_factory=dict)  # pid -> run id
    netns: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    rules: list[tuple[list[str], str]] = field(default_factory=list)
    cgroups: dict[Path, str] = field(default_factory=dict)
    dirs: dict[Path, str] = field(default_factory=dict)
    states: dict[str, dict[str, object]] = field(default_factory=dict)
    docker: dict[str, str] = field(default_factory=dict)  # "container NAME (engine)" -> run id
    # every marked process seen (also those not to be removed: liveness is judged on them)
    marked: dict[int, Marked] = field(default_factory=dict)
    # the docker items behind `docker` (see clusters.docker.DockerItem)
    docker_items: dict[str, Any] = field(default_factory=dict)
    # runs whose docker items name a live owner
    docker_live: set[str] = field(default_factory=set)
    # processes inside the cgroups / namespaces to remove: pid -> "cgroup X" / "netns Y"
    members: dict[int, str] = field(default_factory=dict)
    # ktrial's own dockerd, to stop because its owner died (a description), or None
    dockerd: str | None = None
    # found, looked like ktrial's at first sight, left alone: why (shown by clean)
    refused: list[str] = field(default_factory=list)

    def run_ids(self) -> set[str]:
        ids = set(self.processes.values()) | set(self.netns.values()) | set(self.links.values())
        ids |= {r for _, r in self.rules} | set(self.cgroups.values()) | set(self.dirs.values())
        return ids | set(self.states) | set(self.docker.values())

    def only(self, keep: Iterable[str]) -> Leftovers:
        k = set(keep)
        docker = {d: r for d, r in self.docker.items() if r in k}
        return Leftovers(
            processes={p: r for p, r in self.processes.items() if r in k},
            netns={n: r for n, r in self.netns.items() if r in k},
            links={n: r for n, r in self.links.items() if r in k},
            rules=[(x, r) for x, r in self.rules if r in k],
            cgroups={d: r for d, r in self.cgroups.items() if r in k},
            dirs={d: r for d, r in self.dirs.items() if r in k},
            states={r: s for r, s in self.states.items() if r in k},
            docker=docker,
            marked=dict(self.marked),
            docker_items={d: i for d, i in self.docker_items.items() if d in docker},
            docker_live=set(self.docker_live),
            refused=list(self.refused),
        )

    def describe(self) -> list[str]:
        """One line per thing the clean removes (or would), in the order it acts."""
        out = [f"docker {d}" for d in sorted(self.docker)]
        out += [f"process {p} (run {r})" for p, r in sorted(self.processes.items())]
        out += [f"process {p} in {where}" for p, where in sorted(self.members.items())]
        out += [f"cgroup {d}" for d in sorted(self.cgroups)]
        out += [f"netns {n}" for n in sorted(self.netns)]
        out += [f"link {n}" for n in sorted(self.links)]
        out += [f"iptables rule {' '.join(x)}" for x, _ in self.rules]
        out += [f"dir {d}" for d in sorted(self.dirs)]
        out += [f"state {statemod.state_root() / r}" for r in sorted(self.states)]
        if self.dockerd:
            out.append(self.dockerd)
        return out

    def empty(self) -> bool:
        return not self.describe()


# ---------------------------------------------------------------- processes


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def protected_pids() -> set[int]:
    """This process and its ancestors: never kill the hand that runs clean."""
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        parent = _parent(pid)
        if parent is None:
            break
        pid = parent
    return pids


def _marked(pid: int) -> Marked | None:
    try:
        m = CMDLINE_RE.search(Path(f"/proc/{pid}/cmdline").read_bytes())
        jvm = m is not None
        if m is None:
            m = ENVIRON_RE.search(Path(f"/proc/{pid}/environ").read_bytes())
    except OSError:
        return None
    ppid = _parent(pid)
    if m is None or ppid is None:
        return None
    return Marked(pid, m.group(1).decode(), jvm, ppid)


def scan_marked() -> dict[int, Marked]:
    """Every process carrying a well-formed run marker (never this one or its ancestors)."""
    found: dict[int, Marked] = {}
    protected = protected_pids()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) not in protected:
            m = _marked(int(entry.name))
            if m is not None:
                found[m.pid] = m
    return found


def _owner_of(m: Marked, marked: Mapping[int, Marked]) -> int:
    """The nearest ancestor of `m` not marked with its run: the process that started it
    (its owner) while that lives; 1 (or a subreaper) once the owner died."""
    pid = m.ppid
    seen = 0
    while pid in marked and marked[pid].run_id == m.run_id and seen < 64:
        pid, seen = marked[pid].ppid, seen + 1
    return pid


def orphaned(m: Marked, marked: Mapping[int, Marked]) -> bool:
    owner = _owner_of(m, marked)
    return owner <= 1 or not statemod.is_alive(owner, None)


def has_owner(state: Mapping[str, object]) -> bool:
    """Whether a state record names its owner in ktrial's format (a pid, its start time)."""
    pid, start = state.get("owner_pid"), state.get("owner_start")
    ok_pid = isinstance(pid, int) and not isinstance(pid, bool) and pid > 0
    return ok_pid and (start is None or (isinstance(start, int) and not isinstance(start, bool)))


# ---------------------------------------------------------------- work dirs


def _temp_root() -> Path:
    return Path(tempfile.gettempdir()).resolve()


def check_work_dir(
    wd: object, run_id: str, state: Mapping[str, object]
) -> tuple[Path | None, str | None]:
    """(the directory to remove, None) if `wd` is run `run_id`'s work directory as ktrial
    makes it; (None, why not) if it must be left alone; (None, None) if there is none."""
    if wd is None:
        return None, None
    if not isinstance(wd, str) or not os.path.isabs(wd):
        return None, f"work dir {wd!r} of run {run_id}: not an absolute path"
    p = Path(wd)
    if not p.exists() and not p.is_symlink():
        return None, None
    roots = {_temp_root()}
    work_root = state.get("work_root")
    if isinstance(work_root, str) and os.path.isabs(work_root):
        roots.add(Path(work_root).resolve())
    m = WORKDIR_RE.match(p.name)
    why: str | None
    if p.is_symlink() or not p.is_dir():
        why = "not a directory (or a symbolic link)"
    elif not m or m.group(1) != run_id:
        why = f"not named ktrial-{run_id}-*"
    elif p.parent.resolve() not in roots:
        why = f"outside ktrial's work root ({', '.join(str(r) for r in sorted(roots))})"
    else:
        why = _foreign_entry(p)
    if why:
        return None, f"work dir {p} of run {run_id}: {why}; not removed"
    return p, None


def _foreign_entry(p: Path) -> str | None:
    """Why `p` does not look like a ktrial work dir (only node dirs n<i>), None if it does."""
    try:
        entries = list(p.iterdir())
    except OSError as err:
        return f"unreadable ({err})"
    for e in entries:
        if not NODE_DIR_RE.match(e.name) or e.is_symlink() or not e.is_dir():
            return f"holds {e.name!r}, which ktrial does not make there"
    return None


# ---------------------------------------------------------------- scan


def _scan_states(lo: Leftovers) -> None:
    for rid, st in statemod.all_states():
        if not RUN_ID_RE.fullmatch(rid):
            continue  # not a directory ktrial made
        if st.get("run_id") not in (None, rid):
            lo.refused.append(f"state {statemod.state_root() / rid}: names run {st['run_id']}")
            continue
        lo.states[rid] = st
        path, why = check_work_dir(st.get("work_dir"), rid, st)
        if path is not None:
            lo.dirs[path] = rid
        elif why:
            lo.refused.append(why)


def _scan_processes(lo: Leftovers) -> None:
    lo.marked = scan_marked()
    for m in lo.marked.values():
        owned = has_owner(lo.states.get(m.run_id, {}))
        if owned or m.jvm:  # an environment mark alone proves nothing without a record
            lo.processes[m.pid] = m.run_id


def _scan_names(lo: Leftovers) -> None:
    for ns in netns.list_netns():
        if m := NETNS_RE.match(ns):
            lo.netns[ns] = m.group(1)
    for link in netns.list_links():
        if m := LINK_RE.match(link.split("@")[0]):
            lo.links[link.split("@")[0]] = m.group(1)
    for rule in netns.list_rules():
        for i, arg in enumerate(rule[:-1]):
            if arg == "--comment" and (rid := rule_run_id(rule[i + 1])):
                lo.rules.append((rule, rid))
    for d in cgroups.find_all():
        if m := CGROUP_RE.match(d.name):
            lo.cgroups[d] = m.group(1)
    with contextlib.suppress(OSError):
        for d in _temp_root().iterdir():
            m = WORKDIR_RE.match(d.name)
            if m and d not in lo.dirs and m.group(1) not in lo.states and (d / "n1").is_dir():
                path, _ = check_work_dir(str(d), m.group(1), {})
                if path is not None:
                    lo.dirs[path] = m.group(1)


def _scan_docker(lo: Leftovers) -> None:
    items = _docker().scan_items()
    for key, item in items.items():
        owner_live = _docker().owner_alive(item, lo.states.get(item.run_id))
        if owner_live is None and item.system:
            lo.refused.append(
                f"docker {key}: on the system engine with no owner ktrial recorded; left alone"
            )
            continue
        if owner_live:
            lo.docker_live.add(item.run_id)
        lo.docker[key] = item.run_id
        lo.docker_items[key] = item


def scan() -> Leftovers:
    """Everything of every ktrial run on this machine, live or dead."""
    lo = Leftovers()
    _scan_states(lo)
    _scan_processes(lo)
    _scan_docker(lo)
    _scan_names(lo)
    return lo


def live_run_ids(lo: Leftovers) -> set[str]:
    """Runs whose owner may still be alive: a live owner in the state record; without a
    usable record, a broker JVM whose owner (parent) lives; a docker owner label."""
    live = {r for r, st in lo.states.items() if has_owner(st) and statemod.state_is_live(st)}
    for m in lo.marked.values():
        owned = has_owner(lo.states.get(m.run_id, {}))
        if not owned and m.jvm and not orphaned(m, lo.marked):
            live.add(m.run_id)
    return live | lo.docker_live


def _members(lo: Leftovers) -> None:
    """The processes inside the cgroups and namespaces to remove (they are killed first)."""
    protected = protected_pids()
    found: dict[int, str] = {}
    for d in lo.cgroups:
        for pid in cgroups.pids(d):
            found.setdefault(pid, f"cgroup {d}")
    for ns in lo.netns:
        for pid in _netns_pids(ns):
            found.setdefault(pid, f"netns {ns}")
    for pid, where in sorted(found.items()):
        if pid in protected:
            lo.refused.append(
                f"process {pid} in {where} is this clean or its ancestor; not killed "
                f"(so the {where.split()[0]} stays)"
            )
        elif pid not in lo.processes:
            lo.members[pid] = where


def _netns_pids(ns: str) -> list[int]:
    out = netns.run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def plan(all_: bool = False, run_ids: Iterable[str] = ()) -> Leftovers:
    """What a clean removes: leftovers of dead runs (every run with `all_`; only
    `run_ids` if given, and then only well-formed ones)."""
    lo = scan()
    live = live_run_ids(lo)
    targets = {r for r in run_ids if RUN_ID_RE.fullmatch(r)} if run_ids else lo.run_ids()
    if not all_:
        targets -= live
    chosen = lo.only(targets)
    _members(chosen)
    chosen.dockerd = _docker().orphaned_dockerd(set(chosen.docker_items))
    return chosen


# ---------------------------------------------------------------- removal


def _kill(pids: Iterable[int]) -> None:
    protected = protected_pids()
    pids = [p for p in pids if p not in protected]
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
    """Carry out the plan `lo`, containers and processes first; returns what could not be
    removed. Processes that entered a doomed cgroup or namespace since the plan are
    killed with it; this process and its ancestors never are."""
    problems: list[str] = []
    if lo.docker_items:  # through the engine first: killing its processes would strand it
        problems += _docker().remove_items(list(lo.docker_items.values()))
    _kill([*lo.processes, *lo.members])
    protected = protected_pids()
    for d in sorted(lo.cgroups, key=lambda p: len(p.parts), reverse=True):
        if protected & set(cgroups.pids(d)):
            problems.append(f"cgroup {d} holds this clean or its ancestor; not removed")
            continue
        _kill(cgroups.pids(d))
        try:
            cgroups.remove(d)
        except cgroups.CgroupError as e:
            problems.append(str(e))
    for ns in lo.netns:
        _kill(_netns_pids(ns))
        netns.delete_netns(ns)
    for link in lo.links:
        netns.delete_link(link)
    for rule, _ in lo.rules:
        netns.delete_rule(rule)
    for d, rid in lo.dirs.items():
        path, why = check_work_dir(str(d), rid, lo.states.get(rid, {}))  # again, just before
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)
        elif why:
            problems.append(why)
    for rid in lo.states:
        statemod.for_run(rid).remove()
    if lo.dockerd:
        _docker().stop_orphaned_dockerd()
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

    Returns what was (or, with dry_run, would be) removed and any problems; what was
    left alone and why is in the result's `refused`.
    """
    if all_ and not dry_run:
        # live keepers (`cluster up`) are asked to tear down first, then the plan is made
        lo = scan()
        for rid in live_run_ids(lo):
            st = lo.states.get(rid)
            wanted = not run_ids or rid in set(run_ids)
            if wanted and st is not None and st.get("owner_kind") == "keeper":
                stop_owner(st, timeout=30)
    chosen = plan(all_, run_ids)
    if dry_run:
        return chosen, []
    return chosen, remove(chosen)


def _docker() -> Any:
    """The docker backend's leftover helpers (imported late: the SDK is slow to import)."""
    from . import docker

    return docker
