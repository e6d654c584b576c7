"""The node-spec mechanism (clusters/nodespec.py) against a real dockerd: a 3-node
cluster started from a spec file, and a short queue trial under a partition (run with
the host's tools in the containers' network namespaces), checked valid.

The image is ktrial's locally built `ktrial-kafka:4.1.1` (no image can be pulled on the
machines this runs on), described through systems/specs/ktrial-kafka-image.toml: the
spec's own command configures, formats and starts Kafka, so nothing of ktrial's Apache
Kafka system is used once the image exists. Its fault commands run with the host's
tools in each container's network namespace (`exec = "host"`), the path specs for
images without iptables rely on. About 35 s of broker time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.docker]

KTRIAL = [sys.executable, "-m", "ktrial"]
SPEC = Path(__file__).resolve().parents[2] / "systems" / "specs" / "ktrial-kafka-image.toml"


def _skip_reason() -> str | None:
    for tool in ("dockerd", "debootstrap"):
        if shutil.which(tool) is None:
            return f"`{tool}` not installed (run scripts/setup.sh)"
    return local_cluster_skip_reason()


def _ensure_image() -> None:
    """Build ktrial-kafka:4.1.1 if the engine lacks it (the spec says pull = false)."""
    from ktrial.clusters import dockerd
    from ktrial.clusters import state as statemod
    from ktrial.clusters.docker_image import ensure_image
    from ktrial.clusters.install import resolve

    engine = dockerd.connect(statemod.new_run_id())
    try:
        ensure_image(engine.client, resolve("4.1.1"), lambda m: print(m, file=sys.stderr))
    finally:
        engine.close()


def test_a_spec_starts_three_nodes_and_a_queue_trial_runs_valid(tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    _ensure_image()
    store = tmp_path / "store"
    proc = subprocess.run(
        [
            *KTRIAL,
            "run",
            "--cluster",
            "docker",
            "--system-spec",
            str(SPEC),
            "--store",
            str(store),
            "--name",
            "spec",
            "--time-limit",
            "15",
            "--nemesis",
            "partition",
            "--nemesis-interval",
            "5",
            "--seed",
            "3",
            "--no-live",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "verdict: VALID" in proc.stdout
    run = (store / "spec" / "latest").resolve()
    cluster = json.loads((run / "test.json").read_text())["cluster"]
    assert cluster["kind"] == "docker" and cluster["system"] == "apache-kafka-image"
    assert cluster["system_spec"] == str(SPEC) and cluster["image"] == "ktrial-kafka:4.1.1"
    assert sorted(cluster["containers"]) == ["n1", "n2", "n3"]
    assert cluster["client_profile"]["name"] == "apache-kafka-image"
    history = (run / "history.jsonl").read_text()
    assert '"f":"start-partition"' in history.replace(" ", "")  # the fault really happened
    # each node's output, kept from the engine's log before its container went
    for n in ("n1", "n2", "n3"):
        log = run / "logs" / f"{n}-stdout.log"
        assert log.exists() and log.stat().st_size > 0, sorted(p.name for p in run.glob("logs/*"))
    rid = cluster["run_id"]
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert f"kt-{rid}" not in links
