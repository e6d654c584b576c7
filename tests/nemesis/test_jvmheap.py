"""The JVM heap found in /proc/<pid>/smaps (nemesis/jvmheap.py): parsing, the search for
the -Xmx reservation, and a real JVM."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.nemesis.jvmheap import Mapping, find_heap, jvm_heap, jvm_size, max_heap, parse_smaps

MIB = 1 << 20


def smaps(*maps: tuple[int, int, str, str, int]) -> str:
    """smaps text of (start, end, perms, path, anonymous kB) mappings."""
    out = []
    for lo, hi, perms, path, anon_kb in maps:
        out.append(f"{lo:x}-{hi:x} {perms} 00000000 00:00 0    {path}".rstrip())
        out += [
            f"Size:           {(hi - lo) // 1024} kB",
            f"Rss:            {anon_kb} kB",
            f"Anonymous:      {anon_kb} kB",
            "AnonHugePages:         0 kB",
            "VmFlags: rd wr mr mw me ac sd",
        ]
    return "\n".join(out) + "\n"


def test_jvm_sizes_and_the_last_xmx_wins() -> None:
    assert [jvm_size(s) for s in ("512m", "1G", "64k", "1048576", "1t", "12x", "", "m")] == [
        512 * MIB, 1 << 30, 64 << 10, 1 << 20, 1 << 40, None, None, None]  # fmt: skip
    argv = ["java", "-Xms512m", "-Xmx512m", "-cp", "x", "-XX:MaxHeapSize=1g", "Main"]
    assert max_heap(argv) == 1 << 30
    assert max_heap(["java", "-Xmx2g", "-Xmxbogus"]) == 2 << 30
    assert max_heap(["sh", "-c", "exec java"]) is None


def test_parse_smaps_keeps_path_perms_and_anonymous_bytes() -> None:
    text = smaps(
        (0xE0000000, 0xF0000000, "rw-p", "", 1024),
        (0xF0000000, 0xF0100000, "rw-p", "/usr/lib/jvm/lib/server/classes.jsa", 4),
    )
    a, b = parse_smaps(text)
    assert (a.start, a.end, a.perms, a.path, a.anon) == (0xE0000000, 0xF0000000, "rw-p", "", MIB)
    assert b.path.endswith("classes.jsa") and b.anon == 4096
    assert parse_smaps("") == []


BASE = 0xE0000000


def test_heap_with_xms_equal_xmx_and_cds_regions_at_its_top() -> None:
    """Java 17's layout for -Xms512m -Xmx512m (seen on this machine): the reservation
    [e0000000, 100000000) with CDS's archived heap mapped from classes.jsa at its top."""
    maps = parse_smaps(
        smaps(
            (0x1000, 0x2000, "rw-p", "", 4),  # unrelated, not adjacent
            (BASE, 0xFFE00000, "rw-p", "", 200 * 1024),
            (0xFFE00000, 0xFFE75000, "rw-p", "/jvm/classes.jsa", 0),
            (0xFFE75000, 0xFFF00000, "rw-p", "", 8),
            (0xFFF00000, 0xFFF78000, "rw-p", "/jvm/classes.jsa", 0),
            (0xFFF78000, 0x100000000, "rw-p", "", 4),
            (0x100000000, 0x100400000, "rw-p", "", 4096),  # class space right after
        )
    )
    heap = find_heap(maps, 512 * MIB)
    assert heap is not None
    assert heap.max_bytes == heap.committed_bytes == 512 * MIB
    assert heap.resident_bytes == (200 * 1024 + 8 + 4) * 1024  # not the class space


def test_heap_with_xms_under_xmx_counts_only_the_committed_part() -> None:
    maps = parse_smaps(
        smaps(
            (BASE, BASE + 128 * MIB, "rw-p", "", 50 * 1024),
            (BASE + 128 * MIB, BASE + 512 * MIB, "---p", "", 0),
        )
    )
    heap = find_heap(maps, 512 * MIB)
    assert heap is not None and (heap.committed_bytes, heap.resident_bytes) == (
        128 * MIB, 50 * MIB)  # fmt: skip


def test_an_unaligned_xmx_is_found_rounded_up_and_a_missing_heap_is_none() -> None:
    maps = parse_smaps(smaps((BASE, BASE + 502 * MIB, "rw-p", "", 1024)))
    assert find_heap(maps, 501 * MIB + 5) is not None  # rounded up to 2 MiB
    assert find_heap(maps, 512 * MIB) is None  # no range of that size
    gap = parse_smaps(
        smaps(
            (BASE, BASE + 256 * MIB, "rw-p", "", 4),
            (BASE + 257 * MIB, BASE + 513 * MIB, "rw-p", "", 4),
        )
    )
    assert find_heap(gap, 512 * MIB) is None  # not contiguous
    named = parse_smaps(smaps((BASE, BASE + 512 * MIB, "rw-p", "[heap]", 4)))
    assert find_heap(named, 512 * MIB) is None  # the C heap is not the Java heap


@given(
    before=st.lists(st.integers(1, 64), max_size=4),
    pieces=st.lists(
        st.tuples(st.integers(1, 64), st.booleans(), st.integers(0, 100)), min_size=1, max_size=6
    ),
)
def test_the_heap_is_found_right_after_other_mappings(
    before: list[int], pieces: list[tuple[int, bool, int]]
) -> None:
    """Whatever mappings of files sit right before it, a contiguous range of -Xmx bytes
    is found, with its committed and resident parts summed."""
    maps: list[Mapping] = []
    at = BASE
    for mib in before:
        maps.append(Mapping(at, at + mib * MIB, "rw-p", "/lib/x.so", 0))
        at += mib * MIB
    start = at
    for mib, committed, pct in pieces:
        size = mib * MIB
        maps.append(Mapping(at, at + size, "rw-p" if committed else "---p", "",
                            size * pct // 100 if committed else 0))  # fmt: skip
        at += size
    xmx = at - start
    heap = find_heap(maps, xmx)
    assert heap is not None
    assert heap.committed_bytes == sum(m.size for m in maps[len(before) :] if m.perms == "rw-p")
    assert heap.resident_bytes == sum(m.anon for m in maps)


HOLD = """
public class Hold {
  public static void main(String[] a) throws Exception {
    byte[][] keep = new byte[48][];
    for (int i = 0; i < keep.length; i++) keep[i] = new byte[1 << 20];
    System.out.println("ready");
    Thread.sleep(60_000);
  }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="no java")
def test_a_real_jvm_heap_is_found_and_bounded_by_xmx(tmp_path: Path) -> None:
    src = tmp_path / "Hold.java"
    src.write_text(HOLD)
    args = ["java", "-Xms128m", "-Xmx128m", "-XX:+UseG1GC", "-XX:-UsePerfData", str(src)]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        heap = jvm_heap(p.pid)
        assert heap is not None, "heap reservation of -Xmx128m not found in smaps"
        assert heap.max_bytes == heap.committed_bytes == 128 * MIB
        # 48 MiB of arrays were written: resident, and never more than the heap
        assert 40 * MIB < heap.resident_bytes <= 128 * MIB
    finally:
        p.kill()
        p.wait()
    assert jvm_heap(p.pid) is None  # gone


def test_no_heap_for_a_process_that_is_not_a_jvm() -> None:
    p = subprocess.Popen(["sleep", "30"])
    try:
        assert jvm_heap(p.pid) is None
    finally:
        p.kill()
        p.wait()
