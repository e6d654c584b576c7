"""Audit of the dependency-cycle analysis (G0, G1c and their -realtime variants).

DESIGN.md 3: "Graph: vertices are completed data ops; ww edges link the writers of
consecutive versions of a key; wr edges link a writer to each reader of its values;
realtime edges link an ok op to ops invoked after it completed. Find strongly
connected components, then a shortest typed cycle in each". docs/anomalies.md
narrows the vertices to data ops *that committed* (ok; info -- or never completed --
with a value an ok op read), and ww edges to consecutive *committed* versions.

checker/graph.py finds components on a reduced graph (forward data edges implied by
realtime dropped, realtime as a chain of completion nodes, only "active" ops), and
checker/cycles.py searches typed cycles per component. This file builds the literal
full graph with networkx (every ww, wr and realtime edge), enumerates its simple
cycles on small histories and classifies each as Jepsen/Elle would:

* G0: every edge ww; G1c: every edge ww or wr, at least one wr;
* X-realtime: the cycle needs a realtime edge (a vertex cycle whose every step is a
  data edge is the plain type). The checker also names X-realtime when a step is
  both a data and a realtime edge (an earlier audit pinned that as legitimate), so
  the reference gives a *strict* set (needs realtime) and a *lenient* one (may use
  realtime) and the checker must report something in between.

Hand-written histories pin single behaviours; a hypothesis test compares the checker
with the reference on random small histories (sends, polls, transactions on 2-3
keys, ok/info/fail/never-completed outcomes, interleavings, holes, null offsets),
with ww_deps on and off, and checks that every step of every reported cycle is an
edge of the full graph with the keys, values and offsets its text names.

Defects are xfail(strict=True): they pass once fixed.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from itertools import product
from pathlib import Path
from typing import Any

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial.tests.histlines import examples, fail, info, inv, ok, op, pl, run, snd

Line = dict[str, Any]
CYCLE_TYPES = ("G0", "G1c", "G0-realtime", "G1c-realtime")


# ================================================================ helpers


def isnd(k: Any, v: Any) -> list[Any]:
    return ["send", k, v]


POLL = [["poll"]]


def run_tmp(lines: list[Line], **opts: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kt-cycles-") as d:
        return run(Path(d), lines, **opts)


def cycle_types(res: dict[str, Any]) -> set[str]:
    return {t for t in res["error_types"] if t in CYCLE_TYPES}


def explain(res: dict[str, Any]) -> dict[str, list[Any]]:
    return {t: [e.get("explanation") for e in a["examples"]] for t, a in res["anomalies"].items()}


# ================================================================ the reference

WW, WR, RT = "ww", "wr", "rt"


class Ref:
    """The literal dependency graph of a history (file lines), by DESIGN.md 3 and
    docs/anomalies.md "Dependency cycles", written without the checker's code.

    Pairing (docs/history-format.md): a completion pairs with the pending invoke of
    its process (same f); without one it is invoked at its own line; an invoke never
    completed is info with the invoke's sends. A non-ok completion also counts the
    sends its invoke announced but it does not list (offset unknown).
    """

    def __init__(self, lines: list[Line], ww_deps: bool = True) -> None:
        self.lines = lines
        self.ops: list[dict[str, Any]] = []
        pending: dict[Any, tuple[int, Line]] = {}
        for pos, o in enumerate(lines):
            if o["process"] == "nemesis" or o["f"] not in ("send", "poll", "txn"):
                continue
            if o["type"] == "invoke":
                if o["process"] in pending:
                    self._never(*pending.pop(o["process"]))
                pending[o["process"]] = (pos, o)
                continue
            ip, io = pending.pop(o["process"], (pos, o))
            if io["f"] != o["f"]:
                self._never(ip, io)
                ip, io = pos, o
            writes = self._sends(o)
            if o["type"] != "ok":
                have = {(k, v) for k, v, _ in writes}
                writes += [(k, v, None) for k, v, _ in self._sends(io) if (k, v) not in have]
            self.ops.append(
                {
                    "invoke": io if ip != pos else None,
                    "inv": ip,
                    "comp": pos,
                    "type": o["type"],
                    "index": pos,
                    "writes": writes,
                    "reads": self._reads(o),
                }
            )
        for ip, io in sorted(pending.values(), key=lambda x: x[0]):
            self._never(ip, io)
        by_index = {r["index"]: i for i, r in enumerate(self.ops)}
        self.by_index = by_index
        ok_read = {(k, v) for r in self.ops if r["type"] == "ok" for k, _o, v in r["reads"]}
        self.committed = [
            r["type"] == "ok"
            or (r["type"] == "info" and any((k, v) in ok_read for k, v, _ in r["writes"]))
            for r in self.ops
        ]
        # writer of each (key, value): values are unique in the generated histories
        self.writer: dict[tuple[str, Any], int] = {}
        for i, r in enumerate(self.ops):
            for k, v, _o in r["writes"]:
                self.writer.setdefault((k, v), i)
        # the log: every poll (any outcome) and committed sends with an offset
        self.log: dict[str, dict[int, Any]] = {}
        for r in self.ops:
            for k, o, v in r["reads"]:
                if o is not None:
                    self.log.setdefault(k, {}).setdefault(o, v)
        for i, r in enumerate(self.ops):
            if self.committed[i]:
                for k, v, o in r["writes"]:
                    if o is not None:
                        self.log.setdefault(k, {}).setdefault(o, v)
        g = nx.DiGraph()
        g.add_nodes_from(i for i, c in enumerate(self.committed) if c)
        self.g = g
        self.ww_at: dict[tuple[int, int], list[tuple[str, Any, int, Any, int]]] = {}
        if ww_deps:
            for k, lk in self.log.items():
                last: tuple[int, Any, int] | None = None
                for at in sorted(lk):
                    w = self.writer.get((k, lk[at]))
                    if w is None or not self.committed[w]:
                        continue
                    if last is not None and last[0] != w:
                        self._add(last[0], w, WW)
                        self.ww_at.setdefault((last[0], w), []).append(
                            (k, last[1], last[2], lk[at], at)
                        )
                    last = (w, lk[at], at)
        for i, r in enumerate(self.ops):
            if not self.committed[i]:
                continue
            for k, _o, v in r["reads"]:
                w = self.writer.get((k, v))
                if w is not None and w != i and self.committed[w]:
                    self._add(w, i, WR)
        for i, r in enumerate(self.ops):
            if r["type"] != "ok":
                continue
            for j, r2 in enumerate(self.ops):
                if self.committed[j] and r2["inv"] > r["comp"]:
                    self._add(i, j, RT)

    def _never(self, pos: int, io: Line) -> None:
        self.ops.append(
            {
                "invoke": io,
                "inv": pos,
                "comp": None,
                "type": "info",
                "index": pos,
                "writes": [(k, v, None) for k, v, _ in self._sends(io)],
                "reads": [],
            }
        )

    @staticmethod
    def _sends(o: Line) -> list[tuple[str, Any, int | None]]:
        out = []
        for m in o["value"] or []:
            if m[0] == "send":
                if isinstance(m[2], list):
                    off = m[2][0] if m[2][0] is not None and m[2][0] >= 0 else None
                    out.append((str(m[1]), m[2][1], off))
                else:
                    out.append((str(m[1]), m[2], None))
        return out

    def mop_of_send(self, i: int, key: str, value: Any) -> set[int]:
        """Micro-op indices at which op i sent value to key (completion, else invoke)."""
        r = self.ops[i]
        out = set()
        for src in (self.lines[r["comp"]] if r["comp"] is not None else None, r["invoke"]):
            for j, m in enumerate((src or {}).get("value") or []):
                if m[0] == "send" and str(m[1]) == key:
                    v = m[2][1] if isinstance(m[2], list) else m[2]
                    if v == value:
                        out.add(j)
        return out

    def mop_of_read(self, i: int, key: str, value: Any) -> set[tuple[int, Any]]:
        """(micro-op index, offset) of each record of value on key that op i read."""
        r = self.ops[i]
        if r["comp"] is None:
            return set()
        out = set()
        for j, m in enumerate(self.lines[r["comp"]]["value"] or []):
            if m[0] == "poll" and len(m) == 2:
                for o, v in m[1].get(key, []):
                    if v == value:
                        out.add((j, o))
        return out

    @staticmethod
    def _reads(o: Line) -> list[tuple[str, int | None, Any]]:
        if o["f"] not in ("poll", "txn"):
            return []
        return [
            (str(k), off, v)
            for m in o["value"] or []
            if m[0] == "poll" and len(m) == 2
            for k, lst in m[1].items()
            for off, v in lst
        ]

    def _add(self, u: int, v: int, t: str) -> None:
        if self.g.has_edge(u, v):
            self.g[u][v]["t"].add(t)
        else:
            self.g.add_edge(u, v, t={t})

    # ------------------------------------------------------------ classification

    def cycles(self) -> list[list[int]]:
        return [c for c in nx.simple_cycles(self.g) if len(c) >= 2]

    def labels(self, c: list[int]) -> list[set[str]]:
        return [self.g[u][c[(i + 1) % len(c)]]["t"] for i, u in enumerate(c)]

    @staticmethod
    def typings(labels: list[set[str]]) -> set[str]:
        """Every type a typing of this vertex cycle (one label per step) can have."""
        out: set[str] = set()
        for pick in product(*[sorted(s) for s in labels]):
            kinds = set(pick)
            if RT in kinds:
                if WR in kinds:
                    out.add("G1c-realtime")
                else:
                    out.add("G0-realtime")
            elif WR in kinds:
                out.add("G1c")
            else:
                out.add("G0")
        return out

    def types(self) -> tuple[set[str], set[str]]:
        """(strict, lenient) sets of cycle types."""
        strict: set[str] = set()
        lenient: set[str] = set()
        for c in self.cycles():
            lab = self.labels(c)
            ts = self.typings(lab)
            lenient |= ts
            data_only = all(s - {RT} for s in lab)
            strict |= {t for t in ts if "realtime" not in t} if data_only else ts
        return strict, lenient

    def bad(self) -> bool:
        """A cycle of wr and realtime edges alone (always bad, whatever ww_deps)."""
        h = nx.DiGraph()
        h.add_edges_from((u, v) for u, v, d in self.g.edges(data=True) if d["t"] & {WR, RT})
        return any(len(c) > 1 for c in nx.strongly_connected_components(h))


def reference_bad_types(strict: set[str], ww_deps: bool, bad: bool) -> set[str]:
    """Which reported cycle types are bad (anomalies.md): without ww inference every G1c
    (and G1c-realtime); with it only when some cycle has no ww edge (then G1c or
    G1c-realtime, whichever the wr/rt cycle is)."""
    if not ww_deps:
        return strict & {"G1c", "G1c-realtime"}
    return strict & {"G1c", "G1c-realtime"} if bad else set()


# ---------------------------------------------------------------- explanation checks

SENT = re.compile(r"sent value (\S+) to key (\S+?) \(micro-op (\d+)")
READ = re.compile(r"read it(?: at offset (\d+))? \(micro-op (\d+)\)")
NEXT = re.compile(r"next committed record of key (\S+) is value (\S+) at offset (\d+)")
WW_OFF = re.compile(r"\(micro-op \d+, offset (\d+)\)")
NEXT_MOP = re.compile(r"\(micro-op (\d+)\)$")


def check_steps(ref: Ref, name: str, ex: dict[str, Any]) -> None:
    """Every step of a reported cycle is an edge of the full graph, with the key,
    value and offsets its text names; the kinds make the cycle the type it is named."""
    cyc = [ref.by_index[i] for i in ex["cycle"]]
    kinds = ex["edges"]
    assert len(cyc) == len(kinds) == len(ex["steps"]) >= 2, ex
    assert len(set(cyc)) == len(cyc), ("a cycle visits an op twice", ex["explanation"])
    for i, (kind, text) in enumerate(zip(kinds, ex["steps"], strict=True)):
        u, v = cyc[i], cyc[(i + 1) % len(cyc)]
        assert ref.g.has_edge(u, v) and kind in ref.g[u][v]["t"], (i, kind, ex["explanation"])
        if kind == WR:
            m = SENT.search(text)
            assert m, text
            val, key = json.loads(m.group(1)), m.group(2)
            assert int(m.group(3)) in ref.mop_of_send(u, key, val), text
            r = READ.search(text)
            assert r, text
            o = None if r.group(1) is None else int(r.group(1))
            assert (int(r.group(2)), o) in ref.mop_of_read(v, key, val), text
        elif kind == WW:
            m, n = SENT.search(text), NEXT.search(text)
            assert m and n, text
            key, v1, v2 = m.group(2), json.loads(m.group(1)), json.loads(n.group(2))
            hops = {(k, x, y) for k, x, _o1, y, _o2 in ref.ww_at[(u, v)]}
            assert (key, v1, v2) in hops, (text, hops)
            assert int(m.group(3)) in ref.mop_of_send(u, key, v1), text
            o1 = WW_OFF.search(text)
            assert o1 and ref.log[key][int(o1.group(1))] == v1, text
            assert ref.log[key][int(n.group(3))] == v2, text
            j = NEXT_MOP.search(text)
            assert j and int(j.group(1)) in ref.mop_of_send(v, key, v2), text
        else:
            assert "completed" in text and "invoked" in text, text
    ks = set(kinds)
    want = {
        "G0": ks == {WW},
        "G1c": WR in ks and ks <= {WW, WR},
        "G0-realtime": RT in ks and ks <= {WW, RT},
        "G1c-realtime": {WR, RT} <= ks,
    }[name]
    assert want, (name, kinds, ex["explanation"])


# ================================================================ hand-written cases


def three_way_visibility() -> list[Line]:
    """A read z=3 before C was even invoked; B read A's x, C read B's y: the three
    wr edges alone close a cycle (circular visibility, G1c), and with A -rt-> C a
    shorter G1c-realtime too."""
    return [
        ok(0, "txn", [snd("x", 0, 1), pl({"z": [[0, 3]]})]),
        ok(1, "txn", [pl({"x": [[0, 1]]}), snd("y", 0, 2)]),
        ok(2, "txn", [pl({"y": [[0, 2]]}), snd("z", 0, 3)]),
    ]


def test_reference_sees_both_types_of_the_three_way_cycle() -> None:
    ref = Ref(three_way_visibility())
    strict, lenient = ref.types()
    assert strict == lenient == {"G1c", "G1c-realtime"}
    assert ref.bad()


def test_three_way_circular_visibility_is_g1c(tmp_path: Path) -> None:
    for ww in (True, False):
        res = run(tmp_path, three_way_visibility(), ww_deps=ww)
        assert cycle_types(res) == {"G1c", "G1c-realtime"}, (ww, explain(res))
        ex = examples(res, "G1c")[0]
        assert sorted(ex["cycle"]) == [0, 1, 2] and ex["edges"] == ["wr"] * 3
        assert ex["wr_only"] is True


def test_three_way_circular_visibility_is_bad(tmp_path: Path) -> None:
    for ww in (True, False):
        res = run(tmp_path, three_way_visibility(), ww_deps=ww)
        assert res["valid"] is False and "G1c-realtime" in res["bad_error_types"]
        ex = examples(res, "G1c-realtime")[0]
        check_steps(Ref(three_way_visibility(), ww), "G1c-realtime", ex)
        for s in ("op 2", "op 0", "value 3", "key z", "offset 0", "micro-op 1"):
            assert s in ex["explanation"], s


def three_way_writes() -> list[Line]:
    """Sequential sends (each completes before the next is invoked): A's x precedes
    B's, B's y precedes C's, C's z precedes A's -- a G0 cycle of ww edges only."""
    return [
        ok(0, "send", [snd("x", 0, 1), snd("z", 1, 5)]),
        ok(1, "send", [snd("x", 1, 2), snd("y", 0, 3)]),
        ok(2, "send", [snd("y", 1, 4), snd("z", 0, 6)]),
        ok(3, "poll", [pl({"x": [[0, 1], [1, 2]], "y": [[0, 3], [1, 4]], "z": [[0, 6], [1, 5]]})]),
    ]


def test_reference_sees_g0_in_the_three_way_write_cycle() -> None:
    strict, lenient = Ref(three_way_writes()).types()
    assert strict == {"G0", "G0-realtime"} and lenient == strict


def test_three_way_write_cycle_is_g0(tmp_path: Path) -> None:
    res = run(tmp_path, three_way_writes())
    assert cycle_types(res) == {"G0", "G0-realtime"}, explain(res)
    ex = examples(res, "G0")[0]
    assert sorted(ex["cycle"]) == [0, 1, 2] and ex["edges"] == ["ww"] * 3


def test_three_way_write_cycle_is_never_bad(tmp_path: Path) -> None:
    res = run(tmp_path, three_way_writes())
    assert res["valid"] is True and res["bad_error_types"] == []
    assert "G0-realtime" in res["error_types"]
    check_steps(Ref(three_way_writes()), "G0-realtime", examples(res, "G0-realtime")[0])
    res = run(tmp_path, three_way_writes(), ww_deps=False)
    assert cycle_types(res) == set() and res["valid"] is True


# ================================================================ random small histories


def random_history(
    rng: random.Random,
    n_ops: int,
    n_keys: int,
    future_p: float,
    messy: bool = False,
    share_processes: bool = False,
    int_keys: bool = False,
) -> list[Line]:
    """Sends, polls and transactions of unique values on a few keys; ok, info, fail or
    never-completed; with or without invokes; offsets with holes, some null or -1.

    Every value has one true offset (offsets are consistent) unless `messy`, where a
    record or an acknowledgement may name a wrong offset (inconsistent offsets,
    duplicates). Reads may come from anywhere in the log, including values written
    later, so cycles are common.
    """

    def at(k: str, v: int) -> int:
        if messy and rng.random() < 0.25:
            return max(0, offset[(k, v)] + rng.choice([-1, 1, 2]))
        return offset[(k, v)]

    keys = ["x", "y", "z"][:n_keys]
    nv = 0
    ops: list[dict[str, Any]] = []
    for i in range(n_ops):
        f = rng.choice(["send", "poll", "txn", "txn"])
        outcome = rng.choices(["ok", "info", "fail", "never"], [6, 2, 1, 1])[0]
        sends = []
        if f != "poll":
            for _ in range(rng.randint(1, 2)):
                nv += 1
                sends.append((rng.choice(keys), nv))
        ops.append({"i": i, "f": f, "outcome": outcome, "sends": sends})
    # the true log of each key: every value sent, in a random order, with holes
    offset: dict[tuple[str, int], int] = {}
    order: dict[str, list[int]] = {}
    for k in keys:
        vals = [v for o in ops for kk, v in o["sends"] if kk == k]
        rng.shuffle(vals)
        off = 0
        for v in vals:
            off += rng.choice([0, 0, 1])
            offset[(k, v)] = off
            off += 1
        order[k] = vals
    lines_t: list[tuple[float, int, Line]] = []
    for o in ops:
        p = o["i"]
        t0 = rng.random()
        t1 = t0 + rng.random() * 0.6
        f = o["f"]
        inv_mops: list[Any] = [isnd(k, v) for k, v in o["sends"]]
        comp_mops: list[Any] = []
        for k, v in o["sends"]:
            r = rng.random()
            ack: int | None = at(k, v) if r < 0.8 else None if r < 0.95 else -1
            if o["outcome"] != "ok" and rng.random() < 0.2:
                continue  # a partial completion: the invoke announced it
            comp_mops.append(snd(k, ack, v))
        if f != "send":
            recs: dict[str, list[list[Any]]] = {}
            for k in rng.sample(keys, rng.randint(1, len(keys))):
                vals = order[k]
                if not vals or rng.random() < 0.2:
                    continue
                a = rng.randrange(len(vals)) if rng.random() < future_p else 0
                run_ = vals[a : a + rng.randint(1, 3)]
                recs[k] = [[at(k, v) if rng.random() < 0.9 else None, v] for v in run_]
            poll = pl(recs)
            if f == "poll":
                comp_mops = [poll]
                inv_mops = list(POLL)
            else:
                j = rng.randint(0, len(comp_mops))
                comp_mops.insert(j, poll)
                inv_mops.insert(min(j, len(inv_mops)), ["poll"])
        if o["outcome"] == "never" or rng.random() < 0.85:
            lines_t.append((t0, 0, inv(p, f, inv_mops)))
        if o["outcome"] != "never":
            lines_t.append((t1, 1, op(p, o["outcome"], f, comp_mops)))
    lines_t.sort(key=lambda x: (x[0], x[1]))
    lines = [ln for _t, _k, ln in lines_t]
    if share_processes:  # reuse a process once its previous op completed
        busy: set[int] = set()
        first: dict[int, int] = {}
        for ln in lines:
            p = ln["process"]
            if p not in first:
                first[p] = min(set(range(len(lines) + 1)) - busy)
                busy.add(first[p])
            newp = first[p]
            ln["process"] = newp
            if ln["type"] != "invoke":
                busy.discard(newp)
    if int_keys:  # keys written as ints in sends (polls' JSON keys stay strings)
        for ln in lines:
            for m in ln["value"]:
                if m[0] == "send":
                    m[1] = "xyz".index(m[1]) + 1
                elif len(m) == 2:
                    m[1] = {str("xyz".index(k) + 1): r for k, r in m[1].items()}
    if rng.random() < 0.5:  # a consumer op and a nemesis op are no vertices
        lines.insert(rng.randint(0, len(lines)), ok(99, "assign", [1, 2]))
        lines.insert(rng.randint(0, len(lines)), info("nemesis", "start-partition", "majority"))
    return lines


# ================================================================ more hand-written cases


def one_edge_wr_and_rt() -> list[Line]:
    """A (x=1) completes before B is invoked; B read x=1 (wr and rt A->B), and B's y=3
    lands before A's y=4 (ww B->A). Typings of the one cycle A->B->A: (wr, ww) = G1c
    and (rt, ww) = G0-realtime. G1c-realtime needs a wr step *and* a realtime step:
    there is no such cycle."""
    return [
        ok(0, "txn", [snd("x", 0, 1), snd("y", 1, 4)]),
        ok(1, "txn", [pl({"x": [[0, 1]]}), snd("y", 0, 3)]),
        ok(2, "poll", [pl({"y": [[0, 3], [1, 4]]})]),
    ]


def test_reference_one_edge_wr_and_rt() -> None:
    strict, lenient = Ref(one_edge_wr_and_rt()).types()
    assert strict == {"G1c"} and lenient == {"G1c", "G0-realtime"}


def test_one_edge_wr_and_rt_is_not_bad(tmp_path: Path) -> None:
    res = run(tmp_path, one_edge_wr_and_rt())
    assert {"G1c", "G0-realtime"} <= cycle_types(res) and res["valid"] is True
    check_steps(Ref(one_edge_wr_and_rt()), "G1c", examples(res, "G1c")[0])


def test_one_edge_wr_and_rt_is_no_g1c_realtime(tmp_path: Path) -> None:
    res = run(tmp_path, one_edge_wr_and_rt())
    assert "G1c-realtime" not in res["error_types"], explain(res)


def glued_walk() -> list[Line]:
    """A and B run concurrently: A's y=4 lands before B's y=3 (ww A->B) and A read
    y=3 (wr B->A): G1c. C (x=1) is invoked after A completed (rt A->C) but lands
    before A's x=5 (ww C->A): G0-realtime. Every cycle through the one wr edge is
    A->B->A: no simple cycle has both a wr and a realtime step."""
    return [
        inv(0, "txn", [isnd("y", 4), isnd("x", 5), ["poll"]]),
        inv(1, "txn", [isnd("y", 3)]),
        ok(0, "txn", [snd("y", 0, 4), snd("x", 1, 5), pl({"y": [[1, 3]]})]),
        ok(1, "txn", [snd("y", 1, 3)]),
        ok(2, "send", [snd("x", 0, 1)]),
        ok(3, "poll", [pl({"x": [[0, 1], [1, 5]], "y": [[0, 4], [1, 3]]})]),
    ]


def test_reference_glued_walk() -> None:
    strict, lenient = Ref(glued_walk()).types()
    assert strict == lenient == {"G1c", "G0-realtime"}


def test_glued_walk_is_no_g1c_realtime(tmp_path: Path) -> None:
    res = run(tmp_path, glued_walk())
    assert cycle_types(res) == {"G1c", "G0-realtime"}, explain(res)


def test_glued_walk_is_not_bad(tmp_path: Path) -> None:
    res = run(tmp_path, glued_walk())
    assert res["valid"] is True and res["bad_error_types"] == []
    for name in ("G1c", "G0-realtime"):
        check_steps(Ref(glued_walk()), name, examples(res, name)[0])


def forward_wr_in_a_realtime_cycle() -> list[Line]:
    """A (y=5 at offset 2) completes; B polls y=5 (wr A->B, forward), C is invoked
    after B completed (rt B->C) and its y=2 lands at offset 1, before A's y=5 (ww
    C->A). A->B->C->A is wr, rt, ww: a G1c-realtime that needs both its wr and its
    realtime step, besides the G0 / G0-realtime A<->C."""
    return [
        inv(0, "txn", [isnd("y", 5), isnd("x", 4)]),
        ok(0, "txn", [snd("y", 2, 5), snd("x", 0, 4)]),
        inv(1, "poll", POLL),
        ok(1, "poll", [pl({"y": [[2, 5]]})]),
        inv(2, "txn", [isnd("y", 2), isnd("x", 3)]),
        ok(2, "txn", [snd("y", 1, 2), snd("x", 1, 3)]),
        ok(3, "poll", [pl({"x": [[0, 4], [1, 3]], "y": [[1, 2], [2, 5]]})]),
    ]


def test_reference_forward_wr_in_a_realtime_cycle() -> None:
    strict, _lenient = Ref(forward_wr_in_a_realtime_cycle()).types()
    assert strict == {"G0", "G0-realtime", "G1c-realtime"}


def test_forward_wr_in_a_realtime_cycle_is_g1c_realtime(tmp_path: Path) -> None:
    res = run(tmp_path, forward_wr_in_a_realtime_cycle())
    assert "G1c-realtime" in res["error_types"], explain(res)


def test_forward_wr_in_a_realtime_cycle_is_not_bad(tmp_path: Path) -> None:
    res = run(tmp_path, forward_wr_in_a_realtime_cycle())
    assert res["valid"] is True and {"G0", "G0-realtime"} <= cycle_types(res)


def test_no_realtime_edge_from_a_committed_info_op(tmp_path: Path) -> None:
    """The info txn I committed (an ok poll read its x=1) but its commit may have
    landed after its completion line: a send invoked afterwards may land first. No
    realtime edge leaves I, so B's y=2 before I's y=3 makes no G0-realtime."""
    lines = [
        inv(0, "txn", [isnd("x", 1), isnd("y", 3)]),
        info(0, "txn", [snd("x", 0, 1), snd("y", 1, 3)], error="commit timed out"),
        inv(1, "send", [isnd("y", 2)]),
        ok(1, "send", [snd("y", 0, 2)]),
        ok(2, "poll", [pl({"x": [[0, 1]], "y": [[0, 2], [1, 3]]})]),
    ]
    assert Ref(lines).types() == (set(), set())
    res = run(tmp_path, lines)
    assert cycle_types(res) == set() and res["valid"] is True, explain(res)


def test_read_of_a_never_completed_ops_value_before_it_was_invoked(tmp_path: Path) -> None:
    """A read x=7 and completed before N was even invoked; N never completed, but an ok
    op read its value, so it committed and is a vertex: N -wr-> A -rt-> N."""
    lines = [
        inv(0, "txn", [["poll"]]),
        ok(0, "txn", [pl({"x": [[0, 7]]})]),
        inv(1, "send", [isnd("x", 7)]),
    ]
    assert Ref(lines).types() == ({"G1c-realtime"}, {"G1c-realtime"})
    for ww in (True, False):
        res = run(tmp_path, lines, ww_deps=ww)
        assert cycle_types(res) == {"G1c-realtime"} and res["valid"] is False, explain(res)
        ex = examples(res, "G1c-realtime")[0]
        check_steps(Ref(lines, ww), "G1c-realtime", ex)
        assert "never completed" in ex["explanation"] and "value 7" in ex["explanation"]


def test_reads_of_failed_and_info_polls_make_no_edges(tmp_path: Path) -> None:
    """A failed txn and an info poll read x=7 before its writer was invoked: they are
    no vertices (they did not commit), so no cycle; the ok drain is fine."""
    lines = [
        inv(0, "txn", [["poll"], isnd("y", 1)]),
        fail(0, "txn", [pl({"x": [[0, 7]]}), snd("y", 0, 1)]),
        inv(1, "poll", POLL),
        info(1, "poll", [pl({"x": [[0, 7]]})], error="timeout"),
        inv(2, "send", [isnd("x", 7)]),
        ok(2, "send", [snd("x", 0, 7)]),
        ok(3, "poll", [pl({"x": [[0, 7]]})]),
    ]
    assert Ref(lines).types() == (set(), set())
    res = run(tmp_path, lines)
    assert cycle_types(res) == set() and res["valid"] is True, explain(res)


def test_interleaved_sends_of_one_op_make_g0_with_the_other(tmp_path: Path) -> None:
    """A's x=1 at 0 and x=3 at 2 around B's x=2 at 1: ww A->B and B->A (never A->A)."""
    lines = [
        inv(0, "txn", [isnd("x", 1), isnd("x", 3)]),
        inv(1, "send", [isnd("x", 2)]),
        ok(1, "send", [snd("x", 1, 2)]),
        ok(0, "txn", [snd("x", 0, 1), snd("x", 2, 3)]),
        ok(2, "poll", [pl({"x": [[0, 1], [1, 2], [2, 3]]})]),
    ]
    ref = Ref(lines)
    assert ref.types() == ({"G0"}, {"G0"}) and not ref.g.has_edge(1, 1)
    res = run(tmp_path, lines)
    assert cycle_types(res) == {"G0"} and res["valid"] is True, explain(res)
    ex = examples(res, "G0")[0]
    check_steps(ref, "G0", ex)
    assert sorted(ex["cycle"]) == [2, 3]
    assert cycle_types(run(tmp_path, lines, ww_deps=False)) == set()


def test_null_offset_reads_close_a_circular_visibility(tmp_path: Path) -> None:
    """Queen-style: offsets unknown (-1 / null) everywhere; each txn read the other's
    value. wr edges come from the values alone: G1c, bad whatever ww_deps says."""
    lines = [
        inv(0, "txn", [isnd("x", 1), ["poll"]]),
        inv(1, "txn", [isnd("y", 2), ["poll"]]),
        ok(0, "txn", [snd("x", -1, 1), pl({"y": [[None, 2]]})]),
        ok(1, "txn", [snd("y", None, 2), pl({"x": [[None, 1]]})]),
    ]
    for ww in (True, False):
        res = run(tmp_path, lines, ww_deps=ww)
        assert cycle_types(res) == {"G1c"} and res["bad_error_types"] == ["G1c"], explain(res)
        ex = examples(res, "G1c")[0]
        check_steps(Ref(lines, ww), "G1c", ex)
        assert ex["wr_only"] is True and "offset" not in " ".join(ex["steps"])


# ================================================================ checker vs the full graph

HISTORY = dict(
    seed=st.integers(0, 2**32 - 1),
    n_ops=st.integers(2, 8),
    n_keys=st.sampled_from([2, 3]),
    future_p=st.sampled_from([0.0, 0.3, 0.7]),
    share=st.booleans(),
    int_keys=st.booleans(),
)
FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@FUZZ
@given(messy=st.booleans(), **HISTORY)
def test_bad_cycle_verdict_matches_the_full_graph(
    seed: int, n_ops: int, n_keys: int, future_p: float, share: bool, int_keys: bool, messy: bool
) -> None:
    """A G1c/G1c-realtime is bad exactly when the full graph has a cycle of wr and
    realtime edges (with ww_deps on or off); without ww inference the reported types
    are ones the full wr+rt graph has; every example made of wr/rt steps is a simple
    cycle of real edges naming the right values, offsets and micro-ops; subscribe
    changes nothing."""
    rng = random.Random(seed)
    lines = random_history(rng, n_ops, n_keys, future_p, messy, share, int_keys)
    for ww in (True, False):
        res = run_tmp(lines, ww_deps=ww)
        ref = Ref(lines, ww)
        bad = bool({"G1c", "G1c-realtime"} & set(res["bad_error_types"]))
        assert bad == ref.bad(), (ww, lines, explain(res))
        assert not set(res["bad_error_types"]) & {"G0", "G0-realtime"}
        if not ww:
            _strict, lenient = ref.types()
            assert cycle_types(res) <= lenient, (lines, explain(res))
        for name in cycle_types(res):
            for ex in examples(res, name):
                if "ww" not in ex["edges"]:
                    check_steps(ref, name, ex)
                    assert ex["wr_only"] is True
        if ww:
            sub = run_tmp(lines, ww_deps=True, sub_via="subscribe")
            assert cycle_types(sub) == cycle_types(res)
            assert {"G1c", "G1c-realtime"} & set(sub["bad_error_types"]) == {
                "G1c",
                "G1c-realtime",
            } & set(res["bad_error_types"])


@FUZZ
@given(**HISTORY)
def test_cycle_types_and_steps_match_the_full_graph(
    seed: int, n_ops: int, n_keys: int, future_p: float, share: bool, int_keys: bool
) -> None:
    """Every type the full graph's simple cycles need is reported, nothing no simple
    cycle can be is, and every step of every example is a real edge."""
    rng = random.Random(seed)
    lines = random_history(rng, n_ops, n_keys, future_p, False, share, int_keys)
    for ww in (True, False):
        res = run_tmp(lines, ww_deps=ww)
        ref = Ref(lines, ww)
        strict, lenient = ref.types()
        got = cycle_types(res)
        assert strict <= got <= lenient, (ww, lines, strict, lenient, explain(res))
        for name in got:
            for ex in examples(res, name):
                check_steps(ref, name, ex)
