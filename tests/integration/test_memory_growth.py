"""Memory growth on the real local cluster: a synthetic leak in a node's memory cgroup
is reported as `memory-growth`; the same cluster without it is not.

The leak is a small Python process placed in node n2's memory cgroup that keeps
14 MiB/s more of its memory resident. The node-stats sampler records the broker
JVM's pid, so only the cgroup's anonymous memory (minus the JVM's heap) can show it:
this proves the sampler reads the cgroup and the heap off a real broker, and that
the checker judges that figure. Two short queue runs (~25 s each) on the session
cluster; the leaking one first, so the clean one runs on warmed-up brokers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ktrial.histories.jsonl import read_history
from ktrial.histories.store import create_run
from ktrial.trial import Trial, TrialOutcome, TrialSpec
from ktrial.workloads import make_workload

pytestmark = pytest.mark.integration

MIB = 1 << 20
LEAK_NODE = "n2"
LEAK = """
import sys, time
keep, step, cap = [], int(sys.argv[1]), int(sys.argv[2])
print("ready", flush=True)
while sum(map(len, keep)) < cap:
    keep.append(b"x" * step)  # written: resident anonymous memory, charged to the cgroup
    time.sleep(0.25)
time.sleep(600)
"""


def short_run(cluster: Any, tmp_path: Path, name: str) -> TrialOutcome:
    """A queue run of ~25 s through the run orchestration, node-stats every second."""
    seed = 20
    wl = make_workload("queue", {"txn": False, "concurrency": 4}, seed)
    rd = create_run(tmp_path / "store", name)
    spec = TrialSpec(
        name=name,
        seed=seed,
        time_limit=25,
        workload=wl.name,
        heal_wait=0.0,
        drain_timeout=30.0,
        live=False,
        node_stats_interval=1.0,
    )
    out = Trial(spec, say=lambda _: None, cluster=cluster, workload=wl, run_dir=rd).execute()
    assert out.error is None, out.error
    assert out.results is not None
    return out


def memory(out: TrialOutcome) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    assert out.results is not None
    live = out.results["metrics"]["liveness"]
    return live["checks"]["memory-growth"], [
        v for v in live["violations"] if v["type"] == "memory-growth"
    ]


def test_a_leak_in_a_nodes_cgroup_is_memory_growth_and_none_without_it(
    healed_local_cluster: Any, tmp_path: Path
) -> None:
    cluster = healed_local_cluster
    node = cluster.node(LEAK_NODE)
    if not node.cgroup:
        pytest.skip("nodes have no memory cgroups")
    leak = node.popen_in_cgroup(
        [sys.executable, "-c", LEAK, str(MIB * 7 // 2), str(1536 * MIB)],
        stdout=subprocess.PIPE,
    )
    try:
        assert leak.stdout is not None and leak.stdout.readline().strip() == b"ready"
        leaky = short_run(cluster, tmp_path, "leak")
    finally:
        leak.kill()
        leak.wait(10)

    # The sampler saw the brokers' heaps (-Xmx from the command line, found in smaps)
    # and the cgroups' anonymous memory.
    samples = [op.value for op in read_history(leaky.run_dir.history) if op.f == "node-stats"]
    assert len(samples) >= 15
    heap_mb = cluster.metadata()["heap_mb"]
    assert isinstance(heap_mb, int)
    for s in samples:
        for st in s.values():
            assert st["heap_max_bytes"] == heap_mb * MIB, st
            assert (
                0 < st["heap_resident_bytes"] <= st["heap_committed_bytes"] == st["heap_max_bytes"]
            )
            assert st["cgroup_anon_bytes"] >= st["heap_resident_bytes"]

    check, violations = memory(leaky)
    assert check["ok"] is False, check
    (v,) = violations  # only the leaking node
    assert v["node"] == LEAK_NODE and v["figure"] == "cgroup-anon-minus-heap", v
    assert 8 * MIB * 60 < v["bytes_per_min"] < 20 * MIB * 60, v  # ~14 MiB/s
    assert f"node {LEAK_NODE}'s non-heap anonymous memory (node cgroup" in v["explanation"]
    assert leaky.results is not None and leaky.results["valid"] is True  # liveness only reports

    clean = short_run(cluster, tmp_path, "clean")
    check, violations = memory(clean)
    assert check["ok"] is True and violations == [], check
    nodes = clean.results["metrics"]["liveness"]["memory"]["nodes"]  # type: ignore[index]
    assert set(nodes) == {"n1", "n2", "n3"}
    for name, info in nodes.items():
        assert info["figure"] == "cgroup-anon-minus-heap" and info["window_samples"] >= 5, name
        # Judged and not flagged. No tighter bound than the checker's own: a broker's
        # non-heap memory (JIT code, metaspace, buffers) can rise ~75 MiB in 25 s on a
        # warm node, above the 64 MiB floor but far under the 50% ratio (CI, stop 23).
        assert info["flagged"] is False, (name, info)
