"""Find and remove what a killed ktrial's nemesis left behind.

Called by ``ktrial cluster clean``. Leftovers are recognised by name only, never by
guesswork: iptables rules whose comment starts with ``ktrial-nemesis:<pid>:`` inside
the namespaces of ktrial clusters (``kt-*``), and processes whose environment carries
``KTRIAL_BALLOON=<pid>`` (stress-ng balloons) or ``KTRIAL_TOXIPROXY=<pid>`` (Toxiproxy
servers). Without `all`, leftovers whose owner process is still alive are kept (they
belong to a run in progress).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .iptables import COMMENT_PREFIX, owner_of, parse_tagged
from .memory import ENV_MARK as BALLOON_MARK
from .toxiproxy import ENV_MARK as TOXIPROXY_MARK

NETNS_PREFIX = "kt-"


def _alive(pid: int | None) -> bool:
    return pid is not None and pid > 0 and Path(f"/proc/{pid}").exists()


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def ktrial_namespaces() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(NETNS_PREFIX)]


def marked_processes(mark: str) -> Iterator[tuple[int, int | None]]:
    """(pid, owner pid) of every process whose environment has `mark`=<owner>."""
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
                yield int(d.name), int(owner) if owner.isdigit() else None
                break


def clean_rules(all: bool) -> list[str]:
    done = []
    for ns in ktrial_namespaces():
        save = _run(["ip", "netns", "exec", ns, "iptables-save", "-t", "filter"])
        if save.returncode != 0:
            continue
        for argv in parse_tagged(save.stdout, COMMENT_PREFIX):
            comment = argv[argv.index("--comment") + 1]
            if not all and _alive(owner_of(comment)):
                continue
            r = _run(["ip", "netns", "exec", ns, "iptables", "-w", "-D", *argv[1:]])
            if r.returncode == 0:
                done.append(f"iptables rule in {ns}: {shlex.join(argv)}")
    return done


def clean_processes(mark: str, what: str, all: bool) -> list[str]:
    done = []
    me = os.getpid()
    for pid, owner in marked_processes(mark):
        if pid == me or (not all and _alive(owner)):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            done.append(f"{what} pid {pid} (started by pid {owner})")
    return done


def clean_leftovers(all: bool = False) -> list[str]:
    """Remove nemesis leftovers; return one line per thing removed.

    `all`: also remove those of runs still alive (``ktrial cluster clean --all``).
    """
    removed = clean_rules(all)
    removed += clean_processes(BALLOON_MARK, "stress-ng balloon", all)
    removed += clean_processes(TOXIPROXY_MARK, "toxiproxy-server", all)
    return removed
