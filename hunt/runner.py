"""Run one trial as a subprocess of `ktrial run` (the side effects of a hunt).

Each trial is ``python -m ktrial run`` with the hunt's pass-through flags, its own
seed, time limit and faults, in the hunt's own store (``HUNT_DIR/runs``). A
subprocess, not a :class:`~ktrial.trial.Trial` in this process, because:

- a crash, a hung client thread or a leak in one trial cannot take the hunt down or
  leak into the next trial (every trial starts from a fresh interpreter);
- every `ktrial run` flag works as it does for a single run, with the same parsing
  and checks, and the command a replay needs is exactly the one that ran;
- Ctrl-C behaves as in a single run: the trial is started in a session of its own,
  so the terminal's Ctrl-C reaches only the hunt, which passes each one on to the
  trial, which heals, drains briefly and tears down as any run does.

The trial's verdict is read from its run directory's results.json, and its faults,
when needed, from its history (``ktrial faults export``'s reader).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..histories.jsonl import iter_history
from ..histories.store import RunDir, load_json
from ..histories.testmeta import TestMeta
from ..interrupts import handling
from ..nemesis.export import export_faults
from ..nemesis.schedule import ScriptEntry, format_script
from .verdict import bad_types_of

KTRIAL = [sys.executable, "-m", "ktrial"]


@dataclass(frozen=True)
class TrialRequest:
    """One trial to run: its phase (search, replay, confirm), seed and faults."""

    number: int  # 1, 2, ... over the whole hunt
    phase: str
    seed: int
    nemesis_args: tuple[str, ...] = ()  # a search trial's --nemesis* flags
    script: tuple[ScriptEntry, ...] | None = None  # a replay's schedule (may be empty)
    what: str = ""  # for the terminal and hunt.json


@dataclass
class TrialResult:
    request: TrialRequest
    exit_code: int
    seconds: float
    run_dir: str | None = None
    valid: Any = None  # results.json "valid": True, False, "unknown"; None: no results
    bad: tuple[str, ...] = ()  # the anomaly types that made it invalid
    interrupted: bool = False
    error: str | None = None  # the trial could not run (usage error, crash of ktrial)
    script_path: str | None = None
    log_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return {True: "VALID", False: "INVALID"}.get(self.valid, "UNKNOWN")


class Interrupts:
    """Ctrl-C (SIGINT) and SIGTERM during a hunt: count them, pass each one on to the
    running trial, and let the hunt stop at the next trial boundary."""

    def __init__(self) -> None:
        self.count = 0
        self.event = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None

    def handler(self, signum: int, frame: object) -> None:
        self.count += 1
        self.event.set()
        child = self.child
        if child is not None and child.poll() is None:
            with contextlib.suppress(OSError):
                child.send_signal(signal.SIGINT)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interrupts]:
        with handling(self.handler):
            yield self


def run_command(
    run_args: Sequence[str], seed: int, time_limit: float, nemesis: Sequence[str]
) -> list[str]:
    """The `ktrial run` arguments of a trial (without the program and the store)."""
    return [*run_args, "--seed", str(seed), "--time-limit", f"{time_limit:g}", *nemesis]


class SubprocessRunner:
    """Runs trials as `ktrial run` subprocesses into ``hunt_dir/runs``."""

    def __init__(
        self,
        hunt_dir: Path,
        run_args: Sequence[str],
        time_limit: float,
        interrupts: Interrupts,
        command: Sequence[str] | None = None,
    ) -> None:
        self.hunt_dir = hunt_dir
        self.store = hunt_dir / "runs"
        self.scripts = hunt_dir / "scripts"
        self.logs = hunt_dir / "logs"
        self.run_args = list(run_args)
        self.time_limit = time_limit
        self.interrupts = interrupts
        self.command = list(command) if command is not None else list(KTRIAL)

    def nemesis_flags(self, req: TrialRequest) -> tuple[list[str], str | None]:
        """The --nemesis* flags of a request, writing a replay's script file."""
        if req.script is None:
            return list(req.nemesis_args), None
        if not req.script:
            return [], None  # the empty schedule: a run without faults
        self.scripts.mkdir(parents=True, exist_ok=True)
        path = self.scripts / f"{req.number:03d}-{req.phase}.toml"
        path.write_text(format_script(req.script, f"hunt trial {req.number}: {req.what}"))
        return ["--nemesis-script", str(path)], str(path)

    def __call__(self, req: TrialRequest) -> TrialResult:
        nemesis, script = self.nemesis_flags(req)
        args = run_command(self.run_args, req.seed, self.time_limit, nemesis)
        argv = [
            *self.command,
            "run",
            *args,
            "--store",
            str(self.store),
            "--name",
            req.phase,
            "--no-live",
        ]
        self.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.logs / f"{req.number:03d}-{req.phase}.log"
        before = _runs(self.store / req.phase)
        t0 = time.monotonic()
        with log_path.open("wb") as log:
            log.write((" ".join(argv) + "\n\n").encode())
            log.flush()
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            self.interrupts.child = proc
            try:
                code = _wait(proc)
            finally:
                self.interrupts.child = None
        seconds = round(time.monotonic() - t0, 1)
        new = sorted(_runs(self.store / req.phase) - before)
        run_dir = new[-1] if new else None
        result = TrialResult(
            req, code, seconds, str(run_dir) if run_dir else None, script_path=script
        )
        result.log_path = str(log_path)
        read_verdict(result)
        if code not in (0, 1, 2):  # 254: usage error, 255: the harness failed
            result.error = _why(log_path) or f"ktrial run exited {code}"
        return result


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the trial; a signal handler may run meanwhile (it passes Ctrl-C on)."""
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:  # only if someone restored the default handler
            proc.send_signal(signal.SIGINT)


def _runs(base: Path) -> set[Path]:
    if not base.is_dir():
        return set()
    return {p for p in base.iterdir() if p.is_dir() and not p.is_symlink()}


MARKERS = ("harness error:", "run failed:", "Error:", "ktrial crashed:")


def _why(path: Path) -> str:
    """What a trial that could not run said: its error line, else its last lines."""
    try:
        lines = [x.strip() for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    for line in reversed(lines):
        for m in MARKERS:
            if m in line:
                return line[line.index(m) :]
    return " | ".join(lines[-3:])


def read_verdict(result: TrialResult) -> None:
    """Fill in a result's verdict and interruption from its run directory."""
    if result.run_dir is None:
        return
    rd = RunDir(Path(result.run_dir))
    try:
        res = load_json(rd.results) if rd.results.is_file() else None
    except (OSError, ValueError):
        res = None
    if isinstance(res, dict):
        result.valid = res.get("valid")
        result.bad = bad_types_of(res)
    with contextlib.suppress(OSError, ValueError):
        meta = TestMeta.read(rd.test_json)
        result.interrupted = bool(meta.interrupted)


def recorded_faults(result: TrialResult) -> tuple[ScriptEntry, ...]:
    """The faults a trial injected, as script entries (``ktrial faults export``)."""
    if result.run_dir is None:
        return ()
    rd = RunDir(Path(result.run_dir))
    meta = TestMeta.read(rd.test_json)
    return tuple(export_faults(iter_history(rd.history), meta.nemesis).entries)


Runner = Callable[[TrialRequest], TrialResult]
