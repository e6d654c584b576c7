"""The history generator (ktrial.testing.gen) is itself a model of a correct log.

These tests pin down, independently of the checker, that what it produces is
well-formed and obeys the rules a correct broker obeys (read_committed, no loss,
no duplicates, consumers read in order), so that a checker complaint about a
generated history points at the checker, not at the generator.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial.histories import iter_history
from ktrial.testing.gen import GenParams, generate, iter_ops, to_jsonl

params_st = st.builds(
    GenParams,
    seed=st.integers(0, 2**32 - 1),
    keys=st.integers(1, 4),
    processes=st.integers(1, 4),
    ops=st.integers(1, 60),
    txn=st.booleans(),
    abort_p=st.sampled_from([0.0, 0.2, 0.5]),
    fail_p=st.sampled_from([0.0, 0.1]),
    info_p=st.sampled_from([0.0, 0.1, 0.3]),
    crash_p=st.sampled_from([0.0, 0.05, 0.2]),
    sub_via=st.sampled_from(["assign", "subscribe"]),
    reassign_p=st.sampled_from([0.0, 0.1]),
    rebalance_p=st.sampled_from([0.0, 0.2]),
    null_offset_p=st.sampled_from([0.0, 0.3]),
    omit_invokes=st.booleans(),
    truncate=st.booleans(),
    tail_invokes=st.integers(0, 2),
    int_keys=st.booleans(),
    drain_consumers=st.integers(1, 2),
    nemesis_p=st.sampled_from([0.0, 0.05]),
)


def _reads(d: dict[str, Any]) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    if d["f"] not in ("poll", "txn"):
        return out
    for m in d["value"] or []:
        if m[0] == "poll" and len(m) > 1:
            for k, recs in m[1].items():
                out.extend((str(k), o, v) for o, v in recs)
    return out


def _sends(d: dict[str, Any]) -> list[tuple[str, int | None, int]]:
    out: list[tuple[str, int | None, int]] = []
    if d["f"] not in ("send", "txn"):
        return out
    for m in d["value"] or []:
        if m[0] == "send":
            if isinstance(m[2], list):
                o = m[2][0]
                out.append((str(m[1]), None if o is None or o < 0 else o, m[2][1]))
            else:
                out.append((str(m[1]), None, m[2]))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params_st)
def test_generated_histories_obey_a_correct_log(p: GenParams) -> None:
    g = generate(p)
    ops, truth = g.ops, g.truth
    # Well-formed: dense indices, strictly increasing times, parseable.
    assert [d["index"] for d in ops] == list(range(len(ops)))
    times = [d["time"] for d in ops]
    assert times == sorted(times) and len(set(times)) == len(times)
    g.to_ops()

    # One outstanding op per process; completions match invokes.
    outstanding: dict[Any, dict[str, Any]] = {}
    completions_without_invoke = 0
    for d in ops:
        if d["process"] == "nemesis":
            continue
        if d["type"] == "invoke":
            assert d["process"] not in outstanding, d
            outstanding[d["process"]] = d
        else:
            inv = outstanding.pop(d["process"], None)
            if inv is None:
                completions_without_invoke += 1
            else:
                assert inv["f"] == d["f"]
    if not p.omit_invokes:
        assert completions_without_invoke == 0
    else:
        assert sum(d["type"] == "invoke" for d in ops) == truth.in_flight
    assert len(outstanding) == truth.in_flight

    # The log: one value per offset, one offset per value; reads agree with it.
    where: dict[int, tuple[str, int]] = {}
    for k, recs in truth.log.items():
        offs = [o for o, _ in recs]
        assert offs == sorted(set(offs))
        for o, v in recs:
            assert v not in where
            where[v] = (k, o)
    aborted = set(truth.aborted)
    ok_read: set[int] = set()
    for d in ops:
        sent = {v for _, _, v in _sends(d)}
        for k, o, v in _reads(d):
            assert where.get(v) == (k, o), (d, v)  # no aborted/uncommitted/misplaced read
            assert v not in aborted
            assert v not in sent  # read_committed: never the op's own sends
            if d["type"] == "ok":
                ok_read.add(v)
        if d["type"] == "ok":
            for k, so, v in _sends(d):  # so: the send's offset, None if unknown
                assert v in where and (so is None or where[v] == (k, so))
    assert ok_read == set(where), "the drain must read every committed value"

    # Each process's sends to a key land at increasing offsets.
    last_send: dict[tuple[Any, str], int] = {}
    for d in ops:
        if d["type"] in ("ok", "fail", "info"):
            for k, so, _ in _sends(d):
                if so is not None:
                    assert so > last_send.get((d["process"], k), -1)
                    last_send[(d["process"], k)] = so

    # Assign mode: a consumer's successive ok reads of a key are consecutive in the log
    # (rewinds after fail/info ops make the next ok read continue where the last ok
    # read ended), unless it re-assigned from the beginning.
    if p.sub_via == "assign":
        rank = {v: i for recs in truth.log.values() for i, (_, v) in enumerate(recs)}
        last: dict[tuple[Any, str], int] = {}
        for d in ops:
            if d["f"] == "assign" and d["type"] == "ok" and d.get("seek_to_beginning"):
                for k in d["value"]:
                    last.pop((d["process"], str(k)), None)
            if d["type"] != "ok" or d["f"] not in ("poll", "txn"):
                continue
            for k, _, v in _reads(d):
                prev = last.get((d["process"], k))
                if prev is not None:
                    assert rank[v] == prev + 1, (d, k, v)
                last[(d["process"], k)] = rank[v]


def test_generation_is_deterministic_and_streams() -> None:
    p = GenParams(seed=7, ops=80, keys=3, processes=4, info_p=0.2, crash_p=0.05)
    a = generate(p).ops
    assert a == generate(p).ops
    assert a == list(iter_ops(p))
    assert a != generate(GenParams(seed=8, ops=80, keys=3, processes=4)).ops


def test_near_misses_are_produced() -> None:
    """The legal near-misses the checker must tolerate really occur in generated runs."""
    g = generate(GenParams(seed=3, ops=300, keys=2, processes=4, abort_p=0.3, fail_p=0.2))
    t = g.truth
    assert t.markers > 0 and t.aborted and t.rewinds > 0
    holes = sum(recs[-1][0] + 1 - len(recs) for recs in t.log.values())
    assert holes >= t.markers  # markers and aborted records leave offset gaps
    # Concurrent producers interleave inside one op's sends (int-send-skip).
    owner = {(k, o): d["index"] for d in g.ops if d["type"] == "ok" for k, o, _ in _sends(d)}
    interleaved = False
    for d in g.ops:
        if d["type"] != "ok":
            continue
        offs = defaultdict(list)
        for k, o, _ in _sends(d):
            if o is not None:
                offs[k].append(o)
        for k, os_ in offs.items():
            for a, b in itertools.pairwise(os_):
                if any(owner.get((k, o), d["index"]) != d["index"] for o in range(a + 1, b)):
                    interleaved = True
    assert interleaved


def test_jsonl_roundtrip(tmp_path: Path) -> None:
    g = generate(GenParams(seed=5, ops=50, int_keys=False, null_offset_p=0.5, truncate=True))
    path = tmp_path / "history.jsonl"
    assert to_jsonl(g.ops, path) == len(g.ops)
    assert [op.to_json() for op in iter_history(path)] == [op.to_json() for op in g.to_ops()]


def test_visibility_before_acknowledgement_and_info_outcomes_occur() -> None:
    """Readers see txn values before the writer's ok arrives; info ops go both ways."""
    g = generate(GenParams(seed=2, ops=300, keys=2, processes=4, info_p=0.3, txn_weight=3))
    completion_of: dict[int, tuple[int, str]] = {}
    for d in g.ops:
        if d["type"] != "invoke":
            for _, _, v in _sends(d):
                completion_of[v] = (d["index"], d["type"])
    early = False
    info_read: set[int] = set()
    for d in g.ops:
        if d["type"] != "ok":
            continue
        for _, _, v in _reads(d):
            idx, typ = completion_of[v]
            early |= idx > d["index"]  # read and acknowledged before its writer completed
            if typ == "info":
                info_read.add(v)
    assert early
    assert info_read, "some info op committed and was read"
    info_vals = {v for v, (_, t) in completion_of.items() if t == "info"}
    assert info_vals - info_read, "some info op never took effect"
