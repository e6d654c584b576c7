"""Typed dependency cycles: G0, G1c and their -realtime variants, explained step by step.

Two searches, so that what decides validity is always complete:

* the *bad* search uses wr and realtime edges only. Any cycle there has no ww
  edge, so it is circular visibility (G1c) or visibility against real time
  (G1c-realtime): always bad, whatever ww_deps says.
* with ww_deps, the *informational* search adds ww edges and names G0, G1c,
  G0-realtime and G1c-realtime cycles that use them; those are normal for Kafka
  (no write isolation), so a timeout there only truncates the report.

Each non-trivial component (graph.py) becomes a small networkx DiGraph whose
edges carry a bit mask of their types; a shortest cycle of a type is a BFS from
the head of each edge of a required type back to its tail, over (node, types
seen) states, within the component's time budget.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections import deque
from typing import Any

import networkx as nx

from .explain import op_name, secs, val
from .graph import (
    CHAIN,
    RT,
    WR,
    WW,
    Writers,
    back_wr_edges,
    candidate_components,
    next_committed_writer,
    ok_completion_positions,
    potentials,
    windows,
    wr_edges,
    ww_edges,
)
from .logs import Logs, iter_reads
from .prepare import Prepared

Example = dict[str, Any]

# type name -> (allowed edge types, required edge types)
BAD_SEARCH = [("G1c", WR, WR), ("G1c-realtime", WR | RT, WR | RT)]
INFO_SEARCH = [
    ("G0", WW, WW),
    ("G1c", WW | WR, WR),
    ("G0-realtime", WW | RT, RT),
    ("G1c-realtime", WW | WR | RT, WR | RT),
]
CHUNK = 4000  # informational search examines huge components in windows of this many ops
INFO_BUDGET_S = 1.0  # total for the informational search: it never changes the verdict
INFO_MAX_EDGES = 500_000  # ww + wr edges beyond which the ww search is skipped
MAX_STARTS = 256  # start edges tried per type before settling for the best cycle found
MAX_STEPS = 30  # steps explained per cycle example


class Timeout(Exception):
    pass


def component_graph(
    p: Prepared, logs: Logs, writers: Writers, members: list[int], ww: bool, wr: bool = True
) -> nx.DiGraph:
    """All real edges among `members`, each with a `t` bit mask of WW/WR/RT."""
    g = nx.DiGraph()
    g.add_nodes_from(members)
    mset = set(members)

    def add(u: int, v: int, t: int) -> None:
        if g.has_edge(u, v):
            g[u][v]["t"] |= t
        else:
            g.add_edge(u, v, t=t)

    if wr:
        for u, v in wr_edges(p, logs, writers, only=members):
            if u in mset:
                add(u, v, WR)
    if ww:
        for u in members:
            r = p.ops[u]
            for k, val, o, _i in r.writes:
                kl = logs.keys.get(k)
                d = None if kl is None else kl.pos(o, val)
                if d is None:
                    continue
                nxt = next_committed_writer(writers, logs, k, d, u)
                if nxt is not None and nxt[0] in mset:
                    add(u, nxt[0], WW)
    _add_realtime_chain(g, p, members)
    return g


def _add_realtime_chain(g: nx.DiGraph, p: Prepared, members: list[int]) -> None:
    """Realtime order among `members` through a chain of completion nodes: ok op u ->
    its completion node (an RT edge, the step), completion nodes in completion order
    (CHAIN), and the last completion before an op's invocation -> that op (CHAIN).
    u reaches v through the chain exactly when u completed before v was invoked, with
    O(members) edges: direct edges would be m*m between two concurrent groups of m.
    Completion nodes are negative ints (-1 - j); shortest_cycle folds each pass
    through the chain back into one realtime step."""
    ops = p.ops
    done: list[tuple[int, int]] = []
    for m in members:
        c = ops[m].comp_pos
        if ops[m].type == "ok" and c is not None:
            done.append((c, m))
    if not done:
        return
    done.sort()
    pos = [c for c, _m in done]
    for j, (_c, m) in enumerate(done):
        g.add_edge(m, -1 - j, t=RT)
        if j:
            g.add_edge(-j, -1 - j, t=CHAIN)
    for m in members:
        j = bisect_left(pos, ops[m].inv_pos) - 1  # the last completion strictly before
        if j >= 0:
            g.add_edge(-1 - j, m, t=CHAIN)


_SINGLE = {t: [b for b in (WR, WW, RT) if t & b] for t in range(8)}


def shortest_cycle(
    g: nx.DiGraph, allowed: int, required: int, deadline: float
) -> list[tuple[int, int, int]] | None:
    """A shortest simple cycle over `allowed` edge types that uses each `required` type.

    Each step counts as ONE of its edge's types (an edge u->v that is both wr and
    realtime is a wr step or a realtime step, not both), returned as (u, v, type).
    The search runs over (node, required types used so far) states, so the walk it
    finds may pass a node twice; such a walk is cut into its simple cycles and the
    shortest one that still uses every required type is kept. Realtime steps run
    through the completion chain (component_graph): entering it costs one step,
    moving along it and leaving it nothing (a 0-1 BFS), and each pass is folded
    back into one realtime step u -> v.
    """
    req_bits = [b for b in (WW, WR, RT) if required & b]
    # Start from edges of the rarest required type, between ops or into the chain.
    starts_by_bit = {
        b: [(u, v) for u, v, d in g.edges(data=True) if d["t"] & b and u >= 0] for b in req_bits
    }
    # Rarest type first; then the others: a walk from the only edge of the rarest type
    # may split into loops none of which has every required type, while a simple cycle
    # through that edge exists (found from one of its other edges).
    order = sorted(req_bits, key=lambda b: len(starts_by_bit[b]))
    starts = [(b, u, v) for b in order for u, v in starts_by_bit[b]]
    chain_ok = bool(allowed & RT)
    best: list[tuple[int, int, int]] | None = None
    succ = g._succ  # read-only fast access to adjacency
    for tries, (bit, u0, v0) in enumerate(starts):
        if tries >= MAX_STARTS and best is not None:
            break
        if time.monotonic() > deadline:
            if best is None:
                raise Timeout
            break
        start = (v0, bit & required)
        parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
        dist = {start: 0}
        q = deque([start])
        found = None
        steps = 0
        while q:
            st0 = q.popleft()
            node, mask = st0
            if node == u0 and mask == required:
                found = st0
                break
            steps += 1
            if steps & 1023 == 0 and time.monotonic() > deadline:
                if best is not None:
                    return best  # out of time: the best cycle found so far
                raise Timeout
            d0 = dist[st0]
            for nb, d in succ[node].items():
                t = d["t"]
                if t == CHAIN:  # along or out of the chain: free, no type
                    if not chain_ok:
                        continue
                    st = (nb, mask)
                    if st not in dist or dist[st] > d0:
                        dist[st] = d0
                        parent[st] = (st0, CHAIN)
                        q.appendleft(st)
                    continue
                for b in _SINGLE[t & allowed]:
                    st = (nb, mask | (b & required))
                    if st not in dist:
                        dist[st] = d0 + 1
                        parent[st] = (st0, b)
                        q.append(st)
        if found is None:
            continue
        path: list[tuple[int, int, int]] = []
        cur = found
        while parent[cur] is not None:
            prev, b = parent[cur]  # type: ignore[misc]
            path.append((prev[0], cur[0], b))
            cur = prev
        path.reverse()
        cyc = _simple_part(_fold_chain([(u0, v0, bit), *path]), required)
        if cyc is not None and (best is None or len(cyc) < len(best)):
            best = cyc
            if len(best) <= 2:
                break
    return best


def _fold_chain(walk: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Fold each pass through the completion chain (u -> c ... c -> v) into (u, v, RT)."""
    out: list[tuple[int, int, int]] = []
    entered: int | None = None
    for u, v, b in walk:
        if v < 0:  # into or along the chain
            if u >= 0:
                entered = u
            continue
        if u < 0:  # out of the chain
            assert entered is not None
            out.append((entered, v, RT))
            entered = None
            continue
        out.append((u, v, b))
    return out


def _simple_part(
    walk: list[tuple[int, int, int]], required: int
) -> list[tuple[int, int, int]] | None:
    """The shortest simple cycle of a closed walk that uses every required type."""
    cycles: list[list[tuple[int, int, int]]] = []
    stack: list[tuple[int, int, int]] = []
    at: dict[int, int] = {walk[0][0]: 0}  # node -> index in stack where it was entered
    for step in walk:
        stack.append(step)
        v = step[1]
        if v in at:  # a loop closes at v
            i = at[v]
            loop = stack[i:]
            del stack[i:]
            for u, _v, _b in loop[1:]:
                at.pop(u, None)
            cycles.append(loop)
        else:
            at[v] = len(stack)
    ok = [c for c in cycles if _types(c) & required == required]
    return min(ok, key=len) if ok else None


def _types(cyc: list[tuple[int, int, int]]) -> int:
    m = 0
    for _u, _v, b in cyc:
        m |= b
    return m


def _edge_step(
    p: Prepared, logs: Logs, writers: Writers, u: int, v: int, t: int
) -> tuple[str, str]:
    """(edge type name, sentence) explaining why u precedes v."""
    a, b = p.ops[u], p.ops[v]
    if t & WR:
        for k, val_, o, i in iter_reads(logs, b):
            w = p.writer_of.get(k, {}).get(val_)
            if w == u:
                j = next((jj for kk, vv, _oo, jj in a.writes if kk == k and vv == val_), "?")
                at = "" if o is None else f" at offset {o}"
                return "wr", (
                    f"{op_name(a)} sent value {val(val_)} to key {k} (micro-op {j}), and "
                    f"{op_name(b)} read it{at} (micro-op {i})"
                )
    if t & WW:
        for k, val_, o, i in a.writes:
            kl = logs.keys.get(k)
            d = None if kl is None else kl.pos(o, val_)
            if d is None:
                continue
            nxt = next_committed_writer(writers, logs, k, d, u)
            if nxt is not None and nxt[0] == v and kl is not None:
                j = next((jj for kk, vv, _oo, jj in b.writes if kk == k and vv == nxt[1]), "?")
                return "ww", (
                    f"{op_name(a)} sent value {val(val_)} to key {k} (micro-op {i}, offset "
                    f"{kl.offsets[d]}), and the next committed record of key {k} is value "
                    f"{val(nxt[1])} at offset {kl.offsets[nxt[2]]}, sent by {op_name(b)} "
                    f"(micro-op {j})"
                )
    return "rt", (
        f"{op_name(a)} completed at {secs(a.comp_time)}, before {op_name(b)} was invoked at "
        f"{secs(b.inv_time)}"
    )


def explain_cycle(
    p: Prepared, logs: Logs, writers: Writers, name: str, cyc: list[tuple[int, int, int]]
) -> Example:
    steps = []
    kinds = []
    for u, v, t in cyc:  # each step carries the one edge type it counts as
        kind, text = _edge_step(p, logs, writers, u, v, t)
        kinds.append(kind)
        steps.append(text)
    ops = [p.ops[u].index for u, _v, _t in cyc]
    first = p.ops[cyc[0][0]]
    numbered = [f"{n + 1}. [{kinds[n]}] {s}." for n, s in enumerate(steps)]
    if len(steps) > MAX_STEPS:  # a long cycle: `cycle` and `edges` still list every op
        more = len(steps) - MAX_STEPS
        steps = steps[:MAX_STEPS]
        numbered = [*numbered[:MAX_STEPS], f"… {more} more steps (see `cycle` and `edges`)."]
    only_wr = all(k in ("wr", "rt") for k in kinds)
    meaning = {
        "G0": "each op's writes come before the next's, around a loop: writes of these "
        "transactions interleave (normal for Kafka, which does not isolate writes)",
        "G1c": "each op saw or followed the writes of the next, around a loop"
        + (": circular visibility, impossible for committed transactions" if only_wr else ""),
        "G0-realtime": "write order around this loop contradicts the real-time order",
        "G1c-realtime": "visibility around this loop contradicts the real-time order"
        + (": an op saw writes that could not yet be committed" if only_wr else ""),
    }[name]
    return {
        "type": name,
        "cycle": ops,
        "ops": ops,
        "edges": kinds,
        "wr_only": only_wr and "wr" in kinds,
        "steps": steps,
        "explanation": (
            f"A {name} cycle of {len(cyc)} ops: {meaning}. "
            + " ".join(numbered)
            + f" That leads back to {op_name(first)}."
        ),
    }


class Between:
    """Committed ops lying wholly between a component's first invocation and last
    completion: the ops its cycles may pass through without touching a back edge.

    Components are found on the reduced graph (graph.py), whose members are the ops
    touching an edge that goes back in time. A cycle may also pass through ops whose
    every edge goes forward (A wrote what B read, B wrote what C read, C wrote what A
    read, B in between): B sits after some member completed and before another was
    invoked. Searching without B would name that cycle by the realtime edge standing
    in for A->B->C (G1c-realtime) and miss the plain G1c or G0.
    """

    MAX_EXTRA = 2000  # beyond this many, search the members alone (names may coarsen)

    def __init__(self, p: Prepared, logs: Logs) -> None:
        self.ops = p.ops
        self.committed = logs.committed
        self.inv: list[int] = []
        self.ids: list[int] = []
        self.comp: list[int] = []
        self.ready = False  # built on first use: most histories have no component

    def _build(self) -> None:
        cand = [
            r for r in self.ops if r.comp_pos is not None and self.committed[r.id] and r.is_data
        ]
        cand.sort(key=lambda r: r.inv_pos)
        self.inv = [r.inv_pos for r in cand]
        self.ids = [r.id for r in cand]
        self.comp = [r.comp_pos for r in cand]  # type: ignore[misc]  # completed ops only
        self.ready = True

    def widen(self, members: list[int]) -> list[int]:
        if not self.ready:
            self._build()
        lo = min(self.ops[m].inv_pos for m in members)
        hi = max(self.ops[m].comp_pos or self.ops[m].inv_pos for m in members)
        i = bisect_right(self.inv, lo)
        j = bisect_left(self.inv, hi)
        if j - i > self.MAX_EXTRA + len(members):
            return members
        mset = set(members)
        extra = [self.ids[x] for x in range(i, j) if self.comp[x] < hi and self.ids[x] not in mset]
        return members + extra if len(extra) <= self.MAX_EXTRA else members


def _search_component(
    p: Prepared,
    logs: Logs,
    writers: Writers,
    between: Between,
    members: list[int],
    ww: bool,
    searches: list[tuple[str, int, int]],
    budget: float,
) -> tuple[dict[str, Example], bool]:
    deadline = time.monotonic() + budget
    whole = component_graph(p, logs, writers, between.widen(members), ww=ww)
    found: dict[str, Example] = {}
    for comp in nx.strongly_connected_components(whole):
        if sum(1 for x in comp if x >= 0) < 2:  # completion nodes are negative
            continue
        g = whole.subgraph(comp)
        for name, allowed, required in searches:
            if name in found:
                continue
            if time.monotonic() > deadline:
                return found, True
            sub = g
            if allowed != (WW | WR | RT):
                keep = allowed | (CHAIN if allowed & RT else 0)
                sub = g.edge_subgraph([(u, v) for u, v, d in g.edges(data=True) if d["t"] & keep])
            # only where edges of these types alone close a cycle holding every
            # required type: a long acyclic path would otherwise be searched from
            # each of its edges (quadratic) for nothing
            for part in nx.strongly_connected_components(sub):
                if sum(1 for x in part if x >= 0) < 2:
                    continue
                h = sub.subgraph(part)
                have = 0
                for _u, _v, d in h.edges(data=True):
                    have |= d["t"] & allowed
                if have & required != required:
                    continue
                try:
                    cyc = shortest_cycle(h, allowed, required, deadline)
                except Timeout:
                    return found, True
                if cyc is not None:
                    found[name] = explain_cycle(p, logs, writers, name, cyc)
                    break
    return found, False


def find_cycles(
    p: Prepared, logs: Logs, ww_deps: bool, timeout_s: float
) -> tuple[dict[str, list[Example]], list[Example], dict[str, Any]]:
    """Return (anomalies by type, cycle-search-timeout examples, search stats)."""
    cpos = ok_completion_positions(p)
    writers = Writers(p, logs, cpos)
    between = Between(p, logs)
    out: dict[str, list[Example]] = {}
    timeouts: list[Example] = []
    stats: dict[str, Any] = {"components": 0, "largest_component": 0, "truncated": False}
    seen_cycles: set[tuple[Any, ...]] = set()

    def record(found: dict[str, Example]) -> None:
        for name, ex in found.items():
            key = tuple(sorted(ex["cycle"]))
            if (name, *key) in seen_cycles:
                continue
            seen_cycles.add((name, *key))
            out.setdefault(name, []).append(ex)

    # 1. the bad search: wr + realtime
    back_wr = back_wr_edges(p, logs, writers)
    phi = potentials(p, logs.committed)
    bad_components = [
        c for group in windows(back_wr, phi) for c in candidate_components(p, group, cpos)
    ]
    for members in bad_components:
        stats["components"] += 1
        stats["largest_component"] = max(stats["largest_component"], len(members))
        found, to = _search_component(
            p, logs, writers, between, members, False, BAD_SEARCH, timeout_s
        )
        record(found)
        if to and not found:
            timeouts.append(
                {
                    "ops": [p.ops[m].index for m in members[:32]],
                    "size": len(members),
                    "explanation": (
                        f"A strongly connected component of {len(members)} ops joined by wr and "
                        f"realtime edges (first {op_name(p.ops[members[0]])}) contains a cycle of "
                        f"visibility, but no shortest cycle was found within {timeout_s:g} s."
                    ),
                }
            )
    if not ww_deps:
        return out, timeouts, stats

    # 2. the informational search with ww edges (never decides validity)
    back = [] if len(back_wr) > INFO_MAX_EDGES else list(ww_edges(writers))
    if len(back) + len(back_wr) > INFO_MAX_EDGES:
        # Finding components over this many edges costs more than the whole rest of
        # the check, for cycles that cannot change the verdict: say so instead.
        stats["truncated"] = True
        stats["skipped"] = "ww search skipped: too many edges"
        return out, timeouts, stats
    back.extend(back_wr)

    total_deadline = time.monotonic() + min(timeout_s, INFO_BUDGET_S)
    info_components = [
        c for group in windows(back, phi) for c in candidate_components(p, group, cpos)
    ]
    for members in info_components:
        stats["components"] += 1
        stats["largest_component"] = max(stats["largest_component"], len(members))
        chunks = [members]
        if len(members) > CHUNK:
            stats["truncated"] = True
            by_time = sorted(members, key=lambda m: p.ops[m].inv_pos)
            chunks = [by_time[i : i + CHUNK] for i in range(0, len(by_time), CHUNK)]
        for chunk in chunks:
            left = total_deadline - time.monotonic()
            if left <= 0:
                stats["truncated"] = True
                break
            found, to = _search_component(
                p, logs, writers, between, chunk, True, INFO_SEARCH, min(left, timeout_s)
            )
            stats["truncated"] |= to
            record(found)
    return out, timeouts, stats
