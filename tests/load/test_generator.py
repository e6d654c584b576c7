"""The load generator's options and process (load/generator.py)."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest
from ktrial.load.generator import ENV, LoadGenerator, LoadOptions, loadgen_program


def test_defaults_are_the_benchmarks() -> None:
    o = LoadOptions()
    assert (o.size, o.acks, o.idempotent, o.compression, o.linger_ms) == (
        256,
        "all",
        True,
        "lz4",
        5.0,
    )


def test_parse_converts_and_refuses_with_the_key() -> None:
    o = LoadOptions.parse(
        5000, {"consumers": "4", "idempotent": "false", "acks": "1", "linger-ms": "2.5"}
    )
    assert o.rate == 5000 and o.consumers == 4 and not o.idempotent and o.acks == "1"
    assert o.linger_ms == 2.5
    with pytest.raises(ValueError, match="unknown load option 'rate'"):
        LoadOptions.parse(1, {"rate": "5"})
    with pytest.raises(ValueError, match="load option consumers='x': want a int"):
        LoadOptions.parse(1, {"consumers": "x"})
    with pytest.raises(ValueError, match="idempotent producers need acks=all"):
        LoadOptions.parse(1, {"acks": "1"})
    with pytest.raises(ValueError, match="compression must be one of"):
        LoadOptions.parse(1, {"compression": "brotli"})
    with pytest.raises(ValueError, match="size must be >= 16"):
        LoadOptions.parse(1, {"size": "8"})


def test_argv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prog = tmp_path / "gen"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    monkeypatch.setenv(ENV, str(prog))
    argv = LoadOptions(rate=2500, topic="t1", linger_ms=5).argv("b:9092", 30)
    assert argv[0] == str(prog)
    assert "-brokers=b:9092" in argv and "-topic=t1" in argv and "-rate=2500" in argv
    assert "-linger=5ms" in argv and "-idempotent=true" in argv and argv[-1] == "-duration=30s"


def test_missing_program_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "nope"))
    with pytest.raises(ValueError, match=r"not built: run scripts/setup\.sh"):
        loadgen_program()


FAKE = """#!{python}
import json, signal, sys, time
def stop(*_):
    print(json.dumps({{"type": "final", "offered": 1}}), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print(json.dumps({{"type": "start", "time": time.time(), "config": {{}}}}), flush=True)
print("fake generator up", file=sys.stderr, flush=True)
while True:
    time.sleep(0.05)
"""


def test_stop_sends_sigterm_and_the_final_line_is_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prog = tmp_path / "fake-loadgen"
    prog.write_text(FAKE.format(python=sys.executable))
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(ENV, str(prog))
    out, log = tmp_path / "load.jsonl", tmp_path / "loadgen.log"
    with LoadGenerator(LoadOptions(), "b:1", out, log) as gen:
        deadline = time.monotonic() + 10
        while '"start"' not in out.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gen.running()
        pid = gen.pid
    assert not gen.running() and gen.stop() == 0  # stopped once, idempotent
    assert out.read_text().splitlines()[-1] == '{"type": "final", "offered": 1}'
    assert "fake generator up" in log.read_text()
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_generator_ignoring_sigterm_is_killed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prog = tmp_path / "stubborn"
    prog.write_text(
        f"#!{sys.executable}\nimport signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('up', flush=True)\nwhile True: time.sleep(0.05)\n"
    )
    prog.chmod(0o755)
    monkeypatch.setenv(ENV, str(prog))
    out = tmp_path / "load.jsonl"
    gen = LoadGenerator(LoadOptions(), "b:1", out, tmp_path / "log", stop_timeout=0.5).start()
    deadline = time.monotonic() + 10
    while "up" not in out.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gen.stop() == -9
