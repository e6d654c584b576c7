"""Find and remove what a killed ktrial's nemesis left behind, and nothing else.

Called by ``ktrial cluster clean``. Leftovers are recognised by exact markers, never
by guesswork:

* iptables rules whose comment is ``ktrial-nemesis:<owner pid>:<fault id>``, inside
  the namespaces of ktrial clusters (``kt-<runid>-n<i>``);
* stress-ng balloons: processes whose environment has ``KTRIAL_BALLOON=<owner pid>``
  and which are stress-ng (or the ``sh`` wrapper ktrial starts it through);
* Toxiproxy servers: processes whose environment has ``KTRIAL_TOXIPROXY=<owner pid>``
  and which run a ``toxiproxy-server`` binary;
* the redirect of an external cluster's link faults: ``nat OUTPUT`` REDIRECT rules of
  this machine commented ``ktrial-link:<owner pid>:<owner start>`` (clusters/linkproxy.py).

The owner pid must be a plain positive number: a mark with anything else was not set
by ktrial and is ignored. A leftover goes only once its owner is dead (a process
started after the leftover is a reused pid, not its owner), unless `all`. The process
running clean and its ancestors are never signalled. A dry run lists exactly what a
real clean removes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..clusters import linkproxy
from ..clusters.clean import protected_pids
from ..clusters.state import proc_start_time
from .iptables import COMMENT_PREFIX, parse_tagged
from .memory import ENV_MARK as BALLOON_MARK
from .toxiproxy import ENV_MARK as TOXIPROXY_MARK

NETNS_RE = re.compile(r"^kt-[0-9a-f]{6}-n[0-9]{1,3}$")
OWNER_RE = re.compile(r"^[1-9][0-9]{0,9}$")
COMMENT_RE = re.compile(rf"^{re.escape(COMMENT_PREFIX)}([1-9][0-9]{{0,9}}):[A-Za-z0-9_.:-]+$")


def _alive(pid: int | None) -> bool:
    return pid is not None and pid > 0 and Path(f"/proc/{pid}").exists()


def owner_alive(owner: int, pid: int) -> bool:
    """Whether `owner` (from the mark of process `pid`) can still be the process that
    started `pid`: it exists and did not start after `pid` (else its pid was reused)."""
    own_start, start = proc_start_time(owner), proc_start_time(pid)
    if own_start is None:
        return False
    return start is None or own_start <= start


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def ktrial_namespaces() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if NETNS_RE.match(n)]


def marked_processes(mark: str) -> Iterator[tuple[int, int | None]]:
    """(pid, owner pid) of every process whose environment has `mark`=<owner>; the owner
    is None when the value is not a pid (such a process is never ktrial's)."""
    needle = mark.encode() + b"="
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item.startswith(needle):
                owner = item[len(needle) :].decode(errors="replace")
                yield int(d.name), int(owner) if OWNER_RE.match(owner) else None
                break


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def is_balloon(argv: list[str]) -> bool:
    """stress-ng (its workers rename themselves stress-ng-*), or the `sh -c` wrapper that
    puts it in the node's cgroup (memory.start_balloon)."""
    if not argv:
        return False
    prog = os.path.basename(argv[0])
    return prog.startswith("stress-ng") or (
        prog in ("sh", "dash", "bash") and "ktrial-balloon" in argv[2:4]
    )


def is_toxiproxy(argv: list[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]).startswith("toxiproxy-server")


@dataclass(frozen=True)
class Leftover:
    """One thing to remove: what it is (one line) and how."""

    what: str
    remove: Callable[[], bool]  # True if it is gone


def find_rules(all: bool) -> list[Leftover]:
    found = []
    for ns in ktrial_namespaces():
        save = _run(["ip", "netns", "exec", ns, "iptables-save", "-t", "filter"])
        if save.returncode != 0:
            continue
        for argv in parse_tagged(save.stdout, COMMENT_PREFIX):
            m = COMMENT_RE.match(argv[argv.index("--comment") + 1])
            if m is None or (not all and _alive(int(m.group(1)))):
                continue
            delete = ["ip", "netns", "exec", ns, "iptables", "-w", "-D", *argv[1:]]
            found.append(
                Leftover(
                    f"iptables rule in {ns}: {shlex.join(argv)}",
                    lambda cmd=delete: _run(cmd).returncode == 0,  # type: ignore[misc]
                )
            )
    return found


def find_processes(
    mark: str, what: str, looks_right: Callable[[list[str]], bool], all: bool
) -> list[Leftover]:
    found = []
    protected = protected_pids()
    for pid, owner in marked_processes(mark):
        if owner is None or pid in protected or not looks_right(_argv(pid)):
            continue
        if not all and owner_alive(owner, pid):
            continue
        found.append(Leftover(f"{what} pid {pid} (started by pid {owner})", _killer(pid)))
    return found


def _killer(pid: int) -> Callable[[], bool]:
    def kill() -> bool:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return True

    return kill


def find_leftovers(all: bool = False) -> list[Leftover]:
    """Every nemesis leftover a clean removes (`all`: also those of live runs)."""
    found = find_rules(all)
    found += find_processes(BALLOON_MARK, "stress-ng balloon", is_balloon, all)
    found += find_processes(TOXIPROXY_MARK, "toxiproxy-server", is_toxiproxy, all)
    # an external cluster's link redirect: nat rules of this machine (clusters/linkproxy.py)
    found += [Leftover(what, remove) for what, remove in linkproxy.find_leftovers(all)]
    return found


def clean_leftovers(all: bool = False, dry_run: bool = False) -> list[str]:
    """Remove nemesis leftovers; return one line per thing removed (with `dry_run`: per
    thing a real clean would remove, removing nothing).

    `all`: also remove those of runs still alive (``ktrial cluster clean --all``).
    """
    done = []
    for item in find_leftovers(all):
        if dry_run:
            done.append(item.what)
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            if item.remove():
                done.append(item.what)
    return done


def clean_processes(mark: str, what: str, all: bool) -> list[str]:
    """Kill the leftover processes marked `mark` (a balloon or Toxiproxy mark)."""
    looks_right = is_balloon if mark == BALLOON_MARK else is_toxiproxy
    return [p.what for p in find_processes(mark, what, looks_right, all) if p.remove()]


def clean_rules(all: bool) -> list[str]:
    """Remove the tagged iptables rules of dead owners (of all owners with `all`)."""
    return [r.what for r in find_rules(all) if r.remove()]
