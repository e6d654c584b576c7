"""Several logical processes in one worker program (workloads/worker/hosted.py).

The Python side runs against fake_host.py (scripted replies, hangs, deaths); the Java
worker's real host mode (`ktrial-java --host`, no broker needed) against the last
tests: two processes in one JVM, a crash ends one and the other answers on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ktrial.workloads.bounded import CallTimeout, Deadline
from ktrial.workloads.worker import WorkerConfig, WorkerDriver, WorkerError
from ktrial.workloads.worker.config import worker_program
from ktrial.workloads.worker.driver import ClientFacts, spares_for
from ktrial.workloads.worker.hosted import HostedProcess, HostPool
from ktrial.workloads.worker.process import Spares

from .test_worker_driver import config, requests

FAKE_HOST = [sys.executable, str(Path(__file__).with_name("fake_host.py"))]


def ask(p: HostedProcess, call: str, budget_s: float = 5.0, **args: Any) -> dict[str, Any]:
    return p.request(call, args, Deadline(budget_s))


def test_replies_come_back_to_their_own_process_in_completion_order(calls: Path) -> None:
    pool = HostPool(FAKE_HOST, 4)
    try:
        a, b = pool.take("a"), pool.take("b")
        assert a.host is b.host and pool.started == 1
        slow: dict[str, Any] = {}
        th = threading.Thread(target=lambda: slow.update(ask(a, "echo", said="A", delay_ms=3000)))
        th.start()
        time.sleep(0.1)
        fast = ask(b, "echo", said="B")
        assert fast["said"] == "B" and fast["proc"] == b.proc_id
        assert not slow  # b's reply came back while a's earlier request was still out
        th.join(10)
        assert slow["said"] == "A" and slow["proc"] == a.proc_id
    finally:
        pool.close()
    sent = requests(calls)
    assert {r["proc"] for r in sent} == {a.proc_id, b.proc_id} and a.proc_id != b.proc_id
    assert len({r["id"] for r in sent}) == len(sent)  # ids are the host's, never reused


def test_a_pool_puts_at_most_per_host_processes_in_one_program(calls: Path) -> None:
    facts = ClientFacts()
    pool = HostPool(FAKE_HOST, 2, observed=facts)
    try:
        ps = [pool.take(f"p{i}") for i in range(5)]
        assert pool.started == 3
        assert [sum(p.host is h for p in ps) for h in {p.host for p in ps}].count(2) == 2
        assert facts.to_json()["hosts"] == {"processes_per_host": 2, "hosts_started": 3}
        first = ps[0].host
        ask(ps[0], "close")  # a place is freed: the next process goes there
        assert ps[0].dead
        assert pool.take("again").host is first and pool.started == 3
    finally:
        pool.close()
    with pytest.raises(WorkerError, match="pool closed"):
        pool.take("late")


def test_a_call_that_does_not_answer_crashes_only_its_own_process(calls: Path) -> None:
    pool = HostPool(FAKE_HOST, 4)
    try:
        a, b = pool.take("a"), pool.take("b")
        with pytest.raises(CallTimeout, match="hang did not answer in time"):
            ask(a, "hang", budget_s=0.3)
        assert a.dead and a.proc_id not in a.host.procs
        assert ask(b, "echo", said="still")["said"] == "still"
        with pytest.raises(WorkerError, match="called after the process was stopped"):
            ask(a, "echo")
    finally:
        pool.close()
    crashes = [r for r in requests(calls) if r["call"] == "crash"]
    assert [r["proc"] for r in crashes] == [a.proc_id]


def test_a_program_that_dies_fails_every_process_it_served(calls: Path) -> None:
    pool = HostPool(FAKE_HOST, 4)
    try:
        a, b = pool.take("a"), pool.take("b")
        with pytest.raises(WorkerError) as died:
            ask(a, "die")
        assert died.value.record["fatal"] is True and "exit status" in str(died.value.record)
        with pytest.raises(WorkerError, match="WorkerDied"):
            ask(b, "echo")
        assert a.dead and b.dead
        c = pool.take("c")  # a new program for the next process
        assert c.host is not a.host and pool.started == 2
        assert ask(c, "echo", said="new")["said"] == "new"
        assert a.host.proc.poll() == 3  # the dead program was reaped
    finally:
        pool.close()


def test_a_closed_process_is_not_crashed_afterwards(calls: Path) -> None:
    pool = HostPool(FAKE_HOST, 2)
    try:
        d = WorkerDriver(config(), 7, 0, spares=pool)
        assert isinstance(d.worker, HostedProcess)
        d.close()
        e = WorkerDriver(config(), 8, 1, spares=pool)
        e.close(abrupt=True)
        e.close(abrupt=True)  # idempotent
        for _ in range(100):  # the crash request reaches the program
            if len(requests(calls)) >= 4:
                break
            time.sleep(0.05)
        time.sleep(0.2)  # and nothing after it
    finally:
        pool.close()
    sent = [(r["call"], r["proc"]) for r in requests(calls)]
    p7, p8 = sent[0][1], sent[2][1]
    assert sent == [("open", p7), ("close", p7), ("open", p8), ("crash", p8)]
    opened = requests(calls)[0]
    assert opened["client_id"] == "ktrial-p7" and "processes_per_jvm" not in opened["settings"]


def java(**producer: Any) -> WorkerConfig:
    return config(worker="java", producer_overrides=producer)


def test_processes_per_jvm_chooses_hosts_or_spares(calls: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("KTRIAL_WORKER_JAVA", FAKE_HOST[1])
    monkeypatch.setattr(Path, "is_file", lambda self: True)
    monkeypatch.setattr("os.access", lambda *a: True)
    assert java().processes_per_host() == 1
    assert java().producer_config()["processes_per_jvm"] == 1  # recorded in test.json
    assert "processes_per_jvm" not in java().settings(True, True)  # not sent to the worker
    one = spares_for(java())
    assert isinstance(one, Spares)
    one.close()
    many = spares_for(java(processes_per_jvm="16"))
    assert isinstance(many, HostPool) and many.per_host == 16
    many.close()
    assert config(worker="franz").processes_per_host() == 1  # no host mode
    for bad in (0, -2, "x", 1.5, "2.0"):
        with pytest.raises(ValueError, match=r"processes_per_jvm must be an integer >= 1"):
            java(processes_per_jvm=bad).processes_per_host()


def java_program() -> list[str]:
    try:
        return [str(worker_program("java"))]
    except ValueError as e:
        pytest.skip(str(e))


def test_the_java_worker_hosts_processes_and_a_crash_ends_one(calls: Path) -> None:
    pool = HostPool(java_program(), 4)
    nobody = {
        "bootstrap": "127.0.0.1:1",  # no broker needed: the clients only need to exist
        "txn_id": "",
        "producer": True,
        "consumer": True,
        "group": "",
        "settings": {"acks": "all"},
        "timeout_ms": 20000,
    }
    try:
        a, b = pool.take("a"), pool.take("b")
        for p in (a, b):
            assert ask(p, "open", 30.0, client_id=p.name, **nobody)["ok"] is True
        assert ask(a, "open", 30.0, client_id="again", **nobody)["error"]["name"] == "BadRequest"
        a.kill()  # crash: the JVM ends a's clients; b is untouched
        time.sleep(0.5)
        flushed = ask(b, "flush", timeout_ms=100)
        assert flushed["ok"] is True and flushed["unreported"] == 0
        got = a.host.send(a.proc_id, "flush", {"timeout_ms": 100})
        assert got is not None and got.done.wait(10) and got.reply is not None
        assert got.reply["error"]["name"] == "NotOpen"  # a is gone from the JVM
        assert ask(b, "close", timeout_ms=1000)["ok"] is True and b.dead
        assert a.host.proc.poll() is None  # the JVM serves on with no process
    finally:
        pool.close()
    assert a.host.proc.poll() is not None


def test_the_java_host_refuses_a_request_without_a_process() -> None:
    program = java_program()
    out = subprocess.run(
        [*program, "--host"],
        input=b'{"id":1,"call":"open"}\nnot json\n',
        capture_output=True,
        timeout=60,
    )
    replies = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["error"]["name"] for r in replies] == ["BadRequest", "BadRequest"]
    assert 'no "proc"' in replies[0]["error"]["message"]
    assert out.returncode == 0  # stdin ended: the JVM exits
