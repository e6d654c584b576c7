"""How much of a JVM's heap is resident, read from /proc without touching the JVM.

The memory-growth check (checker/memory.py) subtracts a broker's heap from its
anonymous memory: a heap filling up to -Xmx is bounded, what grows outside it is not.

Why /proc/<pid>/smaps and not the JVM's own counters: the brokers run with
`-XX:-UsePerfData` (clusters/kafka_config.py), so there is no hsperfdata file for
jstat to read, and `jcmd <pid> GC.heap_info` starts a JVM per call (~0.25 s wall,
~0.16 s CPU measured here, and a safepoint in the broker) — too dear every few
seconds on a machine the brokers share. The heap is instead found in the process's
memory map: the JVM reserves it as one contiguous range of exactly -Xmx bytes
(rounded up to the heap's alignment), committed pieces `rw-p`, the rest `---p`
(Java 17 with CDS maps its archived heap objects, file-backed, at the top of that
range). The resident anonymous pages of that range are the heap's share of the
process's anonymous memory. Reading smaps walks the page tables: measured in
bench/nodestats.py.

Heap *used* (live objects) is not visible this way, only what was touched; that is
the figure that counts against RSS.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_SIZE = re.compile(r"^(\d+)([kKmMgGtT]?)$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_ALIGNMENTS = tuple(1 << (20 + k) for k in range(7))  # 1 MiB .. 64 MiB


def jvm_size(text: str) -> int | None:
    """A JVM size option's value in bytes ("512m", "1g", "1048576"); None if not one."""
    m = _SIZE.match(text)
    return int(m.group(1)) * _UNITS[m.group(2).lower()] if m else None


def max_heap(argv: Sequence[str]) -> int | None:
    """-Xmx of a JVM command line (the last -Xmx or -XX:MaxHeapSize wins, as in the
    JVM); None when the command line sets none (or is not a JVM's)."""
    found: int | None = None
    for arg in argv:
        if arg.startswith("-Xmx"):
            found = jvm_size(arg[4:]) or found
        elif arg.startswith("-XX:MaxHeapSize="):
            found = jvm_size(arg.split("=", 1)[1]) or found
    return found


@dataclass(frozen=True, slots=True)
class Mapping:
    start: int
    end: int
    perms: str
    path: str
    anon: int  # resident anonymous bytes ("Anonymous:")

    @property
    def size(self) -> int:
        return self.end - self.start


def parse_smaps(text: str) -> list[Mapping]:
    """/proc/<pid>/smaps -> its mappings in address order (only the fields used here)."""
    out: list[Mapping] = []
    head: list[str] | None = None
    anon = 0

    def flush() -> None:
        if head is not None:
            lo, hi = head[0].split("-", 1)
            path = head[5] if len(head) > 5 else ""
            out.append(Mapping(int(lo, 16), int(hi, 16), head[1], path, anon))

    for line in text.splitlines():
        first = line.split(" ", 1)[0]
        if "-" in first and not first.endswith(":"):
            flush()
            head, anon = line.split(None, 5), 0
        elif first == "Anonymous:":
            anon = int(line.split()[1]) * 1024
    flush()
    return out


@dataclass(frozen=True, slots=True)
class Heap:
    max_bytes: int  # -Xmx
    committed_bytes: int  # the reservation's accessible (committed) part
    resident_bytes: int  # its resident anonymous pages


def find_heap(maps: Sequence[Mapping], xmx: int) -> Heap | None:
    """The heap in a process's mappings: a contiguous run of mappings that starts with
    an anonymous one and spans exactly -Xmx, else (the JVM aligns the heap) -Xmx rounded
    up to a power-of-two alignment of 1-64 MiB. None when there is no such run."""
    for sizes in ({xmx}, {-(-xmx // a) * a for a in _ALIGNMENTS}):
        run = _span(maps, sizes)
        if run:
            return Heap(
                xmx,
                sum(m.size for m in run if not m.perms.startswith("---")),
                sum(m.anon for m in run),
            )
    return None


def _span(maps: Sequence[Mapping], sizes: set[int]) -> Sequence[Mapping] | None:
    """The first run of adjacent mappings, starting with an anonymous one, whose span
    is one of `sizes`."""
    top = max(sizes)
    for i, first in enumerate(maps):
        if first.path:
            continue
        for j in range(i, len(maps)):
            if j > i and maps[j].start != maps[j - 1].end:
                break
            span = maps[j].end - first.start
            if span in sizes:
                return maps[i : j + 1]
            if span > top:
                break
    return None


def jvm_heap(pid: int, proc: Path = Path("/proc")) -> Heap | None:
    """The heap of a running JVM, None when the process is not a JVM with -Xmx on its
    command line, is gone, or its heap is not found in its memory map."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
        xmx = max_heap(argv)
        if xmx is None:
            return None
        return find_heap(parse_smaps((proc / str(pid) / "smaps").read_text()), xmx)
    except (OSError, ValueError):
        return None
