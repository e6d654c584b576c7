"""Audit of the copy workload's exactly-once checks and of the liveness metrics.

Part 1 (checker/copy.py): copy histories shaped as workloads/copy.py records them
(input ``send`` ops of producer processes; one ``txn`` per copier step, invoked as
``[["poll"]]`` and completed as ``[["poll", {in: [[o, v]]}], ["send", out, [o,
(step + 1) * M + v]], ...]``; ``crash`` ops; a drain that assigns every key from the
beginning and polls). Correct histories (aborted copies, retries after a crash or
fencing, info commits that did or did not commit, zombies that read an input value a
second time, Queen's null offsets) must be valid; injected duplicate or lost copies
must be eos-duplicate / eos-loss with keys, values and offsets explained.

Part 2 (checker/liveness.py): healthy histories must not produce violations with the
default thresholds even under ``liveness_bad``; real starvation, stuck keys, slow
recovery and memory growth must be flagged and explained; results.json stays
JSON-serialisable with sane numbers on odd histories.

Problems found are ``xfail(strict=True)``: they pass once fixed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check
from ktrial.histories.jsonl import op_from_json
from ktrial.tests.histlines import examples
from ktrial.tests.test_checker_audit import cli  # the real entry point, in process

S = 1_000_000_000
M = 1 << 32  # workloads/copy.py VALUE_MODULUS
MIB = 1024 * 1024
COPY: dict[str, Any] = {
    "input_keys": [0, 1],
    "output_keys": [2, 3],
    "route": {"0": 2, "1": 3},
    "value_modulus": M,
}
META: dict[str, Any] = {"workload": "copy", "copy": COPY}

Out = tuple[int, int | None, int]  # (output key, output offset, output value)


class H:
    """A history under construction; `at` times are seconds after `t0`."""

    def __init__(self, t0: float = 0.0) -> None:
        self.ops: list[dict[str, Any]] = []
        self.t0 = t0

    def add(self, at: float, **op: Any) -> None:
        self.ops.append({"index": 0, "time": round((self.t0 + at) * S), **op})

    def pair(
        self, p: int, ti: float, tc: float, f: str, inv: Any, comp: Any, typ: str = "ok", **x: Any
    ) -> None:
        self.add(ti, process=p, type="invoke", f=f, value=inv)
        self.add(tc, process=p, type=typ, f=f, value=comp, **x)

    def send(
        self, p: int, ti: float, tc: float, k: int, v: int, o: int | None, typ: str = "ok"
    ) -> None:
        done = [o, v] if typ == "ok" else v
        self.pair(p, ti, tc, "send", [["send", k, v]], [["send", k, done]], typ)

    def poll(
        self, p: int, ti: float, tc: float, recs: dict[str, list[list[int]]], typ: str = "ok"
    ) -> None:
        self.pair(p, ti, tc, "poll", [["poll"]], [["poll", recs]], typ)

    def copy(
        self,
        p: int,
        ti: float,
        tc: float,
        recs: dict[str, list[list[int]]],
        outs: list[Out],
        typ: str = "ok",
        **x: Any,
    ) -> None:
        """One copier step (workloads/confluent.py copy_txn)."""
        comp = [["poll", recs]] + [["send", k, [o, v]] for k, o, v in outs]
        self.pair(p, ti, tc, "txn", [["poll"]], comp, typ, **x)

    def subscribe(self, p: int, at: float, keys: list[int]) -> None:
        self.pair(p, at, at + 0.01, "subscribe", keys, keys)

    def crash(self, p: int, at: float) -> None:
        self.add(at, process=p, type="info", f="crash", value=None)

    def drain(self, p: int, at: float, recs: dict[str, list[list[int]]]) -> None:
        keys = [int(k) for k in recs]
        self.pair(p, at, at + 0.1, "assign", keys, keys, seek_to_beginning=True)
        self.poll(p, at + 0.1, at + 0.5, recs)

    def nem(self, at: float, f: str, value: Any = None) -> None:
        self.add(at, process="nemesis", type="info", f=f, value=value)

    def lines(self) -> list[dict[str, Any]]:
        """history.jsonl order: by completion time, insertion order on ties."""
        ordered = sorted(self.ops, key=lambda d: d["time"])
        for i, d in enumerate(ordered):
            d["index"] = i
        return ordered

    def check(self, meta: dict[str, Any] | None = None, **opts: Any) -> dict[str, Any]:
        ops = [op_from_json(d, i) for i, d in enumerate(self.lines())]
        return check(ops, CheckOptions(**opts), meta)

    def write(self, d: Path, meta: dict[str, Any] | None = None) -> Path:
        d.mkdir(parents=True, exist_ok=True)
        (d / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in self.lines()))
        if meta is not None:
            (d / "test.json").write_text(json.dumps(meta))
        return d


def live(res: dict[str, Any]) -> dict[str, Any]:
    return res["metrics"]["liveness"]  # type: ignore[no-any-return]


def vtypes(res: dict[str, Any]) -> set[str]:
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


# ==================================================================== part 1: copy


def two_inputs() -> H:
    """Input 10 at key 0 offset 0 and 11 at key 1 offset 0, acknowledged."""
    h = H()
    h.send(1000, 0.0, 0.1, 0, 10, 0)
    h.send(1000, 0.1, 0.2, 1, 11, 0)
    return h


def test_correct_copy_with_aborts_retries_info_commits_and_zombies_is_valid() -> None:
    h = H()
    for p in (0, 1, 2):
        h.subscribe(p, 0.0, [0, 1])
    h.subscribe(4, 11.9, [0, 1])
    h.subscribe(5, 22.9, [0, 1])
    h.send(1000, 0.0, 0.1, 0, 10, 0)
    h.send(1000, 0.1, 0.2, 0, 11, 1)
    h.send(1000, 0.2, 0.3, 1, 12, 0)
    h.send(1000, 0.3, 0.4, 1, 13, 1)
    h.send(1001, 0.3, 5.0, 1, 14, None, typ="info")  # landed at offset 2 (read later)
    h.send(1001, 5.1, 9.0, 0, 15, None, typ="info")  # never landed: nobody reads it
    # step 1: a deliberate abort of the copy of 10 (its output was acknowledged at 0)
    h.copy(0, 1.0, 1.2, {"0": [[0, 10]]}, [(2, 0, 1 * M + 10)], typ="fail", error="abort")
    # step 2: the retry rereads 10 and copies 11 too (abort marker at 1)
    h.copy(0, 1.3, 1.5, {"0": [[0, 10], [1, 11]]}, [(2, 2, 2 * M + 10), (2, 3, 2 * M + 11)])
    # step 3: copier 1 copies 12; the commit timed out (info) but did commit
    h.copy(1, 1.6, 11.6, {"1": [[0, 12]]}, [(3, 0, 3 * M + 12)], typ="info", error="timeout")
    h.crash(1, 11.7)
    # step 4: a zombie of an older generation copies 13: fenced, nothing committed
    h.copy(2, 1.7, 2.0, {"1": [[1, 13]]}, [(3, 2, 4 * M + 13)], typ="fail", error="fenced")
    # step 5: the new owner reads 13 again and 14; its commit timed out and did NOT commit
    h.copy(4, 12.0, 22.0, {"1": [[1, 13], [2, 14]]}, [(3, 4, 5 * M + 13), (3, 5, 5 * M + 14)],
           typ="info", error="timeout")  # fmt: skip
    h.crash(4, 22.1)
    # step 6: its successor copies 13 and 14 (a third read of 13); then an empty step
    h.copy(5, 23.0, 23.3, {"1": [[1, 13], [2, 14]]}, [(3, 7, 6 * M + 13), (3, 8, 6 * M + 14)])
    h.copy(5, 24.0, 24.1, {}, [])
    h.drain(90, 30.0, {
        "0": [[0, 10], [1, 11]], "1": [[0, 12], [1, 13], [2, 14]],
        "2": [[2, 2 * M + 10], [3, 2 * M + 11]],
        "3": [[0, 3 * M + 12], [7, 6 * M + 13], [8, 6 * M + 14]],
    })  # fmt: skip
    res = h.check(META)
    assert res["valid"] is True, res["error_types"]
    assert res["error_types"] == []


def test_queen_null_offsets_for_transactional_sends_are_valid() -> None:
    # Queen returns -1 for transactional sends: recorded as null offsets.
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, None, M + 10), (3, None, M + 11)])
    # another copier's aborted copy of 10 (copier 0's own consumer had moved past
    # offset 0: re-reading it would be a nonmonotonic-poll, Jepsen's rule)
    h.copy(1, 2.0, 2.5, {"0": [[0, 10]]}, [(2, None, 2 * M + 10)], typ="fail", error="abort")
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [[0, M + 10]], "3": [[0, M + 11]]})
    res = h.check(META)
    assert res["valid"] is True and res["error_types"] == []


def test_copy_section_under_checker_or_workload_and_test_json_on_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(3, 0, M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [], "3": [[0, M + 11]]})
    for where in ("checker", "workload"):
        assert set(h.check({where: {"copy": COPY}})["error_types"]) == {"eos-loss"}
    d = h.write(tmp_path / "run", META)
    code, _out, _err = cli(["check", str(d)], capsys)
    res = json.loads((d / "results.json").read_text())
    assert code == 1 and res["bad_error_types"] == ["eos-loss"]


def test_eos_duplicate_of_two_committed_copies_is_explained() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, 0, M + 10), (3, 0, M + 11)])
    # a zombie copier of the old generation was not fenced: it copied 10 again
    h.copy(1, 2.0, 2.5, {"0": [[0, 10]]}, [(2, 2, 2 * M + 10)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]],
                       "2": [[0, M + 10], [2, 2 * M + 10]], "3": [[0, M + 11]]})  # fmt: skip
    res = h.check(META)
    assert res["valid"] is False and set(res["bad_error_types"]) == {"eos-duplicate"}
    (ex,) = examples(res, "eos-duplicate")
    assert (ex["key"], ex["value"], ex["output_key"]) == ("0", 10, "2")
    assert ex["offsets"] == [0, 2] and ex["output_values"] == [M + 10, 2 * M + 10]
    assert len(ex["writers"]) == 2
    for s in ("input value 10", "key 0", "output key 2", "offset 0", "offset 2"):
        assert s in ex["explanation"]


def test_eos_duplicate_inside_one_step() -> None:
    # one step wrote the same input value twice (two offsets, one output value)
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]},
           [(2, 0, M + 10), (3, 0, M + 11), (2, 1, M + 10)])  # fmt: skip
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]],
                       "2": [[0, M + 10], [1, M + 10]], "3": [[0, M + 11]]})  # fmt: skip
    res = h.check(META)
    assert "eos-duplicate" in res["bad_error_types"]


def test_same_value_twice_in_one_op_does_not_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = H()
    h.send(1000, 0.0, 0.1, 0, 10, 0)
    h.send(1000, 0.2, 0.3, 0, 10, 1)  # the input log holds 10 twice (a broker duplicate)
    h.copy(0, 1.0, 1.5, {"0": [[0, 10], [1, 10]]}, [(2, 0, M + 10), (2, 1, M + 10)])
    h.drain(90, 30.0, {"0": [[0, 10], [1, 10]], "2": [[0, M + 10], [1, M + 10]]})
    d = h.write(tmp_path / "run", META)
    code, _out, err = cli(["check", str(d)], capsys)
    assert code == 1, err
    res = json.loads((d / "results.json").read_text())
    assert "duplicate" in res["bad_error_types"]


def test_input_duplicate_is_not_blamed_on_the_copier() -> None:
    h = H()
    h.send(1000, 0.0, 0.1, 0, 10, 0)
    h.send(1000, 0.2, 0.3, 0, 10, 1)
    # copied in two steps: each input record exactly once
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]]}, [(2, 0, M + 10)])
    h.copy(0, 2.0, 2.5, {"0": [[1, 10]]}, [(2, 2, 2 * M + 10)])
    h.drain(90, 30.0, {"0": [[0, 10], [1, 10]], "2": [[0, M + 10], [2, 2 * M + 10]]})
    res = h.check(META)
    assert "duplicate" in res["bad_error_types"]  # the input log's own anomaly
    dup = res["anomalies"].get("eos-duplicate")
    if dup is not None:  # if reported, it must show the input held the value twice
        (ex,) = dup["examples"]
        assert ex.get("input_offsets") == [0, 1] or "input offsets 0" in ex["explanation"]


def test_eos_duplicate_names_the_zombie_info_writer() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 11.0, {"0": [[0, 10]]}, [(2, 0, M + 10)], typ="info", error="timeout")
    h.copy(1, 2.0, 2.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, 2, 2 * M + 10), (3, 0, M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]],
                       "2": [[0, M + 10], [2, 2 * M + 10]], "3": [[0, M + 11]]})  # fmt: skip
    lines = h.lines()
    info_idx = next(d["index"] for d in lines if d["type"] == "info" and d["f"] == "txn")
    ok_idx = next(d["index"] for d in lines if d["type"] == "ok" and d["f"] == "txn")
    res = h.check(META)
    (ex,) = examples(res, "eos-duplicate")
    assert info_idx in ex["writers"] and ok_idx in ex["writers"]
    assert f"op {info_idx}" in ex["explanation"] and f"op {ok_idx}" in ex["explanation"]


def test_eos_duplicate_with_unknown_offsets_and_no_output_read() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, None, M + 10), (3, None, M + 11)])
    h.copy(1, 2.0, 2.5, {"0": [[0, 10]]}, [(2, None, 2 * M + 10)])
    res = h.check(META)
    assert "eos-duplicate" in res["bad_error_types"]


def test_eos_loss_when_only_aborted_or_uncommitted_copies_exist() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]]}, [(2, 0, M + 10)], typ="fail", error="abort")
    h.copy(1, 2.0, 12.0, {"1": [[0, 11]]}, [(3, 0, M + 11)], typ="info", error="timeout")
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [], "3": []})
    res = h.check(META)
    assert set(res["bad_error_types"]) == {"eos-loss"}
    got = {(e["key"], e["value"], e["output_key"]) for e in examples(res, "eos-loss")}
    assert got == {("0", 10, "2"), ("1", 11, "3")}
    assert all("caveat" not in e for e in examples(res, "eos-loss"))


def test_eos_loss_caveat_when_the_copiers_did_not_catch_up() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"1": [[0, 11]]}, [(3, 0, M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [], "3": [[0, M + 11]]})
    meta = {**META, "drain": {"caught_up": False, "copy_caught_up": False}}
    (ex,) = examples(h.check(meta), "eos-loss")
    assert "caught up" in ex["caveat"]


def test_misrouted_copy_is_a_loss_of_its_input() -> None:
    h = two_inputs()
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(3, 0, M + 10), (3, 1, M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10]], "1": [[0, 11]], "2": [], "3": [[0, M + 10], [1, M + 11]]})
    res = h.check(META)
    (ex,) = examples(res, "eos-loss")
    assert (ex["key"], ex["value"], ex["output_key"]) == ("0", 10, "2")


def test_eos_loss_names_the_input_offset() -> None:
    h = two_inputs()
    h.send(1000, 0.2, 0.3, 0, 12, 1)
    h.copy(0, 1.0, 1.5, {"0": [[0, 10], [1, 12]]}, [(2, 0, M + 10)])
    h.copy(0, 1.6, 1.8, {"1": [[0, 11]]}, [(3, 0, 2 * M + 11)])
    h.drain(90, 30.0, {"0": [[0, 10], [1, 12]], "1": [[0, 11]],
                       "2": [[0, M + 10]], "3": [[0, 2 * M + 11]]})  # fmt: skip
    (ex,) = examples(h.check(META), "eos-loss")
    assert (ex["key"], ex["value"]) == ("0", 12)
    assert ex.get("offset") == 1 and "offset 1" in ex["explanation"]


def test_an_acknowledged_copy_missing_from_the_drained_output_is_a_lost_write() -> None:
    """docs/anomalies.md: a copy acknowledged to an ok copier but never read back is a
    lost-write on the output key (the copier did its part; the log lost it), not an
    eos-loss -- and the run is invalid either way."""
    h = two_inputs()
    h.send(1000, 0.2, 0.3, 0, 12, 1)
    h.copy(0, 1.0, 1.5, {"0": [[0, 10]], "1": [[0, 11]]}, [(2, 0, M + 10), (3, 0, M + 11)])
    h.copy(0, 2.0, 2.5, {"0": [[1, 12]]}, [(2, 2, 2 * M + 12)])
    h.drain(90, 30.0, {"0": [[0, 10], [1, 12]], "1": [[0, 11]],
                       "2": [[2, 2 * M + 12]], "3": [[0, M + 11]]})  # fmt: skip
    res = h.check(META)
    assert res["valid"] is False and "lost-write" in res["bad_error_types"]
    (ex,) = examples(res, "lost-write")
    assert (ex["key"], ex["value"]) == ("2", M + 10)
    assert "eos-loss" not in res["error_types"]


@pytest.mark.parametrize(
    "section",
    [{"input_keys": [0]}, {"route": {"0": 2}, "value_modulus": None}, {"route": [[0, 2]]}],
    ids=["no-route", "null-modulus", "route-list"],
)
def test_bad_copy_section_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section: dict[str, Any]
) -> None:
    h = two_inputs()
    h.poll(9, 1.0, 1.1, {"0": [[0, 10]]})
    d = h.write(tmp_path / "run", {"workload": "copy", "copy": section})
    code, _out, err = cli(["check", str(d)], capsys)
    assert code == 254 and "test.json" in err and "copy" in err


# ================================================================ part 2: liveness


def steady(h: H, a: float, b: float, o: int = 0, per_s: int = 10, key: int = 1) -> int:
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
    h = H()
    o = steady(h, 0, 30)
    h.nem(30.0, "start-partition", {"n1": ["n2", "n3"]})
    for i in range(10):  # sends time out during the partition
        h.add(30.0 + i, process=0, type="invoke", f="send", value=[["send", 1, 5000 + i]])
        h.add(30.9 + i, process=0, type="fail", f="send", value=[["send", 1, 5000 + i]])
    h.nem(40.0, "stop-partition", {})
    o = steady(h, 40.5, 90, o)
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
    h = H(t0)
    o = steady(h, 0, 25)
    o = steady(h, 200, 230, o)  # 175 s without any traffic
    res = h.check(liveness_bad=True)
    assert_healthy(res)
    assert live(res)["starvation"]["windows_judged"] >= 4


def test_healthy_single_process_transactions() -> None:
    h = H(t0=3.0)
    for i in range(400):  # one process: a txn, then a poll reading it back
        t = i / 10
        h.pair(0, t, t + 0.03, "txn", [["send", 1, i]], [["send", 1, [2 * i, i]]])
        h.poll(0, t + 0.04, t + 0.09, {"1": [[2 * i, i]]})
    res = h.check(liveness_bad=True)
    assert_healthy(res)
    assert live(res)["commit_latency_ms"]["f"] == "txn"


def test_healthy_copy_run_has_no_liveness_violation() -> None:
    h = H()
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
    h = H()
    o = steady(h, 0, 10)
    h.nem(10.0, "kill", {"node": "n1"})
    h.nem(20.0, "start", {"node": "n1"})
    steady(h, 100, 130, o)  # traffic resumes 80 s after the heal and works at once
    res = h.check(liveness_bad=True)
    assert "slow-recovery" not in vtypes(res), live(res)["violations"]


def test_stuck_metric_is_never_negative() -> None:
    h = H()
    h.send(0, 0.0, 100.0, 1, 10, None, typ="info")  # timed out at 100 s
    h.poll(1, 1.0, 2.0, {"1": [[0, 10]]})  # ... but its value was read at 2 s
    res = h.check(liveness_bad=True)
    assert res["valid"] is True
    assert negatives(live(res)) == []


def test_odd_histories_give_serialisable_sane_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases: dict[str, H] = {}
    h = H()
    h.nem(0.0, "node-stats", {"n1": {"rss_bytes": 1}})
    h.nem(5.0, "heal", {})
    cases["nemesis-only"] = h
    h = H()
    h.add(0.0, process=0, type="invoke", f="send", value=[["send", 1, 1]])
    cases["invoke-only"] = h
    h = H(t0=7.5)
    h.poll(1, 1.0, 2.0, {"1": [[0, 10]]})  # a read of a value nobody wrote
    h.nem(0.5, "resume", {})
    h.nem(1.0, "node-stats", {"n1": {"rss_bytes": 0}, "n2": "garbage", "n3": {"rss_bytes": None}})
    cases["read-only"] = h
    h = H()
    h.nem(0.0, "heal", {})
    h.send(0, 10.0, 10.0, 1, 10, 0)  # zero-length op
    h.poll(1, 10.0, 10.0, {"1": [[0, 10]]})
    for i, r in enumerate([100, 0, 300]):
        h.nem(float(i), "node-stats", {"n1": {"rss_bytes": r}})
    cases["zero-times"] = h
    for name, h in cases.items():
        d = h.write(tmp_path / name)
        code, _out, err = cli(["check", str(d), "--liveness-bad"], capsys)
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
    h = H(t0=500.0)
    o = steady(h, 0, 20)
    # 20-40 s: producers carry on, consumer 1 gets nothing; it catches up at 45 s
    start = o
    for i in range(200):
        t = 20 + i / 10
        h.send(0, t, t + 0.01, 1, 1000 + o, o)
        o += 1
    h.poll(1, 44.0, 45.0, {"1": [[i, 1000 + i] for i in range(start, o)]})
    h.nem(30.0, "start-partition", {"n1": ["n2"]})
    h.nem(45.0, "stop-partition", {})
    for i in range(8):  # key 2 refuses sends for 75 s after the heal, then one lands
        h.add(45.5 + 10 * i, process=2, type="invoke", f="send", value=[["send", 2, 9000 + i]])
        h.add(46.0 + 10 * i, process=2, type="fail", f="send", value=[["send", 2, 9000 + i]])
    steady(h, 45.0, 130.0, o)
    h.send(3, 10.0, 10.1, 3, 7, 4)  # key 3: value 7 at offset 4, never read
    for i in range(6):  # node n2's RSS: 300 MiB -> 550 MiB; n1 flat
        rss = {"n1": {"rss_bytes": 400 * MIB}, "n2": {"rss_bytes": (300 + 50 * i) * MIB}}
        h.nem(20.0 * i, "node-stats", rss)
    d = h.write(tmp_path / "run", {"liveness_bad": True})
    code, _out, _err = cli(["check", str(d)], capsys)
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
    assert mem["node"] == "n2" and "+250 MiB" in mem["explanation"]
    assert negatives(live(res)) == []
    json.dumps(res, allow_nan=False)


def test_slow_recovery_flagged_and_explained() -> None:
    h = H(t0=12.0)
    o = steady(h, 0, 10)
    h.nem(10.0, "pause", {"node": "n1"})
    h.nem(20.0, "resume", {"node": "n1"})
    for i in range(7):  # attempts right after the heal keep failing until 90 s
        h.add(20.5 + 10 * i, process=0, type="invoke", f="send", value=[["send", 1, 8000 + i]])
        h.add(29.5 + 10 * i, process=0, type="info", f="send", value=[["send", 1, 8000 + i]])
    steady(h, 90, 100, o)
    res = h.check(liveness_bad=True)
    (v,) = examples(res, "slow-recovery")
    # timed from the first attempt after the heal (20.5 s) to the first success (90.01 s)
    assert v["f"] == "resume" and v["time_s"] == 20.0 and v["send_s"] == pytest.approx(69.51)
    assert "sends took 69.5 s" in v["explanation"] and "threshold 60 s" in v["explanation"]


def base_traffic() -> H:
    h = H()
    steady(h, 0, 3)
    return h


def test_memory_leak_ending_in_an_oom_kill_is_flagged() -> None:
    h = base_traffic()
    for i, r in enumerate([400, 600, 800, 1000, 1200]):
        h.nem(30.0 * i, "node-stats", {"n1": {"rss_bytes": r * MIB, "cache_bytes": 0}})
    h.nem(130.0, "oom-kill", {"node": "n1"})
    h.nem(140.0, "start", {"nodes": ["n1"], "reason": "oom-killed"})
    for i, r in enumerate([300, 350]):
        h.nem(150.0 + 30 * i, "node-stats", {"n1": {"rss_bytes": r * MIB, "cache_bytes": 0}})
    res = h.check(liveness_bad=True)
    assert "memory-growth" in vtypes(res)


def test_node_first_sampled_while_booting_is_not_growth() -> None:
    h = base_traffic()
    h.nem(0.0, "node-stats", {"n2": {"rss_bytes": 500 * MIB}})  # n1 is down
    for i, r in enumerate([150, 450, 460, 455, 458, 452]):
        rss = {"n1": {"rss_bytes": r * MIB}, "n2": {"rss_bytes": 500 * MIB}}
        h.nem(10.0 + 30 * i, "node-stats", rss)
    res = h.check(liveness_bad=True)
    assert "memory-growth" not in vtypes(res)


def test_memory_growth_default_thresholds_boundaries() -> None:
    h = base_traffic()
    for i in range(3):  # n1: +60 MiB of 100 (60% but under 64 MiB); n2: +70 MiB of 400 (17%)
        rss = {"n1": {"rss_bytes": (100 + 30 * i) * MIB}, "n2": {"rss_bytes": (400 + 35 * i) * MIB},
               "n3": {"rss_bytes": (200 + 60 * i) * MIB}}  # fmt: skip
        h.nem(60.0 * i, "node-stats", rss)
    res = h.check(liveness_bad=True)
    nodes = live(res)["memory"]["nodes"]
    assert (nodes["n1"]["flagged"], nodes["n2"]["flagged"], nodes["n3"]["flagged"]) == (
        False, False, True)  # fmt: skip
    assert [e["node"] for e in examples(res, "memory-growth")] == ["n3"]
