"""histories/testmeta.py: test.json as one record, old spellings read, one spelling written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.histories.testmeta import TestMeta

# A test.json as `ktrial run` writes it (abridged workload fragment), in the file's order.
RUN_JSON: dict[str, Any] = {
    "ktrial_version": "0.1.0",
    "name": "queue",
    "seed": 7,
    "time_limit": 20.0,
    "wall_start": 1_795_000_000.5,
    "cluster": {"kind": "local", "broker_versions": ["3.9.0"]},
    "workload": "queue",
    "keys": {"0": {"topic": "t-0", "partition": 0}},
    "topics": {"t-0": 4},
    "sub_via": "assign",
    "ww_deps": True,
    "nemesis": {"faults": ["kill"]},
    "run": {"name": "queue", "time_limit": 20.0},
    "history_wall_start": 1_795_000_003.25,
    "drain": {"caught_up": True, "lagging_keys": {}},
    "interrupted": False,
    "wall_end": 1_795_000_040.0,
}


def test_a_run_test_json_round_trips_key_for_key_and_in_order() -> None:
    meta = TestMeta.from_json(RUN_JSON)
    assert meta.seed == 7 and meta.time_limit == 20.0 and meta.wall_start == 1_795_000_000.5
    assert meta.history_wall_start == 1_795_000_003.25 and meta.interrupted is False
    assert meta.drain == {"caught_up": True, "lagging_keys": {}}
    # the workload's fragment is kept, at its place after "cluster"
    assert set(meta.other) == {"workload", "keys", "topics", "sub_via", "ww_deps"}
    out = meta.to_json()
    assert out == RUN_JSON
    assert list(out) == list(RUN_JSON)


def test_unset_fields_are_not_written() -> None:
    """Before the main phase test.json has no drain, end time or interruption yet."""
    meta = TestMeta(ktrial_version="0.1.0", name="q", seed=1, time_limit=5.0, wall_start=1.0)
    assert meta.to_json() == {
        "ktrial_version": "0.1.0",
        "name": "q",
        "seed": 1,
        "time_limit": 5.0,
        "wall_start": 1.0,
    }
    assert TestMeta().to_json() == {}


def test_the_old_runner_spellings_load_and_the_new_ones_are_written() -> None:
    """workloads/runner.py wrote time_limit_s and a local wall_clock_start with offset."""
    old = {
        "ktrial_version": "0.1.0",
        "seed": 5,
        "cluster": {"kind": "local"},
        "wall_clock_start": "2026-11-18T12:06:40+0100",
        "time_limit_s": 180,
        "main_phase_s": 61.5,
        "workload": "txn-cost",
    }
    meta = TestMeta.from_json(old)
    assert meta.time_limit == 180
    assert meta.wall_start == 1_795_000_000.0  # 11:06:40 UTC
    assert meta.other == {"main_phase_s": 61.5, "workload": "txn-cost"}  # unknown: kept
    out = meta.to_json()
    assert "time_limit_s" not in out and "wall_clock_start" not in out
    assert out["time_limit"] == 180 and out["wall_start"] == 1_795_000_000.0


def test_a_new_spelling_wins_over_an_old_one_in_the_same_file() -> None:
    meta = TestMeta.from_json({"time_limit": 10, "time_limit_s": 99})
    assert meta.time_limit == 10 and meta.other == {"time_limit_s": 99}


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2026-11-18T11:06:40", 1_795_000_000.0),  # no offset: UTC
        ("2026-11-18T11:06:40+00:00", 1_795_000_000.0),
        ("2026-11-18T12:06:40+0100", 1_795_000_000.0),
    ],
)
def test_an_iso_wall_start_becomes_epoch_seconds(text: str, epoch: float) -> None:
    assert TestMeta.from_json({"wall_start": text}).wall_start == epoch


def test_values_of_the_wrong_type_are_kept_as_they_were_and_not_trusted() -> None:
    data = {"seed": "x", "interrupted": "no", "wall_start": "yesterday", "cluster": [1], "name": 3}
    meta = TestMeta.from_json(data)
    assert meta.seed is None and meta.interrupted is None and meta.wall_start is None
    assert meta.cluster is None and meta.name is None
    assert meta.to_json() == data
    assert TestMeta.from_json({"seed": True}).seed is None  # a bool is not a seed


def test_setting_looks_at_the_top_level_then_the_sections_in_either_spelling() -> None:
    meta = TestMeta.from_json(
        {
            "ww_deps": False,
            "workload": {"name": "queue", "sub-via": "subscribe"},
            "checker": {"stuck_s": 12, "ww_deps": True},
            "options": {"liveness-bad": True},
        }
    )
    assert meta.setting("ww_deps") is False  # the top level first
    assert meta.setting("sub_via") == "subscribe"
    assert meta.setting("stuck_s") == 12
    assert meta.setting("liveness_bad") is True
    assert meta.setting("recovery_s") is None


def test_readers_of_the_workload_fragment() -> None:
    meta = TestMeta.from_json(RUN_JSON)
    assert meta.workload_name == "queue"
    assert meta.keys == {"0": {"topic": "t-0", "partition": 0}}
    assert meta.topics == {"t-0": 4}
    assert meta.broker_versions == ["3.9.0"]
    assert meta.slo == {}
    jepsen = TestMeta.from_json({"workload": {"kind": "queue"}, "keys": [1], "slo": {"x": 1}})
    assert jepsen.workload_name == "queue" and jepsen.keys == {} and jepsen.slo == {"x": 1}
    assert TestMeta().workload_name is None and TestMeta().broker_versions == []


def test_read_and_write_files(tmp_path: Path) -> None:
    path = tmp_path / "test.json"
    assert TestMeta.read(path) == TestMeta()  # no test.json: an empty record
    TestMeta.from_json(RUN_JSON).write(path)
    assert json.loads(path.read_text()) == RUN_JSON
    assert TestMeta.read(path) == TestMeta.from_json(RUN_JSON)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object, not list"):
        TestMeta.read(path)
    path.write_text("{not json")
    with pytest.raises(ValueError):
        TestMeta.read(path)
