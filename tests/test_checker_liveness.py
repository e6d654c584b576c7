"""Liveness metrics on hand-built histories: exact numbers, and no false alarm when healthy.

Each history is written op by op with explicit times (seconds -> ns) so the
expected latencies, windows and recovery times can be computed by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from ktrial.checker import CheckOptions, check, options_from_test_json
from ktrial.checker.liveness import quantiles
from ktrial.cli import cli
from ktrial.histories.jsonl import op_from_json
from ktrial.testing.gen import GenParams, generate

S = 1_000_000_000


class Hist:
    """A history under construction; `at` times are seconds since the start."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def add(self, at: float, **op: Any) -> None:
        self.ops.append({"index": len(self.ops), "time": round(at * S), **op})

    def send(
        self, p: int, t_inv: float, t_ok: float, k: Any, v: int, o: int | None, typ: str = "ok"
    ) -> None:
        self.add(t_inv, process=p, type="invoke", f="send", value=[["send", k, v]])
        self.add(t_ok, process=p, type=typ, f="send", value=[["send", k, [o, v]]])

    def txn(self, p: int, t_inv: float, t_ok: float, sends: list[tuple[Any, int, int]]) -> None:
        self.add(
            t_inv, process=p, type="invoke", f="txn", value=[["send", k, v] for k, v, _ in sends]
        )
        self.add(
            t_ok, process=p, type="ok", f="txn", value=[["send", k, [o, v]] for k, v, o in sends]
        )

    def poll(self, p: int, t_inv: float, t_ok: float, recs: dict[Any, list[list[int]]]) -> None:
        self.add(t_inv, process=p, type="invoke", f="poll", value=[["poll"]])
        self.add(t_ok, process=p, type="ok", f="poll", value=[["poll", recs]])

    def nemesis(self, at: float, f: str, value: Any = None) -> None:
        self.add(at, process="nemesis", type="info", f=f, value=value)

    def check(self, **opts: Any) -> dict[str, Any]:
        # history.jsonl is in completion order: sort by time, keeping insertion order on ties
        ordered = sorted(self.ops, key=lambda d: d["time"])
        for i, d in enumerate(ordered):
            d["index"] = i
        return check([op_from_json(d, i) for i, d in enumerate(ordered)], CheckOptions(**opts))


def live(res: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = res["metrics"]["liveness"]
    return out


def vtypes(res: dict[str, Any]) -> list[str]:
    return [v["type"] for v in live(res)["violations"]]


def steady(h: Hist, seconds: int, per_s: int = 10, lag: float = 0.05, key: str = "1") -> int:
    """A producer sending `per_s` values a second to `key` and a consumer reading each
    `lag` s after its ack; returns the next free offset."""
    o = 0
    for i in range(seconds * per_s):
        t = i / per_s
        h.send(0, t, t + 0.01, key, 1000 + o, o)
        h.poll(1, t + 0.01, t + 0.01 + lag, {key: [[o, 1000 + o]]})
        o += 1
    return o


# ----------------------------------------------------------------------- latencies


def test_e2e_and_commit_latency_exact() -> None:
    h = Hist()
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
    h = Hist()
    h.send(0, 0.0, 0.5, "1", 10, 0)
    h.poll(1, 0.1, 0.2, {"1": [[0, 10]]})  # read before the producer heard the ack
    m = live(h.check())
    assert m["commit_latency_ms"]["f"] == "send" and m["commit_latency_ms"]["max"] == 500.0
    assert m["e2e_latency_ms"]["read_before_ack"] == 1 and m["e2e_latency_ms"]["max"] == 0.0


def test_quantiles_nearest_rank() -> None:
    assert quantiles([float(x) for x in range(1, 101)]) == {
        "n": 100, "p50": 51.0, "p90": 91.0, "p99": 100.0, "max": 100.0}  # fmt: skip
    assert quantiles([])["p99"] is None


# ---------------------------------------------------------------------- starvation


def test_healthy_steady_history_has_no_violation() -> None:
    h = Hist()
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
    h = Hist()
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
    h = Hist()
    for i in range(30):  # 1 value/s, never read until 50 s: fewer than 20 per window
        h.send(0, i, i + 0.01, "1", 10 + i, i)
    h.poll(1, 49.0, 50.0, {"1": [[i, 10 + i] for i in range(30)]})
    m = live(h.check())
    assert m["starvation"]["windows_judged"] == 0
    assert "starvation" not in vtypes(h.check())


# ----------------------------------------------------------------------- recovery


def test_recovery_after_stop_partition() -> None:
    h = Hist()
    h.send(0, 0.0, 0.1, "1", 10, 0)
    h.poll(1, 0.1, 0.2, {"1": [[0, 10]]})
    h.nemesis(1.0, "start-partition", {"n1": ["n2"]})
    h.add(1.5, process=0, type="invoke", f="send", value=[["send", "1", 11]])
    h.add(6.5, process=0, type="info", f="send", value=[["send", "1", 11]], error="timeout")
    h.nemesis(10.0, "stop-partition", None)
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
    h = Hist()
    h.send(0, 0.0, 0.1, "1", 10, 0)
    h.poll(1, 0.1, 0.2, {"1": [[0, 10]]})
    h.nemesis(1.0, "resume", {"node": "n1"})
    for i in range(8):  # sends keep failing for 70 s after the heal
        t = 2.0 + 10 * i
        h.add(t, process=0, type="invoke", f="send", value=[["send", "1", 20 + i]])
        h.add(t + 1, process=0, type="fail", f="send", value=[["send", "1", 20 + i]])
    h.nemesis(80.0, "heal", {})  # nothing attempted after this one: not measured
    h.poll(1, 80.5, 81.0, {"1": [[0, 10]]})
    m = live(h.check())
    ev1, ev2 = m["recovery"]["events"]
    assert ev1["send_s"] is None and ev2["send_s"] is None
    assert "send_note" in ev2 and "send_note" not in ev1
    (v,) = [v for v in m["violations"] if v["type"] == "slow-recovery"]
    assert v["f"] == "resume" and "sends never succeeded again" in v["explanation"]


# ------------------------------------------------------------------ stuck partitions


def test_stuck_key_reported_with_value_and_offset() -> None:
    h = Hist()
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
    h = Hist()
    h.send(0, 0.0, 1.0, "a", 10, 0)
    h.send(0, 1.0, 2.0, "c", 30, None)  # a null offset (Queen), never read
    h.poll(1, 59.0, 60.0, {"a": [[0, 10]]})
    viol = live(h.check())["violations"]
    (stuck,) = [v for v in viol if v["type"] == "stuck-partition" and v["key"] == "c"]
    assert (
        stuck["offset"] is None
        and "value 30 (offset unknown) was acknowledged" in stuck["explanation"]
    ), stuck["explanation"]


# -------------------------------------------------------------------- memory growth


def test_memory_growth_flags_the_growing_node_only() -> None:
    h = Hist()
    steady(h, 3)
    mib = 1024 * 1024
    for i in range(4):  # samples at 0, 60, 120, 180 s
        h.nemesis(
            60.0 * i,
            "node-stats",
            {
                "n1": {"rss_bytes": (200 + 50 * i) * mib, "cache_bytes": None},  # 200 -> 350
                "n2": {"rss_bytes": (300 + (i % 2)) * mib, "cache_bytes": 5 * mib},  # flat
            },
        )
    m = live(h.check())
    nodes = m["memory"]["nodes"]
    assert nodes["n1"]["flagged"] is True and nodes["n2"]["flagged"] is False
    assert nodes["n1"]["growth_bytes"] == 150 * mib
    assert nodes["n1"]["bytes_per_min"] == pytest.approx(50 * mib)
    assert (nodes["n1"]["first_bytes"], nodes["n1"]["last_bytes"], nodes["n1"]["max_bytes"]) == (
        200 * mib, 350 * mib, 350 * mib)  # fmt: skip
    (v,) = [v for v in m["violations"] if v["type"] == "memory-growth"]
    assert v["node"] == "n1" and "+150 MiB" in v["explanation"]


def test_memory_growth_is_judged_per_broker_process() -> None:
    """A new pid is a new JVM: growth before a restart is not hidden by the small RSS
    after it, and growth is not counted across the restart either."""
    h = Hist()
    steady(h, 3)
    mib = 1024 * 1024
    rss = [(200, 1), (300, 1), (400, 1), (500, 1), (450, 2), (460, 2), (470, 2)]
    for i, (r, pid) in enumerate(rss):
        h.nemesis(30.0 * i, "node-stats", {"n1": {"rss_bytes": r * mib, "pid": pid}})
    nodes = live(h.check())["memory"]["nodes"]
    assert nodes["n1"]["processes"] == 2 and nodes["n1"]["flagged"] is True
    assert nodes["n1"]["growth_bytes"] == 300 * mib  # 200 -> 500 in the first JVM
    # a drop at a restart followed by a flat new JVM is no growth
    h = Hist()
    steady(h, 3)
    for i, r in enumerate([500, 450, 460, 470]):
        h.nemesis(30.0 * i, "node-stats", {"n1": {"rss_bytes": r * mib, "pid": 7 if i else 6}})
    nodes = live(h.check())["memory"]["nodes"]
    assert nodes["n1"]["processes"] == 2 and nodes["n1"]["flagged"] is False


def test_memory_growth_needs_three_samples() -> None:
    h = Hist()
    steady(h, 3)
    mib = 1024 * 1024
    h.nemesis(0.0, "node-stats", {"n1": {"rss_bytes": 100 * mib}})
    h.nemesis(9.0, "node-stats", {"n1": {"rss_bytes": 900 * mib}})
    m = live(h.check())
    assert m["memory"]["nodes"]["n1"]["flagged"] is False and m["violations"] == []


# ------------------------------------------------------------------- liveness_bad


def _starving_and_stuck() -> Hist:
    h = Hist()
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
