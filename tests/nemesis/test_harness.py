"""nemesis/harness.py: ktrial's own Toxiproxy dying mid-run is recorded at once, once,
with how it died; stopping it on purpose is not a failure."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from ktrial.nemesis.harness import F_HARNESS_ERROR, HarnessWatch, how
from ktrial.nemesis.toxiproxy import ToxiproxyServer, default_binary


class Rec:
    def __init__(self) -> None:
        self.ops: list[tuple[str, Any]] = []

    def nemesis(self, f: str, value: Any, **extra: Any) -> None:
        self.ops.append((f, value))


def test_how_a_process_ended() -> None:
    assert how(-9) == "killed by SIGKILL" and how(2) == "exited with status 2"
    assert how(-200) == "killed by signal 200"


needs_toxiproxy = pytest.mark.skipif(
    not default_binary().exists(), reason="toxiproxy-server not installed (scripts/setup.sh)"
)


@needs_toxiproxy
def test_a_killed_toxiproxy_is_recorded_once_with_its_signal() -> None:
    server = ToxiproxyServer()
    server.start()
    rec, said = Rec(), list[str]()
    watch = HarnessWatch({"Toxiproxy": server}, rec, said.append, interval_s=0.05).start()
    try:
        time.sleep(0.2)
        assert rec.ops == []  # alive: nothing to say
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)  # what another run's clean-up did to a soak
        deadline = time.monotonic() + 5
        while not rec.ops and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # more polls: still one op
    finally:
        watch.close()
        server.stop()
    assert [f for f, _ in rec.ops] == [F_HARNESS_ERROR]
    value = rec.ops[0][1]
    assert value["what"] == "Toxiproxy" and value["status"] == -signal.SIGKILL
    assert "killed by SIGKILL" in value["error"] and str(value["pid"]) in value["error"]
    assert said and said[0].startswith("HARNESS FAILURE: ktrial's Toxiproxy")


@needs_toxiproxy
def test_stopping_the_proxy_on_purpose_is_no_failure() -> None:
    server = ToxiproxyServer()
    server.start()
    rec = Rec()
    watch = HarnessWatch({"Toxiproxy": server}, rec, interval_s=0.05).start()
    server.stop()  # teardown order gone wrong: still not a death
    time.sleep(0.2)
    watch.close()
    assert rec.ops == []
