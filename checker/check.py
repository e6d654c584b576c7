"""check(): a pure function from a history to results; check_file() reads one first.

The analyses are independent functions over shared derived indexes built once
(prepare.py: paired ops, writers and ok reads; logs.py: per-key logs and dense
version orders).
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import Any

from ..histories.jsonl import iter_flat, iter_history
from ..histories.loadlog import LOAD_FILE, LoadLog, LoadLogError, read_loadlog
from ..histories.model import NEMESIS, Flat, Op
from . import behind, catalogue, cycles, faults, liveness, metrics, order, visibility
from .copy import check_copy, copy_section
from .excuse import cluster_nodes, fault_intervals
from .logs import build_logs
from .options import CheckOptions
from .prepare import Prepared, prepare
from .results import combine
from .window import (
    JudgedWindow,
    drain_start_in_history,
    drain_started_ns,
    had_drain,
    judged_window,
    warmup_s,
)

# Nemesis ops that are bookkeeping, not faults (report/faults.py keeps the same list).
NOT_FAULTS = frozenset({"node-stats", "quiet-period"})

DEFAULT = CheckOptions()
_first, _second = itemgetter(0), itemgetter(1)


def check(
    ops: Iterable[Op | Flat],
    opts: CheckOptions = DEFAULT,
    meta: dict[str, Any] | None = None,
    load: LoadLog | None = None,
) -> dict[str, Any]:
    """Check a history; return the results dict (docs/anomalies.md).

    A copy-workload history (test.json has a ``copy`` section, or ``opts.copy``) is
    also checked for exactly-once: eos-duplicate and eos-loss. `load`: the background
    load's telemetry (load.jsonl), judged "behind" or not (checker/behind.py).
    """
    started = time.monotonic()
    copy_meta = _copy_meta(opts, meta)
    is_copy = copy_meta is not None
    if copy_meta is not None and opts.copy is None:  # liveness leaves output keys out
        opts = replace(opts, copy=copy_section(copy_meta))
    if is_copy and not isinstance(ops, (list, tuple)):
        ops = list(ops)  # read twice: the main analyses and the exactly-once check
    # Millions of long-lived small containers make the cyclic GC rescan the heap over
    # and over (it doubled the time of a 1M-op check); nothing here builds cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        nemesis: list[Op] = []
        p = prepare(_tap_nemesis(ops, nemesis))
        res = analyse(p, opts, started, nemesis, meta, load)
        if is_copy:
            assert copy_meta is not None
            merge_anomalies(res, check_copy(ops, copy_meta, opts.max_examples))  # type: ignore[arg-type]
        return faults.apply(res, meta, nemesis)  # faults asked for that did not happen
    finally:
        if was_enabled:
            gc.enable()


def check_file(
    path: str | os.PathLike[str],
    opts: CheckOptions = DEFAULT,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Check a history.jsonl file (streamed; malformed input raises HistoryError), with
    the load.jsonl beside it when there is one (an unreadable one is a warning)."""
    reader = iter_history if needs_ops(opts, meta) else iter_flat
    load, warning = load_beside(path)
    res = check(reader(path), opts, meta, load)
    if warning:
        res["warnings"] = [*res.get("warnings", []), warning]
    return res


def load_beside(path: str | os.PathLike[str]) -> tuple[LoadLog | None, str | None]:
    """The background load's telemetry (load.jsonl) beside a history file, if any, and
    a warning when it cannot be read (the load is then not judged)."""
    load_path = os.path.join(os.path.dirname(os.fspath(path)), LOAD_FILE)
    if not os.path.isfile(load_path):
        return None, None
    try:
        return read_loadlog(load_path), None
    except (LoadLogError, OSError) as e:
        return None, f"the background load was not judged: {e}"


def needs_ops(opts: CheckOptions, meta: dict[str, Any] | None) -> bool:
    """Whether the check reads whole Ops: the copy workload's exactly-once check does;
    everything else is fed client data ops as Flat effects (a faster reader)."""
    return _copy_meta(opts, meta) is not None


def _copy_meta(opts: CheckOptions, meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """test.json's metadata with the copy section the check uses, or None (no copy)."""
    copy_meta = {**(meta or {}), "copy": opts.copy} if opts.copy else meta
    return copy_meta if copy_meta is not None and copy_section(copy_meta) is not None else None


def merge_anomalies(results: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Fold always-bad anomalies of another analysis into `results` (invalidating it)."""
    if not extra:
        return results
    results.setdefault("anomalies", {}).update(extra)
    for key in ("error_types", "bad_error_types"):
        results[key] = sorted(set(results.get(key, [])) | set(extra))
    results["valid"] = False
    return results


def _tap_nemesis(ops: Iterable[Op | Flat], sink: list[Op]) -> Iterator[Op | Flat]:
    """Pass ops through, keeping the nemesis ops: prepare() only counts them, but the
    liveness analysis needs the heals and the node-stats samples."""
    for op in ops:
        if op.process == NEMESIS:
            sink.append(op)  # type: ignore[arg-type]  # never a Flat
        yield op


def analyse(
    p: Prepared,
    opts: CheckOptions,
    started: float,
    nemesis: Sequence[Op] = (),
    meta: dict[str, Any] | None = None,
    load: LoadLog | None = None,
) -> dict[str, Any]:
    sub_via = opts.sub_via or ("subscribe" if p.has_subscribe else "assign")
    limit = max(opts.max_examples, 1)
    logs = build_logs(p)
    found: dict[str, list[dict[str, Any]]] = {}
    found["inconsistent-offsets"] = visibility.inconsistent_offsets(p, logs, limit)
    found["duplicate"] = visibility.duplicates(p, logs, limit)
    lost = visibility.lost_writes(p, logs, limit)
    found["lost-write"] = lost
    found["unseen"] = visibility.unseen(p, limit)
    found["G1a"] = visibility.g1a(p, logs, limit)
    found["precommitted-read"] = visibility.precommitted_reads(p, limit)
    found["torn-transaction"] = visibility.torn_transactions(p, logs, lost, limit)
    found.update(order.internal(p, logs, limit))
    found.update(order.polls(p, logs, limit, opts.consumer_rewinds))
    found["nonmonotonic-send"] = order.sends(p, logs, limit)
    cyc, timeouts, cycle_stats = cycles.find_cycles(p, logs, opts.ww_deps, opts.cycle_timeout_s)
    found.update(cyc)
    found["cycle-search-timeout"] = timeouts
    judged = judged_window_of(p, nemesis, meta, opts)
    live = liveness.liveness(p, logs, nemesis, opts, judged, cluster_nodes(meta))
    if load is not None:
        _judge_load(live, load, p, nemesis, meta, opts)
    if opts.liveness_bad:  # soak jobs: each violation type becomes a (bad) anomaly type
        found.update(liveness.violations_by_type(live))
    liveness.cap_violations(live)
    uncatalogued = sorted(set(found) - catalogue.BY_NAME.keys())
    if uncatalogued:  # a new analysis must add its types to the catalogue first
        raise AssertionError(f"anomaly types missing from checker/catalogue.py: {uncatalogued}")

    res = combine(
        found,
        sub_via=sub_via,
        ww_deps=opts.ww_deps,
        max_examples=opts.max_examples,
        nothing_checked=not any(p.ok_reads.values()),  # no ok op read anything
    )
    counts, causes, latency = metrics.counts_latency(p)
    unseen_final, unseen_pts = metrics.unseen_over_time(p)
    res["metrics"] = {
        "counts": counts,
        "info_causes": causes,
        "latency_ms": latency,
        "throughput": metrics.throughput(p),
        "realtime_lag": metrics.realtime_lag(p, logs, judged),
        "unseen": {"final": unseen_final, "over_time": unseen_pts},
        "liveness": live,
    }
    if judged is not None:  # only then: results of bare histories keep their shape
        res["metrics"]["judged_window"] = judged.to_json(p.first_time or 0)
    res["stats"] = _stats(p, logs, opts, sub_via, cycle_stats, started)
    return res


def _judge_load(
    live: dict[str, Any],
    load: LoadLog,
    p: Prepared,
    nemesis: Sequence[Op],
    meta: dict[str, Any] | None,
    opts: CheckOptions,
) -> None:
    """The background load's "behind" check, on the history's clock (test.json's
    history_wall_start), with a fault and its recovery time excusing it."""
    t0 = p.first_time or 0
    end = p.last_time or t0
    wall0 = (meta or {}).get("history_wall_start")
    start = load.start_time
    offset = start - wall0 - t0 / 1e9 if isinstance(wall0, (int, float)) and start else 0.0
    spans = [
        ((f.start_ns - t0) / 1e9, (f.end_ns - t0) / 1e9 + opts.recovery_s, f.label())
        for f in fault_intervals(nemesis, end)
    ]
    window_s = opts.liveness_window_s
    behind.add_to_liveness(
        live, load, spans, offset, window_s, opts.liveness_bad, warmup_s(meta, window_s)
    )


def judged_window_of(
    p: Prepared, nemesis: Sequence[Op], meta: dict[str, Any] | None, opts: CheckOptions
) -> JudgedWindow | None:
    """The judged window (checker/window.py) of this history, or None when the whole
    history is judged (always so without test.json)."""
    if not meta:
        return None
    faults = [
        op.time
        for op in nemesis
        if op.type == "info" and op.f not in NOT_FAULTS and not liveness.is_heal(op.f)
    ]
    found = None
    if had_drain(meta) and drain_started_ns(meta) is None:  # a run from before started_s
        found = drain_start_in_history(
            (r.process, r.inv_time, r.f == "assign" and r.seek) for r in p.ops
        )
    w = judged_window(
        meta,
        p.first_time,
        p.last_time,
        window_s=opts.liveness_window_s,
        first_fault_ns=min(faults, default=None),
        drain_start_ns=found,
    )
    return w if w.excluded else None


def _stats(
    p: Prepared,
    logs: Any,
    opts: CheckOptions,
    sub_via: str,
    cycle_stats: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    sends = {"ok": 0, "fail": 0, "info": 0, "values": 0}
    polls = {"ok": 0, "fail": 0, "info": 0, "records": 0}
    txns = {"committed": 0, "aborted": 0, "info": 0}
    reads = writes = 0
    keys: set[str] = set(logs.keys)
    txn_kind = {"ok": "committed", "fail": "aborted", "info": "info"}
    for r in p.ops:
        f = r.f
        if f == "send":
            sends[r.type] += 1
            sends["values"] += len(r.writes)
        elif f == "poll":
            polls[r.type] += 1
        elif f == "txn":
            txns[txn_kind[r.type]] += 1
        else:
            continue  # not a data op
        if r.reads:
            n = sum(map(len, map(_second, r.reads)))
            reads += n
            if f == "poll":
                polls["records"] += n
        if r.writes:
            writes += len(r.writes)
            keys.update(map(_first, r.writes))
    ft, lt = p.first_time or 0, p.last_time or 0
    options = opts.to_json()
    options["sub_via"] = sub_via
    return {
        "ops": p.n_lines,
        "client_ops": len(p.ops),
        "nemesis_ops": p.n_nemesis,
        "keys": len(keys),
        "sends": sends,
        "polls": polls,
        "txns": txns,
        "reads": reads,
        "writes": writes,
        "options": options,
        "cycle_search": cycle_stats,
        "duration_s": round((lt - ft) / 1e9, 3),
        "check_time_s": round(time.monotonic() - started, 3),
    }
