"""Throughput of the queue workload vs Kafka's own kafka-producer-perf-test, same cluster.

Starts one 3-node LocalCluster, warms it up (--warmup seconds of the idempotent queue
workload, not measured: the brokers' JIT needs a minute or so before their speed
settles; a cold cluster measured 40-60 % slower; then up to 20 s of transactions, which
create and load __transaction_state), then:
1. the queue workload without faults, idempotent (no txn), for --seconds, recorded
   to a real history (ops/s = completed ops / main-phase seconds);
2. the same with --txn (transactions of 1-4 micro-ops);
   (each with every --driver: confluent, franz);
3. org.apache.kafka.tools.ProducerPerformance (acks=all, enable.idempotence=true,
   100-byte records, unthrottled) on a fresh RF-3 topic.
Prints one JSON object; also the load average, since this machine is shared.

Each run also says where its time goes: every client call of each driver timed on the
Python side (`calls`: n, calls per transaction, mean ms, ms per transaction), the
worker drivers' through their channel, confluent's through
bench/drivers/timing.py's TimedConfluentDriver; and per op kind p50/p90/p99 latency.

    .venv/bin/python bench/bench_workload.py --seconds 30 --concurrency 16,64
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from ktrial.clusters.install import resolve
from ktrial.clusters.local import LocalCluster
from ktrial.histories.jsonl import HistoryWriter
from ktrial.histories.recorder import Recorder
from ktrial.workloads.queue import QueueOptions, QueueWorkload
from ktrial.workloads.worker.driver import ClientFacts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drivers.timing import breakdown, timed_confluent_factory


def run_queue(
    cluster: LocalCluster, opts: dict[str, Any], seconds: float, out: Path
) -> dict[str, Any]:
    stop = threading.Event()
    qopts = QueueOptions.from_dict(opts)
    facts = ClientFacts()  # confluent's calls (the workers' are in wl.observed)
    factory = None
    if qopts.driver == "confluent" and not qopts.driver_mix:
        factory = timed_confluent_factory(facts, lambda: stop)
    wl = QueueWorkload(qopts, 1, driver_factory=factory)
    wl.setup(cluster)
    out.unlink(missing_ok=True)  # the writer appends
    writer = HistoryWriter(out)
    rec = Recorder(writer)
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
    steady = steady_rates(out, qopts.concurrency)
    done = sum(n for (_f, ty), n in rec.counts.items() if ty != "invoke")
    by = {f"{f}:{ty}": n for (f, ty), n in sorted(rec.counts.items()) if ty != "invoke"}
    txns = sum(n for (f, ty), n in rec.counts.items() if f == "txn" and ty != "invoke")
    observed = wl.observed.get(qopts.driver, facts) if factory is None else facts
    call_ms = observed.to_json().get("call_ms", {})
    return {
        "opts": opts,
        "seconds": round(el, 2),
        "ops": done,
        "ops_per_s": round(done / el, 1),
        "txn_ok_per_s": round(rec.counts.get(("txn", "ok"), 0) / el, 1),
        "steady": steady,
        "calls": breakdown(call_ms, txns or done),
        "calls_per": "txn" if txns else "op",
        "client_cpu_s": round(cpu, 2),
        "client_cpu_ms_per_op": round(1000 * cpu / max(done, 1), 3),
        "counts": by,
        "latency_ms": lat,
        "loadavg_1m_before": load0,
        "loadavg_after": os.getloadavg(),
    }


def latencies(history: Path) -> dict[str, dict[str, float]]:
    """Median / p90 / p99 / mean latency (ms) per kind of completed op; polls split into
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
            "p99": round(xs[int(len(xs) * 0.99)], 1),
            "mean": round(sum(xs) / len(xs), 1),
        }
    return out


def steady_rates(history: Path, concurrency: int) -> dict[str, float]:
    """The rates once every slot's first process has invoked its first op: a driver
    whose clients start slowly (a JVM each) spends the run's first seconds opening them.

    Processes 0..concurrency-1 are the slots' first ones (numbered as they open). The
    window runs from the last of their first invokes to the last completion."""
    first: dict[int, int] = {}
    completions: list[tuple[int, str, str]] = []
    with history.open("rb") as fh:
        for line in fh:
            op = orjson.loads(line)
            p, t = op["process"], op["time"]
            if op["type"] == "invoke":
                if isinstance(p, int) and p < concurrency and p not in first:
                    first[p] = t
            else:
                completions.append((t, op["f"], op["type"]))
    if not first or not completions:
        return {}
    ready = max(first.values())
    end = max(t for t, _, _ in completions)
    span = (end - ready) / 1e9
    if span <= 0:
        return {}
    after = [(f, ty) for t, f, ty in completions if t >= ready]
    return {
        "ready_s": round(ready / 1e9, 2),
        "seconds": round(span, 2),
        "ops_per_s": round(len(after) / span, 1),
        "txn_ok_per_s": round(sum(1 for f, ty in after if (f, ty) == ("txn", "ok")) / span, 1),
    }


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


def setting(text: str) -> tuple[str, Any]:
    """KEY=VALUE -> (key, value): an int, a bool (true/false) or the string."""
    k, _, v = text.partition("=")
    if v.lower() in ("true", "false"):
        return k, v.lower() == "true"
    try:
        return k, int(v)
    except ValueError:
        return k, v


def driver_variant(text: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """One --driver entry: a driver with its own producer settings and queue options, for
    an A/B in one cluster. "franz+transaction.version=1+%poll_ms=20" -> ("franz",
    {"transaction.version": 1}, {"poll_ms": 20}) (a leading % marks a queue option)."""
    driver, *pairs = text.split("+")
    settings = dict(setting(p) for p in pairs if not p.startswith("%"))
    options = dict(setting(p[1:]) for p in pairs if p.startswith("%"))
    return driver, settings, options


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
        help="client driver(s): confluent, franz, java; a comma-separated list runs each in"
        " turn; DRIVER+KEY=VALUE+%%OPTION=VALUE... adds producer settings and queue options"
        " (a leading %%) to that entry only",
    )
    ap.add_argument("--no-txn", action="store_true", help="skip the --txn runs")
    ap.add_argument("--only-txn", action="store_true", help="skip the idempotent (no txn) runs")
    ap.add_argument(
        "--producer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="producer setting override for every run, the driver's own names (repeatable)",
    )
    ap.add_argument(
        "--warmup-driver",
        default="confluent",
        help="the driver of the warm-up load (64 processes, no transactions)",
    )
    ap.add_argument("--no-perf", action="store_true", help="skip ProducerPerformance")
    ap.add_argument(
        "--warmup",
        type=float,
        default=150,
        help="unmeasured seconds of load first: cold brokers (JIT) measured 15-40%% slower",
    )
    ap.add_argument(
        "--client-log",
        metavar="FILE",
        help="write librdkafka's log lines (with e.g. --producer-config debug=eos) to FILE",
    )
    ap.add_argument("--out", default="/tmp/ktrial-bench-workload")
    a = ap.parse_args()
    if a.client_log:
        h = logging.FileHandler(a.client_log)
        h.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(threadName)s %(message)s"))
        lg = logging.getLogger("ktrial.librdkafka")
        lg.addHandler(h)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"nproc": os.cpu_count()}
    extra: dict[str, Any] = {k: int(v) for k, _, v in (o.partition("=") for o in a.opt)}
    if a.consumer_config:
        extra["consumer_config"] = dict(setting(o) for o in a.consumer_config)
    if a.producer_config:
        extra["producer_config"] = dict(setting(o) for o in a.producer_config)
    res["loadavg_start"] = os.getloadavg()
    cluster = LocalCluster(nodes=3)
    with cluster:  # not `as`: OwnedCluster.__enter__ is typed as the base class
        if a.warmup > 0:
            warm = {"concurrency": 64, "driver": a.warmup_driver}
            run_queue(cluster, warm, a.warmup, out / "warmup.jsonl")
            if not a.no_txn:
                # The first transactional clients create __transaction_state and wait for
                # its partitions to load: measured, that cost the first txn run up to a
                # third of its transactions (opens retried, txns timed out).
                txn_warm = {"concurrency": 16, "driver": a.warmup_driver, "txn": True}
                run_queue(cluster, txn_warm, min(a.warmup, 20), out / "warmup-txn.jsonl")
        for c in [int(x) for x in a.concurrency.split(",")]:
            modes: list[tuple[str, dict[str, Any]]] = [] if a.only_txn else [("idempotent", {})]
            if not a.no_txn:
                modes.append(("txn", {"txn": True}))
            for (mode, opts), variant in ((m, d) for m in modes for d in a.driver.split(",")):
                driver, settings, qopts = driver_variant(variant)
                run_opts = {"concurrency": c, **extra, **qopts, **opts, "driver": driver}
                if settings:
                    run_opts["producer_config"] = {**extra.get("producer_config", {}), **settings}
                tag = variant.replace("/", "_")
                r = run_queue(cluster, run_opts, a.seconds, out / f"{mode}-{tag}-{c}.jsonl")
                res[f"{mode}-{variant}-c{c}"] = r
                print(json.dumps(r), flush=True)
        if not a.no_perf:
            res["producer_perf_test"] = run_perf_test(cluster, a.perf_records)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
