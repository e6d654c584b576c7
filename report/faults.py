"""Fault windows from the nemesis ops of a history.

The nemesis records each fault as ops in the same history as the clients
(process "nemesis", type info): a start op and, later, an end op. Pairing them
by family gives the windows that plots shade, so a reader can line up latency
spikes or unseen values with the fault that caused them. An unpaired start
lasts until the end of the run; an unknown nemesis op is kept as an instant.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# start f -> family; end f -> the families it may close.
STARTS: dict[str, str] = {
    "start-partition": "partition",
    "kill": "kill",
    "stop": "stop",
    "pause": "pause",
    "memory-squeeze": "memory",
    "toxic-on": "toxic",
    "start-loss": "loss",
    "rolling-restart": "restart",
}
ENDS: dict[str, tuple[str, ...]] = {
    "stop-partition": ("partition",),
    "start": ("kill", "stop", "restart"),
    "restart": ("kill", "stop"),
    "resume": ("pause",),
    "memory-release": ("memory",),
    "toxic-off": ("toxic",),
    "stop-loss": ("loss",),
    "rolling-restart-done": ("restart",),
}
# Ops that end every open fault (the final heal of a run).
HEAL_ALL = frozenset({"heal", "heal-all", "stop-all"})
# Schedule bookkeeping, not faults: not drawn.
NOT_FAULTS = frozenset({"quiet-period", "node-stats"})  # markers and samples, not faults

# One colour per family, readable on white and distinct from the data markers.
FAMILY_COLOURS: dict[str, str] = {
    "partition": "#e6550d",
    "kill": "#d62728",
    "stop": "#9467bd",
    "pause": "#17becf",
    "memory": "#bcbd22",
    "toxic": "#8c564b",
    "loss": "#e377c2",
    "restart": "#7f7f7f",
}
_EXTRA_COLOURS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")


def family_colour(family: str) -> str:
    if family in FAMILY_COLOURS:
        return FAMILY_COLOURS[family]
    return _EXTRA_COLOURS[sum(map(ord, family)) % len(_EXTRA_COLOURS)]


def family_of(f: str) -> tuple[str, str] | None:
    """('start'|'end', family) for a nemesis f, or None if it is not a paired fault op."""
    if f in STARTS:
        return "start", STARTS[f]
    if f in ENDS:
        return "end", ENDS[f][0]
    # Generic start-X / stop-X pairs from nemeses ktrial does not know by name.
    if f.startswith("start-"):
        return "start", f[len("start-") :]
    if f.startswith("stop-"):
        return "end", f[len("stop-") :]
    return None


def targets(value: Any) -> frozenset[str]:
    """Node names a nemesis value mentions (best effort; empty when it names none)."""
    for _ in range(8):  # {"nodes": {"targets": [...]}}: a few levels, never a recursion
        if isinstance(value, str):
            return frozenset({value})
        if isinstance(value, (list, tuple)):
            return frozenset(str(v) for v in value if isinstance(v, (str, int)))
        if not isinstance(value, dict):
            break
        value = next((value[k] for k in ("nodes", "targets", "node", "target") if k in value), None)
    return frozenset()


def nodes_text(value: Any, limit: int = 24) -> str:
    """The nodes a fault value names, "n1,n3" (cut to `limit`); "" when it names none."""
    names = sorted(targets(value))
    text = ",".join(names)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class FaultWindow:
    family: str
    start_s: float
    end_s: float
    start_f: str
    end_f: str | None  # None: never ended (lasted to the end of the run) or an instant
    value: Any

    @property
    def instant(self) -> bool:
        return self.start_s == self.end_s and self.end_f is None

    @property
    def label(self) -> str:
        """The family and the nodes it hit: "kill n2,n3"."""
        nodes = nodes_text(self.value)
        return f"{self.family} {nodes}" if nodes else self.family


class FaultTracker:
    """Feed nemesis ops in history order; `windows(end_s)` pairs them into FaultWindows."""

    def __init__(self) -> None:
        self._open: list[tuple[str, float, str, Any]] = []  # family, start, f, value
        self._done: list[FaultWindow] = []

    def add(self, f: str, time_s: float, value: Any) -> None:
        if f in NOT_FAULTS:
            return
        if f in HEAL_ALL:
            for fam, t0, sf, v in self._open:
                self._done.append(FaultWindow(fam, t0, time_s, sf, f, v))
            self._open.clear()
            return
        kind = family_of(f)
        if kind is None:
            self._done.append(FaultWindow(f, time_s, time_s, f, None, value))
            return
        what, family = kind
        if what == "start":
            self._open.append((family, time_s, f, value))
            return
        families = ENDS.get(f, (family,))
        candidates = [o for o in self._open if o[0] in families]
        named = targets(value)
        if named:
            matching = [o for o in candidates if targets(o[3]) & named]
            if matching:
                candidates = matching
        for o in candidates:
            self._open.remove(o)
            self._done.append(FaultWindow(o[0], o[1], time_s, o[2], f, o[3]))

    def windows(self, end_s: float) -> list[FaultWindow]:
        """Every window so far, unpaired starts lasting until `end_s`, sorted by start."""
        out = list(self._done)
        out.extend(
            FaultWindow(fam, t0, max(end_s, t0), sf, None, v) for fam, t0, sf, v in self._open
        )
        out.sort(key=lambda w: (w.start_s, w.family))
        return out


def fault_windows(nemesis_ops: Iterable[tuple[str, float, Any]], end_s: float) -> list[FaultWindow]:
    """Pair (f, time_s, value) nemesis ops, in history order, into windows."""
    tr = FaultTracker()
    for f, t, v in nemesis_ops:
        tr.add(f, t, v)
    return tr.windows(end_s)
