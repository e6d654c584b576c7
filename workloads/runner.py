"""One test run without a nemesis: setup -> main phase -> drain -> check, in a run directory.

`execute` is the reusable orchestration behind ``ktrial run`` (the lead's run.py
may wrap it with a nemesis, or replace it): it writes test.json before the first
op, records the history through one Recorder, survives Ctrl-C (the workers stop,
the history is closed and the partial history is still checked), and returns the
results that were written to results.json.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..checker import check_file, options_from_test_json
from ..clusters.base import Cluster
from ..histories.jsonl import HistoryWriter
from ..histories.recorder import Recorder
from ..histories.store import RunDir, write_json
from . import Workload

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    results: dict[str, Any]
    meta: dict[str, Any]
    interrupted: bool = False
    drain: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def check_run(run: RunDir, meta: dict[str, Any]) -> dict[str, Any]:
    """Check the run's history (the checker adds the copy checks itself) and write results.json."""
    results = check_file(run.history, options_from_test_json(meta), meta)
    write_json(run.results, results)
    return results


def execute(
    cluster: Cluster,
    workload: Workload,
    run: RunDir,
    seed: int,
    time_limit_s: float,
    drain_timeout_s: float = 60.0,
    extra_meta: dict[str, Any] | None = None,
    stop: threading.Event | None = None,
    until: Callable[[Counter[tuple[str, str]]], bool] | None = None,
) -> RunOutcome:
    """Run `workload` on `cluster` for `time_limit_s`, drain, check; write everything to `run`.

    `until`, if given, ends the main phase early once it returns True for the
    recorder's live counts ((f, type) -> n): a run sized by work done rather than time.
    """
    t0 = time.monotonic()
    meta: dict[str, Any] = {
        "ktrial_version": __version__,
        "seed": seed,
        "cluster": cluster.metadata(),
        "wall_clock_start": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "time_limit_s": time_limit_s,
        **(extra_meta or {}),
    }
    meta.update(workload.setup(cluster))
    run.write_test(meta)

    writer = HistoryWriter(run.history)
    recorder = Recorder(writer)
    stop = stop or threading.Event()
    errors: list[BaseException] = []

    def main_phase() -> None:
        try:
            workload.run(recorder, stop)
        except BaseException as e:  # re-raised in the caller's thread
            errors.append(e)

    worker = threading.Thread(target=main_phase, name="workload", daemon=True)
    interrupted = False
    drain: dict[str, Any] = {}
    try:
        worker.start()
        deadline = time.monotonic() + time_limit_s
        try:
            while worker.is_alive() and not stop.is_set():
                stop.wait(min(0.5, max(0.0, deadline - time.monotonic())))
                if time.monotonic() >= deadline:
                    break
                if until is not None and until(recorder.snapshot()[1]):
                    break
        except KeyboardInterrupt:
            interrupted = True
            log.warning("interrupted: stopping workers, the partial history will be checked")
        stop.set()
        try:
            worker.join()
        except KeyboardInterrupt:
            interrupted = True
            worker.join()
        if errors:
            raise errors[0]
        if not interrupted:
            try:
                drain = workload.drain(recorder, drain_timeout_s)
            except KeyboardInterrupt:
                interrupted = True
    finally:
        writer.close()
    meta["drain"] = drain
    results_of = getattr(workload, "results", None)
    if callable(results_of):  # a measuring workload's table (txn-cost)
        meta["workload_results"] = results_of()
    meta["interrupted"] = interrupted
    meta["main_phase_s"] = round(time.monotonic() - t0, 3)
    run.write_test(meta)
    results = check_run(run, meta)
    counts = {f"{f}:{t}": n for (f, t), n in sorted(recorder.counts.items())}
    return RunOutcome(results, meta, interrupted, drain, counts, time.monotonic() - t0)
