"""node-stats samples: real RSS of real processes, recorded as nemesis ops."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from ktrial.histories.jsonl import HistoryWriter, iter_history
from ktrial.histories.recorder import Recorder
from ktrial.nemesis.nodestats import F_NODE_STATS, NodeStatsSampler, proc_memory, sample


class ProcNode:
    def __init__(self, name: str, pid: int | None) -> None:
        self.name, self._pid, self.cgroup = name, pid, None

    @property
    def pid(self) -> int | None:
        return self._pid


def test_rss_of_a_live_process_and_none_when_gone() -> None:
    mine = proc_memory(os.getpid())
    assert mine is not None
    rss, anon = mine
    assert rss > 10 * 2**20  # a Python interpreter is > 10 MiB
    assert anon is not None and 0 < anon < rss  # its anonymous part; the rest is files
    p = subprocess.Popen(["true"])
    p.wait()
    assert proc_memory(p.pid) is None


def test_status_without_rss_anon_gives_none_for_it(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "status").write_text("Name:\tjava\nVmRSS:\t  2048 kB\n")
    assert proc_memory(7, tmp_path) == (2 * 2**20, None)
    (tmp_path / "7" / "status").write_text("Name:\tzombie\n")
    assert proc_memory(7, tmp_path) is None


def test_sample_skips_stopped_and_vanished_nodes() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    nodes: list[Any] = [ProcNode("n1", os.getpid()), ProcNode("n2", None), ProcNode("n3", gone.pid)]
    s = sample(nodes)
    assert list(s) == ["n1"]
    assert (s["n1"]["rss_bytes"] or 0) > 10 * 2**20
    assert s["n1"]["cache_bytes"] is None and s["n1"]["cgroup_anon_bytes"] is None  # no cgroup
    assert (s["n1"]["rss_anon_bytes"] or 0) > 0
    heap = ("heap_max_bytes", "heap_committed_bytes", "heap_resident_bytes")
    assert [s["n1"][k] for k in heap] == [None, None, None]  # python is no JVM
    assert s["n1"]["pid"] == os.getpid()  # one JVM from the next, for memory growth


def test_sampler_records_node_stats_ops_until_closed(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "h.jsonl")
    rec = Recorder(writer)
    nodes: list[Any] = [ProcNode("n1", os.getpid())]  # only what sample() reads of a Node
    sampler = NodeStatsSampler(nodes, rec, interval_s=0.05).start()
    deadline = time.monotonic() + 5
    while sampler.samples < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    sampler.close()
    n = sampler.samples
    time.sleep(0.15)
    assert sampler.samples == n >= 3  # nothing after close
    writer.close()
    ops = list(iter_history(tmp_path / "h.jsonl"))
    assert len(ops) == n
    assert all(o.process == "nemesis" and o.type == "info" and o.f == F_NODE_STATS for o in ops)
    assert all(o.value["n1"]["rss_bytes"] > 0 for o in ops)
    assert [o.time for o in ops] == sorted(o.time for o in ops)


def test_sample_reads_the_node_cgroups_anonymous_memory_and_page_cache(tmp_path: Path) -> None:
    """cgroup v2 layout (memory.max, memory.stat): anon and file of every process in it."""
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "memory.stat").write_text("anon 123456\nfile 7890\nkernel 5\n")
    node: Any = ProcNode("n1", os.getpid())
    node.cgroup = str(tmp_path)
    s = sample([node])["n1"]
    assert (s["cgroup_anon_bytes"], s["cache_bytes"]) == (123456, 7890)
