"""How long a driver worker takes to start: spawn -> its reply to `open`.

One JVM (or Go process) per logical process, so this is paid at every process start
(a retired process's successor included). Measured without brokers: `open` of a
non-transactional producer + consumer against an address nobody listens on creates
the clients without contacting Kafka (no InitProducerId), so this is the start-up of
the runtime, the client library's classes and the client objects alone.

    .venv/bin/python bench/drivers/startup.py [--workers java,franz] [--together 16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import threading
import time

from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.worker import WorkerConfig, worker_program


def one(worker: str) -> float:
    cfg = WorkerConfig(
        bootstrap="127.0.0.1:1",
        keys=KeyMap({0: TopicPartition("t", 0)}),
        group_id="g",
        worker=worker,
    )
    req = {
        "id": 1,
        "call": "open",
        "bootstrap": "127.0.0.1:1",
        "client_id": "bench",
        "txn_id": "",
        "producer": True,
        "consumer": True,
        "settings": cfg.settings(True, True),
        "timeout_ms": 30000,
    }
    t0 = time.monotonic()
    p = subprocess.Popen(
        [str(worker_program(worker))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write((json.dumps(req) + "\n").encode())
    p.stdin.flush()
    line = p.stdout.readline()
    dt = time.monotonic() - t0
    assert json.loads(line).get("ok"), line
    p.kill()
    p.wait()
    return dt


def _timed(worker: str, into: list[float]) -> None:
    into.append(one(worker))  # list.append is atomic


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="java,franz")
    ap.add_argument("--together", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    for w in a.workers.split(","):
        alone = [one(w) for _ in range(a.repeat)]
        times: list[float] = []
        t0 = time.monotonic()
        ts = [threading.Thread(target=_timed, args=(w, times)) for _ in range(a.together)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.monotonic() - t0
        print(
            f"{w}: alone median {statistics.median(alone) * 1000:.0f} ms"
            f" (min {min(alone) * 1000:.0f}); {a.together} at once: all open after"
            f" {wall:.1f} s, median {statistics.median(times) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
