"""`--cluster external` against real brokers ktrial did not start for the run.

The brokers are the session's local cluster; ktrial sees only their bootstrap
servers. Pause/resume hooks really SIGSTOP/SIGCONT the broker JVMs (through pid files
the test writes, as an operator's script would use systemctl or ssh).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from ktrial.clusters.external import ExternalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_discovery_topics_and_teardown_deletes_them(local_cluster: Any) -> None:
    ext = ExternalCluster(local_cluster.bootstrap_servers)
    ext.start()
    assert {(n.name, n.node_id, n.address) for n in ext.nodes} == {
        (f"n{n.node_id}", n.node_id, n.address) for n in local_cluster.nodes
    }
    topic = f"ktrial-ext-{os.getpid()}"
    ext.create_topics({topic: 2}, replication_factor=3)
    admin = ext._admin()
    md = admin.list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 2
    assert all(len(p.isrs) == 3 for p in md.topics[topic].partitions.values())
    ext.teardown()
    # each broker drops a deleted topic from its metadata cache in its own time
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.5)
    assert topic not in admin.list_topics(timeout=10).topics
    assert ext.metadata()["unavailable_faults"] == sorted(ext.unsupported_faults())


def test_run_on_an_external_cluster_with_pause_hooks_is_valid(
    local_cluster: Any, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    for n in local_cluster.nodes:
        (pids / f"n{n.node_id}").write_text(str(n.pid))
    log = tmp_path / "hooks.log"
    store = tmp_path / "store"
    cmd = [
        sys.executable,
        "-m",
        "ktrial",
        "run",
        "--cluster",
        "external",
        "--bootstrap",
        local_cluster.bootstrap_servers,
        "--hook",
        f"pause=echo pause {{name}} >> {log}; kill -STOP $(cat {pids}/{{name}})",
        "--hook",
        f"resume=echo resume {{name}} >> {log}; kill -CONT $(cat {pids}/{{name}})",
        "--nemesis",
        "pause",
        "--nemesis-interval",
        "4",
        "--time-limit",
        "20",
        "--txn",
        "--store",
        str(store),
        "--name",
        "ext",
        "--seed",
        "3",
        "--no-live",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    finally:
        for n in local_cluster.nodes:  # never leave the shared cluster frozen
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(n.pid, signal.SIGCONT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "verdict: VALID" in proc.stdout
    run = (store / "ext" / "latest").resolve()
    meta = orjson.loads((run / "test.json").read_bytes())
    assert meta["cluster"]["kind"] == "external"
    ops = [orjson.loads(line) for line in (run / "history.jsonl").read_bytes().splitlines()]
    nem = [o["f"] for o in ops if o["process"] == "nemesis"]
    assert "pause" in nem and "resume" in nem, nem
    hooks = log.read_text().split()
    assert "pause" in hooks and "resume" in hooks
    assert sum(1 for o in ops if o["type"] == "ok" and o["f"] == "txn") >= 20
    # the run's topics are gone from the cluster it borrowed (each broker's metadata
    # cache drops them in its own time)
    admin = local_cluster._admin()
    deadline = time.monotonic() + 60
    while set(meta["topics"]) & set(admin.list_topics(timeout=10).topics):
        assert time.monotonic() < deadline, "the run's topics were not deleted"
        time.sleep(0.5)


def test_faults_without_hooks_are_refused_before_anything_runs(
    local_cluster: Any, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ktrial",
            "run",
            "--cluster",
            "external",
            "--bootstrap",
            local_cluster.bootstrap_servers,
            "--nemesis",
            "kill,partition",
            "--store",
            str(tmp_path / "store"),
            "--no-live",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # refused as a usage error when the flags are read: no run directory, no cluster
    assert proc.returncode == 254, proc.stdout + proc.stderr
    assert not (tmp_path / "store").exists()
    out = proc.stdout + proc.stderr
    assert "kill: external cluster: add --hook kill='COMMAND' --hook start='COMMAND'" in out
    assert "partition: ktrial cannot reach an external cluster's network" in out
