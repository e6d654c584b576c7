"""Throughput of the queue workload vs Kafka's own kafka-producer-perf-test, same cluster.

Starts one 3-node LocalCluster, warms it up (--warmup seconds of the idempotent queue
workload, not measured: the brokers' JIT needs a minute or so before their speed
settles; a cold cluster measured 40-60 % slower), then:
1. the queue workload without faults, idempotent (no txn), for --seconds, recorded
   to a real history (ops/s = completed ops / main-phase seconds);
2. the same with --txn (transactions of 1-4 micro-ops);
   (each with every --driver: confluent, franz);
3. org.apache.kafka.tools.ProducerPerformance (acks=all, enable.idempotence=true,
   100-byte records, unthrottled) on a fresh RF-3 topic.
Prints one JSON object; also the load average, since this machine is shared.

    .venv/bin/python bench/bench_workload.py --seconds 30 --concurrency 16,64
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from ktrial.clusters.install import resolve
from ktrial.clusters.local import LocalCluster
from ktrial.histories.jsonl import HistoryWriter
from ktrial.histories.recorder import Recorder
from ktrial.workloads import make_workload


def run_queue(
    cluster: LocalCluster, opts: dict[str, Any], seconds: float, out: Path
) -> dict[str, Any]:
    wl = make_workload("queue", opts, 1)
    wl.setup(cluster)
    out.unlink(missing_ok=True)  # the writer appends
    writer = HistoryWriter(out)
    rec = Recorder(writer)
    stop = threading.Event()
    t = threading.Timer(seconds, stop.set)
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    cpu0 = time.process_time()  # this process: Python workers + librdkafka threads
    t.start()
    wl.run(rec, stop)
    el = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    writer.close()
    lat = latencies(out)
    done = sum(n for (_f, ty), n in rec.counts.items() if ty != "invoke")
    by = {f"{f}:{ty}": n for (f, ty), n in sorted(rec.counts.items()) if ty != "invoke"}
    return {
        "opts": opts,
        "seconds": round(el, 2),
        "ops": done,
        "ops_per_s": round(done / el, 1),
        "client_cpu_s": round(cpu, 2),
        "client_cpu_ms_per_op": round(1000 * cpu / max(done, 1), 3),
        "counts": by,
        "latency_ms": lat,
        "loadavg_1m_before": load0,
        "loadavg_1m_after": os.getloadavg()[0],
    }


def latencies(history: Path) -> dict[str, dict[str, float]]:
    """Median / p90 / mean latency (ms) per kind of completed op; polls split into
    those that returned records and empty ones (which wait `poll_ms`)."""
    invoked: dict[Any, int] = {}
    by: dict[str, list[float]] = {}
    with history.open("rb") as fh:
        for line in fh:
            op = orjson.loads(line)
            p = op["process"]
            if op["type"] == "invoke":
                invoked[p] = op["time"]
                continue
            if p not in invoked:
                continue
            kind = f"{op['f']}:{op['type']}"
            if op["f"] == "poll" and op["type"] == "ok":
                got = any(len(m) > 1 and m[1] for m in op["value"] or [])
                kind = "poll:ok-records" if got else "poll:ok-empty"
            by.setdefault(kind, []).append((op["time"] - invoked.pop(p)) / 1e6)
    out = {}
    for kind, xs in sorted(by.items()):
        xs.sort()
        out[kind] = {
            "n": len(xs),
            "p50": round(xs[len(xs) // 2], 1),
            "p90": round(xs[int(len(xs) * 0.9)], 1),
            "mean": round(sum(xs) / len(xs), 1),
        }
    return out


def run_perf_test(cluster: LocalCluster, records: int) -> dict[str, Any]:
    topic = f"perf-{int(time.time())}"
    cluster.create_topics({topic: 4}, replication_factor=3)
    lib = resolve(auto_install=False).lib_dir
    cmd = [
        "java",
        "-Xmx512m",
        "-cp",
        f"{lib}/*",
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={cluster.bootstrap_servers}",
        "acks=all",
        "enable.idempotence=true",
    ]
    load0 = os.getloadavg()[0]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    last = [ln for ln in p.stdout.splitlines() if "records sent" in ln][-1:]
    m = re.search(r"([\d.]+) records/sec", last[0]) if last else None
    lat = re.search(r"([\d.]+) ms avg latency", last[0]) if last else None
    return {
        "cmd": " ".join(cmd),
        "records_per_s": float(m.group(1)) if m else None,
        "avg_latency_ms": float(lat.group(1)) if lat else None,
        "summary": last[0] if last else p.stdout[-500:] + p.stderr[-500:],
        "loadavg_1m_before": load0,
        "loadavg_1m_after": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument(
        "--concurrency",
        default="16",
        help="worker processes; a comma-separated list runs each in turn",
    )
    ap.add_argument("--perf-records", type=int, default=200000)
    ap.add_argument(
        "--opt",
        action="append",
        default=[],
        metavar="KEY=INT",
        help="extra queue workload option for every run, e.g. poll_ms=50 (repeatable)",
    )
    ap.add_argument(
        "--consumer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka consumer override for every run (repeatable)",
    )
    ap.add_argument(
        "--driver",
        default="confluent",
        help="client driver(s): confluent, franz; a comma-separated list runs each in turn",
    )
    ap.add_argument("--no-txn", action="store_true", help="skip the --txn runs")
    ap.add_argument("--no-perf", action="store_true", help="skip ProducerPerformance")
    ap.add_argument(
        "--warmup",
        type=float,
        default=150,
        help="unmeasured seconds of load first: cold brokers (JIT) measured 15-40%% slower",
    )
    ap.add_argument("--out", default="/tmp/ktrial-bench-workload")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"nproc": os.cpu_count()}
    extra: dict[str, Any] = {k: int(v) for k, _, v in (o.partition("=") for o in a.opt)}
    if a.consumer_config:
        extra["consumer_config"] = dict(o.partition("=")[::2] for o in a.consumer_config)
    cluster = LocalCluster(nodes=3)
    with cluster:  # not `as`: OwnedCluster.__enter__ is typed as the base class
        if a.warmup > 0:
            run_queue(cluster, {"concurrency": 64}, a.warmup, out / "warmup.jsonl")
        for c in [int(x) for x in a.concurrency.split(",")]:
            modes: list[tuple[str, dict[str, Any]]] = [("idempotent", {})]
            if not a.no_txn:
                modes.append(("txn", {"txn": True}))
            for (mode, opts), driver in ((m, d) for m in modes for d in a.driver.split(",")):
                r = run_queue(
                    cluster,
                    {"concurrency": c, **extra, **opts, "driver": driver},
                    a.seconds,
                    out / f"{mode}-{driver}-{c}.jsonl",
                )
                res[f"{mode}-{driver}-c{c}"] = r
                print(json.dumps(r), flush=True)
        if not a.no_perf:
            res["producer_perf_test"] = run_perf_test(cluster, a.perf_records)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
