"""Safety checks while a run is going: ``ktrial run --check-every S [--stop-on-anomaly]``.

A long soak that breaks in its first hour should say so then, not eleven hours
later. While the main phase runs, a :class:`Watcher` thread checks the history
written so far every ``--check-every`` seconds, shows each safety anomaly in the
live view and the log as soon as a check finds it, appends every check to the run's
``watch.jsonl``, and with ``--stop-on-anomaly`` asks the trial to end the main phase
(the trial then heals, drains and checks as usual). The final check, on the whole
history after the drain, stays the authority for the verdict.

**Cost.** Each check is the ordinary checker run in a child process
(``python -m ktrial.watch HISTORY TEST_JSON``, niced), so it never holds the
workload's interpreter lock and yields the CPU to the workload and the brokers. A
check re-reads the whole history so far; when checks grow slow the interval grows
with them (:func:`next_wait`), so checking takes at most :data:`MAX_SHARE` of the
run's wall time.

**Which anomalies a prefix decides.** A prefix of a history has ops still in flight
and values that no consumer has reached yet: a check of it must only report what the
rest of the history cannot undo. :data:`WATCHED` lists those types, each with the
reason; :data:`UNWATCHED` lists the others with the reason a prefix cannot decide
them (a test holds the two tables to the checker's catalogue, so a new type has to be
placed in one). A finding of a prefix is one of the findings of the whole history:
offsets and values that completed ops reported never change, and an op that never
completed has no real-time successors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("ktrial.watch")

DEFAULT_EVERY_S = 60.0
# Checking takes at most this share of the run's wall time (check time / (wait + check)).
MAX_SHARE = 0.1
# Nice increment of the checking child: the workload and brokers come first.
NICENESS = 10
EXPLANATION_CHARS = 300

WATCHED: Mapping[str, str] = {
    "duplicate": "a value seen at two offsets: offsets that completed ops reported never "
    "change, so the rest of the history cannot undo it",
    "inconsistent-offsets": "two values seen at one offset: as for duplicate, final once read",
    "G1a": "a value read that only failed ops wrote: a fail is final and values are never "
    "written twice",
    "precommitted-read": "decided within one completed op",
    "poll-skip": "decided between two consecutive completed ops of one consumer; the "
    "skipped offsets hold values completed ops reported, and more offsets only add skips",
    "nonmonotonic-poll": "decided between two consecutive completed ops of one consumer",
    "int-poll-skip": "decided within one completed op",
    "int-nonmonotonic-poll": "decided within one completed op",
    "nonmonotonic-send": "decided between two completed sends of one producer",
    "int-nonmonotonic-send": "decided within one completed op",
    "G1c": "a cycle of completed ops' write-read (and write-write) dependencies: edges of "
    "a prefix stay edges of the whole history",
    "G1c-realtime": "as G1c; an op still in flight has no real-time successors, so no "
    "real-time edge is invented",
}

UNWATCHED: Mapping[str, str] = {
    "lost-write": "a consumer that has not reached the offset yet (or the drain, which reads "
    "every key from the beginning) may still read it",
    "unseen": "decided by the drain at the end: until then values are legitimately unread",
    "torn-transaction": "built on lost writes, which only the drain decides",
    "int-send-skip": "never bad (sends are not isolated in Kafka)",
    "G0": "never bad (Kafka does not order writes across keys)",
    "G0-realtime": "never bad (as G0, with real-time order)",
    "cycle-search-timeout": "a limit of the search, not an anomaly",
    "eos-duplicate": "copies are compared with how often the input holds the value, which "
    "a prefix may not know yet",
    "eos-loss": "the copiers catch up, and the output is read back, only at the end",
    "starvation": "liveness, judged over the run's windows by the final check",
    "stuck-partition": "liveness: a value waiting now may be read before the end",
    "slow-recovery": "liveness, judged by the final check",
    "memory-growth": "liveness, judged over all of the run's samples by the final check",
    "throughput-collapse": "liveness, judged against the whole run's median by the final check",
    "behind": "liveness of the background load (load.jsonl), judged by the final check",
}


# ---------------------------------------------------------------------- findings


@dataclass(frozen=True)
class Finding:
    """One watched anomaly type in a prefix's results: its count and first example."""

    type: str
    count: int
    key: str | None = None
    ops: tuple[int, ...] = ()
    explanation: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "count": self.count,
            "key": self.key,
            "ops": list(self.ops),
            "explanation": self.explanation,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Finding:
        key = d.get("key")
        return cls(
            str(d["type"]),
            int(d["count"]),
            None if key is None else str(key),
            tuple(int(i) for i in d.get("ops") or ()),
            str(d.get("explanation") or ""),
        )

    def line(self) -> str:
        """One line for the terminal and the log: type, count, key, ops, why."""
        where = [f"key {self.key}"] if self.key is not None else []
        if self.ops:
            shown = ", ".join(map(str, self.ops[:6])) + (", ..." if len(self.ops) > 6 else "")
            where.append(f"op{'s' if len(self.ops) > 1 else ''} {shown}")
        head = f"{self.type} ×{self.count:,}" + (f" ({'; '.join(where)})" if where else "")
        return f"{head}: {self.explanation}" if self.explanation else head


def findings(results: Mapping[str, Any]) -> dict[str, Finding]:
    """The watched types a prefix's results hold as bad, with their first example.

    Only bad types count (the verdict rule decides, e.g. poll-skip is expected with
    subscribe); every type outside :data:`WATCHED` is ignored, however bad."""
    out: dict[str, Finding] = {}
    anomalies = results.get("anomalies") or {}
    for t in results.get("bad_error_types") or ():
        if t not in WATCHED:
            continue
        a = anomalies.get(t) or {}
        ex = (a.get("examples") or [{}])[0]
        key = ex.get("key")
        ops = ex.get("ops") or ex.get("cycle") or ()
        out[t] = Finding(
            t,
            int(a.get("count") or 1),
            None if key is None else str(key),
            tuple(i for i in ops if isinstance(i, int) and not isinstance(i, bool)),
            _clip(str(ex.get("explanation") or _describe(ex))),
        )
    return out


def _describe(ex: Mapping[str, Any]) -> str:
    """A few facts of an example that has no explanation sentence."""
    parts = [
        f"{k} {_clip(str(ex[k]), 60)}" for k in ("offset", "offsets", "value", "values") if k in ex
    ]
    return ", ".join(parts)


def _clip(s: str, n: int = EXPLANATION_CHARS) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def news(seen: Mapping[str, int], now: Mapping[str, Finding]) -> list[Finding]:
    """The findings that are new since `seen` (type -> count already reported): a type
    not reported yet, or one whose count grew."""
    return [f for t, f in sorted(now.items()) if f.count > seen.get(t, 0)]


def next_wait(every_s: float, took_s: float, share: float = MAX_SHARE) -> float:
    """Seconds to wait before the next check: `every_s`, or longer when the last check
    took `took_s`, so that checking takes at most `share` of the wall time."""
    return max(every_s, took_s * (1.0 - share) / share)


# ---------------------------------------------------------------------- one check


@dataclass(frozen=True)
class CheckReport:
    """What one check of the history so far returned."""

    ops: int = 0
    took_s: float = 0.0
    found: dict[str, Finding] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "ops": self.ops,
            "took_s": round(self.took_s, 3),
            "found": [f.to_json() for f in self.found.values()],
        }
        if self.error is not None:
            d["error"] = self.error
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CheckReport:
        found = [Finding.from_json(f) for f in d.get("found") or ()]
        err = d.get("error")
        return cls(
            int(d.get("ops") or 0),
            float(d.get("took_s") or 0.0),
            {f.type: f for f in found},
            None if err is None else str(err),
        )


def check_prefix(history: Path, test_json: Path | None) -> CheckReport:
    """Check the history written so far (its last line may be torn: skipped) and keep
    the watched anomalies. In the child process."""
    from .checker import check_file, options_from_test_json
    from .histories.jsonl import HistoryError, HistoryWarning
    from .histories.testmeta import TestMeta

    t0 = time.monotonic()
    try:
        meta = TestMeta.read(test_json) if test_json is not None else TestMeta()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HistoryWarning)  # a torn last line is expected
            results = check_file(history, options_from_test_json(meta), meta.to_json())
    except (HistoryError, OSError, ValueError) as e:
        return CheckReport(took_s=time.monotonic() - t0, error=str(e))
    ops = int((results.get("stats") or {}).get("ops") or 0)
    return CheckReport(ops, time.monotonic() - t0, findings(results))


def main(argv: list[str] | None = None) -> int:
    """``python -m ktrial.watch HISTORY [TEST_JSON]``: one check, its report as one JSON
    line on stdout. Run niced, by :func:`run_child`."""
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print("usage: python -m ktrial.watch HISTORY [TEST_JSON]", file=sys.stderr)
        return 254
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    report = check_prefix(Path(args[0]), Path(args[1]) if len(args) > 1 else None)
    sys.stdout.buffer.write(orjson.dumps(report.to_json()) + b"\n")
    return 0


class ChildCheck:
    """One check in a child process; `cancel()` ends it (the main phase is over)."""

    def __init__(self, history: Path, test_json: Path) -> None:
        self.argv = [sys.executable, "-m", "ktrial.watch", str(history), str(test_json)]
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._cancelled = False

    def __call__(self) -> CheckReport:
        t0 = time.monotonic()
        with self._lock:
            if self._cancelled:
                return CheckReport(error="cancelled")
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # the user's Ctrl-C is the trial's to handle
            )
        out, err = self._proc.communicate()
        code = self._proc.returncode
        took = time.monotonic() - t0
        if self._cancelled:
            return CheckReport(took_s=took, error="cancelled")
        try:
            if code != 0:
                raise ValueError(f"exit {code}")
            report = CheckReport.from_json(orjson.loads(out.splitlines()[-1]))
        except (ValueError, IndexError, KeyError, TypeError, orjson.JSONDecodeError) as e:
            tail = err.decode(errors="replace").strip().splitlines()[-3:]
            return CheckReport(took_s=took, error=f"the check failed ({e}): {' | '.join(tail)}")
        # the child's own time leaves out its start-up; the wall time is what it cost
        return CheckReport(report.ops, took, report.found, report.error)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()


# ---------------------------------------------------------------------- the watcher

Runner = Callable[[], CheckReport]


class Watcher:
    """Checks the history while the main phase runs (a thread; each check in a child).

    `say` gets one line per new anomaly (the trial's terminal output, shown above the
    live view); every check is appended to `journal` (watch.jsonl); `status()` is the
    live view's line; `stop_requested` is set at the first anomaly when
    `stop_on_anomaly`. `clock` gives the run's elapsed seconds (history time)."""

    def __init__(
        self,
        runner: Runner,
        every_s: float,
        *,
        stop_on_anomaly: bool = False,
        say: Callable[[str], Any] = print,
        journal: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        share: float = MAX_SHARE,
        cancel: Callable[[], None] | None = None,
    ) -> None:
        if every_s <= 0:
            raise ValueError(f"check interval must be positive, got {every_s!r}")
        self.runner = runner
        self.every_s = every_s
        self.stop_on_anomaly = stop_on_anomaly
        self.say = say
        self.journal = journal
        self.clock = clock
        self.share = share
        self._cancel = cancel
        self.stop_requested = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.reported: dict[str, int] = {}  # type -> count already shown
        self.found: dict[str, Finding] = {}  # the latest finding of each type
        self.first_seen_s: dict[str, float] = {}
        self.checks = 0
        self.check_s = 0.0  # wall time spent checking
        self.last: CheckReport | None = None
        self.last_at_s: float | None = None
        self.wait_s = every_s
        self.errors = 0

    # ------------------------------------------------------------------ thread

    def start(self) -> Watcher:
        self._thread = threading.Thread(target=self._loop, name="ktrial-watch", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop checking (a check under way is killed). Idempotent."""
        self._closed.set()
        if self._cancel is not None:
            self._cancel()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _loop(self) -> None:
        while not self._closed.wait(self.wait_s):
            try:
                self.check_once()
            except Exception as e:  # never take the run down
                log.exception("the running check failed")
                self.say(f"running check failed: {type(e).__name__}: {e}; only the final check")
                return

    def check_once(self) -> list[Finding]:
        """One check now: show and record what is new; the new findings."""
        report = self.runner()
        if self._closed.is_set() and report.error == "cancelled":
            return []
        at = self.clock()
        with self._lock:
            self.checks += 1
            self.check_s += report.took_s
            self.last, self.last_at_s = report, at
            self.wait_s = next_wait(self.every_s, report.took_s, self.share)
            new = news(self.reported, report.found) if report.error is None else []
            first = {f.type for f in new if f.type not in self.reported}
            for f in new:
                self.first_seen_s.setdefault(f.type, at)
                self.reported[f.type] = f.count
            self.found.update(report.found)
        self._journal({"at_s": round(at, 3), **report.to_json(), "new": [f.type for f in new]})
        if report.error is not None:
            self.errors += 1
            log.warning("running check at %.1f s: %s", at, report.error)
            if self.errors == 1:
                self.say(f"running check failed ({report.error}); will try again")
            return []
        for f in new:
            what = f.line() if f.type in first else f"{f.type} now ×{f.count:,}"
            text = f"anomaly while running (at {at:,.0f} s): {what}"
            log.warning("%s", text)
            self.say(text)
        if new and self.stop_on_anomaly and not self.stop_requested.is_set():
            self.say("stopping the run early (--stop-on-anomaly): healing, draining, checking")
            self.stop_requested.set()
        return new

    def _journal(self, line: dict[str, Any]) -> None:
        if self.journal is None:
            return
        try:
            with self.journal.open("ab") as fh:
                fh.write(orjson.dumps(line) + b"\n")
        except OSError as e:
            log.warning("cannot write %s: %s", self.journal, e)

    # ------------------------------------------------------------------ views

    def status(self) -> tuple[str, bool]:
        """The live view's line, and whether it is an alarm (an anomaly was found)."""
        with self._lock:
            if self.found:
                listed = ", ".join(f"{t} ×{f.count:,}" for t, f in sorted(self.found.items()))
                tail = " (stopping: --stop-on-anomaly)" if self.stop_requested.is_set() else ""
                return f"ANOMALY while running: {listed}{tail}", True
            if self.last is None:
                return f"safety check every {self.every_s:g} s: none yet", False
            if self.last.error is not None:
                return f"safety check at {self.last_at_s:,.0f} s failed: {self.last.error}", False
            return (
                f"safety check at {self.last_at_s:,.0f} s: no anomaly in {self.last.ops:,} ops "
                f"({self.last.took_s:.1f} s; next in {self.wait_s:,.0f} s)",
                False,
            )

    def summary(self) -> dict[str, Any]:
        """test.json's ``watch`` section: the settings, the checks, what they found."""
        with self._lock:
            return {
                "check_every_s": self.every_s,
                "stop_on_anomaly": self.stop_on_anomaly,
                "checks": self.checks,
                "check_s": round(self.check_s, 3),
                "errors": self.errors,
                "found": {
                    t: {**f.to_json(), "first_seen_s": round(self.first_seen_s.get(t, 0.0), 3)}
                    for t, f in sorted(self.found.items())
                },
            }


def stopped_early_note(watch: Mapping[str, Any] | None, time_limit: float | None) -> str | None:
    """The report's sentence for a run the watcher stopped, or None."""
    stop = (watch or {}).get("stopped_early")
    if not isinstance(stop, Mapping):
        return None
    at = stop.get("at_s")
    types = ", ".join(str(t) for t in stop.get("types") or ()) or "an anomaly"
    when = f" at {at:,.0f} s" if isinstance(at, (int, float)) else ""
    of = f" of its {time_limit:g} s" if time_limit else ""
    return (
        f"the run stopped early{when}{of} (--stop-on-anomaly): {types} found while it ran; "
        "faults were healed and every key drained before this check"
    )


if __name__ == "__main__":
    sys.exit(main())
