"""Benchmark: how long each fault operation of the ssh backend takes, and how many SSH
commands it runs, against sshd "hosts" on this machine (testing/sshhosts.py).

Starts 3 hosts and a 3-broker `SshCluster` on them, then, --rounds times, starts and
stops one fault of each node family through the nemesis (partition, loss, kill, pause,
restart, memory with a balloon) and takes a node-stats sample; prints per operation
the median wall time and the SSH commands it ran (every `SshHost.run` is counted).
Needs root, sshd, stress-ng and the Kafka jars; the brokers run under the lock:

    flock /tmp/ktrial-brokers.lock .venv/bin/python bench/ssh/faultops.py [--rounds 3] [--json F]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ktrial.clusters.sshconn import SshHost, SshOptions, parse_hosts


class _Calls:
    on = False
    trace = False  # print every command of an operation with its wall time
    n = 0
    lock = threading.Lock()


_calls = _Calls()
# background samplers (the memory fault's, node stats) are not the operation's own calls
_BACKGROUND = ("ktrial-memory-sampler", "ktrial-node-stats")


def _count_calls() -> None:
    """Count every SshHost.run of the operation, in whatever thread (a step's hosts are
    served in parallel), but not those of the background samplers."""
    orig = SshHost.run

    def run(self: SshHost, script: str, *a: Any, **kw: Any) -> Any:
        mine = _calls.on and threading.current_thread().name not in _BACKGROUND
        if mine:
            with _calls.lock:
                _calls.n += 1
        t0 = time.monotonic()
        try:
            return orig(self, script, *a, **kw)
        finally:
            if mine and _calls.trace:
                body = script.split("\n}\n")[-1].strip().splitlines() or [""]
                print(f"    {time.monotonic() - t0:5.2f} s  {self.name}: {body[0][:90]}")

    SshHost.run = run  # type: ignore[method-assign]


def timed(fn: Callable[[], Any]) -> tuple[float, int]:
    _calls.on, _calls.n = True, 0
    t0 = time.monotonic()
    try:
        fn()
    finally:
        _calls.on = False
    return time.monotonic() - t0, _calls.n


def raw_latency(host: SshHost, n: int = 20) -> float:
    host.run("true")  # the master connection
    t0 = time.monotonic()
    for _ in range(n):
        host.run("true")
    return (time.monotonic() - t0) / n


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--trace", action="store_true", help="print each SSH command's time")
    ap.add_argument("--balloon-mib", type=int, default=32, help="the memory fault's balloon")
    args = ap.parse_args(argv)

    from ktrial.clusters.ssh import SshCluster
    from ktrial.histories.jsonl import HistoryWriter
    from ktrial.histories.recorder import Recorder
    from ktrial.nemesis import Nemesis
    from ktrial.nemesis.nodestats import sample
    from ktrial.testing.sshhosts import SshHosts

    _count_calls()
    _calls.trace = args.trace
    out: dict[str, Any] = {}
    times: dict[str, list[float]] = defaultdict(list)
    calls: dict[str, list[int]] = defaultdict(list)
    with SshHosts(3) as hosts, tempfile.TemporaryDirectory() as tmp:
        opts = SshOptions(identity=str(hosts.identity), known_hosts=str(hosts.known_hosts))
        t0 = time.monotonic()
        cluster = SshCluster(parse_hosts(hosts.nodes), opts, heap_mb=384)
        with cluster:
            out["cluster_ready_s"] = round(time.monotonic() - t0, 1)
            out["ssh_true_s"] = round(raw_latency(cluster.nodes[0].ssh), 4)  # type: ignore[attr-defined]
            writer = HistoryWriter(Path(tmp) / "history.jsonl")
            nem = Nemesis(cluster, Recorder(writer), rng=random.Random(1))
            plan: list[tuple[str, Any, dict[str, Any]]] = [
                ("partition", ["n1"], {"shape": "isolate"}),
                ("loss", ["n2"], {"probability": 0.3}),
                ("kill", ["n2"], {}),
                ("pause", ["n3"], {}),
                ("memory", ["n1"], {"balloon_bytes": args.balloon_mib << 20}),
                ("restart", ["n3"], {"settle": 0}),
            ]
            try:
                for _ in range(args.rounds):
                    for name, targets, params in plan:
                        if args.trace:
                            print(name, flush=True)
                        holder: list[Any] = []
                        dt, n = timed(lambda: holder.append(nem.start(name, targets, **params)))  # noqa: B023
                        times[f"{name} start"].append(dt)
                        calls[f"{name} start"].append(n)
                        time.sleep(1)
                        dt, n = timed(lambda: nem.stop(holder[0]))  # noqa: B023
                        times[f"{name} stop"].append(dt)
                        calls[f"{name} stop"].append(n)
                        cluster.wait_ready(120)
                    dt, n = timed(lambda: sample(cluster.nodes))
                    times["node-stats sample (3 nodes)"].append(dt)
                    calls["node-stats sample (3 nodes)"].append(n)
            finally:
                nem.heal_all()
                writer.close()
    print(f"cluster ready in {out['cluster_ready_s']} s; one `ssh true` {out['ssh_true_s']} s")
    print(f"{'operation':32} {'median s':>9} {'max s':>7} {'ssh cmds':>9}")
    ops = {}
    for k in times:
        med, mx = statistics.median(times[k]), max(times[k])
        print(f"{k:32} {med:9.2f} {mx:7.2f} {statistics.median(calls[k]):9.0f}")
        ops[k] = {"median_s": round(med, 3), "max_s": round(mx, 3), "ssh_commands": calls[k]}
    out["ops"] = ops
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
