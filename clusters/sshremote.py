"""What the ssh backend runs on a node's host: sh scripts (pure builders) and the
remote counterparts of the local memory helpers.

Everything a script touches on the host is named by the run: the run directory
``<root>/runs/<runid>/`` (an ``owner`` file and node directories ``n<i>``), the memory
cgroup ``ktrial-<runid>-n<i>`` at the root of the host's memory hierarchy, processes
carrying ``KTRIAL_RUN=<runid>`` in their environment (the broker, the balloon). A
process is ours only if its environment says so (pids are re-checked on every use, so a
reused pid is never signalled). Programs uploaded once are cached by content under
``<root>/programs/<digest>/`` and kept across runs.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..nemesis import cgroups as nemcg
from ..nemesis.jvmheap import find_heap, max_heap, parse_smaps
from .sshconn import RemoteError, SshHost

DEFAULT_ROOT = "/var/tmp/ktrial"
RUN_ID_RE = re.compile(r"^[0-9a-f]{6}$")
NODE_RE = re.compile(r"^n[0-9]{1,3}$")
DIGEST_RE = re.compile(r"^[0-9a-f]{16,64}$")

# sh functions every script may use ($1 a pid, $2 a run id)
LIB = r"""
kt_state() { sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null; }
kt_alive() { s=$(kt_state "$1"); [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]; }
kt_ours() { tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | grep -qx "KTRIAL_RUN=$2"; }
kt_stopped() {
  for t in /proc/"$1"/task/*/stat; do
    s=$(sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "$t" 2>/dev/null)
    [ -z "$s" ] || [ "$s" = T ] || [ "$s" = t ] || return 1
  done
}
kt_wait_gone() {
  i=0; while kt_alive "$1"; do i=$((i+1)); [ $i -gt $2 ] && return 1; sleep 0.1; done
}
kt_memcg() {
  m=$(awk '$3=="cgroup" && $4 ~ /(^|,)memory(,|$)/ {print $2; exit}' /proc/self/mounts)
  if [ -z "$m" ]; then
    m=$(awk '$3=="cgroup2" {print $2; exit}' /proc/self/mounts)
    [ -n "$m" ] && grep -qw memory "$m/cgroup.controllers" 2>/dev/null || m=""
  fi
  echo "$m"
}
"""


def q(s: object) -> str:
    return shlex.quote(str(s))


def script(body: str) -> str:
    return LIB + body


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.match(run_id):
        raise ValueError(f"not a ktrial run id: {run_id!r}")
    return run_id


def run_dir(root: str, run_id: str) -> str:
    return f"{root}/runs/{check_run_id(run_id)}"


def cgroup_name(run_id: str, node: str) -> str:
    return f"ktrial-{check_run_id(run_id)}-{node}"


# ---------------------------------------------------------------- set-up


def probe_script() -> str:
    """What the host has: uid, the memory hierarchy, java, iptables, stress-ng."""
    return script(
        'echo "uid=$(id -u)"\n'
        'echo "memcg=$(kt_memcg)"\n'
        'echo "java=$(command -v java || true)"\n'
        'echo "iptables=$(command -v iptables || true)"\n'
        'echo "stress=$(command -v stress-ng || true)"\n'
    )


def parse_probe(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def make_run_dir_script(root: str, run_id: str, owner: str, nodes: Sequence[str]) -> str:
    d = run_dir(root, run_id)
    mk = " ".join(q(f"{d}/{n}/logs") + " " + q(f"{d}/{n}/data") for n in nodes)
    return f"set -e\nmkdir -p {mk}\nprintf '%s\\n' {q(owner)} > {q(d + '/owner')}\n"


def remove_run_dir_script(root: str, run_id: str) -> str:
    """rm -rf of exactly the run's directory, and only if it holds nothing ktrial does
    not make there (an owner file and node directories)."""
    d = q(run_dir(root, run_id))
    return (
        f'd={d}\n[ -d "$d" ] || exit 0\n[ -L "$d" ] && {{ echo "$d is a link" >&2; exit 3; }}\n'
        'for e in "$d"/* "$d"/.[!.]*; do\n'
        '  [ -e "$e" ] || continue\n'
        '  case "${e##*/}" in owner) ;; n[0-9]|n[0-9][0-9]|n[0-9][0-9][0-9]) ;; '
        '*) echo "$d holds ${e##*/}, which ktrial does not make there" >&2; exit 3;; esac\n'
        "done\n"
        'rm -rf -- "$d"\nrmdir "${d%/*}" 2>/dev/null || true\n'
    )


def program_ready_script(root: str, digest: str) -> str:
    return f"test -f {q(f'{root}/programs/{digest}/.complete')}"


def program_upload_script(root: str, digest: str) -> str:
    """Unpack a tar from stdin into the program cache (atomic: a marker last, a rename)."""
    if not DIGEST_RE.match(digest):
        raise ValueError(f"not a digest: {digest!r}")
    d = f"{root}/programs/{digest}"
    return (
        f'set -e\nd={q(d)}\ntmp="$d.tmp.$$"\nrm -rf -- "$tmp"\nmkdir -p "$tmp"\n'
        'tar -C "$tmp" -xf -\ntouch "$tmp/.complete"\n'
        'if [ -f "$d/.complete" ]; then rm -rf -- "$tmp"; '
        'else rm -rf -- "$d"; mv -T "$tmp" "$d"; fi\n'
    )


def make_cgroup_script(run_id: str, node: str) -> str:
    """Create the node's memory cgroup at the root of the memory hierarchy; print its path
    (nothing when the host has no memory cgroups)."""
    name = cgroup_name(run_id, node)
    return script(
        'm=$(kt_memcg)\n[ -n "$m" ] || exit 0\n'
        'if [ -f "$m/cgroup.subtree_control" ] && ! grep -qw memory "$m/cgroup.subtree_control"; '
        'then echo +memory > "$m/cgroup.subtree_control" 2>/dev/null || true; fi\n'
        f'mkdir -p "$m/{name}" && echo "$m/{name}"\n'
    )


def remove_cgroup_script(path: str, run_id: str) -> str:
    """Kill what is left in the cgroup (ours by construction), then rmdir it."""
    base = os.path.basename(path)
    if not re.match(rf"^ktrial-{check_run_id(run_id)}-n[0-9]{{1,3}}$", base):
        raise ValueError(f"not a cgroup of run {run_id}: {path}")
    return script(
        f'c={q(path)}\n[ -d "$c" ] || exit 0\n'
        'for p in $(cat "$c/cgroup.procs" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; '
        'kill -KILL "$p" 2>/dev/null; done\n'
        'i=0; while ! rmdir "$c" 2>/dev/null; do i=$((i+1)); [ $i -gt 100 ] && '
        '{ echo "cannot remove $c" >&2; exit 1; }; sleep 0.1; done\n'
    )


# ---------------------------------------------------------------- the broker process


def start_script(
    work: str, stdout: str, cmd: Sequence[str], run_id: str, node: str, cgroup: str | None
) -> str:
    """Start `cmd` detached (own session, stdio appended to `stdout`), in the cgroup, with
    the run marker; its pid goes to ``<work>/broker.pid`` and to stdout."""
    join = 'echo $$ > "$0/cgroup.procs" && exec "$@"' if cgroup else 'exec "$@"'
    args = " ".join(q(a) for a in cmd)
    return (
        f"set -e\ncd {q(work)}\nmkdir -p {q(os.path.dirname(stdout))}\n"
        f"printf '\\n=== ktrial: starting {node} at %s ===\\n' \"$(date)\" "
        f">> {q(stdout)}\n"
        f"export KTRIAL_RUN={q(check_run_id(run_id))} KTRIAL_NODE={q(node)}\n"
        f"setsid sh -c {q(join)} {q(cgroup or '-')} {args} "
        f"</dev/null >>{q(stdout)} 2>&1 &\n"
        "echo $! > broker.pid\necho $!\n"
    )


def status_script(work: str, run_id: str) -> str:
    """Print "<pid> <state>" of the node's broker when it runs (and is ours), else nothing."""
    return script(
        f"p=$(cat {q(work)}/broker.pid 2>/dev/null) || exit 0\n"
        f'kt_alive "$p" && kt_ours "$p" {q(run_id)} && echo "$p $(kt_state "$p")"\nexit 0\n'
    )


def signal_script(pid: int, run_id: str, sig: str, wait: str, timeout_s: float) -> str:
    """Send `sig` to the broker `pid` if it is still ours; then wait for `wait`
    ("gone", "stopped" or "" for nothing). Exit 0 if it happened, 4 on a timeout."""
    n = max(1, int(timeout_s * 10))
    waits = {
        "gone": f'kt_wait_gone "$p" {n} || exit 4\n',
        "stopped": (
            f'i=0; until kt_stopped "$p"; do i=$((i+1)); [ $i -gt {n} ] && exit 4; '
            "sleep 0.1; done\n"
        ),
        "": "",
    }
    return script(
        f"p={int(pid)}\n"
        f'kt_alive "$p" && kt_ours "$p" {q(run_id)} || exit 0\n'
        f'kill -{sig} "$p"\n' + waits[wait]
    )


def stopped_script(pid: int) -> str:
    return script(f"kt_stopped {int(pid)}")


# ---------------------------------------------------------------- memory


def memory_sample_script(pid: int, cgroup: str | None) -> str:
    """VmRSS/RssAnon, the cgroup's memory.stat, the command line and the heap's mappings
    (smaps headers and Anonymous lines only), in sections."""
    p = int(pid)
    cg = f"cat {q(cgroup)}/memory.stat 2>/dev/null" if cgroup else "true"
    return (
        f"echo '#status'; grep -E '^(VmRSS|RssAnon):' /proc/{p}/status 2>/dev/null\n"
        f"echo '#cgroup'; {cg}\n"
        f"echo '#cmdline'; tr '\\0' '\\n' < /proc/{p}/cmdline 2>/dev/null; echo\n"
        f"echo '#smaps'; grep -E '^[0-9a-f]+-[0-9a-f]+ |^Anonymous:' /proc/{p}/smaps 2>/dev/null\n"
        "exit 0\n"
    )


def parse_memory_sample(text: str, pid: int) -> dict[str, int | None] | None:
    """The node-stats figures (nemesis/nodestats.py) from `memory_sample_script`'s output."""
    parts: dict[str, list[str]] = {}
    cur = ""
    for line in text.splitlines():
        if line.startswith("#") and line[1:] in ("status", "cgroup", "cmdline", "smaps"):
            cur = line[1:]
            parts[cur] = []
        elif cur:
            parts[cur].append(line)
    rss = anon = None
    for line in parts.get("status", []):
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            if f[0] == "VmRSS:":
                rss = int(f[1]) * 1024
            elif f[0] == "RssAnon:":
                anon = int(f[1]) * 1024
    if rss is None:
        return None
    cg_anon = cache = None
    stat = nemcg.parse_kv("\n".join(parts.get("cgroup", [])))
    if stat:
        if "total_rss" in stat or "rss" in stat:
            cg_anon = stat.get("total_rss", stat.get("rss", 0))
            cache = stat.get("total_cache", stat.get("cache", 0))
        else:
            cg_anon, cache = stat.get("anon", 0), stat.get("file", 0)
    heap = None
    xmx = max_heap([a for a in parts.get("cmdline", []) if a])
    if xmx is not None:
        heap = find_heap(parse_smaps("\n".join(parts.get("smaps", []))), xmx)
    return {
        "rss_bytes": rss,
        "rss_anon_bytes": anon,
        "cgroup_anon_bytes": cg_anon,
        "cache_bytes": cache,
        "heap_max_bytes": heap.max_bytes if heap else None,
        "heap_committed_bytes": heap.committed_bytes if heap else None,
        "heap_resident_bytes": heap.resident_bytes if heap else None,
        "pid": pid,
    }


@dataclass(frozen=True)
class RemoteMemoryCgroup(nemcg.MemoryCgroup):
    """A node's memory cgroup on its host: the local class's logic, files read over SSH."""

    host: SshHost = field(compare=False, repr=False, default=None)  # type: ignore[assignment]
    ver: int = 1

    @property
    def version(self) -> int:
        return self.ver

    def _read(self, name: str) -> str:
        try:
            return self.host.out(f"cat {q(self.path / name)}", what=f"reading {name}")
        except RemoteError as e:
            raise OSError(errno.EIO, str(e)) from e

    def _write(self, name: str, value: str) -> None:
        proc = self.host.run(f"echo {q(value)} > {q(self.path / name)}", check=False)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()
            # The kernel refuses a v1 limit it cannot reclaim down to with EBUSY, but
            # dash's echo reports every failed write as "I/O error" (measured here):
            # both mean "busy" to the caller, which then steps the limit up.
            busy = "busy" in err.lower() or "i/o error" in err.lower()
            code = errno.EBUSY if busy else errno.EIO
            raise OSError(code, f"{self.host.name}: writing {value} to {self.path / name}: {err}")

    def exists(self) -> bool:
        return self.host.run(f"test -d {q(self.path)}", check=False).returncode == 0

    def pressure(self) -> dict[str, dict[str, float]] | None:
        if self.version != 2:
            return None
        try:
            return nemcg.parse_psi(self._read("memory.pressure"))
        except OSError:
            return None

    # the host's own counters (the memory fault records their deltas)
    def vmstat(self) -> dict[str, int]:
        return nemcg.parse_kv(self.host.out("cat /proc/vmstat"))

    def system_pressure(self) -> dict[str, dict[str, float]] | None:
        proc = self.host.run("cat /proc/pressure/memory", check=False)
        return nemcg.parse_psi(proc.stdout.decode()) if proc.returncode == 0 else None


def remote_cgroup(host: SshHost, path: str) -> RemoteMemoryCgroup:
    v1 = host.run(f"test -f {q(path)}/memory.limit_in_bytes", check=False).returncode == 0
    return RemoteMemoryCgroup(Path(path), host, 1 if v1 else 2)


BALLOON_MARK = "KTRIAL_BALLOON"


def balloon_start_script(cgroup: str, nbytes: int, run_id: str, owner_pid: int, node: str) -> str:
    """A detached ``stress-ng --vm`` that joins the cgroup before it allocates; prints its pid."""
    cmd = ["stress-ng", "--vm", "1", "--vm-bytes", str(int(nbytes)), "--vm-keep"]
    cmd += ["--timeout", "0", "--quiet", "--vm-hang", "0"]
    join = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'
    return (
        "set -e\ncommand -v stress-ng >/dev/null || { echo 'stress-ng missing' >&2; exit 5; }\n"
        f"export KTRIAL_RUN={q(check_run_id(run_id))} KTRIAL_NODE={q(node)} "
        f"{BALLOON_MARK}={int(owner_pid)}\n"
        f"setsid sh -c {q(join)} ktrial-balloon {q(cgroup)} {' '.join(cmd)} "
        "</dev/null >/dev/null 2>&1 &\necho $!\n"
    )


def balloon_stop_script(pid: int, cgroup: str, run_id: str) -> str:
    """Kill the balloon's process group, then any marked balloon left in the cgroup."""
    return script(
        f'p={int(pid)}\nif kt_alive "$p" && kt_ours "$p" {q(run_id)}; then '
        'kill -KILL -- -"$p" 2>/dev/null; fi\n'
        "i=0\nwhile :; do\n  left=''\n"
        f"  for x in $(cat {q(cgroup)}/cgroup.procs 2>/dev/null); do\n"
        f'    tr "\\0" "\\n" < /proc/$x/environ 2>/dev/null | grep -q "^{BALLOON_MARK}=" && '
        'left="$left $x"\n  done\n'
        '  [ -z "$left" ] && exit 0\n  kill -KILL $left 2>/dev/null\n'
        "  i=$((i+1)); [ $i -gt 100 ] && exit 4; sleep 0.1\ndone\n"
    )


class RemoteBalloon:
    """A balloon running on a node's host (what memory.start_balloon is locally)."""

    def __init__(self, host: SshHost, pid: int, cgroup: str, run_id: str) -> None:
        self.host, self.pid, self.cgroup, self.run_id = host, pid, cgroup, run_id

    def stop(self) -> None:
        self.host.run(balloon_stop_script(self.pid, self.cgroup, self.run_id), timeout=30)
