"""The ssh backend against real sshd "hosts" on this machine (testing/sshhosts.py).

Three network namespaces, each with its own sshd, address and /var/tmp; ktrial reaches
them only over SSH. One `ktrial run --cluster ssh` of the README's main job (queue
workload) with a fault of every node family on a script (partition, loss, kill, pause,
memory with a balloon) must be VALID with every fault injected and leave nothing on
any host; a second run, interrupted with SIGINT while faults are active, must leave
nothing either, on the hosts or on the control machine. Broker time: ~66 s + ~33 s on
this loaded machine (2 Dec 2026; each fault step is one SSH round trip per host).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import local_cluster_skip_reason

pytestmark = pytest.mark.integration

KTRIAL = [sys.executable, "-m", "ktrial"]

SCRIPT = """
[[entry]]
at = 1
fault = "partition"
targets = ["n1"]
shape = "isolate"
duration = 3

[[entry]]
at = 6
fault = "loss"
targets = ["n2"]
probability = 0.3
duration = 3

[[entry]]
at = 11
fault = "kill"
targets = ["n2"]
duration = 3

[[entry]]
at = 16
fault = "pause"
targets = ["n3"]
duration = 3

[[entry]]
at = 21
fault = "memory"
targets = ["n1"]
balloon_bytes = 33554432
duration = 3
"""


@pytest.fixture(scope="module")
def hosts() -> Iterator[object]:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    if not Path("/usr/sbin/sshd").exists() or shutil.which("ssh") is None:
        pytest.skip("openssh-server / openssh-client not installed (run scripts/setup.sh)")
    if shutil.which("stress-ng") is None:
        pytest.skip("stress-ng not installed (run scripts/setup.sh)")
    from ktrial.testing.sshhosts import SshHosts

    with SshHosts(3) as h:
        yield h


def _run_args(hosts: object, store: Path, script: Path, limit: int) -> list[str]:
    return [
        *KTRIAL,
        "run",
        *hosts.cli_args(),  # type: ignore[attr-defined]
        "--store",
        str(store),
        "--time-limit",
        str(limit),
        "--heap-mb",
        "384",
        "--nemesis",
        "partition,loss,kill,pause,memory",
        "--nemesis-schedule",
        "script",
        "--nemesis-script",
        str(script),
        "--node-stats-interval",
        "2",
        "--heal-wait",
        "2",
        "--drain-timeout",
        "30",
        "--check-every",
        "0",
        "--no-live",
        "--seed",
        "19",
    ]


def _latest(store: Path) -> Path:
    tests = [p for p in (store / "queue").iterdir() if p.is_dir() and not p.is_symlink()]
    return max(tests, key=lambda p: p.stat().st_mtime)


def test_main_job_over_ssh_is_valid_with_every_node_fault(hosts: object, tmp_path: Path) -> None:
    script = tmp_path / "faults.toml"
    script.write_text(SCRIPT)
    store = tmp_path / "store"
    proc = subprocess.run(
        _run_args(hosts, store, script, 40), capture_output=True, text=True, timeout=600
    )
    run = _latest(store)
    nemesis = [
        f"{o['time'] / 1e9:.1f} {o['f']} {json.dumps(o.get('value'))[:200]}"
        for o in map(json.loads, (run / "history.jsonl").read_text().splitlines())
        if o.get("process") == "nemesis" and o.get("f") != "node-stats"
    ]
    assert proc.returncode == 0, "\n".join([proc.stderr[-3000:], *nemesis])
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True
    assert results["faults"]["ok"], results["faults"]
    assert set(results["faults"]["injected"]) >= {"partition", "loss", "kill", "pause", "memory"}
    meta = json.loads((run / "test.json").read_text())
    assert meta["cluster"]["kind"] == "ssh"
    assert sorted(meta["cluster"]["hosts"].values()) == sorted(hosts.nodes.split(","))  # type: ignore[attr-defined]
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    fs = {o.get("f") for o in ops if o.get("process") == "nemesis"}
    assert {"start-partition", "start-loss", "kill", "pause", "memory-squeeze"} <= fs
    assert "node-stats" in fs and "harness-error" not in fs
    release = next(o for o in ops if o.get("f") == "memory-release")
    assert release["value"]["observed"]["n1"].get("anon_max", 0) > 0
    stats = next(o for o in ops if o.get("f") == "node-stats")
    assert stats["value"]["n1"]["heap_max_bytes"] == 384 << 20
    for n in ("n1", "n2", "n3"):  # the logs came back from the hosts
        assert (run / "logs" / f"{n}-server.log").stat().st_size > 0
    assert hosts.residue(meta["cluster"]["run_id"]) == []  # type: ignore[attr-defined]


def test_sigint_mid_run_leaves_nothing_on_any_host(hosts: object, tmp_path: Path) -> None:
    script = tmp_path / "faults.toml"
    script.write_text(
        '[[entry]]\nat = 0\nfault = "partition"\ntargets = ["n1"]\nshape = "isolate"\n'
        '[[entry]]\nat = 0\nfault = "pause"\ntargets = ["n3"]\n'
        '[[entry]]\nat = 0\nfault = "memory"\ntargets = ["n2"]\nballoon_bytes = 33554432\n'
    )
    store = tmp_path / "store"
    args = _run_args(hosts, store, script, 120)
    args[args.index("--nemesis") + 1] = "partition,pause,memory"
    # Python keeps SIGINT ignored if it was ignored when it started: give it the default
    child = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    assert child.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(child.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and child.poll() is None:
            if any("cluster ready" in line for line in lines) and _faults_active(hosts):
                break
            time.sleep(0.5)
        seen = "".join(lines)
        assert _faults_active(hosts), seen[-3000:]
        child.send_signal(signal.SIGINT)
        child.wait(180)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    meta = json.loads((_latest(store) / "test.json").read_text())
    run_id = meta["cluster"]["run_id"]
    assert hosts.residue(run_id) == []  # type: ignore[attr-defined]
    # nor on the control machine: the control sockets' directory and the state record
    from ktrial.clusters import state as statemod

    assert list(Path("/tmp").glob(f"ktrial-ssh-{run_id}-*")) == []
    assert not statemod.for_run(run_id).path.exists()


def _faults_active(hosts: object) -> bool:
    """A rule on n1's host, a balloon on n2's and a stopped broker on n3's."""
    _, h2, h3 = hosts.hosts  # type: ignore[attr-defined]
    rules = hosts.ssh(h2, "iptables-save | grep -c ktrial-nemesis || true").stdout.strip()  # type: ignore[attr-defined]
    # the test hosts share this machine's processes: find ours by their node marker
    find = (
        "for p in /proc/[0-9]*; do e=$(tr '\\0' '\\n' < $p/environ 2>/dev/null) || continue; "
        "printf '%s\\n' \"$e\" | grep -qx KTRIAL_NODE={node} || continue; "
        "printf '%s\\n' \"$e\" | grep -q '^KTRIAL_BALLOON=' && echo balloon; "
        "grep -q ') T ' $p/stat && echo stopped; done; true"
    )
    on2 = hosts.ssh(h2, find.format(node="n2")).stdout  # type: ignore[attr-defined]
    on3 = hosts.ssh(h3, find.format(node="n3")).stdout  # type: ignore[attr-defined]
    return rules not in ("", "0") and "balloon" in on2 and "stopped" in on3
