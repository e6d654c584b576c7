"""The worker slot (workloads/slot.py): what it writes on the invokes it records — the
transactional id of a txn op, so `ktrial trace` can find the transaction in the
coordinator's log — and the one naming rule every driver uses for that id."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Any, cast

from ktrial.histories.jsonl import HistoryWriter, read_history
from ktrial.histories.recorder import Recorder
from ktrial.workloads.driver import Completion, Driver, DriverFactory
from ktrial.workloads.slot import Slot, transactional_id


class Echo:
    """A driver that answers every op ok with its own value (the slot's collaborator)."""

    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion:
        return Completion("ok", value)

    def close(self, abrupt: bool = False) -> None:
        pass


def run(driver: Driver, f: str, mops: list[Any]) -> Completion:
    return driver.execute(f, mops)


def ops_of(path: Path, txn_id: str | None) -> list[Any]:
    writer = HistoryWriter(path)
    factory = cast(DriverFactory, lambda process, slot: Echo())
    slot = Slot(Recorder(writer), factory, 3, threading.Event(), txn_id=txn_id)
    assert slot.open()
    for f, value, extra in (("txn", 1, {}), ("send", 2, {}), ("txn", 3, {"txn_id": "given"})):
        mops: list[Any] = [["send", 0, value]]
        slot.record(f, mops, partial(run, f=f, mops=mops), **extra)
    writer.close()
    return list(read_history(path))


def test_txn_invokes_carry_the_slots_transactional_id(tmp_path: Path) -> None:
    ops = ops_of(tmp_path / "h.jsonl", transactional_id("ktrial-ab12", 3))
    invokes = [(op.f, op.extra.get("txn_id")) for op in ops if op.type == "invoke"]
    assert invokes == [("txn", "ktrial-ab12-w3"), ("send", None), ("txn", "given")]
    # completions stay as they were: the id is on the invoke only
    assert all("txn_id" not in op.extra for op in ops if op.type != "invoke")


def test_a_slot_without_transactions_writes_no_id(tmp_path: Path) -> None:
    ops = ops_of(tmp_path / "h.jsonl", None)
    assert [op.extra.get("txn_id") for op in ops if op.type == "invoke"] == [None, None, "given"]


def test_one_transactional_id_per_slot() -> None:
    assert transactional_id("ktrial-ab12", 0) == "ktrial-ab12-w0"
    assert transactional_id("ktrial-ab12-copier", 11) == "ktrial-ab12-copier-w11"
