"""Liveness (checker/liveness.py): end-to-end and commit latency, starvation windows,
recovery after faults, stuck partitions and memory growth, with healthy histories
that must raise no violation and odd ones that must give sane numbers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from ktrial.checker import CheckOptions, check, options_from_test_json
from ktrial.checker.liveness import quantiles
from ktrial.cli import cli
from ktrial.testing.gen import GenParams, generate
from ktrial.tests.checker.common import META, M, live, run_main, run_timed
from ktrial.tests.histlines import (
    Line,
    S,
    Timeline,
    examples,
    inv,
    nem,
    ok,
    snd,
    timed_poll,
    timed_send,
)

MIB = 1024 * 1024


Out = tuple[int, int | None, int]  # (output key, output offset, output value)


def vtype_set(res: dict[str, Any]) -> set[str]:
    return {v["type"] for v in live(res)["violations"]}


def negatives(obj: Any, path: str = "") -> list[tuple[str, float]]:
    """Negative numbers anywhere in `obj` (none of the liveness numbers may be < 0)."""
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in negatives(v, f"{path}/{k}")]
    if isinstance(obj, list):
        return [x for i, v in enumerate(obj) for x in negatives(v, f"{path}[{i}]")]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool) and obj < 0:
        return [(path, obj)]
    return []


def steady_between(
    h: Timeline, a: float, b: float, o: int = 0, per_s: int = 10, key: int = 1
) -> int:
    """Producer 0 sends `per_s` values/s to `key` from a to b; consumer 1 reads each
    50 ms after its ack. Returns the next offset."""
    for i in range(round((b - a) * per_s)):
        t = a + i / per_s
        h.send(0, t, t + 0.01, key, 1000 + o, o)
        h.poll(1, t + 0.01, t + 0.06, {str(key): [[o, 1000 + o]]})
        o += 1
    return o


def assert_healthy(res: dict[str, Any]) -> None:
    assert res["valid"] is True, (res["error_types"], live(res)["violations"])
    assert live(res)["violations"] == []
    assert all(c["ok"] and not c["bad"] for c in live(res)["checks"].values())
    json.dumps(res, allow_nan=False)
    assert negatives(live(res)) == []


def test_healthy_fault_window_recovery_and_final_drain() -> None:
    h = Timeline()
    o = steady_between(h, 0, 30)
    h.nem(30.0, "start-partition", {"n1": ["n2", "n3"]})
    for i in range(10):  # sends time out during the partition
        h.add(30.0 + i, process=0, type="invoke", f="send", value=[["send", 1, 5000 + i]])
        h.add(30.9 + i, process=0, type="fail", f="send", value=[["send", 1, 5000 + i]])
    h.nem(40.0, "stop-partition", {})
    o = steady_between(h, 40.5, 90, o)
    h.nem(90.2, "heal", {})  # the final heal, then the drain (polls only)
    h.pair(9, 95.0, 95.1, "assign", [1], [1], seek_to_beginning=True)
    h.poll(9, 95.1, 96.0, {"1": [[i, 1000 + i] for i in range(o)]})
    res = h.check(liveness_bad=True)
    assert_healthy(res)
    ev = live(res)["recovery"]["events"]
    assert [e["f"] for e in ev] == ["stop-partition", "heal"]
    # nothing in flight at the heal: timed from the first send after it (40.5 s, done
    # 0.01 s later), not from the heal
    assert ev[0]["send_s"] == pytest.approx(0.01) and ev[1]["send_s"] is None


@pytest.mark.parametrize("t0", [0.0, 1e6], ids=["from-0", "from-11-days"])
def test_healthy_idle_periods_without_nemesis(t0: float) -> None:
    h = Timeline(t0)
    o = steady_between(h, 0, 25)
    o = steady_between(h, 200, 230, o)  # 175 s without any traffic
    res = h.check(liveness_bad=True)
    assert_healthy(res)
    assert live(res)["starvation"]["windows_judged"] >= 4


def test_healthy_single_process_transactions() -> None:
    h = Timeline(t0=3.0)
    for i in range(400):  # one process: a txn, then a poll reading it back
        t = i / 10
        h.pair(0, t, t + 0.03, "txn", [["send", 1, i]], [["send", 1, [2 * i, i]]])
        h.poll(0, t + 0.04, t + 0.09, {"1": [[2 * i, i]]})
    res = h.check(liveness_bad=True)
    assert_healthy(res)
    assert live(res)["commit_latency_ms"]["f"] == "txn"


def test_healthy_copy_run_has_no_liveness_violation() -> None:
    h = Timeline()
    inp = {0: 0, 1: 0}
    out = {2: 0, 3: 0}
    drain: dict[str, list[list[int]]] = {"0": [], "1": [], "2": [], "3": []}
    for p in (0, 1, 2):
        h.subscribe(p, 0.0, [0, 1])
    for step in range(1, 601):  # 10 input values/s for 60 s, each copied 0.1 s later
        t = step / 10
        k, v = step % 2, step
        h.send(1000, t, t + 0.01, k, v, inp[k])
        copied: list[Out] = [(k + 2, out[k + 2], step * M + v)]
        h.copy(step % 3, t + 0.02, t + 0.1, {str(k): [[inp[k], v]]}, copied)
        drain[str(k)].append([inp[k], v])
        drain[str(k + 2)].append([out[k + 2], step * M + v])
        inp[k] += 1
        out[k + 2] += 2  # commit markers
    h.nem(61.0, "heal", {})
    h.drain(90, 66.0, drain)
    res = h.check(META, liveness_bad=True)
    assert_healthy(res)


def test_idle_after_a_heal_is_not_a_slow_recovery() -> None:
    h = Timeline()
    o = steady_between(h, 0, 10)
    h.nem(10.0, "kill", {"node": "n1"})
    h.nem(20.0, "start", {"node": "n1"})
    steady_between(h, 100, 130, o)  # traffic resumes 80 s after the heal and works at once
    res = h.check(liveness_bad=True)
    assert "slow-recovery" not in vtype_set(res), live(res)["violations"]


def test_stuck_metric_is_never_negative() -> None:
    h = Timeline()
    h.send(0, 0.0, 100.0, 1, 10, None, typ="info")  # timed out at 100 s
    h.poll(1, 1.0, 2.0, {"1": [[0, 10]]})  # ... but its value was read at 2 s
    res = h.check(liveness_bad=True)
    assert res["valid"] is True
    assert negatives(live(res)) == []


def test_odd_histories_give_serialisable_sane_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases: dict[str, Timeline] = {}
    h = Timeline()
    h.nem(0.0, "node-stats", {"n1": {"rss_bytes": 1}})
    h.nem(5.0, "heal", {})
    cases["nemesis-only"] = h
    h = Timeline()
    h.add(0.0, process=0, type="invoke", f="send", value=[["send", 1, 1]])
    cases["invoke-only"] = h
    h = Timeline(t0=7.5)
    h.poll(1, 1.0, 2.0, {"1": [[0, 10]]})  # a read of a value nobody wrote
    h.nem(0.5, "resume", {})
    h.nem(1.0, "node-stats", {"n1": {"rss_bytes": 0}, "n2": "garbage", "n3": {"rss_bytes": None}})
    cases["read-only"] = h
    h = Timeline()
    h.nem(0.0, "heal", {})
    h.send(0, 10.0, 10.0, 1, 10, 0)  # zero-length op
    h.poll(1, 10.0, 10.0, {"1": [[0, 10]]})
    for i, r in enumerate([100, 0, 300]):
        h.nem(float(i), "node-stats", {"n1": {"rss_bytes": r}})
    cases["zero-times"] = h
    for name, h in cases.items():
        d = h.write(tmp_path / name)
        code, _out, err = run_main(["check", str(d), "--liveness-bad"], capsys)
        assert code in (0, 2), (name, err)
        res = json.loads((d / "results.json").read_text())
        json.dumps(res, allow_nan=False)
        assert negatives(live(res)) == [], name
        for q in ("e2e_latency_ms", "commit_latency_ms"):
            for v in live(res)[q].values():
                assert not (isinstance(v, float) and math.isnan(v))


def test_real_violations_are_flagged_and_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = Timeline(t0=500.0)
    o = steady_between(h, 0, 20)
    # 20-40 s: producers carry on, consumer 1 gets nothing; it catches up at 45 s
    start = o
    for i in range(200):
        t = 20 + i / 10
        h.send(0, t, t + 0.01, 1, 1000 + o, o)
        o += 1
    h.poll(1, 44.0, 45.0, {"1": [[i, 1000 + i] for i in range(start, o)]})
    # the partition begins well after the values of 20 s were overdue (20 s + the 10 s
    # lag allowance), later than its allowance's lead (one lag allowance, 10 s) reaches
    # back: it does not excuse a starvation that began before it
    h.nem(41.0, "start-partition", {"n1": ["n2"]})
    h.nem(45.0, "stop-partition", {})
    for i in range(8):  # key 2 refuses sends for 75 s after the heal, then one lands
        h.add(45.5 + 10 * i, process=2, type="invoke", f="send", value=[["send", 2, 9000 + i]])
        h.add(46.0 + 10 * i, process=2, type="fail", f="send", value=[["send", 2, 9000 + i]])
    steady_between(h, 45.0, 130.0, o)
    h.send(3, 10.0, 10.1, 3, 7, 4)  # key 3: value 7 at offset 4, never read
    for i in range(6):  # node n2's RSS: 100 MiB -> 400 MiB, +3 MiB/s all along; n1 flat
        rss = {"n1": {"rss_bytes": 400 * MIB}, "n2": {"rss_bytes": (100 + 60 * i) * MIB}}
        h.nem(20.0 * i, "node-stats", rss)
    d = h.write(tmp_path / "run", {"liveness_bad": True})
    code, _out, _err = run_main(["check", str(d)], capsys)
    res = json.loads((d / "results.json").read_text())
    assert code == 1
    assert {"starvation", "stuck-partition", "memory-growth", "unseen"} <= set(
        res["bad_error_types"]
    )
    (st,) = examples(res, "starvation")
    # the stall inflates the p99 (16% of the values), so the allowance is capped at one
    # window and the second half of the stall (read at 45 s <= 40 + 10 s) is excused
    assert st["from_s"] == 20.0 and st["to_s"] in (30.0, 40.0)
    assert st["consumed"] < st["offered"] and "consumers starved from 20 s" in st["explanation"]
    assert live(res)["starvation"]["lag_allowance_s"] == 10.0
    stuck = {e["key"]: e for e in examples(res, "stuck-partition")}
    assert stuck["3"]["value"] == 7 and stuck["3"]["offset"] == 4
    assert "never read" in stuck["3"]["explanation"] and "offset 4" in stuck["3"]["explanation"]
    (mem,) = examples(res, "memory-growth")
    # judged on the later half (60-100 s): +3 MiB/s x 40 s
    assert mem["node"] == "n2" and "+120 MiB in that window" in mem["explanation"]
    assert negatives(live(res)) == []
    json.dumps(res, allow_nan=False)


def test_slow_recovery_flagged_and_explained() -> None:
    h = Timeline(t0=12.0)
    o = steady_between(h, 0, 10)
    h.nem(10.0, "pause", {"node": "n1"})
    h.nem(20.0, "resume", {"node": "n1"})
    for i in range(7):  # attempts right after the heal keep failing until 90 s
        h.add(20.5 + 10 * i, process=0, type="invoke", f="send", value=[["send", 1, 8000 + i]])
        h.add(29.5 + 10 * i, process=0, type="info", f="send", value=[["send", 1, 8000 + i]])
    steady_between(h, 90, 100, o)
    res = h.check(liveness_bad=True)
    (v,) = examples(res, "slow-recovery")
    # timed from the first attempt after the heal (20.5 s) to the first success (90.01 s)
    assert v["f"] == "resume" and v["time_s"] == 20.0 and v["send_s"] == pytest.approx(69.51)
    assert "sends took 69.5 s" in v["explanation"] and "threshold 60 s" in v["explanation"]


def test_recovery_clock_starts_at_the_heal_when_attempts_were_in_flight(tmp_path: Path) -> None:
    # Heal at 10 s with a send in flight (invoked 9 s, ok at 15 s: invoked before the
    # heal, so not a recovery). The first send invoked after the heal is ok at 16.5 s:
    # send_s = 16.5 - 10 = 6.5. Its value is first read at 20 s; the first poll after
    # the heal began at 12 s (none in flight at 10 s): read_s = 20 - max(10, 12) = 8.
    h = [
        inv(0, "send", [["send", "x", 1]], 9 * S),
        nem("stop-partition", None, 10 * S),
        *timed_poll(1, 12 * S, 13 * S, {}),
        ok(0, "send", [snd("x", 0, 1)], 15 * S),
        *timed_send(0, 16 * S, 16.5 * S, "x", 1, 2),
        *timed_poll(1, 19 * S, 20 * S, {"x": [[0, 1], [1, 2]]}),
    ]
    res = run_timed(tmp_path, h)
    rec = live(res)["recovery"]
    assert rec["heals"] == 1 and rec["max_send_s"] == 6.5 and rec["max_read_s"] == 8.0
    assert rec["events"][0] == {
        "f": "stop-partition", "index": 1, "time_s": 1.0, "value": None,
        "send_s": 6.5, "read_s": 8.0}  # fmt: skip
    # acks at 15 and 16.5 s, both first read at 20 s: 5000 and 3500 ms
    e2e = live(res)["e2e_latency_ms"]
    assert (e2e["n"], e2e["p50"], e2e["max"]) == (2, 5000.0, 5000.0)
    assert live(res)["stuck_partitions"]["max_unread_s"] == 5.0


def test_starvation_window_boundary_by_hand(tmp_path: Path) -> None:
    # Window 0 (0-10 s) offers 20 values; the allowance is set to 1 s, so a value counts
    # if read by 11 s. 18 are read at 9.5 s, one at exactly 11 s (in time), one at
    # 11 s + 1 ns (late): 19/20 = 0.95 < 0.97. The last ack is at 25 s >= 11 s, so the
    # window is judged; window 2 (20-30 s) offers 1 value: not judged.
    h: list[Line] = []
    for i in range(20):
        h += timed_send(0, i * 0.4 * S, (i * 0.4 + 0.1) * S, "x", i, i)
    h += timed_poll(1, 9.4 * S, 9.5 * S, {"x": [[i, i] for i in range(18)]})
    h += timed_poll(1, 10.9 * S, 11 * S, {"x": [[18, 18]]})
    h += timed_poll(1, 10.95 * S, 11 * S + 1, {"x": [[19, 19]]})
    h += timed_send(0, 24.9 * S, 25 * S, "x", 20, 20)
    h += timed_poll(1, 25.1 * S, 25.2 * S, {"x": [[20, 20]]})
    res = run_timed(tmp_path, h, starvation_lag_s=1.0)
    st = live(res)["starvation"]
    assert (st["windows_judged"], st["min_ratio"], st["lag_allowance_s"]) == (1, 0.95, 1.0)
    (v,) = [v for v in live(res)["violations"] if v["type"] == "starvation"]
    assert (v["from_s"], v["to_s"], v["offered"], v["consumed"], v["ratio"]) == (
        0.0, 10.0, 20, 19, 0.95)  # fmt: skip
    assert "19 (95.0%)" in v["explanation"] and "of 20 values" in v["explanation"]
    assert res["valid"] is True  # liveness is not bad by default
    res = run_timed(tmp_path, h, starvation_lag_s=1.0, liveness_bad=True)
    assert res["valid"] is False and "starvation" in res["bad_error_types"]


def test_stuck_partition_until_the_end_of_the_history(tmp_path: Path) -> None:
    # y's value 7 (offset 3) is acknowledged at 2 s and never read; the history ends at
    # 50 s with a nemesis op: stuck for 48 s > 30 s. x's value waited 1 s.
    h = [
        *timed_send(0, 0, 1 * S, "x", 0, 1),
        *timed_send(0, 1 * S, 2 * S, "y", 3, 7),
        *timed_poll(1, 1.5 * S, 2 * S, {"x": [[0, 1]]}),
        nem("stop-partition", None, 50 * S),
    ]
    res = run_timed(tmp_path, h)
    sp = live(res)["stuck_partitions"]
    assert sp["max_unread_s"] == 48.0 and sp["stuck_keys"] == 1
    (k,) = sp["keys"]
    assert k["key"] == "y" and k["value"] == 7 and k["offset"] == 3
    assert (k["acked_s"], k["read_s"], k["stuck_s"]) == (2.0, None, 48.0)
    assert "offset 3" in k["explanation"] and "never read" in k["explanation"]


def vtypes(res: dict[str, Any]) -> list[str]:
    return [v["type"] for v in live(res)["violations"]]


def steady(h: Timeline, seconds: int, per_s: int = 10, lag: float = 0.05, key: str = "1") -> int:
    """A producer sending `per_s` values a second to `key` and a consumer reading each
    `lag` s after its ack; returns the next free offset."""
    o = 0
    for i in range(seconds * per_s):
        t = i / per_s
        h.send(0, t, t + 0.01, key, 1000 + o, o)
        h.poll(1, t + 0.01, t + 0.01 + lag, {key: [[o, 1000 + o]]})
        o += 1
    return o


def test_e2e_and_commit_latency_exact() -> None:
    h = Timeline()
    # acks at 1.0, 1.2, 1.5 (txn commits); first reads at 1.1, 1.5, 3.5; value 13 never read
    h.txn(0, 0.9, 1.0, [("1", 10, 0)])
    h.txn(0, 1.1, 1.2, [("1", 11, 1), ("2", 12, 0)])
    h.txn(0, 1.3, 1.5, [("2", 13, 1)])
    h.poll(1, 1.05, 1.1, {"1": [[0, 10]]})
    h.poll(1, 1.3, 1.5, {"1": [[1, 11]]})
    h.poll(2, 3.0, 3.5, {"2": [[0, 12]]})
    h.poll(2, 3.6, 3.7, {"1": [[0, 10]]})  # a re-read: not a first read
    m = live(h.check())
    e2e = m["e2e_latency_ms"]
    # 100 ms (10), 300 ms (11), 2300 ms (12)
    assert e2e == {"n": 3, "p50": 300.0, "p90": 2300.0, "p99": 2300.0, "max": 2300.0,
                   "unread": 1, "read_before_ack": 0}  # fmt: skip
    c = m["commit_latency_ms"]
    assert c["f"] == "txn" and c["n"] == 3 and c["p50"] == 100.0 and c["max"] == 200.0


def test_commit_latency_of_sends_without_txns_and_reads_before_ack() -> None:
    h = Timeline()
    h.send(0, 0.0, 0.5, "1", 10, 0)
    h.poll(1, 0.1, 0.2, {"1": [[0, 10]]})  # read before the producer heard the ack
    m = live(h.check())
    assert m["commit_latency_ms"]["f"] == "send" and m["commit_latency_ms"]["max"] == 500.0
    assert m["e2e_latency_ms"]["read_before_ack"] == 1 and m["e2e_latency_ms"]["max"] == 0.0


def test_quantiles_nearest_rank() -> None:
    assert quantiles([float(x) for x in range(1, 101)]) == {
        "n": 100, "p50": 51.0, "p90": 91.0, "p99": 100.0, "max": 100.0}  # fmt: skip
    assert quantiles([])["p99"] is None


def test_healthy_steady_history_has_no_violation() -> None:
    h = Timeline()
    steady(h, 60)
    res = h.check()
    m = live(res)
    assert res["valid"] is True and m["violations"] == []
    st = m["starvation"]
    assert st["lag_allowance_s"] == 1.0  # p99 of 50 ms, floored at 1 s
    assert st["windows_judged"] == 5  # the last window ends within the allowance of the last ack
    assert st["min_ratio"] == 1.0
    assert all(c["ok"] and not c["bad"] for c in m["checks"].values())


def test_starved_window_found_with_counts() -> None:
    h = Timeline()
    for o in range(600):  # 10 values/s for 60 s
        t = o / 10
        h.send(0, t, t + 0.01, "1", 1000 + o, o)
        # the consumer stalls during [20, 30): process 2 reads those values at 45 s
        stalled = 20 <= t < 30
        read_at = 45.0 if stalled else t + 0.06
        h.poll(2 if stalled else 1, read_at - 0.05, read_at, {"1": [[o, 1000 + o]]})
    res = h.check(starvation_lag_s=2.0, sub_via="subscribe")  # process 1 skips 100 values
    m = live(res)
    st = m["starvation"]
    # windows 0..4 judged (window 5 ends at 60 s, after the last ack at 59.91 s)
    assert st["windows_judged"] == 5
    # window [20, 30): its 100 values were acknowledged at 20.01..29.91 and read at 45 s,
    # after the window's end plus the 2 s allowance: 100 offered, 0 consumed.
    assert st["starved_windows"] == [
        {"from_s": 20.0, "to_s": 30.0, "offered": 100, "consumed": 0, "ratio": 0.0}
    ]
    (v,) = [v for v in m["violations"] if v["type"] == "starvation"]
    assert (v["from_s"], v["to_s"], v["offered"], v["consumed"]) == (20.0, 30.0, 100, 0)
    assert "0 (0.0%)" in v["explanation"] and "threshold 97%" in v["explanation"]
    # not bad by default
    assert res["valid"] is True and "starvation" not in res["error_types"]
    assert m["checks"]["starvation"]["ok"] is False and m["checks"]["starvation"]["bad"] is False


def test_small_windows_are_not_judged() -> None:
    h = Timeline()
    for i in range(30):  # 1 value/s, never read until 50 s: fewer than 20 per window
        h.send(0, i, i + 0.01, "1", 10 + i, i)
    h.poll(1, 49.0, 50.0, {"1": [[i, 10 + i] for i in range(30)]})
    m = live(h.check())
    assert m["starvation"]["windows_judged"] == 0
    assert "starvation" not in vtypes(h.check())


def test_recovery_after_stop_partition() -> None:
    h = Timeline()
    h.send(0, 0.0, 0.1, "1", 10, 0)
    h.poll(1, 0.1, 0.2, {"1": [[0, 10]]})
    h.nem(1.0, "start-partition", {"n1": ["n2"]})
    h.add(1.5, process=0, type="invoke", f="send", value=[["send", "1", 11]])
    h.add(6.5, process=0, type="info", f="send", value=[["send", "1", 11]], error="timeout")
    h.nem(10.0, "stop-partition", None)
    h.send(2, 10.5, 13.0, "1", 12, 1)  # first ok send invoked after the heal: done at 13.0
    h.send(2, 13.0, 13.2, "1", 14, 2)
    h.poll(1, 14.0, 14.5, {"1": [[1, 12], [2, 14]]})  # first read of a post-heal value
    m = live(h.check())
    (ev,) = m["recovery"]["events"]
    # Nothing was in flight at the heal: the clocks start at the first attempts after
    # it (a send at 10.5 s, done at 13.0; a poll at 14.0 s, reading post-heal values
    # at 14.5), not at the heal -- an idle client is not slow to recover.
    assert (ev["f"], ev["time_s"], ev["send_s"], ev["read_s"]) == ("stop-partition", 10.0, 2.5, 0.5)
    assert m["recovery"]["max_send_s"] == 2.5 and m["recovery"]["max_read_s"] == 0.5
    assert "slow-recovery" not in vtypes(h.check())
    # with a 2 s threshold, the sends (2.5 s) are slow
    res = h.check(recovery_s=2.0)
    (v,) = [v for v in live(res)["violations"] if v["type"] == "slow-recovery"]
    assert v["send_s"] == 2.5 and "sends took 2.5 s" in v["explanation"]
    assert "reads" not in v["explanation"]
    # an attempt in flight at the heal starts the clock at the heal itself
    h.add(9.0, process=3, type="invoke", f="send", value=[["send", "1", 15]])
    h.add(11.0, process=3, type="fail", f="send", value=[["send", "1", 15]])
    (ev,) = live(h.check())["recovery"]["events"]
    assert ev["send_s"] == 3.0


def test_never_recovered_vs_not_measured() -> None:
    h = Timeline()
    h.send(0, 0.0, 0.1, "1", 10, 0)
    h.poll(1, 0.1, 0.2, {"1": [[0, 10]]})
    h.nem(1.0, "resume", {"node": "n1"})
    for i in range(8):  # sends keep failing for 70 s after the heal
        t = 2.0 + 10 * i
        h.add(t, process=0, type="invoke", f="send", value=[["send", "1", 20 + i]])
        h.add(t + 1, process=0, type="fail", f="send", value=[["send", "1", 20 + i]])
    h.nem(80.0, "heal", {})  # nothing attempted after this one: not measured
    h.poll(1, 80.5, 81.0, {"1": [[0, 10]]})
    m = live(h.check())
    ev1, ev2 = m["recovery"]["events"]
    assert ev1["send_s"] is None and ev2["send_s"] is None
    assert "send_note" in ev2 and "send_note" not in ev1
    (v,) = [v for v in m["violations"] if v["type"] == "slow-recovery"]
    assert v["f"] == "resume" and "sends never succeeded again" in v["explanation"]


def test_stuck_key_reported_with_value_and_offset() -> None:
    h = Timeline()
    h.send(0, 0.0, 1.0, "a", 10, 0)
    h.send(0, 1.0, 2.0, "b", 20, 7)  # key b: read 45 s after its ack
    h.send(0, 2.0, 3.0, "c", 30, 3)  # key c: never read; history ends at 60 s
    h.poll(1, 1.0, 1.5, {"a": [[0, 10]]})
    h.poll(1, 46.0, 47.0, {"b": [[7, 20]]})
    h.poll(1, 59.0, 60.0, {"a": [[0, 10]]})
    res = h.check()
    m = live(res)
    stuck = {v["key"]: v for v in m["violations"] if v["type"] == "stuck-partition"}
    assert set(stuck) == {"b", "c"}
    assert (stuck["b"]["value"], stuck["b"]["offset"], stuck["b"]["stuck_s"]) == (20, 7, 45.0)
    assert stuck["b"]["read_s"] == 47.0
    assert (stuck["c"]["value"], stuck["c"]["offset"], stuck["c"]["stuck_s"]) == (30, 3, 57.0)
    assert stuck["c"]["read_s"] is None and "never read" in stuck["c"]["explanation"]
    assert m["stuck_partitions"]["max_unread_s"] == 57.0
    assert [k["key"] for k in m["stuck_partitions"]["keys"]] == ["c", "b"]  # worst first
    # c is also `unseen` (safety), whatever the liveness options
    assert "unseen" in res["bad_error_types"]
    assert "at offset 7 was acknowledged" in stuck["b"]["explanation"]


def test_stuck_value_of_unknown_offset_says_so() -> None:
    h = Timeline()
    h.send(0, 0.0, 1.0, "a", 10, 0)
    h.send(0, 1.0, 2.0, "c", 30, None)  # a null offset (Queen), never read
    h.poll(1, 59.0, 60.0, {"a": [[0, 10]]})
    viol = live(h.check())["violations"]
    (stuck,) = [v for v in viol if v["type"] == "stuck-partition" and v["key"] == "c"]
    assert (
        stuck["offset"] is None
        and "value 30 (offset unknown) was acknowledged" in stuck["explanation"]
    ), stuck["explanation"]


def _starving_and_stuck() -> Timeline:
    h = Timeline()
    for i in range(300):  # 10/s for 30 s, all read only at 70 s
        t = i / 10
        h.send(0, t, t + 0.01, "1", 1000 + i, i)
    h.send(0, 50.0, 50.01, "1", 5000, 300)  # keeps production going past the windows
    h.poll(1, 69.0, 70.0, {"1": [[i, 1000 + i] for i in range(300)] + [[300, 5000]]})
    return h


def test_liveness_bad_turns_violations_into_bad_anomalies() -> None:
    h = _starving_and_stuck()
    ok_res = h.check()
    assert ok_res["valid"] is True and set(vtypes(ok_res)) == {"starvation", "stuck-partition"}
    res = h.check(liveness_bad=True)
    assert res["valid"] is False
    assert {"starvation", "stuck-partition"} <= set(res["bad_error_types"])
    a = res["anomalies"]["stuck-partition"]
    assert a["count"] == 1 and a["examples"][0]["key"] == "1"
    assert res["anomalies"]["starvation"]["examples"][0]["offered"] == 300
    checks = live(res)["checks"]
    assert checks["starvation"]["bad"] is True and checks["e2e-latency"]["bad"] is False
    assert live(res)["thresholds"]["liveness_bad"] is True


def test_options_from_test_json_read_liveness_settings() -> None:
    opts = options_from_test_json({"liveness_bad": True, "checker": {"stuck_s": 12}})
    assert opts.liveness_bad is True and opts.stuck_s == 12
    assert options_from_test_json({}).liveness_bad is False
    with pytest.raises(ValueError):
        CheckOptions(starvation_ratio=1.5)


@pytest.mark.parametrize("seed", range(6))
def test_generated_valid_histories_stay_valid(seed: int) -> None:
    g = generate(GenParams(seed=seed, ops=200, nemesis_p=0.05))
    res = check(g.to_ops())
    assert res["valid"] is True, res["bad_error_types"]
    m = live(res)
    assert m["e2e_latency_ms"]["unread"] == 0  # the model's drain reads everything
    assert m["e2e_latency_ms"]["n"] > 0


def test_cli_reports_and_judges_liveness(tmp_path: Path) -> None:
    h = _starving_and_stuck()
    hist = tmp_path / "history.jsonl"
    hist.write_bytes(
        b"".join(orjson.dumps(d) + b"\n" for d in sorted(h.ops, key=lambda d: d["time"]))
    )
    out = tmp_path / "results.json"
    r = CliRunner().invoke(cli, ["check", str(hist), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "warn liveness stuck-partition: 1 — key 1 was stuck" in r.output
    assert "warn liveness starvation: 1" in r.output and "--liveness-bad" in r.output
    r = CliRunner().invoke(cli, ["check", str(hist), "--out", str(out), "--liveness-bad",
                                 "--stuck-after", "100", "--window", "5"])  # fmt: skip
    assert r.exit_code == 1, r.output
    assert "BAD  liveness starvation: 1" in r.output and "stuck-partition" not in r.output
    res = orjson.loads(out.read_bytes())
    assert res["bad_error_types"] == ["starvation"]
    th = res["metrics"]["liveness"]["thresholds"]
    assert th["stuck_s"] == 100 and th["window_s"] == 5 and th["liveness_bad"] is True


@pytest.mark.parametrize("seed", range(8))
def test_first_reads_match_a_brute_force(seed: int) -> None:
    """The prefix/slice bookkeeping of first_reads equals min over every ok reader."""
    from ktrial.checker.liveness import UNSET, first_reads
    from ktrial.checker.logs import build_logs
    from ktrial.checker.prepare import prepare

    g = generate(GenParams(seed=seed, ops=300, reseek=seed % 2 == 0, from_start_p=0.3,
                           null_offset_p=0.1 * (seed % 3)))  # fmt: skip
    p = prepare(g.to_ops())
    logs = build_logs(p)
    first, by_value = first_reads(p, logs)
    want: dict[tuple[str, int], int] = {}
    want_v: dict[tuple[str, Any], int] = {}
    for r in p.ops:
        if r.type != "ok" or r.comp_time is None:
            continue
        for k, ps, _i, vals, _o in r.reads:
            if vals is not None:
                for v in vals:
                    want_v[(k, v)] = min(want_v.get((k, v), r.comp_time), r.comp_time)
                continue
            for d in ps:
                want[(k, d)] = min(want.get((k, d), r.comp_time), r.comp_time)
    got = {(k, d): t for k, arr in first.items() for d, t in enumerate(arr) if t != UNSET}
    assert got == want and by_value == want_v
