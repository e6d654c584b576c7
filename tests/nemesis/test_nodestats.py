"""node-stats samples: real RSS of real processes, recorded as nemesis ops."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any, cast

import pytest
from ktrial.clusters.base import Node
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


# ---------------------------------------------------------------- reclaim telemetry
# Parsers checked on files copied from this machine (Linux 6.18, cgroups v1, PSI on):
# tests/data/load/ holds /proc/vmstat, /proc/pressure/memory, /proc/meminfo, the root
# memory cgroup's memory.stat and a Kafka broker's /proc/<pid>/stat.

DATA = Path(__file__).resolve().parents[1] / "data" / "load"


def test_proc_stat_of_a_real_broker() -> None:
    from ktrial.nemesis.nodestats import parse_proc_stat

    cpu, majflt = parse_proc_stat((DATA / "broker-stat").read_text(), 100) or (None, None)
    assert cpu == (1376 + 134) / 100  # utime + stime, clock ticks
    assert majflt == 26
    # a command name with spaces and parentheses does not shift the fields
    odd = "42 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 20 30 0 0"
    assert parse_proc_stat(odd, 10) == ((20 + 30) / 10, 9)
    assert parse_proc_stat("garbage", 100) is None


def test_proc_cpu_of_this_process_grows() -> None:
    from ktrial.nemesis.nodestats import proc_cpu

    before = proc_cpu(os.getpid())
    sum(i * i for i in range(300_000))
    after = proc_cpu(os.getpid())
    assert before is not None and after is not None
    assert after[0] >= before[0] and after[1] >= before[1]


def test_host_figures_from_this_machines_files() -> None:
    from ktrial.nemesis.nodestats import host_figures

    vm = (DATA / "vmstat").read_text()
    h = host_figures(vm, (DATA / "pressure-memory").read_text(), (DATA / "meminfo").read_text())
    assert h["host_allocstall"] == 0 and h["host_pgscan_direct"] == 0  # an idle host
    assert h["host_pgsteal_direct"] == 0
    assert h["host_pgmajfault"] is not None and h["host_pgmajfault"] > 0
    assert h["host_psi_some_us"] is not None and h["host_psi_some_us"] > 0
    assert h["host_psi_full_us"] is not None and h["host_psi_full_us"] <= h["host_psi_some_us"]
    assert h["host_mem_available_bytes"] is not None and h["host_mem_available_bytes"] > 2**30
    # allocstall is summed over zones; a kernel without PSI or meminfo gives None
    stalled = vm.replace("allocstall_normal 0", "allocstall_normal 7").replace(
        "allocstall_movable 0", "allocstall_movable 5"
    )
    h2 = host_figures(stalled, None, None)
    assert h2["host_allocstall"] == 12
    assert h2["host_psi_some_us"] is None and h2["host_mem_available_bytes"] is None
    assert host_figures(None, None, None)["host_pgscan_direct"] is None


def test_cgroup_figures_v1_real_and_v2() -> None:
    from ktrial.nemesis.cgroups import parse_kv
    from ktrial.nemesis.nodestats import cgroup_figures

    v1 = parse_kv((DATA / "cgroup-v1-memory.stat").read_text())
    f1 = cgroup_figures(v1, 1)
    assert f1["cgroup_pgmajfault"] == v1["total_pgmajfault"]  # hierarchical
    assert f1["cgroup_pgscan_direct"] is None  # cgroup v1 does not count it
    # v1 counts refaults (evicted pages read back), hierarchically, file + anon
    assert f1["cgroup_refault"] == (
        v1["total_workingset_refault_file"] + v1["total_workingset_refault_anon"]
    )
    v2 = parse_kv(
        "anon 10\nfile 20\npgmajfault 3\npgscan_direct 400\npgsteal_direct 300\n"
        "workingset_refault_anon 5\nworkingset_refault_file 70\n"
    )
    assert cgroup_figures(v2, 2) == {
        "cgroup_pgmajfault": 3,
        "cgroup_pgscan_direct": 400,
        "cgroup_pgsteal_direct": 300,
        "cgroup_refault": 75,
    }
    # an old kernel's single counter; none at all gives None
    assert cgroup_figures({"total_workingset_refault": 9}, 1)["cgroup_refault"] == 9
    assert cgroup_figures({}, 2)["cgroup_refault"] is None


def test_v2_cgroup_limit_usage_and_limit_hits(tmp_path: Path) -> None:
    """cgroup v2 files (as a squeezed node has them): the limit, usage and memory.events
    `max` (limit hits) are sampled; an unlimited cgroup's limit is null."""
    from ktrial.nemesis.nodestats import _cgroup

    (tmp_path / "memory.max").write_text("268435456\n")
    (tmp_path / "memory.current").write_text("260000000\n")
    (tmp_path / "memory.events").write_text("low 0\nhigh 4\nmax 321\noom 0\noom_kill 0\n")
    (tmp_path / "memory.stat").write_text("anon 1\nfile 2\nworkingset_refault_file 8\n")
    (tmp_path / "memory.pressure").write_text(
        "some avg10=1.00 avg60=0.50 avg300=0.10 total=123456\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=23456\n"
    )
    f = _cgroup(str(tmp_path))
    assert f["cgroup_limit_bytes"] == 268435456 and f["cgroup_usage_bytes"] == 260000000
    assert f["cgroup_failcnt"] == 321 and f["cgroup_refault"] == 8
    assert f["cgroup_psi_some_us"] == 123456
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "memory.events").unlink()  # unreadable: left out, the rest still read
    g = _cgroup(str(tmp_path))
    assert g["cgroup_limit_bytes"] is None and "cgroup_failcnt" not in g
    assert g["cgroup_usage_bytes"] == 260000000


def _v1_hierarchy() -> Any:
    from ktrial.nemesis import cgroups as ncg

    with contextlib.suppress(OSError):
        from ktrial.clusters import cgroups as ccg

        h = ccg.memory_hierarchy()
        if h is not None and h.version == 1 and os.geteuid() == 0:
            return h, ccg, ncg
    return None


@pytest.mark.skipif(_v1_hierarchy() is None, reason="needs root and a cgroup v1 memory hierarchy")
def test_a_squeezed_v1_cgroup_shows_limit_hits_and_refaults(tmp_path: Path) -> None:
    """The reclaim a squeeze forces, seen as node-stats sees it on cgroup v1: a process
    in a 32 MiB cgroup writing and re-reading 96 MiB hits the limit (failcnt: each hit
    is a direct reclaim of the cgroup) and reads evicted pages back (refaults); the
    host's /proc/vmstat direct-reclaim counters do not count cgroup reclaim."""
    from ktrial.nemesis.nodestats import _cgroup

    h, ccg, ncg = _v1_hierarchy()
    rid = f"t{os.getpid()}"
    d = ccg.create(h, rid, "probe")
    try:
        ncg.MemoryCgroup(d).set_limit(32 << 20)
        before = _cgroup(str(d))
        assert before["cgroup_limit_bytes"] == 32 << 20
        f = tmp_path / "blob"
        script = (
            'echo $$ > "$0/cgroup.procs" && '
            'dd if=/dev/zero of="$1" bs=1M count=96 conv=fsync status=none && '
            'cat "$1" > /dev/null && cat "$1" > /dev/null'
        )
        subprocess.run(["sh", "-c", script, str(d), str(f)], check=True, timeout=60)
        after = _cgroup(str(d))
        assert after["cgroup_failcnt"] > before["cgroup_failcnt"]  # type: ignore[operator]
        assert after["cgroup_refault"] > before["cgroup_refault"]  # type: ignore[operator]
        assert after["cgroup_usage_bytes"] <= 32 << 20  # type: ignore[operator]
        assert after["cgroup_pgscan_direct"] is None  # v1 has no such counter
    finally:
        ccg.remove(d)


def test_sample_has_cpu_faults_and_host_counters_and_reuses_the_heap() -> None:
    import ktrial.nemesis.nodestats as ns

    calls: list[int] = []
    real = ns.jvm_heap

    def counting(pid: int) -> Any:
        calls.append(pid)
        return real(pid)

    ns.jvm_heap = counting  # type: ignore[assignment]
    try:
        last: dict[int, Any] = {}
        node = ProcNode("n1", os.getpid())
        s1 = sample([cast(Node, node)], True, last)["n1"]
        s2 = sample([cast(Node, node)], False, last)["n1"]
    finally:
        ns.jvm_heap = real  # type: ignore[assignment]
    assert calls == [os.getpid()]  # the second sample carried the heap forward
    for s in (s1, s2):
        assert s["cpu_ms"] is not None and s["majflt"] is not None
        assert "host_pgscan_direct" in s and "host_psi_some_us" in s
    assert s2["cpu_ms"] >= s1["cpu_ms"]  # type: ignore[operator]


def test_sampler_reads_the_heap_every_fifth_second() -> None:
    rec = _ListRecorder()
    s = NodeStatsSampler([], rec, interval_s=1.0)
    assert s.heap_every == 5
    assert NodeStatsSampler([], rec, interval_s=5.0).heap_every == 1


class _ListRecorder:
    def nemesis(self, f: str, value: Any, **extra: Any) -> None:
        pass
