"""The checker on pathological and large histories: every value at two offsets, every
poll skipping, thousands of processes, never-completed invokes, huge rings under a
cycle-search budget; examples and summaries stay bounded and the time near-linear.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check_file
from ktrial.cli import main
from ktrial.tests.checker.common import poll_pair
from ktrial.tests.histlines import Line, fail, info, inv, ok, pl, snd

MAX_EX = 8  # the default --max-examples


def write(path: Path, lines: list[Line], step_ns: int = 1_000_000) -> Path:
    with path.open("w") as fh:
        for i, o in enumerate(lines):
            fh.write(json.dumps({"index": i, "time": i * step_ns, **o}) + "\n")
    return path


def run(tmp_path: Path, lines: list[Line], step_ns: int = 1_000_000, **opts: Any) -> dict[str, Any]:
    return check_file(write(tmp_path / "history.jsonl", lines, step_ns), CheckOptions(**opts))


def check_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: list[Line], *args: str
) -> tuple[int, str, dict[str, Any]]:
    """`ktrial check` in-process: (exit code, stdout, results.json)."""
    hist = write(tmp_path / "history.jsonl", lines)
    out = tmp_path / "results.json"
    with pytest.raises(SystemExit) as e:
        main(["check", str(hist), "--out", str(out), *args])
    code = e.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().out, json.loads(out.read_text())


def counts(res: dict[str, Any]) -> dict[str, int]:
    return {k: v["count"] for k, v in res["anomalies"].items()}


def assert_bounded_examples(res: dict[str, Any], limit: int = MAX_EX) -> None:
    for name, a in res["anomalies"].items():
        assert len(a["examples"]) <= limit, name
        for ex in a["examples"]:
            assert ex.get("explanation"), name


def sends(key: str, n: int, p: Any = 0, stride: int = 1) -> list[Line]:
    """n acknowledged sends of values 0..n-1, value i at offset stride*i of key."""
    out: list[Line] = []
    for i in range(n):
        out += [inv(p, "send", [["send", key, i]]), ok(p, "send", [snd(key, stride * i, i)])]
    return out


def ring(n: int) -> list[Line]:
    """n concurrent transactions; txn i sends key k<i> and reads txn i+1's value: one
    wr-only cycle of length n (circular visibility, always bad)."""
    lines = [inv(i, "txn", [["send", f"k{i}", i], ["poll"]]) for i in range(n)]
    for i in range(n):
        j = (i + 1) % n
        lines.append(ok(i, "txn", [snd(f"k{i}", 0, i), pl({f"k{j}": [[0, j]]})]))
    return lines


def rt_back(n: int) -> list[Line]:
    """A sequential chain of n ok txns where txn i reads the value txn i+2 sends later:
    each i -rt-> i+2 -wr-> i is a 2-op G1c-realtime cycle (reading the future: txn i
    completed before txn i+2 was invoked, a realtime edge of its own). A final drain
    reads the first two values so nothing is unseen."""
    lines: list[Line] = []
    for i in range(n):
        j = i + 2
        recs = {f"k{j}": [[0, j]]} if j < n else {}
        lines += [
            inv(0, "txn", [["send", f"k{i}", i], ["poll"]]),
            ok(0, "txn", [snd(f"k{i}", 0, i), pl(recs)]),
        ]
    lines += poll_pair(1, {"k0": [[0, 0]], "k1": [[0, 1]]})
    return lines


def future_readers(m: int) -> list[Line]:
    """m concurrent polls each read a value that one of m concurrent sends, invoked
    only after every poll completed, writes: m 2-op G1c-realtime cycles, and m*m
    realtime edges between the two groups."""
    lines = [inv(i, "poll", [["poll"]]) for i in range(m)]
    lines += [ok(i, "poll", [pl({f"k{i}": [[0, i]]})]) for i in range(m)]
    lines += [inv(m + i, "send", [["send", f"k{i}", i]]) for i in range(m)]
    lines += [ok(m + i, "send", [snd(f"k{i}", 0, i)]) for i in range(m)]
    return lines


def test_every_value_at_two_offsets(tmp_path: Path) -> None:
    n = 1500
    lines = [inv(1, "assign", ["a"]), ok(1, "assign", ["a"]), *sends("a", n, stride=2)]
    recs = [[j, j // 2] for j in range(2 * n)]  # value v at offsets 2v and 2v+1
    for s in range(0, len(recs), 100):
        lines += poll_pair(1, {"a": recs[s : s + 100]})
    res = run(tmp_path, lines)
    assert res["valid"] is False
    # value v acknowledged at 2v and also read at 2v+1: only duplicates
    assert counts(res)["duplicate"] == n
    assert "inconsistent-offsets" not in res["anomalies"]
    assert_bounded_examples(res)
    ex = res["anomalies"]["duplicate"]["examples"][0]
    assert ex["key"] == "a" and len(ex["offsets"]) == 2
    assert str(ex["value"]) in ex["explanation"]
    for o in ex["offsets"]:
        assert str(o) in ex["explanation"]


def test_every_offset_two_values(tmp_path: Path) -> None:
    n = 1000
    lines: list[Line] = []
    for i in range(n):
        lines += [inv(0, "send", [["send", "a", i]]), ok(0, "send", [snd("a", i, i)])]
        lines += [inv(1, "send", [["send", "a", n + i]]), ok(1, "send", [snd("a", i, n + i)])]
    lines += poll_pair(2, {"a": [[i, i] for i in range(n)]})
    res = run(tmp_path, lines)
    c = counts(res)
    assert c["inconsistent-offsets"] == n
    assert c["unseen"] == n  # values n..2n-1 never read
    assert_bounded_examples(res)
    ex = res["anomalies"]["inconsistent-offsets"]["examples"][0]
    assert ex["key"] == "a"
    assert "offset" in ex["explanation"]


def test_every_poll_skips_and_repeats(tmp_path: Path) -> None:
    n = 1200
    lines = [inv(1, "assign", ["a"]), ok(1, "assign", ["a"]), *sends("a", n)]
    lines += [inv(2, "assign", ["a"]), ok(2, "assign", ["a"])]
    lines += poll_pair(2, {"a": [[i, i] for i in range(n)]})  # a full reader: nothing is lost
    for i in range(0, n, 2):
        lines += poll_pair(1, {"a": [[i, i]]})  # process 1 skips every other record
    lines += [inv(3, "assign", ["a"]), ok(3, "assign", ["a"])]
    for _ in range(300):
        lines += poll_pair(3, {"a": [[0, 0]]})  # process 3 repeats offset 0
    res = run(tmp_path, lines)
    c = counts(res)
    assert c == {"poll-skip": n // 2 - 1, "nonmonotonic-poll": 299}
    assert set(res["bad_error_types"]) == {"poll-skip", "nonmonotonic-poll"}
    assert_bounded_examples(res)
    ex = res["anomalies"]["poll-skip"]["examples"][0]
    assert ex["explanation"] and "a" in ex["explanation"]
    # with subscribe the same history is valid (rebalances explain both)
    res = run(tmp_path, lines, sub_via="subscribe")
    assert res["valid"] is True
    assert counts(res) == {"poll-skip": n // 2 - 1, "nonmonotonic-poll": 299}


@pytest.mark.parametrize("k", [0, 1, 3])
def test_max_examples_respected(tmp_path: Path, k: int) -> None:
    n = 300
    lines = sends("a", n)
    lines += poll_pair(1, {"a": [[i, i] for i in range(1, n, 2)]})  # every even value lost
    res = run(tmp_path, lines, max_examples=k)
    assert counts(res)["lost-write"] == n // 2  # each even value has a later read
    for a in res["anomalies"].values():
        assert len(a["examples"]) <= k


def test_one_poll_returns_everything(tmp_path: Path) -> None:
    n = 10_000
    lines = sends("a", n) + poll_pair(1, {"a": [[i, i] for i in range(n)]})
    res = run(tmp_path, lines)
    assert res["valid"] is True and res["error_types"] == []
    assert res["stats"]["reads"] == n and res["stats"]["writes"] == n


def test_one_poll_returns_everything_backwards(tmp_path: Path) -> None:
    n = 3000
    lines = sends("a", n)
    lines += [inv(1, "assign", ["a"]), ok(1, "assign", ["a"])]
    lines += poll_pair(1, {"a": [[i, i] for i in reversed(range(n))]})
    res = run(tmp_path, lines)
    assert counts(res) == {"int-nonmonotonic-poll": n - 1}
    assert_bounded_examples(res)


def test_many_keys_few_values(tmp_path: Path) -> None:
    nk = 2000
    lines: list[Line] = []
    for k in range(nk):
        for j in range(3):
            v = 3 * k + j
            lines += [
                inv(k % 50, "send", [["send", f"k{k}", v]]),
                ok(k % 50, "send", [snd(f"k{k}", j, v)]),
            ]
    keys = [f"k{k}" for k in range(nk)]
    lines += [inv(999, "assign", keys), ok(999, "assign", keys)]
    for s in range(0, nk, 250):
        lines += poll_pair(
            999, {f"k{k}": [[j, 3 * k + j] for j in range(3)] for k in range(s, s + 250)}
        )
    res = run(tmp_path, lines)
    assert res["valid"] is True and res["error_types"] == []
    assert res["stats"]["keys"] == nk


def test_thousands_of_processes_one_op_each(tmp_path: Path) -> None:
    n = 3000
    lines: list[Line] = []
    for i in range(n):
        lines += [inv(10 + i, "send", [["send", "a", i]]), ok(10 + i, "send", [snd("a", i, i)])]
    for i in range(n):
        lines += poll_pair(10 + n + i, {"a": [[i, i]]})
    res = run(tmp_path, lines)
    assert res["valid"] is True and res["error_types"] == []


def test_invokes_never_completed(tmp_path: Path) -> None:
    n = 3000
    lines = [inv(i, "send", [["send", "a", i]]) for i in range(n)]
    res = run(tmp_path, lines)
    assert res["valid"] == "unknown" and res["error_types"] == []
    assert res["metrics"]["counts"]["send"]["info"] == n
    assert res["metrics"]["info_causes"] == {"never completed": n}


def test_invokes_never_completed_one_read(tmp_path: Path) -> None:
    """Never-completed sends count as info; the ones an ok poll read committed, the
    others are not lost (they may never have happened)."""
    n = 2000
    lines = [inv(i, "send", [["send", "a", i]]) for i in range(n)]
    lines += poll_pair(n + 1, {"a": [[i, i] for i in range(0, n, 2)]})
    res = run(tmp_path, lines)
    assert res["valid"] is True, counts(res)


def test_only_failed_ops(tmp_path: Path) -> None:
    n = 2000
    lines: list[Line] = []
    for i in range(n):
        lines += [inv(i % 10, "send", [["send", "a", i]]), fail(i % 10, "send", [snd("a", i, i)])]
    for i in range(0, n, 100):
        lines += poll_pair(50, {"a": [[j, j] for j in range(i, i + 100)]}, typ="fail")
    res = run(tmp_path, lines)
    assert res["bad_error_types"] == []
    assert res["metrics"]["counts"]["send"]["fail"] == n


def test_aborted_values_read_by_ok_polls_many(tmp_path: Path) -> None:
    n = 1500
    lines: list[Line] = []
    for i in range(n):
        lines += [inv(i % 10, "send", [["send", "a", i]]), fail(i % 10, "send", [snd("a", i, i)])]
    lines += poll_pair(50, {"a": [[i, i] for i in range(n)]})
    res = run(tmp_path, lines)
    assert counts(res) == {"G1a": n}
    assert_bounded_examples(res)


def test_long_string_values(tmp_path: Path) -> None:
    n = 1000
    lines: list[Line] = [inv(1, "assign", ["a"]), ok(1, "assign", ["a"])]
    for i in range(n):
        v = f"{i:06d}" + "x" * 300
        lines += [inv(0, "send", [["send", "a", v]]), ok(0, "send", [snd("a", i, v)])]
        if i % 2:
            lines += poll_pair(1, {"a": [[i - 1, f"{i - 1:06d}" + "x" * 300], [i, v]]})
    res = run(tmp_path, lines)
    assert res["valid"] is True and res["error_types"] == []


def test_summary_is_a_few_lines_with_many_anomaly_types(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    n = 1000
    lines = [inv(1, "assign", ["a"]), ok(1, "assign", ["a"]), *sends("a", n)]
    for i in range(0, n, 2):
        lines += poll_pair(1, {"a": [[i, i]]})  # skips, and every odd value lost
    for i in range(n):
        lines += [inv(2, "send", [["send", "b", i]]), ok(2, "send", [snd("b", 0, i)])]
    lines += poll_pair(3, {"b": [[0, 0]]})
    code, out, res = check_cli(capsys, tmp_path, lines)
    assert code == 1
    assert {"poll-skip", "lost-write", "inconsistent-offsets", "unseen"} <= set(res["error_types"])
    assert len(out.splitlines()) < 40
    assert len(out) < 8000
    assert len(json.dumps(res)) < 1_000_000


def test_summary_bounded_for_a_long_cycle(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, res = check_cli(capsys, tmp_path, ring(200))
    assert code == 1 and "G1c" in res["bad_error_types"]
    # 200-op circular visibility: 36 KB of summary on one line today
    assert len(out) < 16_000


def one_send_per_key(nk: int) -> list[Line]:
    """Keys k0..k<nk-1> get one acknowledged value each (value k at offset 0), from 50
    producers."""
    lines: list[Line] = []
    for k in range(nk):
        lines += [
            inv(k % 50, "send", [["send", f"k{k}", k]]),
            ok(k % 50, "send", [snd(f"k{k}", 0, k)]),
        ]
    return lines


def test_liveness_violations_capped(tmp_path: Path) -> None:
    nk = 2000
    lines = one_send_per_key(nk)
    lines += poll_pair(1000, {"k0": [[0, 0]]})
    res = run(tmp_path, lines, step_ns=1_000_000_000, stuck_s=5.0)
    live = res["metrics"]["liveness"]
    assert live["stuck_partitions"]["stuck_keys"] >= nk - 10
    assert len(live["stuck_partitions"]["keys"]) <= 50  # capped (MAX_LISTED)
    assert len(live["violations"]) <= 50  # not capped: one per stuck key


def test_liveness_bad_stuck_keys_counted_examples_capped(tmp_path: Path) -> None:
    nk = 500
    lines = one_send_per_key(nk)
    lines += poll_pair(1000, {f"k{k}": [[0, k]] for k in range(nk)})
    res = run(tmp_path, lines, step_ns=1_000_000_000, stuck_s=5.0, liveness_bad=True)
    c = counts(res)
    stuck = res["metrics"]["liveness"]["stuck_partitions"]["stuck_keys"]
    assert c["stuck-partition"] == stuck > 400
    assert "stuck-partition" in res["bad_error_types"]
    assert_bounded_examples(res)


def test_info_causes_bounded(tmp_path: Path) -> None:
    n = 5000
    lines: list[Line] = []
    for i in range(n):
        lines += [
            inv(i % 10, "send", [["send", "a", i]]),
            info(
                i % 10,
                "send",
                [snd("a", None, i)],
                error=f"Expiring 1 record(s) for t-0:{120000 + i} ms has passed since batch"
                " creation",
            ),
        ]
    lines += poll_pair(99, {})
    res = run(tmp_path, lines)
    causes = res["metrics"]["info_causes"]
    assert sum(causes.values()) == n
    assert len(json.dumps(causes)) < 50_000  # 5,000 entries (~470 KB) today


def test_realtime_lag_per_consumer_capped(tmp_path: Path) -> None:
    n = 400
    lines = sends("a", 1)
    for p in range(n):
        lines += poll_pair(100 + p, {"a": [[0, 0]]})
    res = run(tmp_path, lines)
    assert res["valid"] is True
    per = res["metrics"]["realtime_lag"].get("per_consumer")
    if per is not None:
        assert len(per) <= 100


def test_cycle_timeout_reported_as_unknown(tmp_path: Path) -> None:
    """With a tiny budget the huge ring is not searched to the end: a
    cycle-search-timeout example (size, first ops capped) and verdict unknown."""
    n = 3000
    res = run(tmp_path, ring(n), cycle_timeout_s=0.0005)
    assert set(res["error_types"]) == {"cycle-search-timeout"}
    assert res["valid"] == "unknown"
    ex = res["anomalies"]["cycle-search-timeout"]["examples"][0]
    assert ex["size"] == n and len(ex["ops"]) <= 32
    assert f"{n} ops" in ex["explanation"]


def test_cycle_timeout_exit_code(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, res = check_cli(capsys, tmp_path, ring(1000), "--cycle-timeout", "0.0005")
    assert code == 2 and res["valid"] == "unknown"
    assert "cycle-search-timeout" in out
    assert len(out) < 4000


def test_ring_found_within_budget(tmp_path: Path) -> None:
    res = run(tmp_path, ring(150))
    assert "G1c" in res["bad_error_types"]
    ex = res["anomalies"]["G1c"]["examples"][0]
    assert ex["wr_only"] is True and len(ex["cycle"]) == 150


def test_found_cycle_kept_when_budget_runs_out(tmp_path: Path) -> None:
    # The 3,000-op ring is found by the first BFS (~0.05 s); the next 255 starts
    # (~0.05 s each) would take ~13 s, so a 2 s budget runs out among them: the cycle
    # found first must be kept (it was thrown away: verdict unknown). 2 s leaves room
    # for a loaded machine to build the graph and run the first BFS.
    res = run(tmp_path, ring(3000), cycle_timeout_s=2.0)
    assert "G1c" in res["bad_error_types"], counts(res)
    assert res["valid"] is False


def test_read_from_the_future_short_chain(tmp_path: Path) -> None:
    res = run(tmp_path, rt_back(60))
    assert set(res["error_types"]) == {"G1c-realtime"}
    ex = res["anomalies"]["G1c-realtime"]["examples"][0]
    assert len(ex["cycle"]) == 2 and ex["wr_only"] is True


def test_read_from_the_future_long_chain(tmp_path: Path) -> None:
    res = run(tmp_path, rt_back(1200), cycle_timeout_s=1.5)
    assert "G1c-realtime" in res["bad_error_types"], counts(res)
    assert "cycle-search-timeout" not in res["error_types"]
    ex = res["anomalies"]["G1c-realtime"]["examples"][0]
    assert len(ex["cycle"]) == 2


def test_future_readers_small(tmp_path: Path) -> None:
    res = run(tmp_path, future_readers(30))
    assert set(res["error_types"]) == {"G1c-realtime"}
    ex = res["anomalies"]["G1c-realtime"]["examples"][0]
    assert len(ex["cycle"]) == 2
    assert "k" in ex["explanation"] and "read it" in ex["explanation"]


def test_future_readers_bounded_by_cycle_timeout(tmp_path: Path) -> None:
    t = time.monotonic()
    res = run(tmp_path, future_readers(300), cycle_timeout_s=1.0)
    took = time.monotonic() - t
    # 1,200 lines; with a 1 s budget the whole check should take ~2 s, and the 2-op
    # cycle is the first thing any search finds (a 0.2 s budget ran out first on a
    # loaded 2-core machine)
    assert "G1c-realtime" in res["bad_error_types"], counts(res)
    assert took < 8.0, took


def _dup_history(n: int) -> list[Line]:
    lines = [inv(1, "assign", ["a"]), ok(1, "assign", ["a"]), *sends("a", n, stride=2)]
    recs = [[j, j // 2] for j in range(2 * n)]
    for s in range(0, len(recs), 100):
        lines += poll_pair(1, {"a": recs[s : s + 100]})
    return lines


def _timed_scale(tmp_path: Path, name: str, lines: list[Line]) -> float:
    path = write(tmp_path / name, lines)
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        check_file(path, CheckOptions())
        best = min(best, time.perf_counter() - t)
    return best


def test_scaling_many_duplicates_is_near_linear(tmp_path: Path) -> None:
    small = _timed_scale(tmp_path, "s.jsonl", _dup_history(1500))
    big = _timed_scale(tmp_path, "b.jsonl", _dup_history(6000))
    assert big < 10 * max(small, 0.05), (small, big)


def _wide_consumer(k: int) -> list[Line]:
    """One consumer assigned k keys polls k times, one record each."""
    lines: list[Line] = []
    for i in range(k):
        lines += [inv(0, "send", [["send", f"k{i}", i]]), ok(0, "send", [snd(f"k{i}", 0, i)])]
    keys = [f"k{i}" for i in range(k)]
    lines += [inv(1, "assign", keys), ok(1, "assign", keys)]
    for i in range(k):
        lines += poll_pair(1, {f"k{i}": [[0, i]]})
    return lines


def test_scaling_wide_consumer_is_near_linear(tmp_path: Path) -> None:
    small = _timed_scale(tmp_path, "s.jsonl", _wide_consumer(200))
    big = _timed_scale(tmp_path, "b.jsonl", _wide_consumer(800))
    # 4x the input; linear would be ~4x, quadratic is ~16x
    assert big < 8 * max(small, 0.05), (small, big)
