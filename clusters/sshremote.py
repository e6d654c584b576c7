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
import threading
import time
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

NOT_RUNNING = 3  # exit status of the node scripts: the node's broker does not run
TIMED_OUT = 4  # ... it was signalled, but did not reach the state waited for
ALREADY_RUNNING = 7  # start_script: the broker runs already

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
    and its version, 1 or 2 (nothing when the host has no memory cgroups)."""
    name = cgroup_name(run_id, node)
    return script(
        'm=$(kt_memcg)\n[ -n "$m" ] || exit 0\n'
        'if [ -f "$m/cgroup.subtree_control" ] && ! grep -qw memory "$m/cgroup.subtree_control"; '
        'then echo +memory > "$m/cgroup.subtree_control" 2>/dev/null || true; fi\n'
        f'mkdir -p "$m/{name}" && echo "$m/{name}"\n'
        f'[ -f "$m/{name}/memory.limit_in_bytes" ] && echo 1 || echo 2\n'
    )


def parse_cgroup(text: str) -> tuple[str, int] | None:
    """`make_cgroup_script`'s output -> (path, cgroup version) (pure); None: no cgroup."""
    lines = text.split()
    if not lines or not lines[0].startswith("/"):
        return None
    return lines[0], 1 if lines[1:2] == ["1"] else 2


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
    work: str,
    stdout: str,
    cmd: Sequence[str],
    run_id: str,
    node: str,
    cgroup: str | None,
    unpack: bool = False,
) -> str:
    """Start `cmd` detached (own session, stdio appended to `stdout`), in the cgroup, with
    the run marker; its pid goes to ``<work>/broker.pid`` and to stdout. With `unpack`,
    first unpack the tar on stdin (the node's files) into `work`, so that writing the
    files and starting is one round trip. Exits 7 (printing "running <pid>") and starts
    nothing if the node's broker already runs."""
    join = 'echo $$ > "$0/cgroup.procs" && exec "$@"' if cgroup else 'exec "$@"'
    args = " ".join(q(a) for a in cmd)
    rid = q(check_run_id(run_id))
    return script(
        f'p=$(cat {q(work)}/broker.pid 2>/dev/null) && kt_alive "$p" && kt_ours "$p" {rid} '
        f'&& {{ echo "running $p"; exit {ALREADY_RUNNING}; }}\n'
        f"set -e\nmkdir -p {q(work)}\ncd {q(work)}\n"
        + ("tar -xf -\n" if unpack else "")
        + f"mkdir -p {q(os.path.dirname(stdout))}\n"
        f"printf '\\n=== ktrial: starting {node} at %s ===\\n' \"$(date)\" "
        f">> {q(stdout)}\n"
        f"export KTRIAL_RUN={rid} KTRIAL_NODE={q(node)}\n"
        f"setsid sh -c {q(join)} {q(cgroup or '-')} {args} "
        f"</dev/null >>{q(stdout)} 2>&1 &\n"
        "echo $! > broker.pid\necho $!\n"
    )


def own_broker_finder(work: str, run_id: str) -> str:
    """The sh function ``kt_find`` the node scripts use: print the pid of the broker this
    run started (its pid file in `work`, checked to carry the run's marker), fail when
    there is none. An installed system brings its own (clusters/installed.py)."""
    return (
        f'kt_find() {{ p=$(cat {q(work)}/broker.pid 2>/dev/null) && kt_alive "$p" '
        f'&& kt_ours "$p" {q(check_run_id(run_id))} && echo "$p"; }}\n'
    )


def node_signal_script(
    work: str,
    run_id: str,
    sig: str,
    wait: str,
    timeout_s: float,
    cont_first: bool = False,
    finder: str | None = None,
) -> str:
    """One round trip for a process fault: find the node's broker (its pid file, checked
    to be ours), SIGCONT it first if `cont_first` (a stopped broker ignores TERM until
    resumed), send `sig`, then wait for `wait` ("gone", "stopped" or ""). Prints the pid;
    exits 0 when done, 3 (NOT_RUNNING) when there is no broker, 4 (TIMED_OUT) when the
    wait timed out."""
    n = max(1, int(timeout_s * 10))
    waits = {
        "gone": f'kt_wait_gone "$p" {n} || exit {TIMED_OUT}\n',
        "stopped": (
            f'i=0; until kt_stopped "$p"; do i=$((i+1)); [ $i -gt {n} ] && exit {TIMED_OUT}; '
            "sleep 0.1; done\n"
        ),
        "": "",
    }
    return script(
        (finder or own_broker_finder(work, run_id))
        + f'p=$(kt_find) || exit {NOT_RUNNING}\necho "$p"\n'
        + ('kill -CONT "$p"\n' if cont_first else "")
        + f'kill -{sig} "$p"\n'
        + waits[wait]
    )


def node_state_script(work: str, run_id: str, finder: str | None = None) -> str:
    """Print "<pid> <state>" of the node's broker (T only once every thread stopped, as
    `kt_stopped` sees it), nothing when it does not run: one round trip."""
    return script(
        (finder or own_broker_finder(work, run_id)) + "p=$(kt_find) || exit 0\n"
        'st=$(kt_state "$p"); kt_stopped "$p" && st=T\necho "$p $st"\n'
    )


def parse_pid_state(text: str) -> tuple[int, str] | None:
    """ "<pid> <state>" -> (pid, state) (pure); None for anything else (not running)."""
    out = text.split()
    if len(out) == 2 and out[0].isdigit():
        return int(out[0]), out[1]
    return None


# ---------------------------------------------------------------- several commands at once


def exec_many_script(cmds: Sequence[Sequence[str]], boundary: str) -> str:
    """Run each argv in turn (whatever the previous one's status) and print, per command,
    ``<boundary> <i> <status>``, its stdout, ``<boundary> err``, its stderr: a step's
    commands (iptables rules on one host) in one round trip."""
    if not re.match(r"^[0-9a-zA-Z_-]{8,}$", boundary):
        raise ValueError(f"not a boundary: {boundary!r}")
    body = "t=$(mktemp -d) || exit 1\ntrap 'rm -rf -- \"$t\"' EXIT\n"
    for i, argv in enumerate(cmds):
        body += (
            f'{" ".join(q(a) for a in argv)} >"$t/o" 2>"$t/e" </dev/null; r=$?\n'
            f'echo "{boundary} {i} $r"; cat "$t/o"; echo; echo "{boundary} err"; cat "$t/e"; echo\n'
        )
    return body + "exit 0\n"


def parse_exec_many(text: str, boundary: str, n: int) -> list[tuple[int, str, str]]:
    """`exec_many_script`'s output -> (status, stdout, stderr) of each of the `n` commands
    (pure); a command whose section is missing (the script was cut short) reads as
    status -1."""
    results: list[tuple[int, str, str]] = [(-1, "", "")] * n
    cur: int | None = None
    status = -1
    out: list[str] = []
    err: list[str] = []
    where = out

    def close() -> None:
        if cur is not None and 0 <= cur < n:
            results[cur] = (status, "\n".join(out), "\n".join(err))

    # every section ends with an `echo`, whose newline then separates it from the next
    for line in text.removesuffix("\n").split("\n"):
        head = line.split(" ")
        if head[0] == boundary and len(head) == 3 and head[1].isdigit():
            close()
            cur, out, err = int(head[1]), [], []
            status = int(head[2]) if head[2].lstrip("-").isdigit() else -1
            where = out
        elif head[0] == boundary and head[1:] == ["err"]:
            where = err
        elif cur is not None:
            where.append(line)
    close()
    return results


# ---------------------------------------------------------------- memory


SAMPLE_SECTIONS = (
    "status", "stat", "clk", "cmdline", "smaps", "cgstat", "failcnt", "cgpsi",
    "vmstat", "psi", "meminfo",
)  # fmt: skip


def node_sample_script(
    work: str, run_id: str, cgroup: str | None, finder: str | None = None
) -> str:
    """Everything one node-stats sample needs, in one round trip: the node's broker (its
    pid file, checked to be ours; nothing printed when it does not run), its VmRSS and
    RssAnon, /proc/<pid>/stat (CPU, major faults) and CLK_TCK, the command line and the
    heap's mappings (smaps headers and Anonymous lines only), the cgroup's memory.stat,
    failcnt and PSI, and the host's vmstat, memory PSI and meminfo; in ``#<name>``
    sections (parse_node_sample)."""
    cg = q(cgroup) if cgroup else "/nonexistent"
    return script(
        (finder or own_broker_finder(work, run_id)) + "p=$(kt_find) || exit 0\n"
        'echo "#pid"; echo "$p"\n'
        "echo '#status'; grep -E '^(VmRSS|RssAnon):' /proc/$p/status 2>/dev/null\n"
        "echo '#stat'; cat /proc/$p/stat 2>/dev/null\n"
        "echo '#clk'; getconf CLK_TCK 2>/dev/null\n"
        "echo '#cmdline'; tr '\\0' '\\n' < /proc/$p/cmdline 2>/dev/null; echo\n"
        "echo '#smaps'; grep -E '^[0-9a-f]+-[0-9a-f]+ |^Anonymous:' /proc/$p/smaps 2>/dev/null\n"
        f"c={cg}\n"
        "echo '#cgstat'; cat \"$c/memory.stat\" 2>/dev/null\n"
        "echo '#failcnt'; cat \"$c/memory.failcnt\" 2>/dev/null\n"
        "echo '#cgpsi'; cat \"$c/memory.pressure\" 2>/dev/null\n"
        "echo '#vmstat'; cat /proc/vmstat 2>/dev/null\n"
        "echo '#psi'; cat /proc/pressure/memory 2>/dev/null\n"
        "echo '#meminfo'; cat /proc/meminfo 2>/dev/null\n"
        "exit 0\n"
    )


def split_sections(text: str, names: Sequence[str]) -> dict[str, str]:
    """``#<name>`` sections of a script's output -> name -> text (pure)."""
    parts: dict[str, list[str]] = {}
    cur = ""
    for line in text.splitlines():
        if line.startswith("#") and line[1:] in names:
            cur = line[1:]
            parts[cur] = []
        elif cur:
            parts[cur].append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def parse_node_sample(text: str) -> dict[str, int | None] | None:
    """The node-stats figures (the same keys as a local node's, nemesis/nodestats.py)
    from `node_sample_script`'s output (pure); None when the broker does not run."""
    from ..nemesis import nodestats

    parts = split_sections(text, ("pid", *SAMPLE_SECTIONS))
    pid_text = parts.get("pid", "").strip()
    if not pid_text.isdigit():
        return None
    pid = int(pid_text)
    rss = anon = None
    for line in parts.get("status", "").splitlines():
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            if f[0] == "VmRSS:":
                rss = int(f[1]) * 1024
            elif f[0] == "RssAnon:":
                anon = int(f[1]) * 1024
    if rss is None:
        return None
    stat = nemcg.parse_kv(parts.get("cgstat", ""))
    cg_anon = cache = None
    version = 2
    if stat:
        if "total_rss" in stat or "rss" in stat:
            version = 1
            cg_anon = stat.get("total_rss", stat.get("rss", 0))
            cache = stat.get("total_cache", stat.get("cache", 0))
        else:
            cg_anon, cache = stat.get("anon", 0), stat.get("file", 0)
    heap = None
    xmx = max_heap([a for a in parts.get("cmdline", "").splitlines() if a])
    if xmx is not None:
        heap = find_heap(parse_smaps(parts.get("smaps", "")), xmx)
    clk = parts.get("clk", "").strip()
    cpu = nodestats.parse_proc_stat(parts.get("stat", ""), int(clk) if clk.isdigit() else 100)
    out: dict[str, int | None] = {
        "rss_bytes": rss,
        "rss_anon_bytes": anon,
        "cgroup_anon_bytes": cg_anon,
        "cache_bytes": cache,
        "heap_max_bytes": heap.max_bytes if heap else None,
        "heap_committed_bytes": heap.committed_bytes if heap else None,
        "heap_resident_bytes": heap.resident_bytes if heap else None,
        "pid": pid,
        "cpu_ms": round(cpu[0] * 1000) if cpu else None,
        "majflt": cpu[1] if cpu else None,
    }
    if stat:
        out.update(nodestats.cgroup_figures(stat, version))
        failcnt = parts.get("failcnt", "").strip()
        out["cgroup_failcnt"] = int(failcnt) if version == 1 and failcnt.isdigit() else None
        some = nemcg.parse_psi(parts.get("cgpsi", "")).get("some", {}).get("total")
        out["cgroup_psi_some_us"] = int(some) if some is not None else None
    out.update(
        nodestats.host_figures(
            parts.get("vmstat") or None, parts.get("psi") or None, parts.get("meminfo") or None
        )
    )
    return out


# ---------------------------------------------------------------- a cgroup's files in one read

CGROUP_FILES = {
    1: (
        "memory.limit_in_bytes", "memory.usage_in_bytes", "memory.failcnt",
        "memory.oom_control", "memory.stat",
    ),
    2: (
        "memory.max", "memory.high", "memory.current", "memory.events", "memory.stat",
        "memory.pressure",
    ),
}  # fmt: skip
HOST_FILES = ("/proc/vmstat", "/proc/pressure/memory")
FILE_MARK = "#ktrial-file "
MISSING_MARK = "#ktrial-missing"
DIR_MARK = "#ktrial-dir"


def read_files_script(directory: str, paths: Sequence[str]) -> str:
    """Print whether `directory` exists, then each file in a section of its own (a file
    that cannot be read says so): every read of one step in one round trip."""
    body = f"[ -d {q(directory)} ] && echo {q(DIR_MARK)}\n"
    for p in paths:
        body += f"echo; echo {q(FILE_MARK + p)}; cat {q(p)} 2>/dev/null || echo {q(MISSING_MARK)}\n"
    return body + "exit 0\n"


def parse_files(text: str) -> tuple[bool, dict[str, str | None]]:
    """`read_files_script`'s output -> (directory exists, path -> text or None) (pure)."""
    exists = False
    files: dict[str, list[str] | None] = {}
    cur: str | None = None
    for line in text.splitlines():
        if line == DIR_MARK and cur is None:
            exists = True
        elif line.startswith(FILE_MARK):
            cur = line[len(FILE_MARK) :]
            files[cur] = []
        elif cur is not None:
            lines = files[cur]
            if line == MISSING_MARK and lines == []:
                files[cur] = None
            elif lines is not None:
                lines.append(line)
    out: dict[str, str | None] = {}
    for k, v in files.items():
        out[k] = None if v is None else "\n".join(v).rstrip("\n") + "\n"
    return exists, out


class _Snapshot:
    """The last read of a cgroup's files (shared by the fault's threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at = -1e9
        self.exists = False
        self.files: dict[str, str | None] = {}


@dataclass(frozen=True)
class RemoteMemoryCgroup(nemcg.MemoryCgroup):
    """A node's memory cgroup on its host: the local class's logic, files read over SSH.

    One round trip reads every file the memory fault looks at in one step (the cgroup's
    limits, usage, counters and PSI, and the host's vmstat and PSI: `read_files_script`);
    reads within `ttl` seconds of it are answered from that snapshot, and every write
    drops it. So a fault's start (window, limits, host counters) costs one read, not ten.
    """

    host: SshHost = field(compare=False, repr=False, default=None)  # type: ignore[assignment]
    ver: int = 1
    ttl: float = 0.75
    snap: _Snapshot = field(default_factory=_Snapshot, compare=False, repr=False)

    @property
    def version(self) -> int:
        return self.ver

    def snapshot(self) -> _Snapshot:
        """The files as last read, read again (one round trip) when older than `ttl`."""
        with self.snap.lock:
            if time.monotonic() - self.snap.at < self.ttl:
                return self.snap
            files = [str(self.path / n) for n in CGROUP_FILES[self.ver]] + list(HOST_FILES)
            text = self.host.out(
                read_files_script(str(self.path), files), what=f"reading {self.path}"
            )
            self.snap.exists, self.snap.files = parse_files(text)
            self.snap.at = time.monotonic()
            return self.snap

    def forget(self) -> None:
        with self.snap.lock:
            self.snap.at = -1e9

    def _read(self, name: str) -> str:
        path = str(self.path / name)
        try:
            if name in CGROUP_FILES[self.ver]:
                text = self.snapshot().files.get(path)
                if text is None:
                    raise OSError(errno.ENOENT, f"{self.host.name}: cannot read {path}")
                return text
            return self.host.out(f"cat {q(path)}", what=f"reading {name}")
        except RemoteError as e:
            raise OSError(errno.EIO, str(e)) from e

    def _write(self, name: str, value: str) -> None:
        try:
            proc = self.host.run(f"echo {q(value)} > {q(self.path / name)}", check=False)
        finally:
            self.forget()
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()
            # The kernel refuses a v1 limit it cannot reclaim down to with EBUSY, but
            # dash's echo reports every failed write as "I/O error" (measured here):
            # both mean "busy" to the caller, which then steps the limit up.
            busy = "busy" in err.lower() or "i/o error" in err.lower()
            code = errno.EBUSY if busy else errno.EIO
            raise OSError(code, f"{self.host.name}: writing {value} to {self.path / name}: {err}")

    def exists(self) -> bool:
        return self.snapshot().exists

    def pressure(self) -> dict[str, dict[str, float]] | None:
        if self.version != 2:
            return None
        try:
            return nemcg.parse_psi(self._read("memory.pressure"))
        except OSError:
            return None

    # the host's own counters (the memory fault records their deltas)
    def vmstat(self) -> dict[str, int]:
        return nemcg.parse_kv(self.snapshot().files.get("/proc/vmstat") or "")

    def system_pressure(self) -> dict[str, dict[str, float]] | None:
        text = self.snapshot().files.get("/proc/pressure/memory")
        return nemcg.parse_psi(text) if text is not None else None


def remote_cgroup(host: SshHost, path: str, version: int | None = None) -> RemoteMemoryCgroup:
    """The cgroup at `path` on the host; its version asked for (one round trip) if not given."""
    if version is None:
        v1 = host.run(f"test -f {q(path)}/memory.limit_in_bytes", check=False).returncode == 0
        version = 1 if v1 else 2
    return RemoteMemoryCgroup(Path(path), host, version)


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
