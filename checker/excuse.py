"""What each fault allows: the stretches of a run in which a liveness stall is excused.

A fault legitimately stalls a system: a killed leader's keys wait for an election, a
partitioned broker's clients time out, a squeezed broker slows down. A stall while a
fault is active, or within an explicit recovery allowance after it is healed, is the
fault's effect, not a regression; a stall outside those stretches, or one that
outlasts them, is judged as before. This module is the rule, as pure functions of the
nemesis ops (and the cluster's size from test.json):

* :func:`fault_intervals` pairs each fault's start op with its end op (by ``fault_id``
  when the ops carry one, else by family and the nodes named), a ``heal`` ending all;
* :func:`episodes` groups faults that were active at the same time and gives each
  group its *allowance*: from its first start to its last heal plus ``allowance_s``
  (the checker's ``recovery_s``). One exception bounds what a single broker's outage
  allows: a kill, stop or pause of fewer than half of the cluster's nodes held longer
  than the allowance excuses only ``allowance_s`` after its start (the cluster must
  fail over by then) and ``allowance_s`` after its heal;
* :class:`Excuser` answers "which episode, if any, excuses a stall over [lo, hi]": the
  stall must lie within one stretch of one episode's allowance, so a chain of faults
  never excuses a stall that outlasts the fault it began in.

Which faults excuse what (docs/anomalies.md, "Liveness"): every fault family may stall
every key (leadership, group and transaction coordinators move whichever broker is
hit; a toxic on one broker's link stalls every client of the partitions it leads), so
no per-key leadership is tracked.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..histories.model import FAULT_START_F, Op

NS = 1_000_000_000
# The op that ends each family's fault (docs/faults.md), and the ops that end them all.
END_F: dict[str, tuple[str, ...]] = {
    "stop-partition": ("partition",),
    "stop-loss": ("loss",),
    "start": ("kill", "stop"),
    "resume": ("pause",),
    "memory-release": ("memory",),
    "toxic-off": ("toxic",),
    "stop-rolling-restart": ("restart",),
}
HEAL_ALL_F = frozenset({"heal", "heal-all", "stop-all"})
NOT_FAULTS = frozenset({"node-stats", "quiet-period", "fault-error"})
# A minority of brokers out of these is a failover, not an outage: bounded by the allowance.
FAILOVER_FAMILIES = frozenset({"kill", "stop", "pause"})


@dataclass(frozen=True)
class Fault:
    """One fault from its start op to its end op (`end_ns` is the history's end when none
    was recorded)."""

    id: str
    family: str
    start_ns: int
    end_ns: int
    nodes: frozenset[str]
    healed: bool = True

    def label(self) -> str:
        """'kill n1,n2'."""
        return f"{self.family} {','.join(sorted(self.nodes))}".strip()


def _nodes(value: Any) -> frozenset[str]:
    """Node names a nemesis value names (its nodes/targets/node field, or the value itself
    when it is a name or a list of names); empty when it names none."""
    for _ in range(4):
        if isinstance(value, str):
            return frozenset({value})
        if isinstance(value, (list, tuple)):
            return frozenset(str(v) for v in value if isinstance(v, (str, int)))
        if not isinstance(value, Mapping):
            break
        value = next((value[k] for k in ("nodes", "targets", "node", "target") if k in value), None)
    return frozenset()


def _start_family(op: Op) -> str | None:
    family = FAULT_START_F.get(op.f)
    if family is None and op.f.startswith("start-") and len(op.f) > 6:
        family = op.f[6:]  # another tool's start-X / stop-X pair
    if family is None:
        return None
    tagged = op.extra.get("fault") if isinstance(op.extra, dict) else None
    return tagged if isinstance(tagged, str) and tagged else family


def _end_families(f: str) -> tuple[str, ...]:
    if f in END_F:
        return END_F[f]
    return (f[5:],) if f.startswith("stop-") and len(f) > 5 else ()


def _fault_id(op: Op) -> str | None:
    fid = op.extra.get("fault_id") if isinstance(op.extra, dict) else None
    return str(fid) if isinstance(fid, (str, int)) and not isinstance(fid, bool) else None


def fault_intervals(nemesis: Iterable[Op], end_ns: int) -> list[Fault]:
    """Every fault of the nemesis ops (history order), sorted by start.

    An end op closes the open fault with its ``fault_id``; without one, the open faults
    of its family, only those naming one of its nodes when it names any. ``heal``,
    ``heal-all`` and ``stop-all`` close every open fault. Ops of no fault (node-stats,
    quiet-period, fault-error, an oom-kill inside a memory fault) are skipped."""
    open_: list[tuple[str | None, str, int, frozenset[str], int]] = []  # id, family, t, nodes, n
    done: list[Fault] = []
    n = 0
    for op in nemesis:
        if op.type != "info" or op.f in NOT_FAULTS:
            continue
        t = op.time
        if op.f in HEAL_ALL_F:
            done += [Fault(i or f"#{k}", fam, s, max(t, s), nd) for i, fam, s, nd, k in open_]
            open_.clear()
            continue
        family = _start_family(op)
        if family is not None:
            n += 1
            open_.append((_fault_id(op), family, t, _nodes(op.value), n))
            continue
        families = _end_families(op.f)
        if not families:
            continue
        fid = _fault_id(op)
        closing = [o for o in open_ if fid is not None and o[0] == fid]
        if not closing:
            tagged = op.extra.get("fault") if isinstance(op.extra, dict) else None
            fams = (tagged,) if isinstance(tagged, str) and tagged else families
            closing = [o for o in open_ if o[1] in fams and (fid is None or o[0] is None)]
            named = _nodes(op.value)
            if named:  # a fault naming other nodes is not this one's to end
                closing = [o for o in closing if not o[3] or o[3] & named]
        for o in closing:
            open_.remove(o)
            done.append(Fault(o[0] or f"#{o[4]}", o[1], o[2], max(t, o[2]), o[3]))
    done += [Fault(i or f"#{k}", fam, s, max(end_ns, s), nd, False) for i, fam, s, nd, k in open_]
    done.sort(key=lambda f: (f.start_ns, f.end_ns))
    return done


def cluster_nodes(meta: Mapping[str, Any] | None) -> int | None:
    """How many nodes the cluster had, from test.json's ``cluster.nodes`` (a count or a
    list of names); None when unknown."""
    cluster = meta.get("cluster") if isinstance(meta, Mapping) else None
    nodes = cluster.get("nodes") if isinstance(cluster, Mapping) else None
    if isinstance(nodes, bool):
        return None
    if isinstance(nodes, int):
        return nodes if nodes > 0 else None
    if isinstance(nodes, (list, tuple)) and nodes:
        return len(nodes)
    return None


def _fails_over(f: Fault, nodes: int | None) -> bool:
    """A kill/stop/pause of a known minority of the cluster: the rest should take over."""
    return (
        f.family in FAILOVER_FAMILIES
        and nodes is not None
        and len(f.nodes) > 0
        and 2 * len(f.nodes) < nodes
    )


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


@dataclass(frozen=True)
class Episode:
    """Faults active at overlapping times, and the stretches their stalls are excused in."""

    faults: tuple[Fault, ...]
    start_ns: int
    end_ns: int  # the last heal (or the history's end)
    allowance_ns: int
    spans: tuple[tuple[int, int], ...]  # the allowance: disjoint, sorted
    bounded: tuple[Fault, ...]  # faults whose outage the failover bound cuts short

    def fault_ids(self) -> list[str]:
        return [f.id for f in self.faults]

    def names(self, most: int = 3) -> str:
        """'kill n1,n2 (c38e6c-1-kill); toxic n3 (c38e6c-4-toxic)', the first `most`
        faults and how many more."""
        text = "; ".join(f"{f.label()} ({f.id})" for f in self.faults[:most])
        more = len(self.faults) - most
        return text + (f" and {more} more fault{'s' * (more > 1)}" if more > 0 else "")

    def to_json(self, t0: int) -> dict[str, Any]:
        """{from_s, to_s, spans, active_from_s, active_to_s, faults, families, why}, seconds
        from `t0`; `spans` are the stretches excused, [from_s, to_s] their hull."""

        def s(t: int) -> float:
            return round((t - t0) / NS, 3)

        allowance = self.allowance_ns / NS
        healed = all(f.healed for f in self.faults)
        text = (
            f"{self.names()}: active {s(self.start_ns):g}-{s(self.end_ns):g} s"
            + ("" if healed else " (never healed before the history ends)")
            + f", then {allowance:g} s to recover"
        )
        if self.bounded:
            text += (
                f"; {', '.join(f.label() for f in self.bounded)} took out a minority of the "
                f"nodes, so the rest must fail over within {allowance:g} s of its start: "
                "a stall later in the outage is not excused"
            )
        return {
            "from_s": s(self.spans[0][0]),
            "to_s": s(self.spans[-1][1]),
            "spans": [[s(a), s(b)] for a, b in self.spans],
            "active_from_s": s(self.start_ns),
            "active_to_s": s(self.end_ns),
            "faults": [f.id for f in self.faults],
            "families": sorted({f.family for f in self.faults}),
            "why": text,
        }


def episode_names(eps: Sequence[Episode], most: int = 3) -> str:
    """The faults of a few episodes, 'kill n1 (#1) and partition n3 (#2)', for sentences."""
    text = " and ".join(e.names() for e in eps[:most])
    more = len(eps) - most
    return text + (f" and {more} more episodes" if more > 0 else "")


def episodes(
    faults: Sequence[Fault], allowance_s: float, nodes: int | None, lead_s: float = 0.0
) -> list[Episode]:
    """Faults grouped by overlapping activity, each group with its allowance (module doc).
    Each allowance begins `lead_s` before its fault: a value in flight when the fault
    struck (acknowledged, not yet read within its normal latency) is its effect too."""
    allow = round(allowance_s * NS) if allowance_s != float("inf") else 1 << 62
    lead = round(lead_s * NS)
    groups: list[list[Fault]] = []
    end = None
    for f in sorted(faults, key=lambda f: (f.start_ns, f.end_ns)):
        if end is not None and f.start_ns <= end:
            groups[-1].append(f)
            end = max(end, f.end_ns)
        else:
            groups.append([f])
            end = f.end_ns
    out = []
    for g in groups:
        spans: list[tuple[int, int]] = []
        bounded = []
        for f in g:
            if _fails_over(f, nodes) and f.end_ns - f.start_ns > allow:
                bounded.append(f)
                spans += [(f.start_ns - lead, f.start_ns + allow), (f.end_ns, f.end_ns + allow)]
            else:
                spans.append((f.start_ns - lead, f.end_ns + allow))
        out.append(
            Episode(
                tuple(g),
                g[0].start_ns,
                max(f.end_ns for f in g),
                allow,
                tuple(_merge(spans)),
                tuple(bounded),
            )
        )
    return out


class Excuser:
    """Which episode excuses a stall overdue over [lo, hi]: one whose allowance has a
    stretch holding all of it, else none."""

    def __init__(self, eps: Sequence[Episode]) -> None:
        self.episodes = list(eps)
        pieces = sorted(
            (a, b, i) for i, e in enumerate(self.episodes) for a, b in e.spans
        )  # fmt: skip
        self._starts = [p[0] for p in pieces]
        self._best: list[tuple[int, int]] = []  # per prefix: (latest end, its episode)
        top = (-(1 << 62), -1)
        for _a, b, i in pieces:
            if b > top[0]:
                top = (b, i)
            self._best.append(top)

    def __bool__(self) -> bool:
        return bool(self.episodes)

    def allowed_until(self, lo: int) -> int | None:
        """Until when a stall that became overdue at `lo` is excused: the latest end of an
        allowance stretch holding `lo`; None when no fault was active or recovering."""
        j = bisect_right(self._starts, lo) - 1
        if j < 0:
            return None
        end = self._best[j][0]
        return end if end >= lo else None

    def which(self, lo: int, hi: int) -> int | None:
        """The index of an episode excusing [lo, hi], or None."""
        j = bisect_right(self._starts, lo) - 1
        if j < 0:
            return None
        end, i = self._best[j]
        return i if end >= hi else None

    def covering(self, lo: int, hi: int) -> list[Episode]:
        """Every episode whose allowance has a stretch holding [lo, hi] (to name them)."""
        return [e for e in self.episodes if any(a <= lo and hi <= b for a, b in e.spans)]

    def why_not(self, lo: int, hi: int, t0: int) -> str:
        """Why a stall overdue over [lo, hi] (ns) is not excused, for its explanation."""

        def s(t: int) -> str:
            return f"{(t - t0) / NS:.1f}"

        near = [
            (e, a, b) for e in self.episodes for a, b in e.spans if a <= hi and lo <= b
        ]  # fmt: skip
        if not near:
            return f"not excused: no fault was active or recovering {s(lo)}-{s(hi)} s"
        allowed = ", ".join(f"{e.names()}: {s(a)}-{s(b)} s" for e, a, b in near[:3])
        if len(near) > 3:
            allowed += f" and {len(near) - 3} more"
        return f"not excused: overdue {s(lo)}-{s(hi)} s, beyond what faults allowed ({allowed})"

    def which_all(self, lo: Any, hi: Any) -> Any:
        """which() of numpy arrays at once: the episode index per stall, -1 where none."""
        lo, hi = np.asarray(lo), np.asarray(hi)
        if not self._starts or not len(lo):
            return np.full(len(lo), -1, dtype=np.int64)
        ends = [b for b, _i in self._best]
        wide = lo.dtype == object or hi.dtype == object or ends[-1] >= 1 << 62
        dtype: Any = object if wide else np.int64  # times beyond int64's reach stay exact
        if wide:
            lo, hi = lo.astype(object), hi.astype(object)
        j = np.searchsorted(np.array(self._starts, dtype=dtype), lo, side="right") - 1
        jj = np.maximum(j, 0)
        ok = (j >= 0) & (np.array(ends, dtype=dtype)[jj] >= hi)
        eps = np.array([i for _b, i in self._best], dtype=np.int64)
        return np.where(ok, eps[jj], -1)


def excuser(
    nemesis: Iterable[Op],
    end_ns: int,
    allowance_s: float,
    nodes: int | None,
    lead_s: float = 0.0,
) -> tuple[Excuser, list[Fault]]:
    """The excuser of a history's faults, and the faults themselves."""
    faults = fault_intervals(nemesis, end_ns)
    return Excuser(episodes(faults, allowance_s, nodes, lead_s)), faults


def windows(ex: Excuser, start_ns: int, end_ns: int, t0: int, allowance_s: float) -> dict[str, Any]:
    """results' ``liveness.windows``: the judged window [start_ns, end_ns] split into the
    stretches judged as they are (no fault active or recovering) and each episode's
    allowance (clipped to the window), with why."""
    covered = _merge(
        (max(a, start_ns), min(b, end_ns))
        for e in ex.episodes
        for a, b in e.spans
        if a < end_ns and b > start_ns
    )
    judged = []
    at = start_ns
    for a, b in covered:
        if a > at:
            judged.append((at, a))
        at = max(at, b)
    if at < end_ns:
        judged.append((at, end_ns))

    def s(t: int) -> float:
        return round((t - t0) / NS, 3)

    excused = [e.to_json(t0) for e in ex.episodes]
    return {
        "allowance_s": allowance_s,
        "judged": [
            {"from_s": s(a), "to_s": s(b), "why": "no fault active or recovering"}
            for a, b in judged
        ],
        "excused": excused,
        "judged_s": round(sum(b - a for a, b in judged) / NS, 3),
        "excused_s": round(sum(b - a for a, b in covered) / NS, 3),
    }
