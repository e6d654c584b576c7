"""A system somebody else installed on the `--cluster ssh` hosts, driven as it is found.

`ktrial run --cluster ssh --node h1,h2,h3 --system-spec FILE` with a node spec that has
an ``[installed]`` table (and no image) does not upload or start anything: the brokers
already run on the hosts (an admin's Kafka or Queen, a systemd unit), and the spec says
how to drive each one. The format is the node spec's (clusters/nodespec.py: `name`,
`[ports]` with the client port, `[ready]`, `[faults]`, `[profile]`), so one file
describes a system whichever way it runs; this module reads the ``[installed]`` table
and runs it over the ssh backend's connections (clusters/ssh.py):

```toml
[installed]
start = "/opt/kafka/bin/start.sh"              # returns once the broker is launched
stop = "/opt/kafka/bin/kafka-server-stop.sh"   # optional: else stop_signal to the pid
pidfile = "/opt/kafka/run/kafka.pid"           # or pid = "<command printing it>"
cmdline_contains = "kafka.Kafka"               # a pid whose command line lacks it is not the broker
memory_cgroup = "/kafka"                       # optional: under the host's memory hierarchy
logs = ["/opt/kafka/logs/server.log"]          # collected: what the run wrote
# systemd_unit = "kafka.service"               # pid (MainPID), start, stop and
#                                              # memory_cgroup = "unit" from systemd
```

Templates take the node's `{id}` (its broker id: `broker_ids`, else 1..N), `{index}`,
`{name}` (n1..), `{host}` (as given to --node), `{address}` (its IPv4 address), `{port}`
(client port), `{port_NAME}`, `{nodes}` and `{bootstrap}`; values are put in as they are
(host names are checked by --node's parser; nothing else comes from outside the spec).

What a run does to an installed system, and how it leaves it (the rule: touch nothing
ktrial did not make, and leave the system running as found):

- at start, per host: the broker must be running (else the run stops, naming the node:
  ktrial does not start what it found stopped); its pid, its memory cgroup's limits
  and the sizes of its log files are noted, and the run directory
  ``<root>/runs/<runid>/n<i>/`` gets ``restore.sh``, the script that puts the node back;
- faults: kill, stop and pause signal the pid the spec yields (re-read every time);
  start and restart run the spec's commands; partitions and loss are iptables rules
  like on any ssh node; memory pressure squeezes the cgroup the spec names (refused
  without one) and runs the balloon there; node stats read the host's /proc;
- the heal and the teardown resume a paused broker, delete this ktrial's rules, write
  back the cgroup limits noted at start (never "unlimited" over the admin's own), kill
  any balloon and start a broker that is down (teardown waits until it has a pid);
  the topics the run made are deleted; the logs collected are only what was written
  to them during the run. Nothing installed is written, moved or deleted;
- a ktrial killed with SIGKILL leaves its run directory: ``ktrial cluster clean
  --cluster ssh`` runs its ``restore.sh`` before removing it (clusters/sshclean.py).
  The installed broker carries no ktrial marker, so clean never stops it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shlex
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import sshremote as R
from .admin import ClusterNotReady
from .base import Unsupported
from .kafka_config import Ports
from .nodebase import READY_TOPIC, NodeStateError
from .nodespec import PLACEHOLDER, NodeSpec, SpecError, SpecSystem, render
from .ssh import SshCluster, SshNode, _address, require_root_and_iptables
from .sshconn import HostSpec, HostUnreachable, RemoteError, SshHost, SshOptions

log = logging.getLogger(__name__)

INSTALLED_KEYS: dict[str, type | tuple[type, ...]] = {
    "start": str,
    "stop": str,
    "pid": str,
    "pidfile": str,
    "systemd_unit": str,
    "cmdline_contains": str,
    "memory_cgroup": str,
    "logs": list,
    "broker_ids": list,
    "start_timeout": (int, float),
    "stop_timeout": (int, float),
}
NODE_KEYS = ("id", "index", "name", "host", "address", "port", "nodes", "bootstrap")
LOG_CAP = 64 << 20  # bytes of each log file collected at most (its end)
START_FAILED = 5  # exit status of the start/stop scripts: the spec's command failed
NO_TOXIC = (
    "an installed system advertises its own listeners, so ktrial cannot put Toxiproxy "
    "in front of it over SSH; run link faults with --cluster external (link proxies)"
)


@dataclass(frozen=True)
class InstalledSpec:
    """What a node spec's [installed] table says (validated; templates not rendered)."""

    start: str
    stop: str | None = None
    pid: str | None = None
    pidfile: str | None = None
    systemd_unit: str | None = None
    cmdline_contains: str | None = None
    memory_cgroup: str | None = None  # "unit", or a path under the memory hierarchy
    logs: tuple[str, ...] = ()
    broker_ids: tuple[int, ...] | None = None
    start_timeout: float = 120.0
    stop_timeout: float = 60.0

    def pid_source(self) -> str:
        if self.pid:
            return f"pid command {self.pid!r}"
        if self.pidfile:
            return f"pidfile {self.pidfile}"
        return f"systemd unit {self.systemd_unit} (MainPID)"


# ---------------------------------------------------------------- the [installed] table


def parse_installed(table: Mapping[str, Any], spec: NodeSpec) -> InstalledSpec:
    """The [installed] table of `spec`'s file (pure); SpecError naming file and key."""
    where = f"node spec {spec.path} [installed]"
    for k, v in table.items():
        if k not in INSTALLED_KEYS:
            raise SpecError(
                f"{where}: unknown key {k!r}; allowed: {', '.join(sorted(INSTALLED_KEYS))}"
            )
        want = INSTALLED_KEYS[k]
        if isinstance(v, bool) or not isinstance(v, want):
            name = "number" if want == (int, float) else getattr(want, "__name__", "value")
            raise SpecError(f"{where}: {k} must be a {name}, not {type(v).__name__}")
        if isinstance(v, str) and not v.strip():
            raise SpecError(f"{where}: {k} is empty")
    unit = table.get("systemd_unit")
    if unit is not None and not re.fullmatch(r"[A-Za-z0-9@_.:{}\\-]+", unit):
        raise SpecError(f"{where}: systemd_unit {unit!r} is not a unit name")
    if "pid" in table and "pidfile" in table:
        raise SpecError(f"{where}: give one of pid (a command printing it) and pidfile, not both")
    if not ({"pid", "pidfile"} & set(table)) and unit is None:
        raise SpecError(
            f"{where}: how to find the broker's pid is missing: pid = \"<command printing "
            'it>", pidfile = "<path>" or systemd_unit = "<unit>"'
        )
    start = table.get("start") or (f"systemctl start {unit}" if unit else None)
    if start is None:
        raise SpecError(
            f'{where}: start (a command that launches the broker and returns, e.g. "systemctl '
            'start kafka") is required without systemd_unit'
        )
    stop = table.get("stop") or (f"systemctl stop {unit}" if unit else None)
    cg = table.get("memory_cgroup")
    if cg == "unit" and unit is None:
        raise SpecError(f'{where}: memory_cgroup = "unit" needs systemd_unit')
    if cg is not None and cg != "unit":
        if not cg.startswith("/") or cg.rstrip("/") == "" or "/../" in cg + "/" or "'" in cg:
            raise SpecError(
                f"{where}: memory_cgroup {cg!r}: give the cgroup's path under the host's "
                'memory hierarchy (e.g. "/kafka" for /sys/fs/cgroup/memory/kafka on cgroup '
                'v1, /sys/fs/cgroup/kafka on v2), not the root, or "unit"'
            )
        if cg.startswith("/sys/fs/cgroup"):
            raise SpecError(
                f"{where}: memory_cgroup {cg!r}: give the path under the memory hierarchy "
                "(without /sys/fs/cgroup[/memory]): the same spec then fits cgroup v1 and v2"
            )
    logs = table.get("logs", [])
    if not all(isinstance(x, str) and x.startswith("/") for x in logs):
        raise SpecError(f"{where}: logs must be a list of absolute paths (strings)")
    ids = table.get("broker_ids")
    if ids is not None and (
        not ids or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)
    ):
        raise SpecError(f"{where}: broker_ids must list one broker id (an integer >= 0) per host")
    if ids is not None and len(set(ids)) != len(ids):
        raise SpecError(f"{where}: broker_ids lists an id twice")
    timeouts = {}
    for k in ("start_timeout", "stop_timeout"):
        if k in table:
            if not 0 < table[k] <= 3600:
                raise SpecError(f"{where}: {k} must be between 0 and 3600 seconds")
            timeouts[k] = float(table[k])
    templates = {k: v for k, v in table.items() if isinstance(v, str)}
    templates.update({f"logs[{i}]": v for i, v in enumerate(logs)})
    known = {*NODE_KEYS, *(f"port_{k}" for k in spec.ports)}
    for key, text in templates.items():
        for m in PLACEHOLDER.finditer(text):
            if m.group(1) not in known:
                raise SpecError(
                    f"{where}: {key}: unknown placeholder {{{m.group(1)}}}; known: "
                    + ", ".join("{" + k + "}" for k in sorted(known))
                )
    return InstalledSpec(
        start=start,
        stop=stop,
        pid=table.get("pid"),
        pidfile=table.get("pidfile"),
        systemd_unit=unit,
        cmdline_contains=table.get("cmdline_contains"),
        memory_cgroup=cg,
        logs=tuple(logs),
        broker_ids=tuple(ids) if ids is not None else None,
        **timeouts,
    )


def check_hosts(spec: NodeSpec, n_hosts: int) -> None:
    """SpecError when the spec's broker ids do not fit the --node list."""
    inst = spec.installed
    if inst is not None and inst.broker_ids is not None and len(inst.broker_ids) != n_hosts:
        raise SpecError(
            f"node spec {spec.path} [installed]: broker_ids lists {len(inst.broker_ids)} "
            f"id(s) for {n_hosts} --node host(s): one per host, in --node order"
        )


def node_values(
    spec: NodeSpec, index: int, node_id: int, host: str, address: str, peers: Sequence[str]
) -> dict[str, str]:
    """Every placeholder's value for the node on `host` (pure); `peers` are every node's
    address in --node order."""
    port = spec.client_port
    v = {
        "id": str(node_id),
        "index": str(index - 1),
        "name": f"n{index}",
        "host": host,
        "address": address,
        "port": str(port),
        "nodes": str(len(peers)),
        "bootstrap": ",".join(f"{a}:{port}" for a in peers),
    }
    v.update({f"port_{k}": str(p) for k, p in spec.ports.items()})
    return v


@dataclass(frozen=True)
class NodeCommands:
    """The [installed] templates rendered for one node."""

    start: str
    stop: str | None
    pid: str | None
    pidfile: str | None
    unit: str | None
    cmdline_contains: str | None
    memory_cgroup: str | None
    logs: tuple[str, ...]
    start_timeout: float
    stop_timeout: float


def commands_for(inst: InstalledSpec, values: Mapping[str, str]) -> NodeCommands:
    def r(text: str | None) -> str | None:
        return None if text is None else render(text, values)

    return NodeCommands(
        start=render(inst.start, values),
        stop=r(inst.stop),
        pid=r(inst.pid),
        pidfile=r(inst.pidfile),
        unit=r(inst.systemd_unit),
        cmdline_contains=r(inst.cmdline_contains),
        memory_cgroup=inst.memory_cgroup if inst.memory_cgroup == "unit" else r(inst.memory_cgroup),
        logs=tuple(render(p, values) for p in inst.logs),
        start_timeout=inst.start_timeout,
        stop_timeout=inst.stop_timeout,
    )


# ---------------------------------------------------------------- scripts (pure builders)

q = R.q


def systemctl_show(unit: str, prop: str) -> str:
    """The sh command printing one property of a unit (works with systemd before 230,
    which lacks `--value`)."""
    return f"systemctl show -p {prop} {q(unit)} 2>/dev/null | sed -n 's/^{prop}=//p'"


def finder(c: NodeCommands) -> str:
    """``kt_find``: print the installed broker's pid (alive, and its command line holding
    `cmdline_contains` if given), fail when there is none."""
    if c.pid:
        read = f"p=$(sh -c {q(c.pid)} 2>/dev/null | head -n 1 | tr -d ' \\t\\r')"
    elif c.pidfile:
        read = f"p=$(head -n 1 {q(c.pidfile)} 2>/dev/null | tr -d ' \\t\\r')"
    else:
        assert c.unit is not None
        read = f"p=$({systemctl_show(c.unit, 'MainPID')})"
    match = ""
    if c.cmdline_contains:
        match = (
            "  tr '\\0' ' ' < \"/proc/$p/cmdline\" 2>/dev/null | grep -qF -- "
            f"{q(c.cmdline_contains)} || return 1\n"
        )
    return (
        "kt_find() {\n"
        f"  {read}\n"
        '  case "$p" in ""|0|*[!0-9]*) return 1;; esac\n'
        '  kt_alive "$p" || return 1\n' + match + '  echo "$p"\n}\n'
    )


def _run_command(cmd: str, out: str, timeout: float) -> str:
    """sh running the spec's command `cmd` from /, stdio to the file `out`, at most
    `timeout` s (coreutils timeout when the host has it; status 124 then says it did not
    return), without ktrial's markers in its environment (what it starts is the admin's,
    never a process `cluster clean` would take for ktrial's); its status in $r."""
    t = max(1, int(timeout))
    clean = "cd / && unset KTRIAL_RUN KTRIAL_NODE KTRIAL_BALLOON && exec"
    return (
        "if command -v timeout >/dev/null 2>&1; then "
        f"({clean} timeout {t} sh -c {q(cmd)}) </dev/null >{q(out)} 2>&1; r=$?; "
        f"else ({clean} sh -c {q(cmd)}) </dev/null >{q(out)} 2>&1; r=$?; fi\n"
        f'[ "$r" -eq 124 ] && echo "the command did not return within {t} s: it must '
        'launch the broker in the background and return" >>' + f"{q(out)}\n"
    )


def _start_block(c: NodeCommands, work: str) -> str:
    """Run the start command, then wait up to start_timeout for a pid (kt_find)."""
    out = f"{work}/start.out"
    n = max(1, int(c.start_timeout * 5))
    return (
        _run_command(c.start, out, c.start_timeout) + f'if [ "$r" -ne 0 ]; then cat {q(out)} >&2; '
        f'echo "the start command exited with status $r" >&2; exit {START_FAILED}; fi\n'
        f"i=0; until p=$(kt_find); do i=$((i+1)); if [ $i -gt {n} ]; then cat {q(out)} >&2; "
        f'echo "no broker pid ({int(c.start_timeout)} s after the start command)" >&2; '
        f"exit {R.TIMED_OUT}; fi; sleep 0.2; done\n"
    )


def start_script(c: NodeCommands, work: str) -> str:
    """Start the installed broker (the spec's start command) unless it runs; print its pid
    once it has one. Exits 7 ("running <pid>") when it already ran, 5 when the command
    failed, 4 when no pid came within start_timeout (stderr: the command's output)."""
    return R.script(
        finder(c)
        + f'p=$(kt_find) && {{ echo "running $p"; exit {R.ALREADY_RUNNING}; }}\n'
        + f"mkdir -p {q(work)}\n"
        + _start_block(c, work)
        + 'echo "$p"\n'
    )


def stop_script(c: NodeCommands, work: str) -> str:
    """The spec's stop command (after a SIGCONT: a stopped broker cannot stop), then wait
    up to stop_timeout until the pid it had is gone. Prints that pid; exits 3 when none
    ran, 5 when the command failed, 4 when the broker outlived the wait."""
    assert c.stop is not None
    out = f"{work}/stop.out"
    n = max(1, int(c.stop_timeout * 10))
    return R.script(
        finder(c)
        + f'p=$(kt_find) || exit {R.NOT_RUNNING}\necho "$p"\nkill -CONT "$p" 2>/dev/null\n'
        + f"mkdir -p {q(work)}\n"
        + _run_command(c.stop, out, c.stop_timeout)
        + f'if [ "$r" -ne 0 ]; then cat {q(out)} >&2; '
        f'echo "the stop command exited with status $r" >&2; exit {START_FAILED}; fi\n'
        + f'kt_wait_gone "$p" {n} || exit {R.TIMED_OUT}\n'
    )


def _cgroup_rel(c: NodeCommands) -> str:
    """sh setting $rel: the cgroup's path under the memory hierarchy ('' when none)."""
    if c.memory_cgroup == "unit":
        assert c.unit is not None
        return f"rel=$({systemctl_show(c.unit, 'ControlGroup')})\n"
    return f"rel={q(c.memory_cgroup or '')}\n"


def survey_script(c: NodeCommands) -> str:
    """What the run notes at start: the broker's pid and state (``pid P S`` or
    ``notrunning``), its memory cgroup (``cgroup PATH``, ``version V``, ``member yes``
    when the broker is in it or below it, ``limit FILE VALUE`` for every limit file), and
    each log file's size (``log SIZE PATH``). One round trip."""
    body = finder(c) + (
        'if p=$(kt_find); then st=$(kt_state "$p"); kt_stopped "$p" && st=T; '
        'echo "pid $p $st"; else echo notrunning; fi\n'
    )
    if c.memory_cgroup:
        body += (
            _cgroup_rel(c) + 'm=$(kt_memcg)\necho "memcg $m"\n'
            'if [ -n "$m" ] && [ -n "$rel" ] && [ "$rel" != / ] && [ -d "$m$rel" ]; then\n'
            '  c="$m$rel"; echo "cgroup $c"\n'
            '  if [ -f "$c/memory.limit_in_bytes" ]; then echo "version 1"; '
            'else echo "version 2"; fi\n'
            '  [ -n "$p" ] && find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null '
            '| grep -qx "$p" && echo "member yes"\n'
            "  for f in memory.limit_in_bytes memory.max memory.high; do\n"
            '    [ -f "$c/$f" ] && echo "limit $f $(cat "$c/$f")"\n'
            "  done\n"
            'else echo "nocgroup $rel"; fi\n'
        )
    for path in c.logs:
        body += (
            f"for f in {_glob(path)}; do "
            '[ -f "$f" ] && echo "log $(wc -c < "$f" | tr -d " ") $f"; done\n'
        )
    return R.script(body + "exit 0\n")


def _glob(path: str) -> str:
    """A log path for a `for` loop: left to the shell's globbing when it has wildcards
    (then it must hold no blanks), else quoted."""
    if any(ch in path for ch in "*?["):
        if any(ch.isspace() or ch in "'\"`$;|&<>()" for ch in path):
            raise SpecError(f"log path {path!r}: a pattern may hold no blanks or quotes")
        return path
    return q(path)


@dataclass
class Survey:
    pid: int | None = None
    state: str = ""
    memcg: str = ""
    cgroup: str | None = None
    cgroup_missing: str | None = None  # the path asked for, when it does not exist
    version: int = 2
    member: bool = False
    limits: dict[str, str] = field(default_factory=dict)
    logs: dict[str, int] = field(default_factory=dict)  # path -> size at start


def parse_survey(text: str) -> Survey:
    """`survey_script`'s output -> Survey (pure)."""
    s = Survey()
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        f = rest.split()
        if kind == "pid" and f and f[0].isdigit():
            s.pid, s.state = int(f[0]), (f[1] if len(f) > 1 else "")
        elif kind == "memcg":
            s.memcg = rest.strip()
        elif kind == "cgroup" and rest.startswith("/"):
            s.cgroup = rest
        elif kind == "nocgroup":
            s.cgroup_missing = rest
        elif kind == "version" and f in (["1"], ["2"]):
            s.version = int(f[0])
        elif kind == "member":
            s.member = True
        elif kind == "limit" and len(f) == 2:
            s.limits[f[0]] = f[1]
        elif kind == "log" and len(f) >= 2 and f[0].isdigit():
            s.logs[rest.split(" ", 1)[1]] = int(f[0])
    return s


def restore_script(
    c: NodeCommands,
    work: str,
    run_id: str,
    cgroup: str | None,
    limits: Mapping[str, str],
    start: bool = True,
) -> str:
    """Put the node back as the run found it (pure): SIGCONT the broker (a no-op on a
    running one), kill this run's balloons left in its cgroup, write back the cgroup
    limits noted at start (v2: memory.max before memory.high), and, with `start`, run
    the start command when the broker is down and wait for its pid. Prints what it did;
    exits like `start_script` when the start fails. Also what ``restore.sh`` in the run
    directory holds, for `ktrial cluster clean` after a killed run."""
    rid = R.check_run_id(run_id)
    body = finder(c) + 'p=$(kt_find) && kill -CONT "$p" 2>/dev/null && echo "resumed $p"\n'
    if cgroup:
        cg = q(cgroup)
        body += (
            f"for x in $(find {cg} -name cgroup.procs -exec cat {{}} + 2>/dev/null); do\n"
            '  e=$(tr "\\0" "\\n" < /proc/$x/environ 2>/dev/null) || continue\n'
            f'  printf "%s\\n" "$e" | grep -qx "KTRIAL_RUN={rid}" && '
            f'printf "%s\\n" "$e" | grep -q "^{R.BALLOON_MARK}=" && '
            'kill -KILL "$x" 2>/dev/null && echo "balloon $x killed"\n'
            "done\n"
        )
        order = ("memory.limit_in_bytes", "memory.max", "memory.high")
        for name in order:
            if name in limits:
                v = limits[name]
                if not re.fullmatch(r"max|-?[0-9]+", v):
                    raise ValueError(f"not a cgroup limit: {v!r}")
                path = q(f"{cgroup}/{name}")
                body += f"[ -f {path} ] && echo {v} > {path} && echo 'limit {name} {v}'\n"
    if start:
        body += "if ! p=$(kt_find); then\n" + _start_block(c, work) + 'echo "started $p"\nfi\n'
    return R.script(body + "exit 0\n")


def fetch_logs_script(work: str, parts: Sequence[tuple[str, int, str]]) -> str:
    """A tar on stdout of each log file's part written since the run started: (path,
    size at start, name in the tar); a file now shorter than at start (rotated,
    truncated) is taken whole; at most the last LOG_CAP bytes of each. The files are
    copied into ``<work>/logs-out`` first (removed again)."""
    t = f"{work}/logs-out"
    body = f't={q(t)}\nrm -rf -- "$t"\nmkdir -p "$t"\n'
    for path, offset, name in parts:
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"not a file name: {name!r}")
        body += (
            f"f={q(path)}; o={int(offset)}\n"
            'if [ -f "$f" ]; then s=$(wc -c < "$f"); [ "$s" -lt "$o" ] && o=0; '
            f'tail -c +$((o+1)) "$f" | tail -c {LOG_CAP} > "$t"/{q(name)}; fi\n'
        )
    return body + 'tar -C "$t" -cf - .; r=$?\nrm -rf -- "$t"\nexit $r\n'


def log_names(paths: Sequence[str]) -> list[str]:
    """A distinct file name for each log path (its base name, numbered when two share one)."""
    names: list[str] = []
    for p in paths:
        base = os.path.basename(p) or "log"
        name, i = base, 2
        while name in names:
            name, i = f"{base}.{i}", i + 1
        names.append(name)
    return names


# ---------------------------------------------------------------- the system


class InstalledSystem(SpecSystem):
    """The node spec's system as installed on the hosts: its readiness, faults and client
    profile (the node spec's); nothing to install, configure or launch."""

    def __init__(self, spec: NodeSpec) -> None:
        if spec.installed is None:
            raise SpecError(f"node spec {spec.path} has no [installed] table")
        super().__init__(spec)
        self.installed: InstalledSpec = spec.installed

    @property
    def version(self) -> str | None:
        return self.spec.version

    def runtime(self) -> str:
        raise Unsupported(f"{self.spec.path}: the system is installed on the hosts already")

    def metadata(self) -> dict[str, object]:
        return {
            "system": self.name,
            "system_spec": self.spec.path,
            "installed": True,
            "broker_versions": [self.version] if self.version else [],
        }

    def fault_limits(self) -> dict[str, str]:
        out = dict(self.spec.unsupported)
        out.setdefault("toxic", NO_TOXIC)
        if not self.installed.memory_cgroup:
            out.setdefault(
                "memory",
                f"node spec {self.spec.path} names no memory cgroup of the installed broker "
                '(installed.memory_cgroup = "/path" under the memory hierarchy, or "unit" '
                "with systemd_unit); ktrial does not move an installed broker into a cgroup "
                "of its own",
            )
        if "replication" not in self.spec.ports:
            out.setdefault(
                "partition-then-kill",
                f"node spec {self.spec.path} gives no ports.replication (the brokers' "
                "inter-broker listener), which this fault cuts",
            )
        return out


def load_installed(path: str | Path) -> InstalledSystem:
    """The installed system of a node spec file; SpecError when it has no [installed]."""
    from .nodespec import load_spec

    spec = load_spec(path)
    if spec.installed is None:
        raise SpecError(
            f"node spec {spec.path} describes a container image ({spec.image}): with "
            "--cluster ssh it needs an [installed] table saying how to drive the system "
            "installed on the hosts (or run the image with --cluster docker)"
        )
    return InstalledSystem(spec)


# ---------------------------------------------------------------- node and cluster


class InstalledNode(SshNode):
    """One installed broker on its host; process operations through the spec's pid,
    start and stop (see the module docstring)."""

    cluster: InstalledSshCluster

    def __init__(
        self,
        cluster: InstalledSshCluster,
        index: int,
        host: SshHost,
        address: str,
        work_dir: str,
        node_id: int,
        ports: Ports,
    ) -> None:
        super().__init__(cluster, index, host, address, work_dir)
        self.node_id = node_id
        self.ports = ports
        self.commands: NodeCommands | None = None
        self.found: Survey = Survey()

    def __repr__(self) -> str:
        return f"<InstalledNode {self.name} {self.ssh.name} pid={self._pid}>"

    @property
    def cmds(self) -> NodeCommands:
        assert self.commands is not None, "the node's commands are set when the cluster starts"
        return self.commands

    def _finder(self) -> str | None:
        return finder(self.cmds)

    def write_files(self) -> None:
        """Nothing: an installed system's files are its admin's."""

    def start(self) -> None:
        """The spec's start command; returns once the broker has a pid."""
        self._seen = None
        c = self.cmds
        proc = self.ssh.run(
            start_script(c, str(self.work_dir)),
            timeout=c.start_timeout + 30,
            check=False,
            what=f"{self.name}: start",
        )
        out = proc.stdout.decode(errors="replace").split()
        if proc.returncode == R.ALREADY_RUNNING:
            raise NodeStateError(f"{self.name} is already running (pid {out[-1]})")
        if proc.returncode != 0:
            raise RemoteError(
                self.ssh.name,
                f"{self.name}: start ({c.start})",
                proc.returncode,
                proc.stderr.decode(errors="replace"),
            )
        self._pid = int(out[-1]) if out and out[-1].isdigit() else None
        self._paused = self._frozen = False
        log.info("started installed %s on %s pid %s", self.name, self.ssh.name, self._pid)
        self.cluster.save_state()

    def stop(self, timeout: float = 30.0) -> None:
        """The spec's stop command and a wait (stop_timeout); SIGKILL if the broker outlived
        it. Without a stop command, the node spec's stop_signal and a wait, as any node."""
        c = self.cmds
        if c.stop is None:
            super().stop(max(timeout, c.stop_timeout))
            return
        self._seen = None
        proc = self.ssh.run(
            stop_script(c, str(self.work_dir)),
            timeout=2 * c.stop_timeout + 30,
            check=False,
            what=f"{self.name}: stop",
        )
        self._paused = self._frozen = False
        if proc.returncode == R.NOT_RUNNING:
            return
        if proc.returncode == R.TIMED_OUT:
            log.warning("%s outlived its stop command by %.0fs; SIGKILL", self.name, c.stop_timeout)
            self.kill()
        elif proc.returncode != 0:
            raise RemoteError(
                self.ssh.name,
                f"{self.name}: stop ({c.stop})",
                proc.returncode,
                proc.stderr.decode(errors="replace"),
            )
        self.cluster.save_state()

    def restore(self, start: bool, rules: bool = True) -> str:
        """Resume, balloons, the cgroup's limits as found, and (with `start`) a start if
        down: one round trip (plus the rule sweep with `rules`); returns what it did."""
        from ..nemesis import iptables

        self._seen = None
        c = self.cmds
        proc = self.ssh.run(
            restore_script(
                c,
                str(self.work_dir),
                self.cluster.run_id,
                self.cgroup_path,
                self.found.limits,
                start,
            ),
            timeout=c.start_timeout + 60,
            check=False,
            what=f"{self.name}: restore",
        )
        if self._cg is not None:
            self._cg.forget()
        self._paused = self._frozen = False
        if rules:
            iptables.remove_tagged(self, iptables.comment_for("", os.getpid()))
        if proc.returncode != 0:
            raise RemoteError(
                self.ssh.name,
                f"{self.name}: putting the installed broker back",
                proc.returncode,
                proc.stderr.decode(errors="replace"),
            )
        return proc.stdout.decode(errors="replace").strip()

    def state(self) -> dict[str, Any]:
        d = super().state()
        d["installed"] = True
        d["pid_at_start"] = self.found.pid
        return d


class InstalledSshCluster(SshCluster):
    """The brokers of an installed system, one per host, driven over SSH; nothing is
    uploaded or launched by ktrial (see the module docstring)."""

    def __init__(
        self,
        hosts: Sequence[HostSpec],
        system: InstalledSystem,
        ssh: SshOptions | None = None,
        root: str = R.DEFAULT_ROOT,
        run_id: str | None = None,
        ready_timeout: float = 180.0,
        retry_for: float = 20.0,
    ) -> None:
        check_hosts(system.spec, len(hosts))
        super().__init__(
            hosts,
            ssh=ssh,
            root=root,
            run_id=run_id,
            ready_timeout=ready_timeout,
            auto_install=False,
            system=system,
            retry_for=retry_for,
        )
        self.installed_system = system
        self.created_topics: list[str] = []
        self._made_ready_topic = False
        self._id_problem = ""

    @property
    def spec(self) -> NodeSpec:
        return self.installed_system.spec

    # ------------------------------------------------------------ start

    def _start(self, wait: bool) -> None:
        stack = self._stack
        self.state_file.write(self._state_dict("starting"))
        stack.callback(self.state_file.remove)
        self._connect_hosts(stack)
        inst = self.installed_system.installed
        spec = self.spec
        ports = Ports(
            spec.client_port, spec.ports.get("replication", 0), spec.ports.get("controller", 0)
        )
        addresses = [_address(h.name) for h in self.ssh_hosts]
        for i, (h, address) in enumerate(zip(self.ssh_hosts, addresses, strict=True), start=1):
            wd = f"{R.run_dir(self.root, self.run_id)}/n{i}"
            node_id = inst.broker_ids[i - 1] if inst.broker_ids else i
            node = InstalledNode(self, i, h, address, wd, node_id, ports)
            values = node_values(spec, i, node_id, h.name, address, addresses)
            node.commands = commands_for(inst, values)
            self._nodes.append(node)
        self.save_state("starting")
        self._prepare_installed()
        self.save_state("started")
        if wait:
            self.wait_ready(self.ready_timeout)

    def _prepare_installed(self) -> None:
        owner = self.owner_line()
        # undone last: the topics after every node is back, the run dirs after both
        dirs_made: list[SshHost] = []

        def remove_dirs() -> None:
            for h in dirs_made:
                self._remove_run_dir(h)

        self._stack.callback(remove_dirs)
        self._stack.callback(self._delete_topics)
        self._stack.callback(self._leave_all_as_found)

        def prepare(n: SshNode) -> None:
            assert isinstance(n, InstalledNode)
            h = n.ssh
            require_root_and_iptables(h)
            c = n.cmds
            found = parse_survey(h.out(survey_script(c), what=f"{n.name}: survey"))
            if found.pid is None:
                raise ClusterNotReady(
                    f"{n.name} on {h.name}: the installed broker is not running (its "
                    f"{self.installed_system.installed.pid_source()} names no live process"
                    + (
                        f" whose command line holds {c.cmdline_contains!r}"
                        if c.cmdline_contains
                        else ""
                    )
                    + "): start it first; ktrial drives an installed system as it finds it "
                    "and leaves it running"
                )
            if found.state == "T":
                raise ClusterNotReady(
                    f"{n.name} on {h.name}: the installed broker (pid {found.pid}) is stopped "
                    "(SIGSTOP): resume it first (kill -CONT)"
                )
            n.found = found
            n._pid = found.pid
            if c.memory_cgroup:
                self._take_cgroup(n, found)
            dirs_made.append(h)
            names = [n.name]
            h.run(R.make_run_dir_script(self.root, self.run_id, owner, names), what="run dir")
            restore = restore_script(c, str(n.work_dir), self.run_id, n.cgroup_path, found.limits)
            path = shlex.quote(f"{n.work_dir}/restore.sh")
            h.run(f"cat > {path}", input=restore.encode(), what="restore.sh")

        self._each(prepare)

    def _take_cgroup(self, n: InstalledNode, found: Survey) -> None:
        c = n.cmds
        what = "the unit's cgroup" if c.memory_cgroup == "unit" else f"cgroup {c.memory_cgroup}"
        where = f"node spec {self.spec.path} [installed] memory_cgroup"
        if not found.memcg:
            raise ClusterNotReady(
                f"{n.name} on {n.ssh.name}: {where}: the host has no memory cgroup hierarchy"
            )
        if found.cgroup is None:
            raise ClusterNotReady(
                f"{n.name} on {n.ssh.name}: {where}: {what} "
                f"({found.cgroup_missing or 'unknown'}) does not exist under {found.memcg}"
                + (
                    " (systemd makes a unit's memory cgroup with MemoryAccounting=yes)"
                    if c.memory_cgroup == "unit"
                    else ""
                )
            )
        if not found.member:
            raise ClusterNotReady(
                f"{n.name} on {n.ssh.name}: {where}: the broker (pid {found.pid}) is not in "
                f"{found.cgroup}: a squeeze there would not reach it"
            )
        n.cgroup_path = found.cgroup
        n._cg = R.remote_cgroup(n.ssh, found.cgroup, found.version)

    # ------------------------------------------------------------ the end

    def _leave_all_as_found(self) -> None:
        """Every node back as found (teardown: also after an error or Ctrl-C)."""

        def leave(n: SshNode) -> None:
            assert isinstance(n, InstalledNode)
            if n.commands is None or n.found.pid is None:
                return  # never surveyed: nothing of ours there
            try:
                did = n.restore(start=True)
                log.info(
                    "teardown: %s back as found: %s", n.name, did.replace("\n", "; ") or "as it was"
                )
            except (HostUnreachable, RemoteError) as e:
                log.error("teardown: %s: %s", n.name, e)
                self._say(f"could not put {n.name} back as found: {e}")

        self._each(leave)

    def _delete_topics(self) -> None:
        """Delete the topics this run made on the installed cluster (and the ready probe
        topic if it made that)."""
        topics = list(self.created_topics) + ([READY_TOPIC] if self._made_ready_topic else [])
        self.created_topics, self._made_ready_topic = [], False
        if not topics or not self._nodes:
            return
        try:
            admin = self._admin()
            for t, fut in admin.delete_topics(topics, operation_timeout=30).items():
                try:
                    fut.result(60)
                except Exception as e:
                    log.warning("could not delete topic %s: %s", t, e)
        except Exception as e:
            log.warning("could not delete this run's topics %s: %s", topics, e)

    def _created(self, topics: list[str]) -> None:
        self.created_topics += topics

    # ------------------------------------------------------------ readiness and heal

    def _ready_step(self, admin: Any) -> str:
        why = super()._ready_step(admin)
        if self._ready_created:
            self._made_ready_topic = True
        if why.startswith("brokers not registered") and self.system.registers_brokers:
            with contextlib.suppress(Exception):
                ids = sorted(admin.list_topics(timeout=5).brokers)
                mine = sorted(n.node_id for n in self._nodes)
                if len(ids) >= len(mine) and not set(mine) <= set(ids):
                    self._id_problem = (
                        f"the cluster's metadata lists broker ids {ids}, the spec's nodes are "
                        f"{mine}: set installed.broker_ids in {self.spec.path} (one per "
                        "--node host, in order)"
                    )
        return why

    def _check_alive(self) -> None:
        if self._id_problem:
            raise ClusterNotReady(self._id_problem)
        super()._check_alive()

    def _heal_node(self, node: SshNode) -> None:
        """Resume a stopped broker, kill balloons, delete this ktrial's rules, write back
        the cgroup's limits as found (never "unlimited" over the admin's own)."""
        assert isinstance(node, InstalledNode)
        node.restore(start=False)

    # ------------------------------------------------------------ logs, failures, metadata

    def _fetch(self, n: SshNode, d: Path, prefix: str) -> None:
        """The part of each log file of the spec written since the run started."""
        assert isinstance(n, InstalledNode)
        paths = sorted(n.found.logs)
        if not paths:
            return
        parts = list(zip(paths, [n.found.logs[p] for p in paths], log_names(paths), strict=True))
        try:
            data = n.ssh.run(
                fetch_logs_script(str(n.work_dir), parts), timeout=120, check=False
            ).stdout
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                for m in tar.getmembers():
                    if m.isfile() and "/" not in m.name.removeprefix("./"):
                        src = tar.extractfile(m)
                        if src is not None:
                            (d / f"{prefix}{Path(m.name).name}").write_bytes(src.read())
        except (HostUnreachable, tarfile.TarError, OSError) as e:
            (d / f"{prefix}COLLECT-FAILED.txt").write_text(f"logs of {n.name} not collected: {e}\n")

    def _failure(self, what: str, nodes: Sequence[SshNode]) -> ClusterNotReady:
        parts = [f"cluster {self.run_id} (installed, {self.spec.path}): {what}"]
        for n in nodes:
            assert isinstance(n, InstalledNode)
            running = n.is_running()
            state = "running" if running else "not running"
            logs = n.cmds.logs if n.commands else ()
            if not logs:
                parts.append(f"--- {n.name} ({n.ssh.name}, {state}); the spec names no logs")
                continue
            parts.append(f"--- {n.name} ({n.ssh.name}, {state}), last lines of {logs[0]}:")
            try:
                parts.append(
                    n.ssh.out(f"tail -n 30 {shlex.quote(logs[0])} 2>&1 || true", retry=False)
                )
            except HostUnreachable as e:
                parts.append(f"(no log: {e})")
        return ClusterNotReady("\n".join(parts))

    def metadata(self) -> dict[str, object]:
        meta = super().metadata()
        for k in ("program_digest", "uploaded"):
            meta.pop(k, None)
        meta["installed"] = {
            "spec": self.spec.path,
            "pids_at_start": {
                n.name: n.found.pid for n in self._nodes if isinstance(n, InstalledNode)
            },
            "broker_ids": {n.name: n.node_id for n in self._nodes},
            "memory_cgroups": {n.name: n.cgroup_path for n in self._nodes},
            "logs": {
                n.name: sorted(n.found.logs) for n in self._nodes if isinstance(n, InstalledNode)
            },
        }
        return meta
