"""Dependency cycles: G0, G1c and their realtime variants, explained step by step."""

from __future__ import annotations

from typing import Any

from ktrial.checker import CheckOptions, check
from ktrial.histories.jsonl import op_from_json


def H(*ops: dict[str, Any]) -> list[Any]:
    out = []
    for i, o in enumerate(ops):
        d = dict(o)
        d.setdefault("index", i)
        d.setdefault("time", i * 1_000_000)
        out.append(op_from_json(d, i))
    return out


def inv(p: int, mops: list[Any]) -> dict:
    return {"process": p, "type": "invoke", "f": "txn", "value": mops}


def ok(p: int, mops: list[Any]) -> dict:
    return {"process": p, "type": "ok", "f": "txn", "value": mops}


def reader(p: int, recs: dict[str, Any]) -> dict:
    return {"process": p, "type": "ok", "f": "poll", "value": [["poll", recs]]}


def circular() -> list[Any]:
    """Two concurrent transactions, each reading the other's write: circular visibility."""
    return H(
        inv(0, [["send", "x", 1], ["poll"]]),
        inv(1, [["send", "y", 2], ["poll"]]),
        ok(0, [["send", "x", [0, 1]], ["poll", {"y": [[0, 2]]}]]),
        ok(1, [["send", "y", [0, 2]], ["poll", {"x": [[0, 1]]}]]),
    )


def test_wr_only_g1c_is_bad_whatever_ww_deps_says() -> None:
    for ww in (True, False):
        res = check(circular(), CheckOptions(ww_deps=ww))
        assert res["bad_error_types"] == ["G1c"], (ww, res["error_types"])
        ex = res["anomalies"]["G1c"]["examples"][0]
        assert sorted(ex["cycle"]) == [2, 3] and ex["wr_only"] is True
        assert len(ex["steps"]) == 2
        assert "sent value 1 to key x (micro-op 0)" in ex["steps"][0] + ex["steps"][1]
        assert "circular visibility" in ex["explanation"]


def interleaved() -> list[Any]:
    """T1 writes x before T2, T2 writes y before T1: a write cycle (normal for Kafka)."""
    return H(
        inv(0, [["send", "x", 1], ["send", "y", 4]]),
        inv(1, [["send", "x", 2], ["send", "y", 3]]),
        ok(0, [["send", "x", [0, 1]], ["send", "y", [1, 4]]]),
        ok(1, [["send", "x", [1, 2]], ["send", "y", [0, 3]]]),
        reader(2, {"x": [[0, 1], [1, 2]], "y": [[0, 3], [1, 4]]}),
    )


def test_g0_is_reported_but_never_bad() -> None:
    res = check(interleaved(), CheckOptions(ww_deps=True))
    assert "G0" in res["error_types"] and res["valid"] is True
    ex = res["anomalies"]["G0"]["examples"][0]
    assert sorted(ex["cycle"]) == [2, 3] and ex["edges"] == ["ww", "ww"]
    assert "offset" in ex["steps"][0]
    # Without ww inference there are no write edges, so no write cycle at all.
    res = check(interleaved(), CheckOptions(ww_deps=False))
    assert "G0" not in res["error_types"] and res["valid"] is True


def test_g1c_through_ww_edges_is_normal_with_ww_deps() -> None:
    # T1 sends x:1 before T2's x:2 (ww T1->T2); T1 read T2's y:3 (wr T2->T1).
    h = H(
        inv(0, [["send", "x", 1], ["poll"]]),
        inv(1, [["send", "x", 2], ["send", "y", 3]]),
        ok(1, [["send", "x", [1, 2]], ["send", "y", [0, 3]]]),
        ok(0, [["send", "x", [0, 1]], ["poll", {"y": [[0, 3]]}]]),
        reader(2, {"x": [[0, 1], [1, 2]]}),
    )
    res = check(h, CheckOptions(ww_deps=True))
    assert "G1c" in res["error_types"] and "G1c" not in res["bad_error_types"]
    assert res["anomalies"]["G1c"]["examples"][0]["wr_only"] is False
    assert res["valid"] is True


def test_g1c_realtime_reading_the_future_is_bad() -> None:
    # The poll completed before the send was even invoked, yet read its value.
    h = H(
        reader(1, {"x": [[0, 7]]}),
        inv(0, [["send", "x", 7]]),
        {"process": 0, "type": "ok", "f": "send", "value": [["send", "x", [0, 7]]]},
    )
    res = check(h, CheckOptions(ww_deps=True))
    assert "G1c-realtime" in res["bad_error_types"]
    ex = res["anomalies"]["G1c-realtime"]["examples"][0]
    assert set(ex["edges"]) == {"wr", "rt"}
    assert "before" in ex["explanation"] and "value 7" in ex["explanation"]


def test_g0_realtime_is_not_bad() -> None:
    h = H(
        {"process": 0, "type": "ok", "f": "send", "value": [["send", "x", [5, 1]]]},
        {"process": 1, "type": "ok", "f": "send", "value": [["send", "x", [3, 2]]]},
        reader(2, {"x": [[3, 2], [5, 1]]}),
    )
    res = check(h)
    assert "G0-realtime" in res["error_types"] and res["valid"] is True


def test_cycle_search_timeout_makes_the_verdict_unknown() -> None:
    res = check(circular(), CheckOptions(cycle_timeout_s=1e-9))
    assert "cycle-search-timeout" in res["error_types"]
    assert res["bad_error_types"] == [] and res["valid"] == "unknown"
    ex = res["anomalies"]["cycle-search-timeout"]["examples"][0]
    assert ex["size"] == 2 and "visibility" in ex["explanation"]
