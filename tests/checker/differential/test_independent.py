"""The checker against the independent model of a correct Kafka cluster (model.py).

Histories of the model, in every spelling, must be valid; each fault injected into
one (a lost record, a duplicate, a reordering, an aborted read, ...) must be found as
exactly its anomaly type. The cycle search and the lost-write rule are also compared
with brute-force references written here from the rules of docs/anomalies.md, not from checker code.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ktrial.checker import CheckOptions
from ktrial.tests.checker.differential.model import (
    ABORTED,
    COMMITTED,
    Params,
    Style,
    World,
    check_ops,
    render,
    simulate,
)
from ktrial.tests.histlines import done, inv, numbered


def describe(res: dict[str, Any]) -> str:
    return json.dumps(
        {t: res["anomalies"][t]["examples"][:2] for t in res["bad_error_types"]}, default=str
    )[:3000]


styles = st.builds(
    Style,
    keys=st.sampled_from(["int", "str", "mixed"]),
    values=st.sampled_from(["int", "str"]),
    index=st.booleans(),
    time=st.sampled_from(["mono", "jitter", "none"]),
    queen=st.booleans(),
    empty_keys=st.booleans(),
    drop_adjacent_invokes=st.booleans(),
    edn=st.booleans(),
)


params = st.builds(
    Params,
    n_keys=st.integers(1, 6),
    n_clients=st.integers(1, 5),
    ticks=st.integers(20, 400),
    txn_p=st.sampled_from([0.0, 0.5, 1.0]),
    subscribe_p=st.sampled_from([0.0, 0.0, 0.3, 1.0]),
    abort_p=st.sampled_from([0.0, 0.15, 0.4]),
    info_p=st.sampled_from([0.0, 0.1, 0.3]),
    crash_p=st.sampled_from([0.0, 0.01, 0.05]),
    nemesis_p=st.sampled_from([0.0, 0.05]),
    seek_p=st.sampled_from([0.0, 0.3]),
    rewind_p=st.sampled_from([0.0, 0.5, 1.0]),
)


def rewinds(w: World) -> bool:
    """Whether every client of the run rewinds after a failed or indeterminate op: only
    then does Jepsen's consumer-position rule (consumer_rewinds, the default) apply."""
    return all(c.rewinds for c in w.clients)


def assert_valid(res: dict[str, Any]) -> None:
    assert res["bad_error_types"] == [], describe(res)
    if res["stats"]["reads"]:
        assert res["valid"] is True, res["valid"]


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(seed=st.integers(0, 2**32 - 1), p=params, style=styles)
def test_correct_model_histories_are_valid(seed: int, p: Params, style: Style) -> None:
    w = simulate(seed, p)
    ops = render(w.events, style, seed)
    assert_valid(check_ops(ops, CheckOptions(consumer_rewinds=rewinds(w)), edn=style.edn))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), style=styles)
def test_correct_assign_only_histories_are_valid_with_sub_via_assign(
    seed: int, style: Style
) -> None:
    """Pure assign mode: poll-skip and nonmonotonic-poll are bad here, so consumer
    order is judged strictly (docs/anomalies.md)."""
    p = Params(n_keys=3, n_clients=3, ticks=300, subscribe_p=0.0, crash_p=0.02, info_p=0.15)
    w = simulate(seed, p)
    ops = render(w.events, style, seed)
    opts = CheckOptions(sub_via="assign", consumer_rewinds=rewinds(w))
    assert_valid(check_ops(ops, opts, edn=style.edn))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), p=params)
def test_correct_histories_are_valid_without_ww_inference(seed: int, p: Params) -> None:
    """Without ww edges any G1c is bad (docs/anomalies.md): a correct Kafka never shows a
    cycle of wr (+ realtime) edges alone."""
    w = simulate(seed, p)
    opts = CheckOptions(ww_deps=False, consumer_rewinds=rewinds(w))
    assert_valid(check_ops(render(w.events, Style(), seed), opts))


Loc = tuple[int, int, int]  # (event index, micro-op index, key)


def ok_poll_chunks(events: list[dict[str, Any]], ok_only: bool = True) -> Iterator[Loc]:
    for i, ev in enumerate(events):
        if ev["f"] not in ("poll", "txn") or ev["type"] == "invoke" or ev["process"] == "nemesis":
            continue
        if ok_only and ev["type"] != "ok":
            continue
        for j, m in enumerate(ev["value"]):
            if m[0] == "poll" and len(m) == 2:
                for k, recs in m[1].items():
                    if recs:
                        yield i, j, k


def recs_at(events: list[dict[str, Any]], loc: Loc) -> list[Any]:
    i, j, k = loc
    return events[i]["value"][j][1][k]  # type: ignore[no-any-return]


def set_recs(events: list[dict[str, Any]], loc: Loc, recs: list[Any]) -> None:
    i, j, k = loc
    events[i]["value"][j][1][k] = recs


def ok_sends(events: list[dict[str, Any]]) -> Iterator[tuple[int, int, int, int, int]]:
    """(event index, micro-op index, key, offset, value) of acknowledged sends of ok ops."""
    for i, ev in enumerate(events):
        if ev["type"] == "ok" and ev["f"] in ("send", "txn"):
            for j, m in enumerate(ev["value"]):
                if m[0] == "send" and isinstance(m[2], list):
                    yield i, j, m[1], m[2][0], m[2][1]


def drop_value(events: list[dict[str, Any]], k: int, v: int) -> None:
    """Make value v of key k unread by anyone (a lost record)."""
    for loc in list(ok_poll_chunks(events, ok_only=False)):
        if loc[2] == k:
            set_recs(events, loc, [r for r in recs_at(events, loc) if r[1] != v])


def read_after(events: list[dict[str, Any]], k: int, off: int) -> bool:
    return any(
        o > off for loc in ok_poll_chunks(events) if loc[2] == k for o, _ in recs_at(events, loc)
    )


def world_for(seed: int, **kw: Any) -> World:
    base: dict[str, Any] = {"n_keys": 2, "n_clients": 3, "ticks": 250, "crash_p": 0.0}
    base.update(kw)
    return simulate(seed, Params(**base))


def bad_types(events: list[dict[str, Any]], opts: CheckOptions | None = None) -> set[str]:
    res = check_ops(render(events, Style()), opts)
    if res["bad_error_types"]:
        assert res["valid"] is False
    return set(res["bad_error_types"])


inject = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


seeds = st.integers(0, 2**32 - 1)


def pick(rng: random.Random, xs: list[Any]) -> Any:
    assume(xs)
    return rng.choice(xs)


@inject
@given(seed=seeds)
def test_injected_lost_write_is_found(seed: int) -> None:
    w = world_for(seed)
    ev = w.events
    cands = [(k, o, v) for _i, _j, k, o, v in ok_sends(ev) if read_after(ev, k, o)]
    k, _o, v = pick(random.Random(seed), cands)
    drop_value(ev, k, v)
    assert "lost-write" in bad_types(ev)


@inject
@given(seed=seeds)
def test_injected_unseen_last_write_is_found(seed: int) -> None:
    w = world_for(seed)
    ev = w.events
    last = {
        k: max(((o, v) for _i, _j, kk, o, v in ok_sends(ev) if kk == k), default=None)
        for k in w.parts
    }
    cands = [(k, ov) for k, ov in last.items() if ov is not None]
    k, (o, v) = pick(random.Random(seed), cands)
    assume(all(r.state != COMMITTED for r in w.parts[k].recs[o + 1 :]))
    drop_value(ev, k, v)
    found = bad_types(ev)
    assert "unseen" in found
    assert "lost-write" not in found


def drain_chunks(w: World) -> list[Loc]:
    drain = w.clients[-1].proc
    return [loc for loc in ok_poll_chunks(w.events) if w.events[loc[0]]["process"] == drain]


@inject
@given(seed=seeds)
def test_injected_duplicate_is_found(seed: int) -> None:
    w = world_for(seed)
    rng = random.Random(seed)
    loc = pick(rng, drain_chunks(w))
    recs = recs_at(w.events, loc)
    _o, v = recs[0]
    # the same value again, past the end of the log
    set_recs(w.events, loc, [*recs, (len(w.parts[loc[2]].recs) + 3, v)])
    assert "duplicate" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_injected_inconsistent_offsets_is_found(seed: int) -> None:
    w = world_for(seed)
    rng = random.Random(seed)
    loc = pick(rng, [x for x in ok_poll_chunks(w.events) if x not in drain_chunks(w)])
    recs = list(recs_at(w.events, loc))
    n = rng.randrange(len(recs))
    recs[n] = (recs[n][0], 10**9)  # another value at the same offset
    set_recs(w.events, loc, recs)
    assert "inconsistent-offsets" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_injected_g1a_aborted_read_is_found(seed: int) -> None:
    w = world_for(seed, txn_p=1.0, abort_p=0.4, info_p=0.0)
    rng = random.Random(seed)
    dk = {loc[2]: loc for loc in drain_chunks(w)}  # the last drain chunk of each key
    aborted = [
        (k, o, r.value)
        for k, part in w.parts.items()
        for o, r in enumerate(part.recs)
        if r.state == ABORTED and w.outcome.get(r.value or 0) == "fail" and k in dk
    ]
    k, o, v = pick(rng, aborted)
    set_recs(w.events, dk[k], sorted([*recs_at(w.events, dk[k]), (o, v)]))
    assert "G1a" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_injected_precommitted_read_is_found(seed: int) -> None:
    w = world_for(seed, txn_p=1.0, abort_p=0.0, info_p=0.0)
    cands = []
    for i, ev in enumerate(w.events):
        if ev["type"] == "ok" and ev["f"] == "txn":
            sends = [m for m in ev["value"] if m[0] == "send"]
            polls = [j for j, m in enumerate(ev["value"]) if m[0] == "poll"]
            if sends and polls and ev["value"].index(sends[0]) < polls[-1]:
                cands.append((i, polls[-1], sends[0]))
    i, j, (_s, k, (o, v)) = pick(random.Random(seed), cands)
    recs = w.events[i]["value"][j][1]
    recs[k] = [*recs.get(k, []), (o, v)]  # the txn's own poll saw its own send
    assert "precommitted-read" in bad_types(w.events)


def multi(w: World, n: int) -> list[Loc]:
    out = []
    for loc in ok_poll_chunks(w.events):
        ev = w.events[loc[0]]
        rb = {k for e in ev.get("rebalance_log", []) for k in e["keys"]}
        if len(recs_at(w.events, loc)) >= n and loc[2] not in rb:
            out.append(loc)
    return out


@inject
@given(seed=seeds)
def test_injected_int_poll_skip_is_found(seed: int) -> None:
    w = world_for(seed)
    loc = pick(random.Random(seed), [x for x in multi(w, 3) if x not in drain_chunks(w)])
    recs = recs_at(w.events, loc)
    set_recs(w.events, loc, [recs[0], *recs[2:]])  # the drain still reads recs[1]
    assert "int-poll-skip" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_injected_int_nonmonotonic_poll_is_found(seed: int) -> None:
    w = world_for(seed)
    loc = pick(random.Random(seed), multi(w, 2))
    recs = recs_at(w.events, loc)
    set_recs(w.events, loc, [recs[1], recs[0], *recs[2:]])
    assert "int-nonmonotonic-poll" in bad_types(w.events)


def successive_drain(w: World) -> list[tuple[Loc, Loc]]:
    """Pairs of successive ok drain reads of one key (one consumer, assign mode)."""
    last: dict[int, Loc] = {}
    out = []
    for loc in drain_chunks(w):
        if loc[2] in last and len(recs_at(w.events, loc)) >= 2:
            out.append((last[loc[2]], loc))
        last[loc[2]] = loc
    return out


@inject
@given(seed=seeds)
def test_injected_poll_skip_in_assign_mode_is_found(seed: int) -> None:
    w = world_for(seed, subscribe_p=0.0)
    # The skipped record must stay in the log without this read: its value was
    # acknowledged by an ok op. (Dropping the only read of an info send's value
    # makes that send uncommitted -- a correct log without the record.)
    acked = {(k, o) for _i, _j, k, o, _v in ok_sends(w.events)}
    drains = [(a, b) for a, b in successive_drain(w) if (b[2], recs_at(w.events, b)[0][0]) in acked]
    _a, b = pick(random.Random(seed), drains)
    recs = recs_at(w.events, b)
    set_recs(w.events, b, recs[1:])
    assert "poll-skip" in bad_types(w.events)
    # expected with subscribe: reported, but not bad
    res = check_ops(render(w.events, Style()), CheckOptions(sub_via="subscribe"))
    assert "poll-skip" in res["error_types"] and "poll-skip" not in res["bad_error_types"]


@inject
@given(seed=seeds)
def test_injected_nonmonotonic_poll_in_assign_mode_is_found(seed: int) -> None:
    w = world_for(seed, subscribe_p=0.0)
    a, b = pick(random.Random(seed), successive_drain(w))
    set_recs(w.events, b, [recs_at(w.events, a)[-1], *recs_at(w.events, b)])
    assert "nonmonotonic-poll" in bad_types(w.events)


def swap_values(events: list[dict[str, Any]], k: int, v1: int, v2: int) -> None:
    """Swap where v1 and v2 sit in key k's log, everywhere (sends and polls agree)."""
    sw = {v1: v2, v2: v1}
    where: dict[int, int] = {}
    for ev in events:
        if ev["f"] in ("send", "txn") and ev["type"] != "invoke":
            for m in ev["value"]:
                if m[0] == "send" and m[1] == k and isinstance(m[2], list):
                    where[m[2][1]] = m[2][0]
    for ev in events:
        if ev["f"] in ("send", "txn") and ev["type"] != "invoke":
            for m in ev["value"]:
                if m[0] == "send" and m[1] == k and isinstance(m[2], list) and m[2][1] in sw:
                    m[2] = [where[sw[m[2][1]]], m[2][1]]
    for loc in list(ok_poll_chunks(events, ok_only=False)):
        if loc[2] == k:
            set_recs(events, loc, [(o, sw.get(v, v)) for o, v in recs_at(events, loc)])


@inject
@given(seed=seeds)
def test_injected_nonmonotonic_send_is_found(seed: int) -> None:
    w = world_for(seed, txn_p=0.0, info_p=0.0, abort_p=0.0)
    last: dict[tuple[Any, int], tuple[int, int]] = {}
    cands = []
    for i, _j, k, _o, v in ok_sends(w.events):
        p = w.events[i]["process"]
        if (p, k) in last and last[(p, k)][0] != i:
            cands.append((k, last[(p, k)][1], v))
        last[(p, k)] = (i, v)
    k, v1, v2 = pick(random.Random(seed), cands)
    swap_values(w.events, k, v1, v2)
    assert "nonmonotonic-send" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_injected_int_nonmonotonic_send_is_found(seed: int) -> None:
    w = world_for(seed, n_keys=1, txn_p=0.5, info_p=0.0, abort_p=0.0)
    cands = []
    for i, ev in enumerate(w.events):
        if ev["type"] == "ok" and ev["f"] in ("send", "txn"):
            vs = [m[2][1] for m in ev["value"] if m[0] == "send"]
            if len(vs) >= 2:
                cands.append((i, vs[0], vs[1]))
    _i, v1, v2 = pick(random.Random(seed), cands)
    swap_values(w.events, 0, v1, v2)
    assert "int-nonmonotonic-send" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_injected_torn_transaction_is_found(seed: int) -> None:
    w = world_for(seed, n_keys=3, txn_p=1.0, abort_p=0.0, info_p=0.0)
    ev = w.events
    cands = []
    for i, e in enumerate(ev):
        if e["type"] == "ok" and e["f"] == "txn":
            sends = [m for m in e["value"] if m[0] == "send"]
            for m in sends:
                if len({s[1] for s in sends}) >= 2 and read_after(ev, m[1], m[2][0]):
                    cands.append((i, m[1], m[2][1]))
    _i, k, v = pick(random.Random(seed), cands)
    drop_value(ev, k, v)
    found = bad_types(ev)
    assert {"torn-transaction", "lost-write"} <= found


def test_g1c_circular_visibility_is_bad_even_with_ww() -> None:
    ops = numbered(
        inv(0, "txn", [["send", 0, 1], ["poll"]]),
        inv(1, "txn", [["send", 1, 2], ["poll"]]),
        done(0, "txn", [["send", 0, [0, 1]], ["poll", {"1": [[0, 2]]}]]),
        done(1, "txn", [["send", 1, [0, 2]], ["poll", {"0": [[0, 1]]}]]),
    )
    res = check_ops(ops)
    assert "G1c" in res["bad_error_types"]


def test_g1c_realtime_read_from_the_future() -> None:
    ops = numbered(
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1]]}]]),
        inv(1, "send", [["send", 0, 1]]),
        done(1, "send", [["send", 0, [0, 1]]]),
    )
    res = check_ops(ops)
    assert "G1c-realtime" in res["bad_error_types"]


def test_g0_interleaved_transactions_are_normal() -> None:
    ops = numbered(
        inv(0, "txn", [["send", 0, 1], ["send", 1, 2]]),
        inv(1, "txn", [["send", 0, 3], ["send", 1, 4]]),
        done(0, "txn", [["send", 0, [0, 1]], ["send", 1, [1, 2]]]),
        done(1, "txn", [["send", 0, [1, 3]], ["send", 1, [0, 4]]]),
        inv(2, "poll", [["poll"]]),
        done(2, "poll", [["poll", {"0": [[0, 1], [1, 3]], "1": [[0, 4], [1, 2]]}]]),
    )
    res = check_ops(ops)
    assert "G0" in res["error_types"]
    assert res["valid"] is True


def test_lost_write_with_unknown_offsets_by_real_time() -> None:
    """Queen's -1 offsets: an acknowledged txn value before a later writer's read value."""
    ops = numbered(
        inv(0, "txn", [["send", 0, 1]]),
        done(0, "txn", [["send", 0, [-1, 1]]]),
        inv(0, "txn", [["send", 0, 2]]),
        done(0, "txn", [["send", 0, [-1, 2]]]),
        inv(1, "poll", [["poll"]]),
        done(1, "poll", [["poll", {"0": [[1, 2]]}]]),
    )
    assert "lost-write" in check_ops(ops)["bad_error_types"]


def test_markers_and_aborted_records_are_not_skips() -> None:
    """Offsets 1 (aborted record) and 2 (its abort marker) are holes, not skips."""
    ops = numbered(
        inv(0, "assign", [0]),
        done(0, "assign", [0]),
        inv(1, "txn", [["send", 0, 1]]),
        done(1, "txn", [["send", 0, [0, 1]]]),
        inv(1, "txn", [["send", 0, 2]]),
        done(1, "txn", [["send", 0, [2, 2]]], "fail"),
        inv(1, "txn", [["send", 0, 3]]),
        done(1, "txn", [["send", 0, [4, 3]]]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1]]}]]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[4, 3]]}]]),
    )
    assert_valid(check_ops(ops, CheckOptions(sub_via="assign")))


def test_jepsen_crash_and_final_polls() -> None:
    """Jepsen's own shapes: :crash ops, :debug-topic-partitions, :poll-ms, info sends with
    nil offsets, a rebalance log {:keys [...]} on a subscribe poll."""
    ops = numbered(
        inv(0, "subscribe", [0, 1]),
        done(0, "subscribe", [0, 1]),
        inv(1, "send", [["send", 0, 1], ["send", 1, 2]]),
        done(1, "send", [["send", 0, [0, 1]], ["send", 1, [None, 2]]], "info", error="timeout"),
        inv(2, "send", [["send", 0, 3]]),
        done(2, "send", [["send", 0, [1, 3]]]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1]]}]], rebalance_log=[{"keys": [0, 1]}]),
        inv(0, "crash", None),
        done(0, "crash", None, "info"),
        {"process": "nemesis", "type": "info", "f": "kill", "value": ["n1"]},
        inv(5, "debug-topic-partitions", [0, 1]),
        done(5, "debug-topic-partitions", {"0": {"leader": 1}}),
        inv(5, "assign", [0, 1]) | {"seek_to_beginning": True},
        done(5, "assign", [0, 1], seek_to_beginning=True),
        inv(5, "poll", [["poll"]]) | {"poll_ms": 1000},
        done(5, "poll", [["poll", {"0": [[0, 1], [1, 3]], "1": [[0, 2]]}]], poll_ms=1000),
    )
    for edn in (False, True):
        assert_valid(check_ops(ops, edn=edn))


def test_a_completion_without_invoke_starts_at_its_own_line() -> None:
    """The documented convention (docs/history-format.md, issue 2): a completion with
    no invoke counts as invoked at its own line, so realtime order applies from there.
    A read that completes before the line of its writer's invoke-less ack is a read
    from the future under that convention; with the send's invoke before the poll's
    completion (what a tool that knows it writes) the same reads are fine."""
    read = done(0, "poll", [["poll", {"0": [[0, 1]]}]])
    sent = done(1, "send", [["send", 0, [0, 1]]])
    res = check_ops(numbered(read, sent), CheckOptions(sub_via="assign"))
    assert res["bad_error_types"] == ["G1c-realtime"], describe(res)
    assert_valid(
        check_ops(
            numbered(inv(1, "send", [["send", 0, 1]]), read, sent), CheckOptions(sub_via="assign")
        )
    )


def test_seek_to_beginning_on_the_invoke() -> None:
    ops = numbered(
        done(1, "send", [["send", 0, [0, 1]], ["send", 0, [1, 2]]]),
        inv(0, "assign", [0]),
        done(0, "assign", [0]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1], [1, 2]]}]]),
        inv(0, "assign", [0]) | {"seek_to_beginning": True},
        done(0, "assign", [0]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1], [1, 2]]}]]),
    )
    assert_valid(check_ops(ops, CheckOptions(sub_via="assign")))


def test_time_before_the_first_op() -> None:
    ops = [
        {"process": "nemesis", "type": "info", "f": "start-partition", "time": 5_000_000},
        {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]]},  # no time
        {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[0, 1]]}]]},
    ]
    assert_valid(check_ops(ops))


def reference_bad_cycle(ops: list[dict[str, Any]]) -> bool:
    """Is there a cycle of wr and realtime edges (docs/anomalies.md), by brute force?

    Vertices: data ops that committed (ok; info -- or never completed -- with a value
    an ok op read). wr: the writer of a value -> each committed op that read it.
    rt: an ok op -> every op invoked after it completed (positions = line order).
    """
    import networkx as nx

    pending: dict[Any, tuple[int, dict[str, Any]]] = {}
    recs: list[dict[str, Any]] = []
    for pos, o in enumerate(ops):
        if o["process"] == "nemesis":
            continue
        if o["type"] == "invoke":
            if o["process"] in pending:
                ip, io = pending.pop(o["process"])
                recs.append({"inv": ip, "comp": None, "type": "info", "op": io})
            pending[o["process"]] = (pos, o)
            continue
        ip, io = pending.pop(o["process"], (pos, o))
        if io["f"] != o["f"]:  # not this completion's invoke: that one never completed
            recs.append({"inv": ip, "comp": None, "type": "info", "op": io})
            ip, io = pos, o
        recs.append({"inv": ip, "comp": pos, "type": o["type"], "op": o, "invop": io})
    for ip, io in pending.values():
        recs.append({"inv": ip, "comp": None, "type": "info", "op": io})

    def sends(r: dict[str, Any]) -> list[tuple[str, Any]]:
        out = []
        for src in (r["op"], r.get("invop") or r["op"]):
            if src["f"] in ("send", "txn"):
                for m in src["value"] or []:
                    if m[0] == "send":
                        v = m[2][1] if isinstance(m[2], list) else m[2]
                        out.append((str(m[1]), v))
        return out

    def reads(r: dict[str, Any]) -> list[tuple[str, Any]]:
        if r["comp"] is None or r["op"]["f"] not in ("poll", "txn"):
            return []
        return [
            (str(k), v)
            for m in r["op"]["value"] or []
            if m[0] == "poll" and len(m) == 2
            for k, lst in m[1].items()
            for _o, v in lst
        ]

    ok_read = {kv for r in recs if r["type"] == "ok" for kv in reads(r)}
    committed = [
        r["op"]["f"] in ("send", "poll", "txn")
        and (r["type"] == "ok" or (r["type"] == "info" and any(s in ok_read for s in sends(r))))
        for r in recs
    ]
    writer: dict[tuple[str, Any], int] = {}
    for i in sorted(range(len(recs)), key=lambda i: recs[i]["comp"] is None):
        for s in sends(recs[i]):
            writer.setdefault(s, i)
    g: Any = nx.DiGraph()
    for i, r in enumerate(recs):
        if not committed[i]:
            continue
        for kv in reads(r):
            w = writer.get(kv)
            if w is not None and w != i and committed[w]:
                g.add_edge(w, i)
        if r["type"] == "ok" and r["comp"] is not None:
            for j, r2 in enumerate(recs):
                if committed[j] and r2["inv"] > r["comp"]:
                    g.add_edge(i, j)
    return any(len(c) > 1 for c in nx.strongly_connected_components(g))


def perturb(events: list[dict[str, Any]], rng: random.Random, n: int, first_proc: int) -> None:
    """Move n client data ops (invoke and completion) elsewhere, under new process numbers."""
    for t in range(n):
        starts = [
            i
            for i, e in enumerate(events)
            if e["type"] == "invoke" and e["f"] in ("send", "poll", "txn")
        ]
        if not starts:
            return
        i = rng.choice(starts)
        p = events[i]["process"]
        j = next((j for j in range(i + 1, len(events)) if events[j]["process"] == p), None)
        if j is None or events[j]["type"] == "invoke":
            continue
        comp = events.pop(j)
        invk = events.pop(i)
        a, b = sorted(rng.sample(range(len(events) + 1), 2))
        invk["process"] = comp["process"] = first_proc + t
        events.insert(b, comp)
        events.insert(a, invk)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=seeds, n=st.integers(1, 4), txn_p=st.sampled_from([0.5, 1.0]))
def test_cycle_search_matches_a_brute_force_reference(seed: int, n: int, txn_p: float) -> None:
    w = world_for(seed, n_keys=3, ticks=120, txn_p=txn_p, crash_p=0.02)
    rng = random.Random(seed)
    perturb(w.events, rng, n, 10_000)
    for t, e in enumerate(w.events):
        e["tick"] = t  # keep times in line order (see test_time_before_the_first_op)
    ops = render(w.events, Style())
    res = check_ops(ops, CheckOptions(ww_deps=True))
    want = reference_bad_cycle(ops)
    got = bool({"G1c", "G1c-realtime"} & set(res["bad_error_types"]))
    assert got == want, (want, res["bad_error_types"], describe(res))


def reference_lost(ops: list[dict[str, Any]]) -> set[tuple[str, Any]]:
    """(key, value) of lost writes by docs/anomalies.md: sends with a known offset, or
    placed where their value was read; invokes that never completed are info ops."""
    ok_read: set[tuple[str, Any]] = set()
    log: dict[str, dict[int, Any]] = {}
    comps = [o for o in ops if o["type"] != "invoke" and o["process"] != "nemesis"]
    # An invoke that never completed is an indeterminate (info) op with the invoke's value.
    pending: dict[Any, dict[str, Any]] = {}
    for o in ops:
        if o["process"] == "nemesis":
            continue
        if o["type"] == "invoke":
            pending[o["process"]] = o
        else:
            pending.pop(o["process"], None)
    comps += [{**o, "type": "info"} for o in pending.values()]
    for o in comps:
        if o["f"] in ("poll", "txn"):
            for m in o["value"]:
                if m[0] == "poll" and len(m) == 2:
                    for k, lst in m[1].items():
                        for off, v in lst:
                            log.setdefault(str(k), {})[off] = v
                            if o["type"] == "ok":
                                ok_read.add((str(k), v))
    committed_sends = []
    for o in comps:
        if o["f"] in ("send", "txn"):
            raw = [(str(m[1]), m[2]) for m in o["value"] if m[0] == "send"]
            ss = [(k, x[0], x[1]) for k, x in raw if isinstance(x, list) and x[0] is not None]
            # a send without a known offset sits where its value was read, if anywhere
            for k, x in raw:
                v = x[1] if isinstance(x, list) else x
                if isinstance(x, list) and x[0] is not None:
                    continue
                at = [off for off, v2 in log.get(k, {}).items() if v2 == v]
                if at:
                    ss.append((k, min(at), v))
            # an info op committed if an ok op read any value it sent (acknowledged or not)
            vals = [(k, x[1] if isinstance(x, list) else x) for k, x in raw]
            if o["type"] == "ok" or (o["type"] == "info" and any(kv in ok_read for kv in vals)):
                committed_sends.extend(ss)
                for k, off, v in ss:
                    log.setdefault(k, {}).setdefault(off, v)
    lost = set()
    for k, off, v in committed_sends:
        if (k, v) in ok_read:
            continue
        if any(o2 > off and (k, v2) in ok_read for o2, v2 in log.get(k, {}).items()):
            lost.add((k, v))
    return lost


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=seeds, drops=st.integers(1, 6))
def test_lost_writes_match_a_brute_force_reference(seed: int, drops: int) -> None:
    w = world_for(seed, n_keys=3, ticks=150, crash_p=0.02)
    rng = random.Random(seed)
    chunks = list(ok_poll_chunks(w.events, ok_only=False))
    for loc in rng.sample(chunks, min(drops, len(chunks))):
        recs = recs_at(w.events, loc)
        set_recs(w.events, loc, [r for r in recs if rng.random() < 0.7])
    ops = render(w.events, Style())
    res = check_ops(ops)
    got = {
        (e["key"], e["value"]) for e in res["anomalies"].get("lost-write", {}).get("examples", [])
    }
    want = reference_lost(ops)
    assert len(want) == res["anomalies"].get("lost-write", {}).get("count", 0), (want, got)
    assert got <= want
