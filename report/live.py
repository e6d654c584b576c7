"""The live progress view of a running test.

`LiveView(recorder, time_limit_s)` is a context manager around the main phase of
a run. A background thread reads `Recorder.snapshot()` (a copy taken under the
recorder's lock, so workers are never blocked for long) and shows elapsed and
remaining time, completions per second by f, ok/fail/info counts, the active
faults, when `unseen_fn` is given, how many acknowledged values no consumer
has read yet, and when `watch_fn` is given, what the running safety check found
(``ktrial/watch.py``: an anomaly shows in red at once). On a terminal this is a
rich Live panel; otherwise (CI logs) a plain line every few seconds, because a
redrawn panel is unreadable in a log.

The view only reads: stopping it (normal exit, exception, Ctrl-C) sets an event
and joins the thread, and it never swallows the exception that ended the block.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .faults import targets

COMPLETIONS = ("ok", "fail", "info")
RATE_WINDOW_S = 5.0


class Snapshotter(Protocol):
    def snapshot(self) -> tuple[int, Counter[tuple[str, str]], dict[str, Any]]: ...


@dataclass(frozen=True)
class Progress:
    """What one refresh shows; pure data so it can be tested without threads."""

    elapsed_s: float
    time_limit_s: float | None
    rates: dict[str, float]  # f -> completions/s over the last few seconds
    totals: dict[str, int]  # ok/fail/info over client ops
    by_f: dict[str, dict[str, int]]
    faults: dict[str, Any]
    unseen: int | None
    watch: str | None = None  # the running safety check's line (watch.py)
    alarm: bool = False  # it found an anomaly

    @property
    def remaining_s(self) -> float | None:
        if self.time_limit_s is None:
            return None
        return max(0.0, self.time_limit_s - self.elapsed_s)


def client_fs(counts: Counter[tuple[str, str]]) -> set[str]:
    """Client ops are invoked; nemesis ops are recorded as info only."""
    return {f for (f, t), n in counts.items() if t == "invoke" and n}


def progress(
    history: deque[tuple[float, Counter[tuple[str, str]]]],
    time_limit_s: float | None,
    faults: dict[str, Any],
    unseen: int | None,
) -> Progress:
    """Build a Progress from timed count snapshots (oldest first, newest last)."""
    now_s, counts = history[-1]
    then_s, before = history[0]
    fs = client_fs(counts)
    dt = now_s - then_s
    rates = {}
    by_f: dict[str, dict[str, int]] = {}
    for f in sorted(fs):
        done_now = sum(counts[(f, t)] for t in COMPLETIONS)
        done_then = sum(before[(f, t)] for t in COMPLETIONS)
        rates[f] = (done_now - done_then) / dt if dt > 0 else 0.0
        by_f[f] = {t: counts[(f, t)] for t in COMPLETIONS}
    totals = {t: sum(by_f[f][t] for f in by_f) for t in COMPLETIONS}
    return Progress(now_s, time_limit_s, rates, totals, by_f, faults, unseen)


def _fault_name(name: str) -> str:
    """Nemesis fault ids look like `<uid>-<n>-<family>`: show `<family>#<n>`."""
    m = re.search(r"-(\d+)-([A-Za-z][\w-]*)$", name)
    return f"{m.group(2)}#{m.group(1)}" if m else name


def _fault_text(faults: dict[str, Any]) -> str:
    if not faults:
        return "none"
    parts = []
    for name, v in sorted(faults.items()):
        nodes = sorted(targets(v))
        parts.append(_fault_name(name) + (f" [{','.join(nodes)}]" if nodes else ""))
    return ", ".join(parts)


def plain_line(p: Progress) -> str:
    """One log line: elapsed/limit, rates, outcome counts, faults, unseen."""
    limit = f"/{p.time_limit_s:.0f}s" if p.time_limit_s is not None else ""
    rates = " ".join(f"{f} {r:.1f}/s" for f, r in p.rates.items()) or "no ops yet"
    totals = " ".join(f"{t} {p.totals.get(t, 0)}" for t in COMPLETIONS)
    line = f"[{p.elapsed_s:7.1f}s{limit}] {rates} | {totals} | faults: {_fault_text(p.faults)}"
    if p.unseen is not None:
        line += f" | unseen {p.unseen}"
    if p.watch is not None:
        line += f" | {p.watch}"
    return line


def panel(p: Progress, title: str = "ktrial") -> Panel:
    """The rich panel shown on a terminal."""
    head = Text()
    head.append(f"elapsed {p.elapsed_s:,.1f} s", style="bold")
    if p.remaining_s is not None:
        head.append(f"   remaining {p.remaining_s:,.1f} s of {p.time_limit_s:,.0f} s")
    table = Table(box=None, pad_edge=False, expand=False)
    table.add_column("f", style="bold")
    table.add_column("ops/s", justify="right")
    table.add_column("ok", justify="right", style="green")
    table.add_column("fail", justify="right", style="yellow")
    table.add_column("info", justify="right", style="red")
    for f, c in p.by_f.items():
        table.add_row(
            f, f"{p.rates.get(f, 0.0):,.1f}", f"{c['ok']:,}", f"{c['fail']:,}", f"{c['info']:,}"
        )
    table.add_row(
        "all",
        f"{sum(p.rates.values()):,.1f}",
        f"{p.totals.get('ok', 0):,}",
        f"{p.totals.get('fail', 0):,}",
        f"{p.totals.get('info', 0):,}",
        style="dim",
    )
    faults = Text("active faults: ", style="bold")
    faults.append(_fault_text(p.faults), style="magenta" if p.faults else "dim")
    parts: list[Any] = [head, table, faults]
    if p.unseen is not None:
        parts.append(Text(f"unseen values: {p.unseen:,}", style="bold red" if p.unseen else "dim"))
    if p.watch is not None:
        parts.append(Text(p.watch, style="bold white on red" if p.alarm else "dim"))
    return Panel(Group(*parts), title=title, expand=False)


class LiveView:
    """Context manager showing a run's progress until the block exits."""

    def __init__(
        self,
        recorder: Snapshotter,
        time_limit_s: float | None,
        unseen_fn: Callable[[], int] | None = None,
        *,
        watch_fn: Callable[[], tuple[str, bool]] | None = None,
        console: Console | None = None,
        refresh_s: float = 0.5,
        plain_every_s: float = 5.0,
        title: str = "ktrial",
    ) -> None:
        self.recorder = recorder
        self.time_limit_s = time_limit_s
        self.unseen_fn = unseen_fn
        self.watch_fn = watch_fn
        self.console = console or Console(stderr=True)
        self.refresh_s = refresh_s
        self.plain_every_s = plain_every_s
        self.title = title
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None
        self._history: deque[tuple[float, Counter[tuple[str, str]]]] = deque()
        self._closed = False

    @property
    def interactive(self) -> bool:
        return self.console.is_terminal

    def current(self) -> Progress:
        """Take a snapshot now and turn it into a Progress (also used by tests)."""
        elapsed_ns, counts, faults = self.recorder.snapshot()
        now = elapsed_ns / 1e9
        self._history.append((now, counts))
        while len(self._history) > 2 and now - self._history[1][0] >= RATE_WINDOW_S:
            self._history.popleft()
        unseen = None
        if self.unseen_fn is not None:
            try:
                unseen = int(self.unseen_fn())
            except Exception:
                unseen = None
        p = progress(self._history, self.time_limit_s, faults, unseen)
        if self.watch_fn is not None:
            try:
                line, alarm = self.watch_fn()
            except Exception:
                return p
            p = replace(p, watch=line, alarm=alarm)
        return p

    def _loop(self) -> None:
        last_plain = time.monotonic()
        while not self._stop.wait(
            self.refresh_s if self.interactive else min(self.refresh_s * 2, self.plain_every_s)
        ):
            try:
                p = self.current()
                if self._live is not None:
                    self._live.update(panel(p, self.title))
                elif time.monotonic() - last_plain >= self.plain_every_s:
                    last_plain = time.monotonic()
                    self.console.print(plain_line(p), markup=False, highlight=False, soft_wrap=True)
            except Exception as e:
                print(f"ktrial live view: {type(e).__name__}: {e}", file=sys.stderr)
                return

    def __enter__(self) -> LiveView:
        first = self.current()
        if self.interactive:
            self._live = Live(
                panel(first, self.title),
                console=self.console,
                refresh_per_second=4,
                transient=False,
                redirect_stdout=True,
                redirect_stderr=True,
            )
            self._live.start()
        self._thread = threading.Thread(target=self._loop, name="ktrial-live", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the thread, draw the final state once, restore the terminal. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        try:
            final = self.current()
        except Exception:
            final = None
        if self._live is not None:
            if final is not None:
                self._live.update(panel(final, self.title))
            self._live.stop()
            self._live = None
        elif final is not None:
            self.console.print(plain_line(final), markup=False, highlight=False, soft_wrap=True)
