"""Dependency graph between committed data ops: ww, wr and realtime edges.

A literal graph of a 1,000,000-op history (every wr edge, every realtime edge)
does not fit in networkx, so strongly connected components are found on a
*reduced* graph with the same reachability:

* a data edge u -> v with u ok and completed before v was invoked is implied by
  realtime, so only the other ("non-forward") data edges are kept;
* realtime reachability is a chain of one node per completion, in completion
  order: an ok op links to its completion node, each completion node to the
  next, and the last completion node before an op's invocation links to the op.
  Only ops touching a non-forward edge ("active" ops) take part: a realtime path
  through any other op is also a direct realtime edge.

Every cycle of the full graph has an edge that goes back in time, so it shows up
as a non-trivial component here. Components are then searched for typed cycles
(cycles.py) on a small networkx graph of their members with all real edges.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from itertools import compress, repeat
from typing import Any

from .logs import KeyLog, Logs
from .prepare import OpRec, Prepared

WW, WR, RT = 1, 2, 4
CHAIN = 8  # cycles.py: an edge of the realtime completion chain (no step of its own)
NEVER = 1 << 62  # completion position of ops that never completed (no realtime successors)


def ok_completion_positions(p: Prepared) -> list[int]:
    """Completion position of each op as a realtime predecessor (NEVER unless ok)."""
    return [r.comp_pos if r.type == "ok" and r.comp_pos is not None else NEVER for r in p.ops]


class Writers:
    """Per key and dense position: the committed op that wrote the value there (-1: none),
    and that op's completion position as a realtime predecessor (-1: none); and the
    versions (the same without the copies of duplicated values)."""

    def __init__(self, p: Prepared, logs: Logs, cpos: list[int]) -> None:
        committed = logs.committed
        self.cpos = cpos
        self.wid: dict[str, list[int]] = {}
        self.wc: dict[str, list[int]] = {}
        for k, kl in logs.keys.items():
            writers = p.writer_of.get(k, {})
            ids = [writers.get(v, -1) for v in kl.values]
            ids = [w if w >= 0 and committed[w] else -1 for w in ids]
            self.wid[k] = ids
            self.wc[k] = [cpos[w] if w >= 0 else -1 for w in ids]
        # Versions, for ww edges: a value at several offsets (a `duplicate`) was
        # written once, so only its home position (home_pos) is a version of its
        # writer; the copies order nothing (a read of a copy is still a wr edge).
        self.versions = dict(self.wid)  # a key's list is copied before it is changed
        for (k, v), offs in logs.dups.items():
            w = p.writer_of.get(k, {}).get(v)
            if k not in self.wid or w is None:
                continue
            kl = logs.keys[k]
            home = home_pos(p.ops[w], kl, k, v)
            for o in offs:
                d = kl.dense.get(o)
                if d is not None and d != home and kl.values[d] == v:
                    if self.versions[k] is self.wid[k]:
                        self.versions[k] = list(self.wid[k])
                    self.versions[k][d] = -1


def home_pos(writer: OpRec, kl: KeyLog, k: str, v: Any) -> int | None:
    """Where `writer`'s send of value v to key k sits in the log: at the offset it was
    acknowledged at, else (unknown offset) where the value first appears."""
    for kk, vv, o, _i in writer.writes:
        if kk == k and vv == v:
            return kl.pos(o, v)
    return kl.first.get(v)


def next_committed_writer(
    wr: Writers, logs: Logs, k: str, d: int, self_id: int
) -> tuple[int, Any, int] | None:
    """The first later version of key k (a value of a committed op, at its home
    position) written by an op other than self: (op id, value, position)."""
    ids = wr.versions.get(k)
    if ids is None:
        return None
    for d2 in range(d + 1, len(ids)):
        w = ids[d2]
        if w >= 0:
            if w == self_id:
                return None
            return w, logs.keys[k].values[d2], d2
    return None


def ww_edges(wr: Writers) -> Iterable[tuple[int, int]]:
    """Writers of consecutive committed versions of each key (dense order)."""
    for ids in wr.versions.values():
        last = -1
        for w in ids:
            if w < 0 or w == last:
                continue
            if last >= 0:
                yield last, w
            last = w


def wr_edges(
    p: Prepared, logs: Logs, wr: Writers, *, only: Iterable[int] | None = None
) -> Iterable[tuple[int, int]]:
    """Writer of a value -> each committed op that read it (deduplicated per reader),
    for the ops `only` (default: all). :func:`back_wr_edges` gives the edges that
    realtime does not imply, for the whole history."""
    committed = logs.committed
    ops = p.ops
    for r in ops if only is None else (ops[i] for i in only):
        if not r.reads or not committed[r.id]:
            continue
        rid = r.id
        ws: set[int] = set()
        for c in r.reads:
            k = c[0]
            if c[3] is not None:  # values kept: null offsets or disagreement with the log
                # Each value's own writer (a null-offset record may sit nowhere in the
                # key's log, and the key may have no log at all).
                wk = p.writer_of.get(k)
                if wk:
                    for v in c[3]:
                        w = wk.get(v, -1)
                        if w >= 0 and committed[w]:
                            ws.add(w)
                continue
            ids = wr.wid.get(k)
            if ids is None:
                continue
            ps = c[1]
            if type(ps) is range:
                ws.update(ids[ps.start : ps.stop])
            else:
                ws.update(map(ids.__getitem__, ps))
        ws.discard(-1)
        ws.discard(rid)
        for w in ws:
            yield w, rid


def back_wr_edges(p: Prepared, logs: Logs, wr: Writers) -> list[tuple[int, int]]:
    """The wr edges (as :func:`wr_edges`) that realtime does not imply: those from a
    writer that was not ok, or completed after the reader was invoked. One pass over
    every read of the history, on slices of positions, so the millions of records of
    old, settled data cost little."""
    committed = logs.committed
    cpos = wr.cpos
    writer_of = p.writer_of
    wid = wr.wid
    wcs = wr.wc
    out: list[tuple[int, int]] = []
    extend = out.extend
    for r in p.ops:
        reads = r.reads
        if not reads or not committed[r.id]:
            continue
        inv = r.inv_pos
        ws: set[int] | None = None  # made on first use: most reads add nothing
        for c in reads:
            k = c[0]
            vals = c[3]
            if vals is not None:  # values kept: each value's own writer (see wr_edges)
                wk = writer_of.get(k)
                if wk:
                    for v in vals:
                        w = wk.get(v, -1)
                        if w >= 0 and committed[w] and cpos[w] >= inv:
                            if ws is None:
                                ws = set()
                            ws.add(w)
                continue
            wc = wcs.get(k)
            if wc is None:
                continue
            ps = c[1]
            if type(ps) is range and ps.start >= 0 and ps.step == 1:
                a = ps.start
                b = ps.stop
                sl = wc[a:b]
                if max(sl) < inv:
                    continue
                if ws is None:
                    ws = set()
                # ids[a:b][i] is ids[ps[i]]: the same writers in the same order
                ws.update(compress(wid[k][a:b], map(inv.__le__, sl)))
                continue
            sl = wc[ps.start : ps.stop] if type(ps) is range else list(map(wc.__getitem__, ps))
            if max(sl) < inv:
                continue
            if ws is None:
                ws = set()
            ws.update(map(wid[k].__getitem__, compress(ps, map(inv.__le__, sl))))
        if ws is not None:
            ws.discard(-1)
            ws.discard(r.id)
            if ws:
                extend(zip(ws, repeat(r.id)))
    return out


def strongly_connected(n: int, adj: list[list[int]]) -> list[list[int]]:
    """Non-trivial strongly connected components (size >= 2) of a graph on 0..n-1.

    Iterative Tarjan: recursion would overflow on the long realtime chain.
    """
    index = [-1] * n
    low = [0] * n
    onstack = [False] * n
    stack: list[int] = []
    push = stack.append
    pop = stack.pop
    out: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        push(root)
        onstack[root] = True
        work = [(root, iter(adj[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if index[w] == -1:  # descend; resume v's neighbours after w
                    index[w] = low[w] = counter
                    counter += 1
                    push(w)
                    onstack[w] = True
                    work.append((w, iter(adj[w])))
                    break
                if onstack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:  # v's neighbours done
                work.pop()
                lv = low[v]
                if work:
                    u = work[-1][0]
                    if lv < low[u]:
                        low[u] = lv
                if lv == index[v]:
                    comp = []
                    while True:
                        w = pop()
                        onstack[w] = False
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def potentials(p: Prepared, committed: list[bool]) -> list[int]:
    """A number per op that every realtime edge strictly increases.

    An ok op's is twice its completion position; an info op (no realtime
    successors) sits just after its invocation. A cycle must therefore contain a
    data edge that goes down in potential, and it lies entirely within the span
    covered by such edges (see windows()).
    """
    return [
        2 * r.comp_pos if r.type == "ok" and r.comp_pos is not None else 2 * r.inv_pos + 1
        for r in p.ops
    ]


def windows(edges: list[tuple[int, int]], phi: list[int]) -> list[list[tuple[int, int]]]:
    """Split edges into groups that may hold cycles; drop the edges that cannot.

    Along a cycle the potential returns to where it started, so every value between
    the cycle's lowest and highest potential is crossed downwards by one of its
    edges: the cycle lies inside one merged interval of the spans [phi(v), phi(u)]
    of the edges u -> v that go down. Edges outside every such interval, and all
    edges when none goes down, are on no cycle.
    """
    spans = sorted((phi[v], phi[u]) for u, v in edges if phi[v] < phi[u])
    if not spans:
        return []
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1][1] = hi
        else:
            merged.append([lo, hi])
    starts = [m[0] for m in merged]
    ends = [m[1] for m in merged]
    groups: list[list[tuple[int, int]]] = [[] for _ in merged]
    for e in edges:
        a = phi[e[0]]
        i = bisect_right(starts, a) - 1  # the last interval starting at or before a
        if i < 0 or a > ends[i]:
            continue
        if starts[i] <= phi[e[1]] <= ends[i]:
            groups[i].append(e)
    return [g for g in groups if g]


def candidate_components(
    p: Prepared, edges: Iterable[tuple[int, int]], cpos: list[int]
) -> list[list[int]]:
    """Op ids of each non-trivial component of data edges + realtime (reduced graph)."""
    ops = p.ops
    # the others are implied by realtime
    back = [e for e in edges if cpos[e[0]] >= ops[e[1]].inv_pos]
    if not back:
        return []
    if len(back) == 1:
        # One edge u -> v: the only way back from v to u is realtime (v completed
        # before u was invoked), which is what the general case below finds.
        u, v = back[0]
        return [sorted((u, v))] if u != v and cpos[v] < ops[u].inv_pos else []
    active = sorted({x for e in back for x in e})
    node = {op: i for i, op in enumerate(active)}
    chain_ops = sorted([x for x in active if cpos[x] != NEVER], key=cpos.__getitem__)
    chain_pos = [cpos[x] for x in chain_ops]
    na = len(active)
    nc = len(chain_ops)
    n = na + nc
    adj: list[list[int]] = [[] for _ in range(n)]
    for u, v in back:
        adj[node[u]].append(node[v])
    for j, x in enumerate(chain_ops):
        adj[node[x]].append(na + j)
        if j + 1 < nc:
            adj[na + j].append(na + j + 1)
    for i, x in enumerate(active):
        j = bisect_left(chain_pos, ops[x].inv_pos) - 1  # last completion strictly before
        if j >= 0:
            adj[na + j].append(i)
    comps = strongly_connected(n, adj)
    out = []
    for c in comps:
        members = sorted(active[i] for i in c if i < na)
        if len(members) >= 2:
            out.append(members)
    return out
