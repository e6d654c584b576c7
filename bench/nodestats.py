"""Cost of one node-stats sample per broker: what nemesis/nodestats.py reads every
--node-stats-interval seconds (default 5) for each node.

    .venv/bin/python bench/nodestats.py              # a JVM of its own
    .venv/bin/python bench/nodestats.py --pid 1234   # a JVM you own
    flock /tmp/ktrial-brokers.lock .venv/bin/python bench/nodestats.py --cluster
                                                     # a 3-node local cluster of its own
    ... --jcmd                                       # + `jcmd <pid> GC.heap_info`, for scale

Its own JVM has the brokers' heap options (-Xms512m -Xmx512m, G1, -XX:-UsePerfData)
and makes about 300 MiB of its heap resident; --cluster starts real brokers (root, the
Kafka jars) and measures them with their memory cgroups. Prints, per process, the
mean CPU time (this process, user+sys) and wall time of each part of a sample over
--n rounds: /proc/<pid>/status, the heap found in /proc/<pid>/smaps
(nemesis/jvmheap.py), the memory cgroup's memory.stat, and the whole sample() of one
node.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ktrial.nemesis import cgroups
from ktrial.nemesis.jvmheap import jvm_heap
from ktrial.nemesis.nodestats import proc_memory, sample

HOLD = """
public class Hold {
  public static void main(String[] a) throws Exception {
    java.util.List<byte[]> keep = new java.util.ArrayList<>();
    for (int i = 0; i < 750; i++) keep.add(new byte[400 << 10]);
    System.out.println("ready");
    Thread.sleep(600_000);
  }
}
"""


class Node:
    """What sample() reads of a cluster node."""

    def __init__(self, name: str, pid: int, cgroup: str | None) -> None:
        self.name, self.pid, self.cgroup = name, pid, cgroup


def cluster_nodes(stack: contextlib.ExitStack) -> list[Node]:
    from ktrial.clusters.local import LocalCluster

    cluster = LocalCluster(nodes=3, profile="safe")
    stack.enter_context(cluster)
    time.sleep(20)  # let the brokers settle after start-up
    return [Node(n.name, n.pid or 0, n.cgroup) for n in cluster.nodes]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    """(mean CPU ms, mean wall ms) of fn over n calls."""
    c0, w0 = cpu(), time.perf_counter()
    for _ in range(n):
        fn()
    return (cpu() - c0) / n * 1e3, (time.perf_counter() - w0) / n * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pid", type=int, action="append", default=[])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--jcmd", action="store_true")
    ap.add_argument("--cluster", action="store_true")
    args = ap.parse_args()
    own: subprocess.Popen[str] | None = None
    tmp = tempfile.mkdtemp()
    stack = contextlib.ExitStack()
    nodes = [Node(f"pid{p}", p, None) for p in args.pid]
    if args.cluster:
        nodes = cluster_nodes(stack)
    if not nodes:
        src = Path(tmp) / "Hold.java"
        src.write_text(HOLD)
        jvm = ["java", "-Xms512m", "-Xmx512m", "-XX:+UseG1GC", "-XX:-UsePerfData", str(src)]
        own = subprocess.Popen(jvm, stdout=subprocess.PIPE, text=True)
        assert own.stdout is not None and own.stdout.readline().strip() == "ready"
        nodes = [Node("own-jvm", own.pid, None)]
    print(f"load average {os.getloadavg()[0]:.2f}, {args.n} rounds per figure")
    try:
        for node in nodes:
            pid = node.pid
            heap = jvm_heap(pid)
            smaps_lines = len((Path(f"/proc/{pid}/smaps")).read_text().splitlines())
            print(
                f"{node.name} (pid {pid}): heap {heap}, rss {proc_memory(pid)}, "
                f"smaps {smaps_lines} lines, cgroup {node.cgroup}"
            )
            one: list[Any] = [node]  # sample() reads only name, pid and cgroup
            parts: dict[str, Callable[[], Any]] = {
                "status (VmRSS, RssAnon)": functools.partial(proc_memory, pid),
                "heap (cmdline + smaps)": functools.partial(jvm_heap, pid),
                "whole sample() of the node": functools.partial(sample, one),
            }
            if node.cgroup:
                cg = cgroups.MemoryCgroup(Path(node.cgroup))
                parts["cgroup memory.stat"] = cg.anon_and_file
            for what, fn in parts.items():
                c, w = timed(fn, args.n)
                print(f"  {what:28s} CPU {c:7.2f} ms  wall {w:7.2f} ms")
            if args.jcmd and shutil.which("jcmd"):
                c0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
                for _ in range(5):
                    subprocess.run(["jcmd", str(pid), "GC.heap_info"], capture_output=True)
                c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                ms = (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) / 5 * 1e3
                wall = (time.perf_counter() - w0) / 5 * 1e3
                print(f"  {'jcmd GC.heap_info':28s} CPU {ms:7.2f} ms  wall {wall:7.2f} ms")
    finally:
        if own is not None:
            own.kill()
            own.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        stack.close()


if __name__ == "__main__":
    main()
