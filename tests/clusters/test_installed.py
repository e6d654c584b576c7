"""clusters/installed.py: the [installed] table of a node spec, the scripts that drive an
installed broker (run here with sh against a local `sleep` standing in for it, through
the same SshNode machinery as over SSH), how a node is put back as found, and the
systemd form's commands (a stand-in `systemctl` on PATH: no systemd was run)."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import tarfile
import time
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any, cast

import pytest
from ktrial.clusters import installed as I
from ktrial.clusters import sshclean
from ktrial.clusters.kafka_config import Ports
from ktrial.clusters.nodebase import NodeStateError
from ktrial.clusters.nodespec import SpecError, parse_spec
from ktrial.clusters.sshconn import HostSpec, RemoteError
from ktrial.nemesis.process import ensure_running
from ktrial.tests.clusters.test_sshremote import LocalHost

RID = "a1b2c3"


def _raw(**installed: Any) -> dict[str, Any]:
    table = {"start": "/opt/k/start.sh", "pidfile": "/opt/k/run/kafka.pid", **installed}
    return {"name": "k", "ports": {"client": 9092}, "installed": table}


def _spec(**installed: Any) -> Any:
    return parse_spec(_raw(**installed), "spec.toml")


def _cmds(spec: Any, i: int = 1, host: str = "h1") -> I.NodeCommands:
    values = I.node_values(spec, i, i, host, "10.0.0.1", ["10.0.0.1", "10.0.0.2"])
    return I.commands_for(spec.installed, values)


# ------------------------------------------------------------ the table


def test_a_minimal_table_and_its_placeholders() -> None:
    spec = _spec(
        start="/opt/k/bin/start {name} {id} {host}:{port}",
        logs=["/opt/k/logs/{name}/server.log"],
        memory_cgroup="/kafka-{name}",
    )
    assert spec.image == "" and spec.installed.stop is None
    c = _cmds(spec, 2, "kafka2")
    assert c.start == "/opt/k/bin/start n2 2 kafka2:9092"
    assert c.logs == ("/opt/k/logs/n2/server.log",) and c.memory_cgroup == "/kafka-n2"
    values = I.node_values(spec, 2, 7, "kafka2", "10.0.0.2", ["10.0.0.1", "10.0.0.2"])
    assert values["bootstrap"] == "10.0.0.1:9092,10.0.0.2:9092" and values["id"] == "7"


def test_the_systemd_form_gives_pid_start_stop_and_cgroup() -> None:
    spec = parse_spec(
        {
            "name": "k",
            "ports": {"client": 9092},
            "installed": {"systemd_unit": "kafka.service", "memory_cgroup": "unit"},
        },
        "spec.toml",
    )
    c = _cmds(spec)
    assert c.start == "systemctl start kafka.service"
    assert c.stop == "systemctl stop kafka.service"
    assert "systemctl show -p MainPID kafka.service 2>/dev/null" in I.finder(c)
    assert "systemctl show -p ControlGroup kafka.service" in I.survey_script(c)


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"start": "s", "pidfile": "/p", "bogus": 1}, "unknown key 'bogus'"),
        ({"start": "s"}, "how to find the broker's pid is missing"),
        ({"start": "s", "pid": "x", "pidfile": "/p"}, "give one of pid"),
        ({"pidfile": "/p"}, "start (a command"),
        ({"start": "s", "pidfile": "/p", "memory_cgroup": "unit"}, '"unit" needs systemd_unit'),
        ({"start": "s", "pidfile": "/p", "memory_cgroup": "/"}, "not the root"),
        ({"start": "s", "pidfile": "/p", "memory_cgroup": "kafka"}, "memory_cgroup 'kafka'"),
        ({"start": "s", "pidfile": "/p", "memory_cgroup": "/sys/fs/cgroup/memory/k"}, "without"),
        ({"start": "s {token}", "pidfile": "/p"}, "start: unknown placeholder {token}"),
        ({"start": "s", "pidfile": "/p", "logs": ["rel.log"]}, "absolute paths"),
        ({"start": "s", "pidfile": "/p", "broker_ids": [1, 1]}, "an id twice"),
        ({"start": "s", "pidfile": "/p", "broker_ids": ["1"]}, "one broker id"),
        ({"start": "s", "pidfile": "/p", "start_timeout": 0}, "start_timeout"),
        ({"start": "s", "pidfile": "/p", "stop": 3}, "stop must be a str"),
        ({"start": "", "pidfile": "/p"}, "start is empty"),
        ({"systemd_unit": "kafka; rm -rf /"}, "not a unit name"),
    ],
)
def test_a_bad_table_names_the_file_and_the_key(table: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec({"name": "k", "ports": {"client": 9092}, "installed": table}, "my.toml")
    assert "my.toml" in str(e.value) and says in str(e.value), str(e.value)


def test_without_an_image_the_containers_keys_are_refused() -> None:
    raw = _raw()
    raw["command"] = ["start"]
    with pytest.raises(SpecError, match="command describes a container image"):
        parse_spec(raw, "x.toml")
    with pytest.raises(SpecError, match=r"`image` is required .* or an \[installed\] table"):
        parse_spec({"name": "k", "ports": {"client": 9092}}, "x.toml")


def test_broker_ids_must_fit_the_hosts() -> None:
    spec = _spec(broker_ids=[4, 5])
    I.check_hosts(spec, 2)
    with pytest.raises(SpecError, match=r"2 id.* for 3 --node host"):
        I.check_hosts(spec, 3)


def test_the_system_refuses_what_it_cannot_do_and_says_why() -> None:
    limits = I.InstalledSystem(_spec()).fault_limits()
    assert "memory_cgroup" in limits["memory"] and "Toxiproxy" in limits["toxic"]
    assert "ports.replication" in limits["partition-then-kill"]
    limits = I.InstalledSystem(_spec(memory_cgroup="/k")).fault_limits()
    assert "memory" not in limits and "kill" not in limits and "partition" not in limits


# ------------------------------------------------------------ the scripts, run here


@pytest.fixture
def install(tmp_path: Path) -> Iterator[Path]:
    """An "installation": start.sh starts a detached sleep and writes its pid file."""
    d = tmp_path / "opt"
    (d / "run").mkdir(parents=True)
    (d / "logs").mkdir()
    (d / "start.sh").write_text(
        "#!/bin/sh\nsetsid sleep 120 </dev/null >/dev/null 2>&1 &\n"
        f"echo $! > {d}/run/kafka.pid\necho started\n"
    )
    (d / "stop.sh").write_text(f"#!/bin/sh\nkill -TERM $(cat {d}/run/kafka.pid)\n")
    for f in ("start.sh", "stop.sh"):
        (d / f).chmod(0o755)
    yield d
    with contextlib.suppress(OSError, ValueError):
        pid = int((d / "run" / "kafka.pid").read_text())
        if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():  # never this test's own pid
            os.kill(pid, signal.SIGKILL)


def _node(tmp_path: Path, install: Path, **table: Any) -> tuple[I.InstalledNode, LocalHost]:
    raw = {
        "name": "k",
        "ports": {"client": 9092},
        "installed": {
            "start": f"{install}/start.sh",
            "pidfile": f"{install}/run/kafka.pid",
            "cmdline_contains": "sleep",
            "start_timeout": 5,
            "stop_timeout": 5,
            **table,
        },
    }
    system = I.InstalledSystem(parse_spec(raw, "spec.toml"))
    cluster = I.InstalledSshCluster([HostSpec("h1")], system, run_id=RID)
    cluster.save_state = lambda *a, **k: None  # type: ignore[method-assign]
    host = LocalHost()
    node = I.InstalledNode(
        cluster, 1, cast(Any, host), "127.0.0.1", str(tmp_path / "n1"), 1, Ports(9092, 0, 0)
    )
    node.commands = I.commands_for(
        system.installed, I.node_values(system.spec, 1, 1, "h1", "127.0.0.1", ["127.0.0.1"])
    )
    cluster._nodes.append(node)
    return node, host


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or _state(pid) == "Z"


def test_process_operations_on_an_installed_broker(tmp_path: Path, install: Path) -> None:
    """The installed "broker" (a sleep its own start script started) is found by its pid
    file, killed, paused, resumed, stopped with its stop script and started again with
    its start script; each operation is one script on the host."""
    node, host = _node(tmp_path, install, stop=f"{install}/stop.sh")
    assert node.pid is None
    n = len(host.scripts)
    node.start()
    assert len(host.scripts) == n + 1
    pid = node._pid
    assert pid and int((install / "run" / "kafka.pid").read_text()) == pid
    with pytest.raises(NodeStateError):
        node.start()
    node.pause()
    assert _state(pid) == "T" and node.process_state() == "T"
    assert ensure_running(node) == "resume" and _state(pid) != "T"
    node.kill()
    assert _gone(pid) and not node.is_running()
    assert ensure_running(node) == "start"
    pid2 = node._pid
    assert pid2 and pid2 != pid
    node.pause()
    node.stop()  # resumed first, then the stop script, then a wait
    assert _gone(pid2) and node.pid is None
    node.stop()  # nothing to stop
    node.restart()
    assert node.is_running() and node._pid not in (pid, pid2)


def test_a_stale_pid_file_is_no_broker(tmp_path: Path, install: Path) -> None:
    """A pid file naming a live process whose command line lacks cmdline_contains (a
    reused pid) does not count: nothing is signalled."""
    node, _ = _node(tmp_path, install)
    (install / "run" / "kafka.pid").write_text(f"{os.getpid()}\n")
    assert node.pid is None
    with pytest.raises(NodeStateError):
        node.pause()
    assert _state(os.getpid()) != "T"


def test_failed_and_slow_starts_say_why(tmp_path: Path, install: Path) -> None:
    node, _ = _node(tmp_path, install, start="echo no java here; exit 3")
    with pytest.raises(RemoteError, match=r"no java here.*exited with status 3"):
        node.start()
    node, _ = _node(tmp_path, install, start="true", start_timeout=1)
    with pytest.raises(RemoteError, match="no broker pid"):
        node.start()


def test_a_start_that_stays_in_the_foreground_says_so(tmp_path: Path, install: Path) -> None:
    node, _ = _node(tmp_path, install, start="sleep 30", start_timeout=1)
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match="did not return within 1 s"):
        node.start()
    assert time.monotonic() - t0 < 15


def test_what_the_start_command_starts_carries_no_ktrial_marker(
    tmp_path: Path, install: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when the session has ktrial's variables, the admin's broker does not get them:
    `cluster clean` must never take it for ktrial's."""
    monkeypatch.setenv("KTRIAL_RUN", RID)
    monkeypatch.setenv("KTRIAL_NODE", "n1")
    node, _ = _node(tmp_path, install)
    node.start()
    env = Path(f"/proc/{node._pid}/environ").read_bytes().split(b"\0")
    assert not [e for e in env if e.startswith(b"KTRIAL_")]


def test_restore_puts_the_node_back_as_found(tmp_path: Path, install: Path) -> None:
    """restore: resume a paused broker, kill this run's balloon in the cgroup (not other
    processes there), write back the limits noted at start, start a broker that is down."""
    node, _ = _node(tmp_path, install)
    node.start()
    pid = node._pid
    assert pid
    cg = tmp_path / "cg"
    cg.mkdir()
    (cg / "memory.limit_in_bytes").write_text("1048576\n")  # squeezed
    env = {**os.environ, "KTRIAL_RUN": RID, "KTRIAL_BALLOON": "1"}
    balloon = subprocess.Popen(["sleep", "60"], env=env)
    other = subprocess.Popen(["sleep", "60"], env={**os.environ, "KTRIAL_RUN": "ffffff"})
    (cg / "cgroup.procs").write_text(f"{pid}\n{balloon.pid}\n{other.pid}\n")
    node.cgroup_path = str(cg)
    node.found = I.Survey(pid=pid, limits={"memory.limit_in_bytes": "9223372036854771712"})
    try:
        os.kill(pid, signal.SIGSTOP)
        did = node.restore(start=False, rules=False)
        assert f"resumed {pid}" in did and f"balloon {balloon.pid} killed" in did
        assert balloon.wait(5) == -signal.SIGKILL and other.poll() is None
        assert (cg / "memory.limit_in_bytes").read_text() == "9223372036854771712\n"
        assert _state(pid) != "T"
        node.kill()
        did = node.restore(start=True, rules=False)
        assert "started" in did and node.is_running() and node._pid != pid
    finally:
        other.kill()
        other.wait()


def test_restore_sh_is_what_clean_runs_for_a_dead_run(tmp_path: Path, install: Path) -> None:
    """The run directory's restore.sh (written at start) starts the installed broker a
    killed ktrial left down; clean runs it only if it is a regular root-owned file."""
    node, host = _node(tmp_path, install)
    root = tmp_path / "root"
    ndir = root / "runs" / RID / "n1"
    ndir.mkdir(parents=True)
    script = I.restore_script(node.cmds, str(ndir), RID, None, {})
    (ndir / "restore.sh").write_text(script)
    item = sshclean.restore_item(str(root), RID, "n1")
    assert item.startswith(sshclean.RESTORE_MARK)
    proc = host.run(item, check=False)
    if os.geteuid() != 0:
        assert proc.returncode == 3  # not root-owned: refused
        return
    assert proc.returncode == 0, proc.stderr
    assert node.is_running()
    (ndir / "restore.sh").rename(ndir / "real.sh")
    (ndir / "restore.sh").symlink_to(ndir / "real.sh")
    assert host.run(item, check=False).returncode == 3


def test_the_scan_lists_restore_scripts() -> None:
    s = sshclean.parse_scan("restore a1b2c3 n2\nrestore a1b2c3 ../x\nrestore zz n1\n")
    assert s.restores == [("a1b2c3", "n2")]


def test_survey_notes_pid_cgroup_limits_and_log_sizes(tmp_path: Path, install: Path) -> None:
    node, host = _node(tmp_path, install, logs=[f"{install}/logs/*.log"])
    node.start()
    (install / "logs" / "server.log").write_text("x" * 10)
    (install / "logs" / "gc.log").write_text("y" * 3)
    found = I.parse_survey(host.out(I.survey_script(node.cmds)))
    assert found.pid == node._pid and found.state in ("S", "R")
    assert found.logs == {f"{install}/logs/gc.log": 3, f"{install}/logs/server.log": 10}
    assert found.cgroup is None  # no memory_cgroup in the spec: nothing asked
    text = "pid 12 S\nmemcg /sys/fs/cgroup/memory\ncgroup /sys/fs/cgroup/memory/k\nversion 1\n"
    text += "member yes\nlimit memory.limit_in_bytes 4096\nlog 7 /a b.log\n"
    s = I.parse_survey(text)
    assert (s.pid, s.cgroup, s.version, s.member) == (12, "/sys/fs/cgroup/memory/k", 1, True)
    assert s.limits == {"memory.limit_in_bytes": "4096"} and s.logs == {"/a b.log": 7}
    assert I.parse_survey("notrunning\nnocgroup /k\n").cgroup_missing == "/k"


def test_logs_collected_are_what_the_run_wrote(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("before\nduring\n")
    b.write_text("new\n")  # rotated: shorter than at start, taken whole
    work = tmp_path / "w"
    work.mkdir()
    script = I.fetch_logs_script(str(work), [(str(a), 7, "a.log"), (str(b), 100, "b.log")])
    data = subprocess.run(["sh", "-c", script], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        got = {
            Path(m.name).name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }
    assert got == {"a.log": b"during\n", "b.log": b"new\n"}
    assert not (work / "logs-out").exists()
    assert I.log_names(["/x/server.log", "/y/server.log", "/z/gc.log"]) == [
        "server.log",
        "server.log.2",
        "gc.log",
    ]


def test_the_systemd_form_runs_against_a_stand_in_systemctl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No systemd here: a `systemctl` on PATH that answers `show -p MainPID` and
    `show -p ControlGroup` as systemd does, and starts a sleep on `start`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "pid"
    fake = bin_dir / "systemctl"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path}/calls\n'
        'case "$1" in\n'
        f'  show) if [ "$3" = MainPID ]; then echo "MainPID=$(cat {state} 2>/dev/null || echo 0)"; '
        'else echo "ControlGroup=/system.slice/$4"; fi;;\n'
        f"  start) setsid sleep 120 </dev/null >/dev/null 2>&1 & echo $! > {state};;\n"
        f"  stop) kill -TERM $(cat {state}); echo 0 > {state};;\n"
        "esac\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    raw = {
        "name": "k",
        "ports": {"client": 9092},
        "installed": {"systemd_unit": "kafka.service", "start_timeout": 5, "stop_timeout": 5},
    }
    system = I.InstalledSystem(parse_spec(raw, "spec.toml"))
    cluster = I.InstalledSshCluster([HostSpec("h1")], system, run_id=RID)
    cluster.save_state = lambda *a, **k: None  # type: ignore[method-assign]
    node = I.InstalledNode(
        cluster, 1, cast(Any, LocalHost()), "127.0.0.1", str(tmp_path / "n1"), 1, Ports(9092, 0, 0)
    )
    node.commands = I.commands_for(
        system.installed, I.node_values(system.spec, 1, 1, "h1", "127.0.0.1", ["127.0.0.1"])
    )
    assert node.pid is None  # MainPID=0
    node.start()
    pid = node._pid
    assert pid and node.is_running()
    node.stop()
    assert _gone(pid)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert "start kafka.service" in calls and "stop kafka.service" in calls
    assert "show -p MainPID kafka.service" in calls
    cmds = I.commands_for(
        I.InstalledSpec(start="x", systemd_unit="kafka.service", memory_cgroup="unit"), {}
    )
    out = subprocess.run(
        ["sh", "-c", I._cgroup_rel(cmds) + 'echo "$rel"'], capture_output=True, text=True
    ).stdout
    assert out.strip() == "/system.slice/kafka.service"


def test_the_specs_in_the_docs_parse() -> None:
    """Every `[installed]` spec shown in docs/recipes.md and docs/clusters.md (Queen's and
    Kafka's) is a valid spec, with the fault limits the text claims."""
    import re
    import tomllib

    docs = Path(__file__).resolve().parents[2] / "docs"
    found = {}
    for name in ("recipes.md", "clusters.md"):
        for block in re.findall(r"```toml\n(.*?)```", (docs / name).read_text(), re.S):
            if "[installed]" in block:
                spec = parse_spec(tomllib.loads(block), f"{name} block")
                found[spec.name + "@" + name] = I.InstalledSystem(spec).fault_limits()
    assert set(found) == {"kafka@recipes.md", "queen-kafka-facade@recipes.md", "kafka@clusters.md"}
    queen = found["queen-kafka-facade@recipes.md"]
    assert "memory" not in queen and "toxic" in queen
    assert "memory" in found["kafka@recipes.md"] and "memory" not in found["kafka@clusters.md"]


def test_broker_ids_that_do_not_match_the_metadata_stop_readiness_at_once(
    tmp_path: Path, install: Path
) -> None:
    from types import SimpleNamespace

    from ktrial.clusters.admin import ClusterNotReady

    node, _ = _node(tmp_path, install)
    cluster = node.cluster
    for i in (2, 3):
        cluster._nodes.append(
            I.InstalledNode(
                cluster,
                i,
                cast(Any, LocalHost()),
                "127.0.0.1",
                str(tmp_path / f"n{i}"),
                i,
                Ports(9092, 0, 0),
            )
        )
    md = SimpleNamespace(brokers={0: "a", 1: "b", 2: "c"}, topics={})
    admin = SimpleNamespace(list_topics=lambda timeout: md)
    assert cluster._ready_step(admin) == "brokers not registered: n3"
    with pytest.raises(ClusterNotReady, match=r"broker ids \[0, 1, 2\].*installed.broker_ids"):
        cluster._check_alive()
    # a broker merely missing (restarting) is waited for, not refused
    cluster._id_problem = ""
    md.brokers = {1: "a", 2: "b"}
    assert cluster._ready_step(admin) == "brokers not registered: n3" and not cluster._id_problem
