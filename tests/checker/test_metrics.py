"""Metrics (checker/metrics.py): counts and latencies per f, info causes, realtime lag,
unseen over time, throughput and the downsampling of series.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from ktrial.tests.checker.common import live, run_timed
from ktrial.tests.histlines import (
    MS,
    Line,
    S,
    info,
    inv,
    nem,
    ok,
    op,
    pl,
    run,
    snd,
    timed_poll,
    timed_send,
)

INT64_MAX = 2**63 - 1


def metrics(res: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = res["metrics"]
    return out


def lag(res: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = res["metrics"]["realtime_lag"]
    return out


def test_realtime_lag_of_an_unread_assigned_key_counts_from_its_first_record(
    tmp_path: Path,
) -> None:
    # x gets offset 0 at 1 ms; consumer 1, assigned [x, y], reads only y at 5 ms:
    # it has read nothing of x, so it is 5 - 1 = 4 ms behind on x, 0 on y (nothing past
    # y's offset 0 ever existed). Consumer 2 (never assigned) reads x up to date at 7 ms.
    h = [
        inv(1, "assign", ["x", "y"], 0),
        ok(1, "assign", ["x", "y"], 0),
        *timed_send(0, 0, 1 * MS, "x", 0, 1),
        *timed_send(0, 1 * MS, 2 * MS, "y", 0, 2),
        *timed_poll(1, 5 * MS, 6 * MS, {"y": [[0, 2]]}),
        *timed_poll(2, 7 * MS, 8 * MS, {"x": [[0, 1]]}),
    ]
    rl = lag(run_timed(tmp_path, h))
    assert rl["worst"] == {"key": "x", "lag_ms": 4.0, "time_s": 0.005, "process": 1}
    assert rl["per_key"] == {"x": 4.0, "y": 0.0}
    assert rl["over_time"] == [[0.005, 4.0], [0.007, 0.0]]


def test_realtime_lag_with_null_offsets_holes_and_several_consumers(tmp_path: Path) -> None:
    # Three sends with unknown (null) offsets, acknowledged at 1, 3, 4 ms; the polls put
    # them at offsets 0, 2, 4 (markers between): dense positions 0, 1, 2, known to exist
    # from 1, 3, 4 ms. Consumer 1 (poll invoked at 10 ms) read position 0: 10 - 3 = 7 ms.
    # Consumer 2 (20 ms) read up to position 1: 20 - 4 = 16 ms. Consumer 3 read it all: 0.
    h = [
        *timed_send(0, 0, 1 * MS, "x", None, 1),
        *timed_send(0, 1 * MS, 3 * MS, "x", None, 2),
        *timed_send(0, 3 * MS, 4 * MS, "x", None, 3),
        *timed_poll(1, 10 * MS, 11 * MS, {"x": [[0, 1]]}),
        *timed_poll(2, 20 * MS, 21 * MS, {"x": [[0, 1], [2, 2]]}),
        *timed_poll(3, 30 * MS, 31 * MS, {"x": [[0, 1], [2, 2], [4, 3]]}),
    ]
    res = run_timed(tmp_path, h)
    assert res["valid"] is True
    rl = lag(res)
    assert rl["worst"] == {"key": "x", "lag_ms": 16.0, "time_s": 0.02, "process": 2}
    assert rl["per_key"] == {"x": 16.0}
    assert rl["over_time"] == [[0.01, 7.0], [0.02, 16.0], [0.03, 0.0]]


def test_realtime_lag_only_ok_polls_move_a_consumer_and_seek_restarts_it(tmp_path: Path) -> None:
    # x: offsets 0..2, known from 1, 2, 3 ms (ok sends). Consumer 1 reads offset 0 (ok,
    # invoked 10 ms: lag 10 - 2 = 8), then an info poll reads 1..2 (does not count: Jepsen
    # counts ok ops only), then an ok poll at 20 ms reads nothing new... it re-reads 0:
    # still at position 0, lag 20 - 2 = 18. Then assign [x] with seek_to_beginning and an
    # ok poll at 30 ms reading all three: lag 0. Consumer 1 stays at max 18 ms.
    h = [
        inv(1, "assign", ["x"], 0),
        ok(1, "assign", ["x"], 0),
        *timed_send(0, 0, 1 * MS, "x", 0, 1),
        *timed_send(0, 1 * MS, 2 * MS, "x", 1, 2),
        *timed_send(0, 2 * MS, 3 * MS, "x", 2, 3),
        *timed_poll(1, 10 * MS, 11 * MS, {"x": [[0, 1]]}),
        inv(1, "poll", [["poll"]], 12 * MS),
        op(1, "info", "poll", [pl({"x": [[1, 2], [2, 3]]})], 13 * MS, error="timeout"),
        *timed_poll(1, 20 * MS, 21 * MS, {"x": [[0, 1]]}),
        inv(1, "assign", ["x"], 25 * MS),
        ok(1, "assign", ["x"], 25 * MS, seek_to_beginning=True),
        *timed_poll(1, 30 * MS, 31 * MS, {"x": [[0, 1], [1, 2], [2, 3]]}),
    ]
    rl = lag(run_timed(tmp_path, h))
    assert rl["worst"] == {"key": "x", "lag_ms": 18.0, "time_s": 0.02, "process": 1}
    assert rl["over_time"] == [[0.01, 8.0], [0.02, 18.0], [0.03, 0.0]]


def test_realtime_lag_of_an_empty_poll_jepsen_docstring_example(tmp_path: Path) -> None:
    # jepsen.tests.kafka/realtime-lag's docstring, in ms: send x[0]=a at 1; poll reads it
    # at 2; send x[1]=b at 3; a poll invoked at 4 returns nothing -> lag 4 - 3 = 1 ms.
    h = [
        ok(0, "send", [snd("x", 0, 1)], 1 * MS),
        *timed_poll(1, 2 * MS, 2 * MS, {"x": [[0, 1]]}),
        ok(0, "send", [snd("x", 1, 2)], 3 * MS),
        *timed_poll(1, 4 * MS, 5 * MS, {"x": []}),
    ]
    rl = lag(run_timed(tmp_path, h))
    # time_s counts from the history's first op (1 ms here), as every ktrial series does
    assert rl["worst"] == {"key": "x", "lag_ms": 1.0, "time_s": 0.003, "process": 1}
    assert rl["per_key"] == {"x": 1.0}


def test_realtime_lag_of_a_starving_consumer_whose_polls_are_all_empty(tmp_path: Path) -> None:
    # Consumer 1 is assigned x; x[0] exists from 1 s; its polls, invoked at 10 s and 20 s,
    # return {} -> lags 9 s and 19 s (9000 and 19000 ms). Consumer 2 reads x at 30 s.
    h = [
        inv(1, "assign", ["x"], 0),
        ok(1, "assign", ["x"], 0),
        *timed_send(0, 0, 1 * S, "x", 0, 1),
        *timed_poll(1, 10 * S, 11 * S, {}),
        *timed_poll(1, 20 * S, 21 * S, {}),
        *timed_poll(2, 30 * S, 31 * S, {"x": [[0, 1]]}),
    ]
    rl = lag(run_timed(tmp_path, h))
    assert rl["worst"] == {"key": "x", "lag_ms": 19000.0, "time_s": 20.0, "process": 1}
    assert rl["over_time"] == [[10.0, 9000.0], [20.0, 19000.0], [30.0, 0.0]]
    assert rl["per_consumer"] == {"1": 19000.0, "2": 0.0}  # the stalest first
    assert list(rl["per_consumer"]) == ["1", "2"]


def test_realtime_lag_subscribe_forgets_positions(tmp_path: Path) -> None:
    # With subscribe the consumer's positions are forgotten (Jepsen): after subscribing,
    # keys come back only as they are read. Consumer 1 read x[0] (lag 10 - 2 = 8 ms),
    # subscribes, then reads y only: x is no longer counted, y is up to date -> 0.
    h = [
        *timed_send(0, 0, 1 * MS, "x", 0, 1),
        *timed_send(0, 1 * MS, 2 * MS, "x", 1, 2),
        *timed_send(0, 2 * MS, 3 * MS, "y", 0, 3),
        *timed_poll(1, 10 * MS, 11 * MS, {"x": [[0, 1]]}),
        inv(1, "subscribe", ["x", "y"], 12 * MS),
        ok(1, "subscribe", ["x", "y"], 12 * MS),
        *timed_poll(1, 20 * MS, 21 * MS, {"y": [[0, 3]]}),
    ]
    rl = lag(run_timed(tmp_path, h))
    assert rl["over_time"] == [[0.01, 8.0], [0.02, 0.0]]
    assert rl["per_key"] == {"x": 8.0, "y": 0.0}


def test_unseen_over_time_counts_after_each_ok_data_op(tmp_path: Path) -> None:
    # ok send 1 (1 ms) -> 1; info send 2 (2 ms) is not counted; fail poll reading 1
    # (3 ms) does not count as seen and adds no point; ok send 3 (4 ms) -> 2; ok poll
    # reads 1 and 2 (5 ms) -> 1 (2 was an info op's value); ok poll reads 4 before its
    # send is acknowledged (6 ms) -> 1; ok send 4 (7 ms) -> still 1; empty ok poll (8 ms)
    # adds no point. Final: 1 (value 3).
    h = [
        *timed_send(0, 0, 1 * MS, "x", 0, 1),
        inv(1, "send", [["send", "x", 2]], 0),
        op(1, "info", "send", [snd("x", None, 2)], 2 * MS, error="timeout"),
        inv(2, "poll", [["poll"]], 2 * MS),
        op(2, "fail", "poll", [pl({"x": [[0, 1]]})], 3 * MS),
        *timed_send(0, 3 * MS, 4 * MS, "x", 2, 3),
        *timed_poll(3, 4 * MS, 5 * MS, {"x": [[0, 1], [1, 2]]}),
        inv(0, "send", [["send", "x", 4]], 5 * MS),
        *timed_poll(4, 5 * MS, 6 * MS, {"x": [[3, 4]]}),
        ok(0, "send", [snd("x", 3, 4)], 7 * MS),
        *timed_poll(5, 7 * MS, 8 * MS, {}),
    ]
    res = run_timed(tmp_path, h)
    u = metrics(res)["unseen"]
    assert u["final"] == 1
    assert u["over_time"] == [[0.001, 1.0], [0.004, 2.0], [0.005, 1.0], [0.006, 1.0], [0.007, 1.0]]
    assert res["anomalies"]["unseen"]["count"] == 1
    assert res["anomalies"]["unseen"]["examples"][0]["values"] == [3]


def test_counts_per_f_and_info_causes(tmp_path: Path) -> None:
    h = [
        nem("start-partition", "majority", 0),
        inv(0, "send", [["send", "x", 1]], 0),
        op(0, "info", "send", [snd("x", None, 1)], 5 * MS, error={"type": "timeout", "m": "a"}),
        inv(1, "send", [["send", "x", 2]], 0),
        op(1, "info", "send", [snd("x", None, 2)], 7 * MS, error="timeout"),
        inv(2, "send", [["send", "x", 3]], 0),
        op(2, "info", "send", [snd("x", None, 3)], 9 * MS, error=["consumer-commit", "boom"]),
        inv(3, "send", [["send", "x", 4]], 0),
        op(3, "info", "send", [snd("x", None, 4)], 9 * MS),  # no error recorded
        inv(4, "txn", [["send", "x", 5]], 0),  # never completes
        inv(5, "poll", [["poll"]], 0),
        op(5, "fail", "poll", [pl({})], 3 * MS, error="refused"),
        op(6, "info", "crash", None, 10 * MS),  # info by construction: not a cause
        inv(7, "poll", [["poll"]], 0),  # superseded by the next invoke: never completed
        inv(7, "poll", [["poll"]], 1 * MS),
        ok(7, "poll", [pl({"x": [[0, 4]]})], 2 * MS),
        nem("stop-partition", None, 20 * MS),
    ]
    res = run_timed(tmp_path, h)
    m = metrics(res)
    assert m["counts"] == {
        "send": {"ok": 0, "fail": 0, "info": 4},
        "poll": {"ok": 1, "fail": 1, "info": 1},
        "crash": {"ok": 0, "fail": 0, "info": 1},
        "txn": {"ok": 0, "fail": 0, "info": 1},
    }
    assert m["info_causes"] == {
        "timeout": 2,
        "consumer-commit": 1,
        "no error recorded": 1,
        "never completed": 2,
    }
    lat = m["latency_ms"]
    assert lat["send"] == {"info": {"count": 4, "p50": 9.0, "p90": 9.0, "p99": 9.0, "max": 9.0}}
    assert lat["poll"]["ok"] == {"count": 1, "p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0}
    assert lat["poll"]["fail"]["max"] == 3.0
    assert "txn" not in lat  # never completed: no latency
    st = res["stats"]
    assert (st["ops"], st["client_ops"], st["nemesis_ops"]) == (17, 9, 2)
    assert st["sends"] == {"ok": 0, "fail": 0, "info": 4, "values": 4}
    assert st["polls"] == {"ok": 1, "fail": 1, "info": 1, "records": 1}
    assert st["txns"] == {"committed": 0, "aborted": 0, "info": 1}
    assert (st["reads"], st["writes"], st["keys"]) == (1, 5, 1)
    assert st["duration_s"] == 0.02


def test_latency_quantiles_jepsen_floor_index(tmp_path: Path) -> None:
    # Ten ok sends with latencies 1..10 ms: sorted xs, quantile q = xs[floor(q n)]
    # (jepsen.checker.perf's index): p50 = xs[5] = 6, p90 = xs[9] = 10, p99 = 10.
    h: list[Line] = []
    for i in range(10):
        h += timed_send(0, 100 * i * MS, (100 * i + i + 1) * MS, "x", i, i)
    h += timed_poll(1, 2 * S, 2 * S + MS, {"x": [[i, i] for i in range(10)]})
    res = run_timed(tmp_path, h)
    assert metrics(res)["latency_ms"]["send"]["ok"] == {
        "count": 10, "p50": 6.0, "p90": 10.0, "p99": 10.0, "max": 10.0}  # fmt: skip
    c = live(res)["commit_latency_ms"]
    assert c == {"f": "send", "n": 10, "p50": 6.0, "p90": 10.0, "p99": 10.0, "max": 10.0}
    # e2e: value i acknowledged at (101 i + 1) ms, read at 2001 ms
    e2e = sorted(2001 - (101 * i + 1) for i in range(10))
    assert live(res)["e2e_latency_ms"] == {
        "n": 10, "p50": float(e2e[5]), "p90": float(e2e[9]), "p99": float(e2e[9]),
        "max": float(e2e[9]), "unread": 0, "read_before_ack": 0}  # fmt: skip


def _odd_histories() -> dict[str, list[Line]]:
    epoch = 1_700_000_000 * S  # a tool writing Unix-epoch nanoseconds
    return {
        "empty": [],
        "only-nemesis": [nem("start-partition", "majority", 0), nem("stop-partition", None, MS)],
        "all-failed": [
            inv(0, "send", [["send", "x", 1]], 0),
            op(0, "fail", "send", [["send", "x", 1]], MS),
            inv(1, "poll", [["poll"]], 0),
            op(1, "fail", "poll", [pl({})], MS),
        ],
        "one-ok-send": [ok(0, "send", [snd("x", 0, 1)], 0)],
        "only-invokes": [inv(0, "send", [["send", "x", 1]], 0), inv(1, "poll", [["poll"]], 1)],
        "equal-times": [
            *timed_send(0, 7, 7, "x", 0, 1),
            *timed_poll(1, 7, 7, {"x": [[0, 1]]}),
            nem("stop-partition", None, 7),
            nem("node-stats", {"n1": {"rss_bytes": 5, "pid": 1}}, 7),
            nem("node-stats", {"n1": {"rss_bytes": 5, "pid": 1}}, 7),
            nem("node-stats", {"n1": {"rss_bytes": 5, "pid": 1}}, 7),
        ],
        "epoch-ns": [
            *timed_send(0, epoch, epoch + 5 * MS, "x", 0, 1),
            *timed_poll(1, epoch + 6 * MS, epoch + 8 * MS, {"x": [[0, 1]]}),
            nem("stop-partition", None, epoch + 7 * MS),
        ],
        "huge-span": [
            *timed_send(0, 0, 1, "x", 0, 1),
            nem("stop-partition", None, 2),
            *timed_poll(1, INT64_MAX - 4, INT64_MAX, {"x": [[0, 1]]}),
        ],
    }


@pytest.mark.parametrize("name", list(_odd_histories()))
def test_odd_histories_give_finite_json_metrics(tmp_path: Path, name: str) -> None:
    res = run_timed(tmp_path, _odd_histories()[name])
    m = metrics(res)
    for key in ("counts", "info_causes", "latency_ms", "realtime_lag", "unseen", "liveness"):
        assert key in m
    assert res["stats"]["ops"] == len(_odd_histories()[name])

    def walk(x: Any) -> None:
        if isinstance(x, float):
            assert math.isfinite(x) and x >= 0, (name, x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(m["realtime_lag"])
    walk(m["latency_ms"])
    walk(m["unseen"])
    if name == "epoch-ns":  # times only shift: ack 5 ms after invoke, read 3 ms after ack
        assert res["valid"] is True
        assert live(res)["e2e_latency_ms"]["max"] == 3.0
        assert res["stats"]["duration_s"] == 0.008


def test_times_near_int64_max_do_not_crash(tmp_path: Path) -> None:
    top = INT64_MAX
    h = [
        *timed_send(0, top - 10, top - 5, "x", 0, 1),
        *timed_poll(1, top - 4, top, {"x": [[0, 1]]}),
    ]
    res = run_timed(tmp_path, h)
    assert res["valid"] is True
    assert live(res)["e2e_latency_ms"]["max"] == 0.0  # 5 ns


@pytest.mark.parametrize("series", ["unseen", "realtime_lag"])
def test_over_time_series_keep_their_last_point_and_peak(tmp_path: Path, series: str) -> None:
    n = 2002  # downsampled to 2000 points
    h: list[Line] = []
    if series == "unseen":
        # n ok sends nobody reads: unseen is 1, 2, ..., n; the final count n is the peak
        h += [ok(0, "send", [snd("x", i, i)], (i + 1) * MS) for i in range(n)]
        final: float = n
    else:
        # x[0] and x[1] exist from 1 ms; a consumer keeps re-reading x[0], poll i invoked
        # at (10 + i) ms: lag 9 + i ms, growing; the last poll's lag is the peak
        h += [ok(0, "send", [snd("x", 0, 0), snd("x", 1, 1)], 1 * MS)]
        h += [ok(1, "assign", ["x"], 2 * MS)]
        for i in range(n):
            h += timed_poll(1, (10 + i) * MS, (10 + i) * MS, {"x": [[0, 0]]})
        final = 9.0 + (n - 1)
    res = run_timed(tmp_path, h)
    pts = metrics(res)[series]["over_time"]
    assert len(pts) <= 2000
    assert max(y for _x, y in pts) == final
    assert pts[-1][1] == final


def test_results_metrics_include_throughput(tmp_path: Path) -> None:
    h: list[Line] = []
    for i in range(20):  # 20 ok sends and 20 ok polls over 10 s
        h += timed_send(0, i * 0.5 * S, (i * 0.5 + 0.1) * S, "x", i, i)
        h += timed_poll(1, (i * 0.5 + 0.2) * S, (i * 0.5 + 0.3) * S, {"x": [[i, i]]})
    res = run_timed(tmp_path, h)
    assert "throughput" in metrics(res)


def test_info_causes_keep_different_error_objects_apart(tmp_path: Path) -> None:
    # What a Java kafka-clients worker might record: the exception class and message.
    errs = [
        {"exception": "org.apache.kafka.common.errors.TimeoutException", "message": "expired"},
        {"exception": "org.apache.kafka.common.errors.NotLeaderOrFollowerException"},
    ]
    h: list[Line] = []
    for i, e in enumerate(errs):
        h += [inv(i, "send", [["send", "x", i]], 0)]
        h += [op(i, "info", "send", [snd("x", None, i)], MS, error=e)]
    causes = metrics(run_timed(tmp_path, h))["info_causes"]
    assert len(causes) == 2 and sum(causes.values()) == 2
    assert "exception" not in causes


def test_info_causes_group_equal_causes_across_string_and_object_forms(tmp_path: Path) -> None:
    errs: list[Any] = [
        "timeout",
        {"type": "timeout", "detail": "x"},
        {"cause": "Broker: Not leader for partition"},
        ["consumer-commit", "Commit cannot be completed"],
        "x" * 200,  # long strings are cut to 80 characters
    ]
    h: list[Line] = []
    for i, e in enumerate(errs):
        h += [inv(i, "send", [["send", "x", i]], 0)]
        h += [op(i, "info", "send", [snd("x", None, i)], MS, error=e)]
    causes = metrics(run_timed(tmp_path, h))["info_causes"]
    assert causes == {
        "timeout": 2,
        "Broker: Not leader for partition": 1,
        "consumer-commit": 1,
        "x" * 80: 1,
    }


def _reference(lines: list[Line]) -> tuple[dict[str, dict[str, int]], dict[str, list[float]], int]:
    """Counts per f and type, ok latencies per f (ms), and values ok-sent but never ok-read,
    computed naively from the documented pairing rules."""
    counts: dict[str, dict[str, int]] = {}
    lat: dict[str, list[float]] = {}
    pending: dict[Any, Line] = {}
    sent: set[tuple[str, Any]] = set()
    read: set[tuple[str, Any]] = set()

    def count(f: str, t: str) -> None:
        counts.setdefault(f, {"ok": 0, "fail": 0, "info": 0})[t] += 1

    for d in lines:
        if d["process"] == "nemesis":
            continue
        if d["type"] == "invoke":
            if d["process"] in pending:
                count(pending[d["process"]]["f"], "info")
            pending[d["process"]] = d
            continue
        i = pending.pop(d["process"], None)
        assert i is None or i["f"] == d["f"]
        count(d["f"], d["type"])
        if d["type"] == "ok":
            lat.setdefault(d["f"], []).append((d["time"] - (i or d)["time"]) / 1e6)
            for m in d["value"] if d["f"] in ("send", "poll", "txn") else ():
                if m[0] == "send":
                    v = m[2][1] if isinstance(m[2], list) else m[2]  # [offset, v] or v
                    sent.add((str(m[1]), v))
                else:
                    read.update((str(k), v) for k, recs in m[1].items() for _o, v in recs)
    for i in pending.values():
        count(i["f"], "info")
    return counts, lat, len(sent - read)


@pytest.mark.parametrize(
    "params",
    [
        {"seed": 1},
        {"seed": 2, "truncate": True, "nemesis_p": 0.05},
        {"seed": 3, "tail_invokes": 3, "crash_p": 0.1, "info_p": 0.2},
        {"seed": 4, "sub_via": "subscribe", "null_offset_p": 0.3},
    ],
    ids=["plain", "truncated", "tail-invokes", "subscribe-null-offsets"],
)
def test_counts_latency_unseen_match_a_naive_reference(
    tmp_path: Path, params: dict[str, Any]
) -> None:
    from ktrial.testing.gen import GenParams, generate

    g = generate(GenParams(ops=150, **params))
    res = run_timed(tmp_path, g.ops)
    counts, lat, unseen = _reference(g.ops)
    m = metrics(res)
    assert m["counts"] == counts
    for f, xs in lat.items():
        xs.sort()
        n = len(xs)
        got = m["latency_ms"][f]["ok"]
        assert got["count"] == n and got["max"] == round(xs[-1], 3)
        assert got["p50"] == round(xs[n // 2], 3)
    assert m["unseen"]["final"] == unseen
    assert res["stats"]["client_ops"] == sum(sum(c.values()) for c in counts.values())
    assert res["stats"]["ops"] == len(g.ops)
    assert res["stats"]["nemesis_ops"] == sum(d["process"] == "nemesis" for d in g.ops)


def test_realtime_lag_forgets_positions_at_a_crash(tmp_path: Path) -> None:
    """Mutant: realtime_lag skips non-ok ops before its crash branch, so a crash forgets
    no position.

    docs/anomalies.md, realtime_lag: '`subscribe` and `crash` forget them'. The crash
    op is `info` (docs/history-format.md): realtime_lag once skipped every non-ok op before its
    `r.f == "crash"` branch, so after the crash the process's empty polls were still
    charged with key 1 (worst 5 ms)."""
    lines = [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(0, "send", [snd(1, 1, 11)]),
        ok(1, "assign", [1]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
        info(1, "crash", None),
        ok(1, "poll", [pl({})]),
        ok(1, "poll", [pl({})]),
    ]
    lag = run(tmp_path, lines)["metrics"]["realtime_lag"]
    # the poll at index 3 (invoked at 3 ms) had read offset 0; offset 1 existed since 1 ms
    assert lag["worst"]["lag_ms"] == 2.0
    assert lag["per_consumer"] == {"1": 2.0}


def test_info_cause_prefers_type_then_cause_and_cuts_at_80() -> None:
    """docs/anomalies.md: the error object's `type`, `cause`, `name`, ... field, cut to 80
    characters. Kills metrics.py:info_cause skipping `cause`, and not cutting."""
    from ktrial.checker.metrics import info_cause

    assert info_cause({"name": "n", "cause": "c"}) == "c"
    assert info_cause({"cause": "c", "type": "t"}) == "t"
    assert info_cause({"cause": "z" * 100}) == "z" * 80
    assert info_cause("e" * 100) == "e" * 80


def test_downsample_keeps_the_peak_of_each_run() -> None:
    """Kills metrics.py:downsample keeping each run's first point instead of its peak,
    or dropping the last run."""
    from ktrial.checker.metrics import downsample

    pts: list[tuple[float, float]] = [(0, 1), (1, 5), (2, 2), (3, 0), (4, 1), (5, 7)]
    assert downsample(pts, 3) == [[1, 5], [2, 2], [5, 7]]
    assert downsample(pts, 6) == [[x, y] for x, y in pts]
    many = [(float(i), float(i % 10)) for i in range(5000)]
    out = downsample(many)
    assert len(out) == 2000
    assert max(y for _x, y in out) == 9.0
    assert out[-1][0] >= 4997.0  # the last run is kept


def test_downsample_always_keeps_the_last_point() -> None:
    """Mutant: downsample ends a series at its last run's peak, not at its last point.

    docs/anomalies.md, Metrics: over_time series are cut to at most 2,000 points 'by
    keeping the highest value of each run of points (...; the last point is always
    kept)'. An unseen count that peaks and then drains to 0 must still end at 0 on the
    plot."""
    from ktrial.checker.metrics import downsample

    pts = [(float(i), 100.0) for i in range(2500)] + [(2500.0, 0.0)]
    out = downsample(pts)
    assert len(out) <= 2000
    assert out[-1] == [2500.0, 0.0]


def test_throughput_of_a_sub_second_run_is_per_second(tmp_path: Path) -> None:
    """docs/anomalies.md: ok data ops per second over the run (earliest to latest
    `time`). Three ok ops over 2 ms are 1,500 ops/s.

    Kills metrics.py:throughput flooring the span at 1 s."""
    lines = [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(0, "send", [snd(1, 1, 11)]),
        ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
    ]
    tp = run(tmp_path, lines)["metrics"]["throughput"]
    assert tp["ok_data_per_s"] == 1500.0
    assert tp["ok_per_s_by_f"] == {"poll": 500.0, "send": 1000.0}
