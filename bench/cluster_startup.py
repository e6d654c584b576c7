"""Benchmark: wall time of `ktrial cluster up` until ready, and broker memory after start.

Runs the real CLI (`python -m ktrial cluster up --json`), so the number includes
everything a user waits for: the Kafka install (cold cache), subnet/namespace/cgroup
setup, storage format, JVM start, and the admin-API readiness check (all brokers
registered, an RF-3 topic fully in sync). Then reads each broker's VmRSS and its
cgroup's memory usage, and times `cluster down`.

  cold: a fresh, empty $KTRIAL_CACHE, so `up` resolves the jars with Maven first.
        ~/.m2 stays as it is (usually warm) unless --cold-m2 points Maven at an
        empty local repository too (a full download from Maven Central).
  warm: the normal cache.

Usage (root, Java, Maven):
  .venv/bin/python bench/cluster_startup.py --nodes 3 --warm-runs 3 --cold [--cold-m2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def cgroup_usage_mib(cgroup: str | None) -> float | None:
    if not cgroup:
        return None
    for name in ("memory.usage_in_bytes", "memory.current"):
        f = Path(cgroup) / name
        if f.exists():
            return int(f.read_text()) / 2**20
    return None


def one_run(label: str, nodes: int, env: dict[str, str], version: str | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "ktrial", "cluster", "up", "--nodes", str(nodes), "--json"]
    if version:
        cmd += ["--kafka-version", version]
    t0 = time.monotonic()
    up = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    t_up = time.monotonic() - t0
    if up.returncode != 0:
        raise SystemExit(f"{label}: cluster up failed:\n{up.stderr}")
    st = json.loads(up.stdout)
    rss = [rss_kib(n["pid"]) for n in st["nodes"]]
    cg = [cgroup_usage_mib(n.get("cgroup")) for n in st["nodes"]]
    t1 = time.monotonic()
    down = subprocess.run(
        [sys.executable, "-m", "ktrial", "cluster", "down", st["run_id"]],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    t_down = time.monotonic() - t1
    if down.returncode != 0:
        raise SystemExit(f"{label}: cluster down failed:\n{down.stderr}")
    return {
        "label": label,
        "up_s": round(t_up, 1),
        "down_s": round(t_down, 1),
        "rss_mib": [round(r / 1024) if r else None for r in rss],
        "cgroup_mib": [round(c) if c else None for c in cg],
        "kafka_version": st.get("kafka_version"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--warm-runs", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="one run with an empty KTRIAL_CACHE")
    ap.add_argument("--cold-m2", action="store_true", help="... and an empty Maven repository")
    ap.add_argument("--kafka-version", default=None)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    results = []
    if args.cold or args.cold_m2:
        tmp = Path(tempfile.mkdtemp(prefix="ktrial-bench-cache-"))
        env = {**os.environ, "KTRIAL_CACHE": str(tmp)}
        label = "cold cache, warm ~/.m2"
        if args.cold_m2:
            env["MAVEN_OPTS"] = f"{env.get('MAVEN_OPTS', '')} -Dmaven.repo.local={tmp / 'm2'}"
            label = "cold cache, empty Maven repo"
        try:
            results.append(one_run(label, args.nodes, env, args.kafka_version))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for i in range(args.warm_runs):
        results.append(one_run(f"warm #{i + 1}", args.nodes, dict(os.environ), args.kafka_version))
    print("| run | nodes | up → ready (s) | down (s) | broker RSS (MiB) | cgroup usage (MiB) |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['label']} | {args.nodes} | {r['up_s']} | {r['down_s']} | "
            f"{', '.join(map(str, r['rss_mib']))} | {', '.join(map(str, r['cgroup_mib']))} |"
        )
    warm = [r["up_s"] for r in results if r["label"].startswith("warm")]
    if warm:
        print(f"\nwarm median {statistics.median(warm)} s over {len(warm)} runs")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
