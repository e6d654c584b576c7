"""WorkerDriver, the Python side of a driver worker (workloads/worker/driver.py).

A fake worker (fake_worker.py: the JSON-lines contract over an in-memory log) stands
in for the worker process, so these tests pin what the adapter sends and how it turns
replies, error records, hangs and deaths into completions. The franz worker itself
runs against real brokers in tests/integration/test_workloads_runs.py.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from ktrial.workloads.driver import KeyMap, TopicPartition
from ktrial.workloads.worker import WorkerConfig, WorkerDriver, WorkerError
from ktrial.workloads.worker.process import WorkerProcess

FAKE = [sys.executable, str(Path(__file__).with_name("fake_worker.py"))]
KEYS = KeyMap({k: TopicPartition("t", k) for k in range(4)})


def config(**kw: Any) -> WorkerConfig:
    base: dict[str, Any] = {
        "bootstrap": "b:9092",
        "keys": KEYS,
        "group_id": "g",
        "txn_id_prefix": "tx",
        "op_timeout_s": 2.0,
        "init_timeout_s": 2.0,
        "commit_min_s": 0.5,
        "abort_timeout_s": 1.0,
        "close_wait_s": 1.0,
    }
    base.update(kw)
    return WorkerConfig(**base)


def requests(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def names(log: Path) -> list[str]:
    return [r["call"] for r in requests(log)]


def open_driver(cfg: WorkerConfig | None = None, slot: int = 3, **kw: Any) -> WorkerDriver:
    return WorkerDriver(cfg or config(), 7, slot, program=FAKE, **kw)


def test_open_sends_the_run_settings_and_the_slots_transactional_id(calls: Path) -> None:
    d = open_driver(config(txn=True, producer_overrides={"linger.ms": 5}))
    d.close()
    first = requests(calls)[0]
    assert first["call"] == "open" and first["bootstrap"] == "b:9092"
    assert first["txn_id"] == "tx-w3" and first["producer"] and first["consumer"]
    assert first["client_id"] == "ktrial-p7"
    s = first["settings"]
    assert s["linger.ms"] == 5 and s["isolation.level"] == "read_committed"
    assert s["transaction.timeout.ms"] == 10000 and "bootstrap.servers" not in s
    assert first["timeout_ms"] == 2000
    assert names(calls)[-1] == "close"


def test_a_send_completes_with_the_offsets_the_worker_reported(calls: Path) -> None:
    d = open_driver()
    c = d.execute("send", [["send", 1, 10], ["send", 1, 11], ["send", 2, 20]])
    assert (c.type, c.value) == (
        "ok",
        [["send", 1, [0, 10]], ["send", 1, [1, 11]], ["send", 2, [0, 20]]],
    )
    produced = [r for r in requests(calls) if r["call"] == "produce"]
    assert [r["records"][0]["value"] for r in produced] == ["10", "11", "20"]
    assert {r["records"][0]["op"] for r in produced} == {1}  # one op's sends share a tag
    d.close()


def test_a_poll_reads_what_was_sent_as_history_values(calls: Path) -> None:
    d = open_driver()
    d.execute("send", [["send", 0, 5], ["send", 0, 6]])
    assert d.assign([0, 1]).type == "ok"
    assign = next(r for r in requests(calls) if r["call"] == "assign")
    assert assign["offsets"] == [
        {"topic": "t", "partition": 0, "offset": 0},
        {"topic": "t", "partition": 1, "offset": 0},
    ]
    c = d.execute("poll", [["poll"]])
    assert (c.type, c.value) == ("ok", [["poll", {"0": [[0, 5], [1, 6]]}]])
    assert d.positions([0, 1]) == {0: 2, 1: 0}
    d.close()


def test_a_txn_begins_sends_offsets_and_commits(calls: Path) -> None:
    d = open_driver(config(txn=True))
    d.execute("send", [["send", 2, 1]])
    d.assign([2])
    c = d.execute("txn", [["poll"], ["send", 3, 9]])
    assert c.type == "ok", c
    assert c.value == [["poll", {"2": [[0, 1]]}], ["send", 3, [0, 9]]]
    seq = names(calls)
    assert seq[seq.index("begin") :] == [
        "begin",
        "fetch",
        "produce",
        "flush",
        "send_offsets",
        "commit",
    ]
    offsets = next(r for r in requests(calls) if r["call"] == "send_offsets")
    assert offsets["group"] == "g"
    assert offsets["offsets"] == [{"topic": "t", "partition": 2, "offset": 1}]  # next to read
    d.close()


def test_a_deliberate_abort_fails_and_rewinds_the_consumer(calls: Path) -> None:
    d = open_driver(config(txn=True))
    d.execute("send", [["send", 0, 1]])
    d.assign([0])
    c = d.execute("txn", [["poll"], ["send", 1, 2]], abort=True)
    assert (c.type, c.error, c.retire) == ("fail", {"name": "DeliberateAbort"}, False)
    assigns = [r for r in requests(calls) if r["call"] == "assign"]
    assert assigns[-1]["offsets"] == [{"topic": "t", "partition": 0, "offset": 0}]  # read again
    assert "abort" in names(calls) and "commit" not in names(calls)
    d.close()


def test_a_failed_commit_is_info_and_retires(calls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FAIL", "commit=REQUEST_TIMED_OUT")
    d = open_driver(config(txn=True))
    c = d.execute("txn", [["send", 0, 1]])
    assert (c.type, c.retire) == ("info", True)
    assert c.error["name"] == "REQUEST_TIMED_OUT"
    assert "abort" not in names(calls)  # never abort after a commit of unknown outcome
    d.close(abrupt=True)


def test_a_commit_that_never_answers_is_info_and_kills_the_worker(
    calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HANG", "commit")
    d = open_driver(config(txn=True, op_timeout_s=0.2))
    c = d.execute("txn", [["send", 0, 1]])
    assert (c.type, c.retire, c.error["name"]) == ("info", True, "CommitTimeout")
    assert isinstance(d.worker, WorkerProcess) and d.worker.proc.poll() is not None  # killed
    d.close()


def test_a_fenced_send_fails_the_txn_and_retires(
    calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL_SEND", "PRODUCER_FENCED")
    d = open_driver(config(txn=True))
    c = d.execute("txn", [["send", 0, 1]])
    assert (c.type, c.retire, c.error["name"]) == ("fail", True, "PRODUCER_FENCED")
    assert c.value == [["send", 0, 1]]  # no offset: not acknowledged
    d.close(abrupt=True)


def test_a_refused_send_fails_and_an_unknown_one_is_info(
    calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL_SEND", "MESSAGE_TOO_LARGE")
    d = open_driver()
    c = d.execute("send", [["send", 0, 1]])
    assert (c.type, c.retire) == ("info", False)  # sent, then refused: some may have landed
    d.close(abrupt=True)
    monkeypatch.setenv("FAKE_FAIL", "produce=MESSAGE_TOO_LARGE")
    monkeypatch.delenv("FAKE_FAIL_SEND")
    d = open_driver()
    c = d.execute("send", [["send", 0, 1]])
    assert (c.type, c.retire) == ("fail", False)  # refused before anything was sent
    d.close(abrupt=True)


def test_a_worker_that_dies_retires_its_process(
    calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_DIE", "fetch")
    d = open_driver()
    d.assign([0])
    c = d.execute("poll", [["poll"]])
    assert (c.type, c.retire) == ("info", True)
    assert c.error["name"] == "WorkerDied" and "exit status 3" in c.error["message"]


def test_opening_fails_with_the_workers_error_and_leaves_no_process(
    calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL", "open=COORDINATOR_NOT_AVAILABLE")
    with pytest.raises(WorkerError, match="COORDINATOR_NOT_AVAILABLE"):
        open_driver(config(txn=True))


def test_an_abrupt_close_kills_without_a_goodbye(calls: Path) -> None:
    d = open_driver()
    d.close(abrupt=True)
    assert isinstance(d.worker, WorkerProcess) and d.worker.proc.returncode is not None
    assert "close" not in names(calls)
    d.close()  # idempotent


def test_stop_cuts_a_hanging_call_short(calls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_HANG", "flush")
    stop = threading.Event()
    d = WorkerDriver(
        config(txn=True, op_timeout_s=30, stop_grace_s=0.2), 1, 0, program=FAKE, stop=stop
    )
    stop.set()
    c = d.execute("txn", [["send", 0, 1]])
    assert (c.type, c.retire) == ("fail", True)  # the commit was never attempted
    assert c.error["name"] == "CallTimeout"
