"""Durability of what a run writes (histories/store.py, the HistoryWriter in
histories/jsonl.py): directory fsyncs after creating and renaming files, and the
writer's background fsync does not hold the lock every worker's append needs."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from ktrial.histories.jsonl import HistoryWriter
from ktrial.histories.store import create_run, write_json

OP = {"process": 0, "type": "invoke", "f": "send", "value": None, "time": 0}


def _recording_fsync(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Patch os.fsync to note what each call synced (the path behind the descriptor)."""
    real = os.fsync
    synced: list[str] = []

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_the_run_directory_is_synced_after_files_appear_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _recording_fsync(monkeypatch)
    rd = create_run(tmp_path / "store", "queue")
    assert str(rd.path.parent) in synced  # the new run directory (and `latest`)
    synced.clear()
    w = HistoryWriter(rd.history, fsync_interval=60)
    assert synced == [str(rd.path)]  # history.jsonl's name is durable before any op
    w.close()
    for f in (rd.results, rd.test_json):
        synced.clear()
        write_json(f, {"valid": True})
        # the data before the rename, the directory after it
        assert synced == [str(rd.path / f".{f.name}.tmp"), str(rd.path)], synced


def test_a_slow_background_fsync_does_not_block_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.fsync
    in_fsync, release = threading.Event(), threading.Event()

    def slow_fsync(fd: int) -> None:
        if threading.current_thread().name == "history-fsync":
            in_fsync.set()
            release.wait(5)  # a disk that takes its time
        real(fd)

    w = HistoryWriter(tmp_path / "history.jsonl", fsync_interval=0.02)
    monkeypatch.setattr(os, "fsync", slow_fsync)
    try:
        w.write_dict(OP)  # dirty: the syncer will fsync within 20 ms
        assert in_fsync.wait(5), "the background fsync never started"
        t0 = time.monotonic()
        for _ in range(100):
            w.write_dict(OP)
        blocked = time.monotonic() - t0
        assert blocked < 1.0, f"appends waited {blocked:.1f}s for the fsync"
        assert w.count == 101
    finally:
        release.set()
        w.close()
    assert len((tmp_path / "history.jsonl").read_bytes().splitlines()) == 101


def test_close_during_a_background_fsync_is_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.fsync
    in_fsync, release = threading.Event(), threading.Event()

    def slow_fsync(fd: int) -> None:
        if threading.current_thread().name == "history-fsync":
            in_fsync.set()
            release.wait(5)
        real(fd)  # the descriptor must still be valid after close()

    w = HistoryWriter(tmp_path / "history.jsonl", fsync_interval=0.02)
    monkeypatch.setattr(os, "fsync", slow_fsync)
    w.write_dict(OP)
    assert in_fsync.wait(5)
    errors: list[BaseException] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value or RuntimeError())
    try:
        w.close()
        release.set()
        w._syncer.join(5)
    finally:
        threading.excepthook = hook
    assert errors == [] and not w._syncer.is_alive()
