"""The drain records when it began (issue 14 B): liveness is not judged from there on."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from ktrial.checker.window import judged_window
from ktrial.histories.jsonl import HistoryWriter
from ktrial.histories.model import Op
from ktrial.histories.recorder import Recorder
from ktrial.workloads.drain import drain
from ktrial.workloads.driver import Completion


class Sink:
    def __init__(self) -> None:
        self.ops: list[Op] = []

    def append(self, op: Op) -> None:
        self.ops.append(op)


class Reader:
    """Reads key 0 up to offset 3 in one poll."""

    def assign(self, keys: Sequence[int], from_beginning: bool = False) -> Completion:
        return Completion("ok", list(keys))

    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion:
        return Completion("ok", [["poll", {"0": [[o, o] for o in range(3)]}]])

    def positions(self, keys: Sequence[int]) -> dict[int, int]:
        return dict.fromkeys(keys, 3)

    def close(self, abrupt: bool = False) -> None:
        pass


def test_the_drain_says_when_it_started_in_history_time() -> None:
    sink = Sink()
    # the Recorder only appends: the Sink stands in for the history file
    rec = Recorder(
        cast(HistoryWriter, sink), start_ns=time.monotonic_ns() - 30 * 1_000_000_000
    )  # run began 30 s ago
    res = drain(rec, lambda process: Reader(), {0: 3}, timeout_s=5.0)
    assert res["caught_up"] is True
    first = sink.ops[0]
    assert first.f == "assign" and first.extra.get("seek_to_beginning") is True
    assert 30.0 <= res["started_s"] <= first.time / 1e9  # before its first op
    # test.json's drain section is what ends the judged window
    meta = {"ktrial_version": "0.1.0", "drain": res}
    w = judged_window(meta, 0, sink.ops[-1].time)
    assert w.end_ns == round(res["started_s"] * 1e9) and "the drain" in w.why


def test_every_drivers_drain_clients_take_the_shared_settings() -> None:
    """Both driver configs accept the one set of drain settings (a renamed field in
    either would break its drain), and the drain reads only, in assign mode, in its own
    group, with the run's consumer settings on top."""
    from ktrial.workloads.confluent.config import DriverConfig
    from ktrial.workloads.drain import drain_settings
    from ktrial.workloads.driver import KeyMap
    from ktrial.workloads.worker.config import WorkerConfig

    s = drain_settings("r1", {"fetch.max.bytes": "1048576"})
    for cfg in (
        DriverConfig(bootstrap="b:1", keys=KeyMap({}), **s),
        WorkerConfig(bootstrap="b:1", keys=KeyMap({}), worker="franz", **s),
    ):
        assert (cfg.group_id, cfg.txn, cfg.sub_via) == ("ktrial-r1-drain", False, "assign")
        assert cfg.poll_ms == 500 and cfg.max_poll_records == 5000
        assert cfg.consumer_overrides == {"fetch.max.bytes": "1048576"}
