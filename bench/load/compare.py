"""ktrial-loadgen against Kafka's own ProducerPerformance, side by side (issue 18).

Starts a local cluster (3 nodes, safe profile), creates one topic, then runs each
producer at the same settings (256-byte messages, acks=all, idempotent, lz4, 5 ms
linger, one producer client, no consumers):

- ``max``: as fast as each client goes (ProducerPerformance --throughput -1; the
  load generator's closed-loop -rate 0) for about the same time;
- ``fixed``: both asked for the same rate (--throughput R; -rate R), so the CPU each
  needs for the same work compares directly.

Client CPU is the child's user+system time (getrusage of the waited child), so the
JVM's start-up and JIT are counted against ProducerPerformance, as they cost. Run it
under the broker lock:

    flock /tmp/ktrial-brokers.lock .venv/bin/python bench/load/compare.py \
        --json /tmp/load-compare.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO.parent))

from ktrial.clusters.install import DEFAULT_KAFKA_VERSION, find_installed  # noqa: E402
from ktrial.clusters.local import LocalCluster  # noqa: E402
from ktrial.load.generator import loadgen_program  # noqa: E402

PP_LINE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec .*?([\d.]+) ms avg latency")
SETTINGS = {
    "acks": "all",
    "enable.idempotence": "true",
    "compression.type": "lz4",
    "linger.ms": "5",
}


def run_child(cmd: list[str]) -> tuple[str, float, float]:
    """(stdout, wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout, wall, cpu


def broker_cpu(cluster: LocalCluster) -> float:
    """CPU seconds the brokers used so far (utime+stime of each broker process)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for n in cluster.nodes:
        if n.pid is None:
            continue
        fields = Path(f"/proc/{n.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def producer_performance(
    classpath: str, bootstrap: str, topic: str, records: int, rate: int, batch_bytes: int
) -> dict[str, Any]:
    settings = {**SETTINGS, "bootstrap.servers": bootstrap}
    if batch_bytes:
        settings["batch.size"] = str(batch_bytes)
    props = [f"{k}={v}" for k, v in settings.items()]
    cmd = [
        "java",
        "-Xmx512m",
        "-cp",
        classpath,
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        "256",
        "--throughput",
        str(rate),
        "--producer-props",
        *props,
    ]
    out, wall, cpu = run_child(cmd)
    m = None
    for line in out.splitlines():
        m = PP_LINE.search(line) or m
    if m is None:
        raise RuntimeError(f"no summary line in ProducerPerformance's output:\n{out[-2000:]}")
    sent, per_s = int(m.group(1)), float(m.group(2))
    return {
        "client": "ProducerPerformance",
        "messages": sent,
        "rate": round(per_s),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "avg_latency_ms": float(m.group(3)),
        "cmd": " ".join([*cmd[:4], "...", *cmd[5:]]),
    }


def loadgen(
    bootstrap: str, topic: str, seconds: float, rate: int, batch_bytes: int
) -> dict[str, Any]:
    cmd = [
        str(loadgen_program()),
        "-brokers",
        bootstrap,
        "-topic",
        topic,
        "-consumers",
        "0",
        "-producers",
        "1",
        "-rate",
        str(rate),
        "-batch",
        "100000",
        "-batch-bytes",
        str(batch_bytes),
        "-duration",
        f"{seconds:g}s",
    ]
    out, wall, cpu = run_child(cmd)
    final = [json.loads(x) for x in out.splitlines() if '"final"' in x][-1]
    return {
        "client": "ktrial-loadgen",
        "messages": final["produced"],
        "rate": round(final["produced_rate"]),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "shed": final["shed"],
        "errors": final["errors"],
        "produce_p50_ms": final["produce_p50_ms"],
        "produce_p99_ms": final["produce_p99_ms"],
        "cmd": " ".join(cmd),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--records", type=int, default=1_500_000, help="ProducerPerformance, max")
    ap.add_argument("--fixed-rate", type=int, default=20_000)
    ap.add_argument("--fixed-seconds", type=float, default=20.0)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--batch-bytes",
        default="16384,1048576",
        help="batch.size of both clients, comma separated: each is a set of rounds (16384 is "
        "the Java client's default, 1048576 franz-go's; 0: each client's own default)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    inst = find_installed(DEFAULT_KAFKA_VERSION)
    if inst is None:
        print("Kafka jars not installed: run scripts/setup.sh", file=sys.stderr)
        return 2
    cluster = LocalCluster(nodes=3, profile="safe")
    rows: list[dict[str, Any]] = []
    try:
        cluster.start(wait=True)
        boot = cluster.bootstrap_servers
        topic = "ktrial-load-compare"
        cluster.create_topics({topic: args.partitions})
        print(f"cluster ready: {boot}; topic {topic} ({args.partitions} partitions)", flush=True)
        sizes = [int(x) for x in args.batch_bytes.split(",")]
        for bb in sizes:
            for r in range(args.rounds):
                b0 = broker_cpu(cluster)
                pp = producer_performance(inst.classpath, boot, topic, args.records, -1, bb)
                pp.update(mode="max", round=r, batch_bytes=bb)
                pp["broker_cpu_s"] = round(broker_cpu(cluster) - b0, 2)
                rows.append(pp)
                print(json.dumps(pp), flush=True)
                b0 = broker_cpu(cluster)
                lg = loadgen(boot, topic, pp["wall_s"], 0, bb)
                lg.update(mode="max", round=r, batch_bytes=bb)
                lg["broker_cpu_s"] = round(broker_cpu(cluster) - b0, 2)
                rows.append(lg)
                print(json.dumps(lg), flush=True)
        n = int(args.fixed_rate * args.fixed_seconds)
        b0 = broker_cpu(cluster)
        pp = producer_performance(inst.classpath, boot, topic, n, args.fixed_rate, sizes[0])
        pp.update(mode="fixed", round=0, batch_bytes=sizes[0])
        pp["broker_cpu_s"] = round(broker_cpu(cluster) - b0, 2)
        rows.append(pp)
        print(json.dumps(pp), flush=True)
        b0 = broker_cpu(cluster)
        lg = loadgen(boot, topic, args.fixed_seconds, args.fixed_rate, sizes[0])
        lg.update(mode="fixed", round=0, batch_bytes=sizes[0])
        lg["broker_cpu_s"] = round(broker_cpu(cluster) - b0, 2)
        rows.append(lg)
        print(json.dumps(lg), flush=True)
    finally:
        cluster.teardown()
    for row in rows:
        row["us_cpu_per_msg"] = round(1e6 * row["cpu_s"] / max(1, row["messages"]), 2)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    print(
        f"{'mode':<6} {'batch':>8} {'client':<20} {'msg/s':>9} {'cpu s':>7} {'µs cpu/msg':>10} "
        f"{'wall s':>7} {'broker cpu s':>12}"
    )
    for row in rows:
        print(
            f"{row['mode']:<6} {row['batch_bytes']:>8} {row['client']:<20} {row['rate']:>9} "
            f"{row['cpu_s']:>7} {row['us_cpu_per_msg']:>10} {row['wall_s']:>7} "
            f"{row['broker_cpu_s']:>12}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
