"""`ktrial cluster clean --cluster ssh --node ...`: what dead ssh runs left on the hosts.

On each host, over SSH, it looks for exactly what the ssh backend makes (see
clusters/sshremote.py): run directories ``<root>/runs/<runid>/`` with their owner file,
processes with ``KTRIAL_RUN=<runid>`` and ``KTRIAL_NODE=<node>`` in their environment
(the broker, a balloon), memory cgroups ``ktrial-<runid>-n<i>`` at the root of the
memory hierarchy, and iptables rules commented ``ktrial-nemesis:<pid>:...``. A run that
drove an installed system (clusters/installed.py) left ``n<i>/restore.sh`` in its run
directory: for a dead run it is run (it resumes the installed broker, writes back its
cgroup's limits, kills the run's balloons there and starts the broker if it is down)
before the directory goes. The installed broker itself carries no ktrial marker: clean
never stops it.

A run is dead when its owner is: the state record on this control machine names its
owner process (pid and start time), else the host's owner file names the control
machine and the process. A run whose owner file names another control machine is
left alone (its owner cannot be asked from here), and so is a process whose run has
neither record nor run directory on that host (a variable alone proves nothing), or a
node not in that host's run directory. A rule goes when the ktrial process its comment
names is not alive here. ``all_`` removes every run's leftovers found. The program
cache (``<root>/programs/``) is kept: it is a cache, shared by runs. A dry run lists
exactly what a real clean removes.
"""

from __future__ import annotations

import re
import shlex
import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import sshremote as R
from . import state as statemod
from .sshconn import CONTROL_PREFIX, HostUnreachable, RemoteError, SshHost

RULE_RE = re.compile(r"--comment \"?ktrial-nemesis:([1-9][0-9]{0,9}):[A-Za-z0-9_.:-]+\"?")
CGROUP_RE = re.compile(r"/ktrial-([0-9a-f]{6})-(n[0-9]{1,3})$")
RESTORE_MARK = "# ktrial: restore an installed node\n"  # such an item may start a broker: slow


def scan_script(root: str) -> str:
    return R.script(
        f"root={R.q(root)}\n"
        'for d in "$root"/runs/*; do\n'
        '  [ -d "$d" ] || continue\n'
        '  nodes=$(cd "$d" && ls -d n[0-9]* 2>/dev/null | tr "\\n" ",")\n'
        '  echo "run ${d##*/} ${nodes:-,} $(head -n 1 "$d/owner" 2>/dev/null)"\n'
        '  for r in "$d"/n[0-9]*/restore.sh; do\n'
        '    [ -f "$r" ] && [ ! -L "$r" ] && n=${r%/restore.sh} && '
        'echo "restore ${d##*/} ${n##*/}"\n'
        "  done\n"
        "done\n"
        "for p in /proc/[0-9]*; do\n"
        "  pid=${p#/proc/}\n"
        '  e=$(tr "\\0" "\\n" < "$p/environ" 2>/dev/null) || continue\n'
        "  r=$(printf '%s\\n' \"$e\" | sed -n 's/^KTRIAL_RUN=\\([0-9a-f]\\{6\\}\\)$/\\1/p' "
        "| head -n 1)\n"
        '  [ -n "$r" ] || continue\n'
        "  n=$(printf '%s\\n' \"$e\" | sed -n 's/^KTRIAL_NODE=\\(n[0-9]\\{1,3\\}\\)$/\\1/p' "
        "| head -n 1)\n"
        '  echo "proc $pid $r ${n:--} $(cat "$p/comm" 2>/dev/null)"\n'
        "done\n"
        'm=$(kt_memcg)\n[ -n "$m" ] && for c in "$m"/ktrial-*; do\n'
        '  [ -d "$c" ] && echo "cgroup $c"\ndone\n'
        "iptables-save -t filter 2>/dev/null | grep -e '--comment' | grep 'ktrial-nemesis:' "
        "| sed 's/^/rule /'\nexit 0\n"
    )


@dataclass
class HostScan:
    runs: dict[str, tuple[list[str], str]] = field(default_factory=dict)  # rid -> (nodes, owner)
    procs: list[tuple[int, str, str, str]] = field(default_factory=list)  # pid, rid, node, comm
    cgroups: list[tuple[str, str, str]] = field(default_factory=list)  # path, rid, node
    rules: list[tuple[str, int]] = field(default_factory=list)  # iptables-save line, owner pid
    restores: list[tuple[str, str]] = field(default_factory=list)  # rid, node with restore.sh


def parse_scan(text: str) -> HostScan:
    """The scan script's output -> what it found (pure); malformed lines are ignored."""
    s = HostScan()
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "run":
            f = rest.split(" ", 2)
            if len(f) >= 2 and R.RUN_ID_RE.match(f[0]):
                nodes = [n for n in f[1].split(",") if R.NODE_RE.match(n)]
                s.runs[f[0]] = (nodes, f[2] if len(f) > 2 else "")
        elif kind == "proc":
            f = rest.split(" ", 3)
            if len(f) >= 3 and f[0].isdigit() and R.RUN_ID_RE.match(f[1]):
                s.procs.append((int(f[0]), f[1], f[2], f[3] if len(f) > 3 else ""))
        elif kind == "cgroup":
            if m := CGROUP_RE.search(rest):
                s.cgroups.append((rest, m.group(1), m.group(2)))
        elif kind == "restore":
            f = rest.split()
            if len(f) == 2 and R.RUN_ID_RE.match(f[0]) and R.NODE_RE.match(f[1]):
                s.restores.append((f[0], f[1]))
        elif kind == "rule" and rest.startswith("-A ") and (m := RULE_RE.search(rest)):
            s.rules.append((rest, int(m.group(1))))
    return s


def owner_state(run_id: str, owner_line: str, here: str) -> tuple[bool | None, str]:
    """(alive?, why) of a run's owner: True/False, or None when it cannot be told here."""
    st = statemod.for_run(run_id).read()
    if st and st.get("kind") == "ssh" and isinstance(st.get("owner_pid"), int):
        alive = statemod.state_is_live(st)
        return alive, f"state record: owner pid {st['owner_pid']} {'alive' if alive else 'dead'}"
    f = owner_line.split()
    if len(f) == 3 and f[1].isdigit():
        if f[0] != here:
            return None, f"owned by a ktrial on control machine {f[0]}, not this one ({here})"
        start = int(f[2]) if f[2].isdigit() else None
        alive = statemod.is_alive(int(f[1]), start)
        return alive, f"owner file: pid {f[1]} on {here} {'alive' if alive else 'dead'}"
    return None, "no state record and no readable owner file"


@dataclass
class Plan:
    host: SshHost
    items: list[tuple[str, str]] = field(default_factory=list)  # (description, sh to remove)
    refused: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)  # dead runs whose local state record goes


def plan_host(host: SshHost, root: str, all_: bool, here: str | None = None) -> Plan:
    here = here or socket.gethostname()
    scan = parse_scan(host.out(scan_script(root), timeout=60, what="scan"))
    plan = Plan(host)
    verdict: dict[str, bool] = {}  # rid -> remove
    rids = set(scan.runs) | {p[1] for p in scan.procs} | {c[1] for c in scan.cgroups}
    for rid in sorted(rids):
        st = statemod.for_run(rid).read()
        mine = rid in scan.runs or (st.get("kind") == "ssh")
        if not mine:
            continue  # another backend's process (a shared machine): not ours to judge here
        alive, why = owner_state(rid, scan.runs.get(rid, ([], ""))[1], here)
        if all_ or alive is False:
            verdict[rid] = True
        else:
            verdict[rid] = False
            what = "alive" if alive else "owner unknown"
            plan.refused.append(f"{host.name}: run {rid} left alone ({what}: {why})")
    nodes_here = {rid: set(v[0]) for rid, v in scan.runs.items()}
    for pid, rid, node, comm in scan.procs:
        if not verdict.get(rid):
            continue
        if node not in nodes_here.get(rid, set()) and not _state_lists(rid, host.name, node):
            continue  # another host's node (hosts sharing a kernel, e.g. the test hosts)
        plan.items.append(
            (
                f"process {pid} ({comm}, run {rid}, {node}) on {host.name}",
                R.script(
                    f"kt_alive {pid} && kt_ours {pid} {rid} && "
                    f"{{ kill -CONT {pid}; kill -KILL {pid}; }}; "
                    f"kt_wait_gone {pid} 150 || true"
                ),
            )
        )
    for path, rid, _node in scan.cgroups:
        if verdict.get(rid):
            plan.items.append((f"cgroup {path} on {host.name}", R.remove_cgroup_script(path, rid)))
    for rule, owner in scan.rules:
        if all_ or not statemod.is_alive(owner, None):
            argv = shlex.split(rule)[1:]
            plan.items.append(
                (
                    f"iptables rule on {host.name}: {rule}",
                    f"iptables -w -D {shlex.join(argv)}",
                )
            )
    for rid, node in scan.restores:
        if verdict.get(rid):
            plan.items.append(
                (
                    f"restore of installed {node} on {host.name} (run {rid}): resume it, its "
                    "cgroup limits as found, start it if down",
                    restore_item(root, rid, node),
                )
            )
    for rid in sorted(scan.runs):
        if verdict.get(rid):
            plan.items.append(
                (f"dir {root}/runs/{rid} on {host.name}", R.remove_run_dir_script(root, rid))
            )
            plan.runs.append(rid)
    return plan


def restore_item(root: str, rid: str, node: str) -> str:
    """sh running a dead run's ``restore.sh`` of `node`, only if it is a root-owned regular
    file (what the run wrote as root), never through a link."""
    f = R.q(f"{R.run_dir(root, rid)}/{node}/restore.sh")
    return (
        RESTORE_MARK + f"f={f}\n"
        '[ -f "$f" ] && [ ! -L "$f" ] && [ "$(stat -c %u "$f")" = 0 ] || '
        '{ echo "$f is not a file ktrial wrote" >&2; exit 3; }\n'
        'sh "$f"\n'
    )


def _state_lists(rid: str, host: str, node: str) -> bool:
    st = statemod.for_run(rid).read()
    return any(
        isinstance(n, dict) and n.get("host") == host and n.get("name") == node
        for n in st.get("nodes") or []
    )


def clean(
    hosts: Sequence[SshHost], root: str, all_: bool = False, dry_run: bool = False
) -> tuple[list[str], list[str], list[str]]:
    """(removed or would-be-removed lines, left-alone lines, problems) over every host."""
    done: list[str] = []
    refused: list[str] = []
    problems: list[str] = []
    dead_runs: set[str] = set()
    for h in hosts:
        try:
            plan = plan_host(h, root, all_)
        except (HostUnreachable, RemoteError) as e:
            problems.append(f"{h.name}: {e}")
            continue
        refused += plan.refused
        for what, sh in plan.items:
            if dry_run:
                done.append(what)
                continue
            try:
                h.run(sh, timeout=3700 if sh.startswith(RESTORE_MARK) else 60, what=what)
                done.append(what)
            except (HostUnreachable, RemoteError) as e:
                problems.append(str(e))
        dead_runs |= set(plan.runs)
    for rid in sorted(dead_runs):
        for d in sorted(Path("/tmp").glob(f"{CONTROL_PREFIX}{rid}-*")):
            if d.is_dir() and not d.is_symlink():  # the dead run's SSH control sockets
                done.append(f"dir {d}")
                if not dry_run:
                    shutil.rmtree(d, ignore_errors=True)
        st = statemod.for_run(rid)
        if st.read().get("kind") == "ssh":
            done.append(f"state {st.dir}")
            if not dry_run:
                st.remove()
    return done, refused, problems
