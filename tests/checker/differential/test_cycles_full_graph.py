"""The cycle analysis against the literal full dependency graph, built here with networkx
from the rules of docs/anomalies.md ("Dependency cycles") without checker code.

Vertices are committed data ops; wr edges link a writer to each committed reader of
its value; ww edges link writers of consecutive committed versions of a key; realtime
edges link an ok op to every committed op invoked after it completed. `Ref` works on
small histories and enumerates simple cycles (G0 / G1c / -realtime by their edge
kinds); `LineRef` works by line positions on bigger histories (20-500 ops). On random
and hand-made histories the checker's verdict (G1c or G1c-realtime bad exactly when
the wr + realtime graph has a cycle), its cycle types and every step of every
reported cycle must agree with the reference.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
import time
from itertools import product
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial.tests.checker.common import (
    bad_cycle,
    cycle_types,
    explain,
    forward_wr_in_a_realtime_cycle,
    glued_walk,
    long_visibility_chain,
    one_edge_wr_and_rt,
    run_all_examples,
    split_walk_history,
    three_way_visibility,
    three_way_writes,
)
from ktrial.tests.histlines import (
    POLL,
    Line,
    examples,
    fail,
    info,
    inv,
    isnd,
    ok,
    op,
    pl,
    run,
    snd,
)


def run_tmp(lines: list[Line], **opts: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kt-cycles-") as d:
        return run(Path(d), lines, **opts)


WW, WR, RT = "ww", "wr", "rt"


class GraphParts:
    """What both references share: the sends of a line and the typed edges of `g`."""

    g: nx.DiGraph

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

    def _add(self, u: int, v: int, t: str) -> None:
        if self.g.has_edge(u, v):
            self.g[u][v]["t"].add(t)
        else:
            self.g.add_edge(u, v, t={t})


class Ref(GraphParts):
    """The literal dependency graph of a history (file lines), by docs/anomalies.md and
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


def test_reference_sees_both_types_of_the_three_way_cycle() -> None:
    ref = Ref(three_way_visibility())
    strict, lenient = ref.types()
    assert strict == lenient == {"G1c", "G1c-realtime"}
    assert ref.bad()


def test_three_way_circular_visibility_is_bad(tmp_path: Path) -> None:
    for ww in (True, False):
        res = run(tmp_path, three_way_visibility(), ww_deps=ww)
        assert res["valid"] is False and "G1c-realtime" in res["bad_error_types"]
        ex = examples(res, "G1c-realtime")[0]
        check_steps(Ref(three_way_visibility(), ww), "G1c-realtime", ex)
        for s in ("op 2", "op 0", "value 3", "key z", "offset 0", "micro-op 1"):
            assert s in ex["explanation"], s


def test_reference_sees_g0_in_the_three_way_write_cycle() -> None:
    strict, lenient = Ref(three_way_writes()).types()
    assert strict == {"G0", "G0-realtime"} and lenient == strict


def test_three_way_write_cycle_is_never_bad(tmp_path: Path) -> None:
    res = run(tmp_path, three_way_writes())
    assert res["valid"] is True and res["bad_error_types"] == []
    assert "G0-realtime" in res["error_types"]
    check_steps(Ref(three_way_writes()), "G0-realtime", examples(res, "G0-realtime")[0])
    res = run(tmp_path, three_way_writes(), ww_deps=False)
    assert cycle_types(res) == set() and res["valid"] is True


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


def test_reference_one_edge_wr_and_rt() -> None:
    strict, lenient = Ref(one_edge_wr_and_rt()).types()
    assert strict == {"G1c"} and lenient == {"G1c", "G0-realtime"}


def test_one_edge_wr_and_rt_is_not_bad(tmp_path: Path) -> None:
    res = run(tmp_path, one_edge_wr_and_rt())
    assert {"G1c", "G0-realtime"} <= cycle_types(res) and res["valid"] is True
    check_steps(Ref(one_edge_wr_and_rt()), "G1c", examples(res, "G1c")[0])


def test_reference_glued_walk() -> None:
    strict, lenient = Ref(glued_walk()).types()
    assert strict == lenient == {"G1c", "G0-realtime"}


def test_glued_walk_is_not_bad(tmp_path: Path) -> None:
    res = run(tmp_path, glued_walk())
    assert res["valid"] is True and res["bad_error_types"] == []
    for name in ("G1c", "G0-realtime"):
        check_steps(Ref(glued_walk()), name, examples(res, name)[0])


def test_reference_forward_wr_in_a_realtime_cycle() -> None:
    strict, _lenient = Ref(forward_wr_in_a_realtime_cycle()).types()
    assert strict == {"G0", "G0-realtime", "G1c-realtime"}


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


class LineRef(GraphParts):
    """The literal full graph of a history (file lines), written without checker code:
    the same graph as Ref, paired and walked by line positions for bigger histories
    (it shares only the send parsing and edge bookkeeping of GraphParts)."""

    def __init__(self, lines: list[Line], ww_deps: bool = True) -> None:
        self.lines = lines
        self.ops: list[dict[str, Any]] = []
        pending: dict[Any, tuple[int, Line]] = {}
        for pos, ln in enumerate(lines):
            if ln["process"] == "nemesis" or ln["f"] not in ("send", "poll", "txn"):
                continue
            if ln["type"] == "invoke":
                if ln["process"] in pending:
                    self._never(*pending.pop(ln["process"]))
                pending[ln["process"]] = (pos, ln)
                continue
            ip, io = pending.pop(ln["process"], (pos, ln))
            writes = self._sends(ln)
            if ln["type"] != "ok":
                have = {(k, v) for k, v, _ in writes}
                writes += [(k, v, None) for k, v, _ in self._sends(io) if (k, v) not in have]
            self.ops.append(
                {"inv": ip, "comp": pos, "type": ln["type"], "index": pos, "writes": writes}
                | {"reads": self._reads(ln)}
            )
        for ip, io in sorted(pending.values(), key=lambda x: x[0]):
            self._never(ip, io)
        self.by_index = {r["index"]: i for i, r in enumerate(self.ops)}
        ok_read = {(k, v) for r in self.ops if r["type"] == "ok" for k, _o, v in r["reads"]}
        self.committed = [
            r["type"] == "ok"
            or (r["type"] == "info" and any((k, v) in ok_read for k, v, _ in r["writes"]))
            for r in self.ops
        ]
        # writer of each (key, value); a failed op wrote nothing if another op sent it
        self.writer: dict[tuple[str, Any], int] = {}
        for i, r in enumerate(self.ops):
            for k, v, _o in r["writes"]:
                w = self.writer.get((k, v))
                if w is None or (self.ops[w]["type"] == "fail" and r["type"] != "fail"):
                    self.writer[(k, v)] = i
        # the log: offset -> first value in file order (polls and committed acks)
        self.log: dict[str, dict[int, Any]] = {}
        events: list[tuple[int, str, int, Any]] = []
        for i, r in enumerate(self.ops):
            pos = r["comp"] if r["comp"] is not None else r["inv"]
            for k, o, v in r["reads"]:
                if o is not None:
                    events.append((pos, k, o, v))
            if self.committed[i]:
                for k, v, o in r["writes"]:
                    if o is not None:
                        events.append((pos if r["type"] == "ok" else 1 << 40, k, o, v))
        events.sort(key=lambda e: e[0])
        for _p, k, o, v in events:
            self.log.setdefault(k, {}).setdefault(o, v)
        self.conflicted = any(
            self.log[k].get(o) != v for _p, k, o, v in events
        )  # some offset holds two values: log order is then the checker's choice
        g = nx.DiGraph()
        g.add_nodes_from(i for i, c in enumerate(self.committed) if c)
        self.g = g
        self.ww_at: dict[tuple[int, int], set[tuple[str, Any, Any]]] = {}
        if ww_deps:
            for k, lk in self.log.items():
                offs = sorted(lk)
                first: dict[Any, int] = {}
                for off in offs:
                    first.setdefault(lk[off], off)
                last: tuple[int, Any] | None = None
                for off in offs:
                    v = lk[off]
                    w = self.writer.get((k, v))
                    if w is None or not self.committed[w] or self.home(w, k, v, first) != off:
                        continue
                    if last is not None and last[0] != w:
                        self._add(last[0], w, WW)
                        self.ww_at.setdefault((last[0], w), set()).add((k, last[1], v))
                    last = (w, v)
        for i, r in enumerate(self.ops):
            if not self.committed[i]:
                continue
            for k, _o, v in r["reads"]:
                w = self.writer.get((k, v))
                if w is not None and w != i and self.committed[w]:
                    self._add(w, i, WR)
        done = sorted((r["comp"], i) for i, r in enumerate(self.ops) if r["type"] == "ok")
        for j, r2 in enumerate(self.ops):
            if self.committed[j]:
                for c, i in done:
                    if c >= r2["inv"]:
                        break
                    self._add(i, j, RT)

    def home(self, w: int, k: str, v: Any, first: dict[Any, int]) -> int | None:
        for kk, vv, o in self.ops[w]["writes"]:
            if kk == k and vv == v and o is not None and self.log[k].get(o) == v:
                return o
        return first.get(v)

    def _never(self, pos: int, io: Line) -> None:
        self.ops.append(
            {
                "inv": pos,
                "comp": None,
                "type": "info",
                "index": pos,
                "writes": [(k, v, None) for k, v, _ in self._sends(io)],
                "reads": [],
            }
        )

    @staticmethod
    def _reads(o: Line) -> list[tuple[str, int | None, Any]]:
        return [
            (str(k), off, v)
            for m in o["value"] or []
            if m[0] == "poll" and len(m) == 2
            for k, lst in m[1].items()
            for off, v in lst
        ]

    def bad(self) -> bool:
        """A cycle of wr and realtime edges (any non-trivial strongly connected component)."""
        h = nx.DiGraph()
        h.add_edges_from((u, v) for u, v, d in self.g.edges(data=True) if d["t"] & {WR, RT})
        return any(len(c) > 1 for c in nx.strongly_connected_components(h))

    def wr_only_cycle(self) -> bool:
        h = nx.DiGraph()
        h.add_edges_from((u, v) for u, v, d in self.g.edges(data=True) if WR in d["t"])
        return any(len(c) > 1 for c in nx.strongly_connected_components(h))


SENT2 = re.compile(r"sent value (\S+) to key (\S+?) \(micro-op")


NEXT2 = re.compile(r"next committed record of key (\S+) is value (\S+) at offset")


def check_example(ref: LineRef, name: str, ex: dict[str, Any], check_ww: bool = True) -> None:
    """A simple cycle of real edges of the named types, with the right key and values."""
    cyc = [ref.by_index[i] for i in ex["cycle"]]
    kinds = ex["edges"]
    assert len(cyc) == len(kinds) >= 2 and len(ex["steps"]) == min(len(kinds), 30), ex
    assert len(set(cyc)) == len(cyc), ("a cycle visits an op twice", ex["explanation"])
    for i, kind in enumerate(kinds):
        u, v = cyc[i], cyc[(i + 1) % len(cyc)]
        assert ref.committed[u] and ref.committed[v], ex["explanation"]
        if kind == WW and not check_ww:
            continue
        assert ref.g.has_edge(u, v) and kind in ref.g[u][v]["t"], (i, kind, ex["explanation"])
        if i >= 30:
            continue  # steps past MAX_STEPS are not explained in text
        text = ex["steps"][i]
        if kind == WR:
            m = SENT2.search(text)
            assert m, text
            val, key = json.loads(m.group(1)), m.group(2)
            assert ref.writer.get((key, val)) == u, text
            assert any(k == key and x == val for k, _o, x in ref.ops[v]["reads"]), text
        elif kind == WW:
            m, n = SENT2.search(text), NEXT2.search(text)
            assert m and n, text
            hop = (m.group(2), json.loads(m.group(1)), json.loads(n.group(2)))
            assert hop in ref.ww_at[(u, v)], (text, ref.ww_at[(u, v)])
        else:
            assert kind == RT, kinds
            a, b = ref.ops[u], ref.ops[v]
            assert a["type"] == "ok" and a["comp"] < b["inv"], text
    ks = set(kinds)
    want = {
        "G0": ks == {WW},
        "G1c": WR in ks and ks <= {WW, WR},
        "G0-realtime": RT in ks and ks <= {WW, RT},
        "G1c-realtime": {WR, RT} <= ks,
    }[name]
    assert want, (name, kinds, ex["explanation"])
    assert ex["wr_only"] == (WR in ks and WW not in ks), ex


def check_all(lines: list[Line], ww: bool, **opts: Any) -> tuple[dict[str, Any], LineRef]:
    res = run_all_examples(lines, ww_deps=ww, **opts)
    ref = LineRef(lines, ww)
    assert bad_cycle(res) == ref.bad(), (ww, explain(res))
    assert not {"G0", "G0-realtime"} & set(res["bad_error_types"])
    if not ww:
        assert not {"G0", "G0-realtime"} & cycle_types(res)
    for name in cycle_types(res):
        for ex in res["anomalies"][name]["examples"]:
            check_example(ref, name, ex, check_ww=not ref.conflicted)
    return res, ref


def big_history(
    rng: random.Random,
    n_ops: int,
    n_procs: int,
    n_keys: int,
    future_p: float,
    dup_p: float = 0.0,
    conflict_p: float = 0.0,
    no_invoke_p: float = 0.1,
) -> list[Line]:
    """Processes run ops one after another (overlapping across processes); each key's
    log is its values in (jittered) invoke order with holes; reads come from the log
    prefix written so far, or (future_p) from anywhere in it."""
    keys = [f"k{i}" for i in range(n_keys)]
    free = [0.0] * n_procs
    pid = list(range(n_procs))
    next_pid = n_procs
    nv = 0
    ops: list[dict[str, Any]] = []
    for _ in range(n_ops):
        s = rng.randrange(n_procs)
        t0 = free[s] + rng.random()
        t1 = t0 + rng.random() * rng.choice([0.5, 2.0, 6.0])
        f = rng.choice(["send", "poll", "txn", "txn"])
        outcome = rng.choices(["ok", "info", "fail", "never"], [12, 3, 2, 1])[0]
        sends = []
        if f != "poll":
            for _ in range(rng.randint(1, 3)):
                nv += 1
                sends.append((rng.choice(keys), nv))
        ops.append({"p": pid[s], "f": f, "outcome": outcome, "sends": sends, "t0": t0, "t1": t1})
        free[s] = t1
        if outcome == "never":
            pid[s] = next_pid
            next_pid += 1
    offset: dict[tuple[str, int], int] = {}
    vis: dict[int, float] = {}
    for o in ops:
        for _k, v in o["sends"]:
            # visible once its writer completed (a commit); never completed: later
            vis[v] = o["t1"] if o["outcome"] != "never" else o["t0"] + rng.random() * 4
    order: dict[str, list[tuple[float, int]]] = {}
    for k in keys:
        vals = sorted(
            (o["t0"] + rng.random() * 2, v) for o in ops for kk, v in o["sends"] if kk == k
        )
        off = 0
        for _t, v in vals:
            off += rng.choice([0, 0, 0, 1])  # holes: markers, aborted records
            offset[(k, v)] = off
            off += 1
        dups = []
        for t, v in vals:
            if rng.random() < dup_p:  # the value lands again, later (a producer retry)
                offset.setdefault((k, -v), off)
                dups.append((t + 3, -v))
                off += 1
        order[k] = sorted(vals + dups)

    def at(k: str, v: int) -> int:
        o = offset[(k, v)] if v > 0 else offset[(k, -v)]
        return o + 1 if rng.random() < conflict_p else o

    def real(v: int) -> int:
        return abs(v)

    lines_t: list[tuple[float, int, Line]] = []
    for o in ops:
        f = o["f"]
        inv_mops: list[Any] = [isnd(k, v) for k, v in o["sends"]]
        comp_mops: list[Any] = []
        for k, v in o["sends"]:
            r = rng.random()
            ack: int | None = offset[(k, v)] if r < 0.8 else None if r < 0.95 else -1
            if o["outcome"] != "ok" and rng.random() < 0.2:
                continue  # a partial completion: the invoke announced it
            comp_mops.append(snd(k, ack, v))
        if f != "send":
            recs: dict[str, list[list[Any]]] = {}
            for k in rng.sample(keys, rng.randint(1, n_keys)):
                vals = order[k]
                if rng.random() >= future_p:  # only what was committed by now
                    vals = [(t, v) for t, v in vals if vis[abs(v)] < o["t1"]]
                if not vals or rng.random() < 0.2:
                    continue
                a = rng.randrange(len(vals))
                run_ = vals[a : a + rng.randint(1, 4)]
                recs[k] = [[(at(k, v) if rng.random() < 0.9 else None), real(v)] for _t, v in run_]
            poll = pl(recs)
            if f == "poll":
                comp_mops = [poll]
                inv_mops = [["poll"]]
            else:
                j = rng.randint(0, len(comp_mops))
                comp_mops.insert(j, poll)
                inv_mops.insert(min(j, len(inv_mops)), ["poll"])
        if o["outcome"] == "never" or rng.random() >= no_invoke_p:
            lines_t.append((o["t0"], 0, inv(o["p"], f, inv_mops)))
        if o["outcome"] != "never":
            extra: dict[str, Any] = {"error": "timeout"} if o["outcome"] == "info" else {}
            lines_t.append((o["t1"], 1, op(o["p"], o["outcome"], f, comp_mops, **extra)))
    lines_t.sort(key=lambda x: (x[0], x[1]))
    lines = [ln for _t, _k, ln in lines_t]
    if rng.random() < 0.3:
        lines.insert(rng.randint(0, len(lines)), ok(999, "assign", keys))
        lines.insert(rng.randint(0, len(lines)), op("nemesis", "info", "kill", "n1"))
    return lines


FUZZ2 = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@FUZZ2
@given(
    seed=st.integers(0, 2**32 - 1),
    n_ops=st.integers(20, 200),
    n_procs=st.integers(2, 8),
    n_keys=st.integers(2, 6),
    future_p=st.sampled_from([0.0, 0.0, 0.002, 0.01, 0.1]),
    dup_p=st.sampled_from([0.0, 0.0, 0.1]),
)
def test_verdict_and_examples_match_the_full_graph(
    seed: int, n_ops: int, n_procs: int, n_keys: int, future_p: float, dup_p: float
) -> None:
    lines = big_history(random.Random(seed), n_ops, n_procs, n_keys, future_p, dup_p)
    for ww in (True, False):
        check_all(lines, ww)


@FUZZ2
@given(
    seed=st.integers(0, 2**32 - 1),
    n_ops=st.integers(20, 120),
    n_keys=st.integers(2, 4),
)
def test_verdict_with_inconsistent_offsets_matches_the_full_graph(
    seed: int, n_ops: int, n_keys: int
) -> None:
    """Offsets that disagree (a read names a neighbour's offset): wr edges still come
    from the values read, so the bad verdict must not change."""
    lines = big_history(random.Random(seed), n_ops, 4, n_keys, 0.005, 0.05, conflict_p=0.1)
    for ww in (True, False):
        check_all(lines, ww)


def test_split_walk_reference_has_a_g1c_realtime_cycle() -> None:
    ref = LineRef(split_walk_history())
    idx = {ref.ops[i]["index"]: i for i in range(len(ref.ops))}
    cyc = [idx[8], idx[6], idx[9], idx[4], idx[11]]  # A B D1 D2 E, by completion line
    kinds = [ref.g[u][cyc[(i + 1) % 5]]["t"] for i, u in enumerate(cyc)]
    assert kinds == [{WR}, {WW}, {WW}, {RT}, {WW}]
    assert not ref.bad()


def test_split_walk_is_valid_and_names_g1c_and_g0_realtime() -> None:
    res, _ref = check_all(split_walk_history(), True)
    assert res["valid"] is True and {"G1c", "G0-realtime"} <= cycle_types(res), explain(res)


def two_groups(n: int, back_edge: bool) -> list[Line]:
    """Group 1: n txns all invoked, then all completed; group 2 likewise, afterwards:
    every group-1 op precedes every group-2 op in real time (n*n realtime edges).
    Group-2 ops read group-1 values (forward wr). With back_edge, the first group-1 op
    also read a value the first group-2 op wrote: a G1c-realtime (read from the future)."""
    keys = ["a", "b", "c", "d"]
    lines: list[Line] = []
    offs = dict.fromkeys(keys, 0)
    acks: dict[int, tuple[str, int]] = {}
    for i in range(2 * n):
        k = keys[i % 4]
        acks[i] = (k, offs[k])
        offs[k] += 1
    for g in (0, 1):
        ids = range(g * n, (g + 1) * n)
        for i in ids:
            lines.append(inv(i, "txn", [["poll"], isnd(acks[i][0], 10_000 + i)]))
        for i in ids:
            recs: dict[str, list[list[Any]]] = {}
            if g == 1:
                j = (i * 7) % n  # a group-1 value
                recs[acks[j][0]] = [[acks[j][1], 10_000 + j]]
            elif back_edge and i == 0:
                recs[acks[n][0]] = [[acks[n][1], 10_000 + n]]
            lines.append(ok(i, "txn", [pl(recs), snd(acks[i][0], acks[i][1], 10_000 + i)]))
    return lines


@pytest.mark.parametrize("back_edge", [False, True])
def test_two_concurrent_groups_of_500(back_edge: bool) -> None:
    lines = two_groups(500, back_edge)
    t = time.monotonic()
    res = run_all_examples(lines)
    took = time.monotonic() - t
    print(f"two groups of 500, back_edge={back_edge}: {took:.2f} s")
    assert took < 20, took
    assert bad_cycle(res) is back_edge, explain(res)
    if back_edge:
        ex = res["anomalies"]["G1c-realtime"]["examples"][0]
        assert sorted(ex["cycle"]) == [500, 1500], ex["explanation"]  # the two ops' oks
        ref = LineRef(lines, False)
        assert ref.bad()
        check_example(ref, "G1c-realtime", ex)
        assert "value 10500" in ex["explanation"], ex["explanation"]


def test_long_visibility_chain_within_between_is_g1c() -> None:
    lines = long_visibility_chain(50)
    for ww in (True, False):
        res, ref = check_all(lines, ww)
        assert ref.wr_only_cycle() and res["valid"] is False
        assert {"G1c", "G1c-realtime"} <= set(res["bad_error_types"]), explain(res)
        ex = res["anomalies"]["G1c"]["examples"][0]
        assert len(ex["cycle"]) == 52 and ex["wr_only"] is True
