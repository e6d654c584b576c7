"""`ktrial check PATH`: re-check a stored history and write results.json.

PATH is a run directory (history.jsonl + test.json inside) or a history file
(test.json is looked for beside it). Exit codes: 0 valid, 1 invalid, 2 unknown,
254 for unusable input (the message names file:line and what to do).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import orjson

from ..checker import CheckOptions, options_from_test_json
from ..checker import check as run_check
from ..checker.check import load_beside, needs_ops
from ..checker.liveness import VIOLATION_TYPES
from ..checker.options import MAX_NUMBER
from ..histories.edn import iter_any_history
from ..histories.jsonl import (
    AnonymousProcessWarning,
    HistoryError,
    HistoryWarning,
    UnknownFWarning,
)
from ..histories.model import Flat, Op
from ..histories.store import MAX_TEST_JSON, load_json, write_bytes_atomic

EXIT_BY_VALID = {True: 0, False: 1, "unknown": 2}
BIG_FILE = 32 * 1024 * 1024


class InputError(click.ClickException):
    """Unusable input: exit 254 whether run through ktrial's main() or click directly."""

    exit_code = 254


RUN_HISTORY_NAMES = ("history.jsonl", "history.edn")


def default_results_path(hist: Path) -> Path:
    """Where results go without --out: results.json beside a run directory's history
    (history.jsonl, or Jepsen's history.edn), else FILE.results.json beside any other
    history file, so two histories checked in one folder keep their own results."""
    if hist.name in RUN_HISTORY_NAMES:
        return hist.parent / "results.json"
    stem = hist.name.rsplit(".", 1)[0] if "." in hist.name.lstrip(".") else hist.name
    return hist.parent / f"{stem}.results.json"


def locate(path: Path) -> tuple[Path, Path | None]:
    """(history file, test.json or None) for a run directory or a history file."""
    if path.is_dir():
        hist = path / "history.jsonl"
        if not hist.is_file() and (path / "history.edn").is_file():
            hist = path / "history.edn"  # a Jepsen run directory
        if not hist.is_file():
            raise InputError(
                f"{path}: no history.jsonl (or Jepsen history.edn) in this directory; pass "
                f"a run directory (store/<test>/<run>) or the path of a history file"
            )
        test = path / "test.json"
    elif path.is_file():
        hist = path
        test = path.parent / "test.json"
    elif path.exists():
        raise InputError(
            f"{path}: not a regular file (a FIFO or a device?); pass a run directory or a "
            f"history file"
        )
    elif path.is_symlink():
        raise InputError(f"{path}: a symbolic link that leads nowhere (dangling, or a loop)")
    else:
        raise InputError(f"{path}: no such file or directory")
    return hist, (test if test.exists() else None)


def load_meta(test: Path | None) -> dict[str, Any]:
    if test is None:
        return {}
    try:
        # a leading BOM is skipped; a FIFO, a device or a huge file is refused unread
        meta = load_json(test, MAX_TEST_JSON)
    except (OSError, orjson.JSONDecodeError) as e:
        raise InputError(
            f"{test}: cannot read test metadata ({e}); fix or remove it, or pass "
            f"--sub-via/--ww-deps explicitly"
        ) from None
    if not isinstance(meta, dict):
        raise InputError(f"{test}: test.json must hold a JSON object")
    return meta


def _with_progress(hist: Path, flat: bool, ignore_unknown_f: bool = False) -> Iterator[Op | Flat]:
    """Stream ops, showing a progress bar on a terminal for big files."""
    size = hist.stat().st_size
    if size < BIG_FILE or not sys.stderr.isatty():
        yield from iter_any_history(hist, flat, ignore_unknown_f=ignore_unknown_f)
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    total = 0
    with hist.open("rb") as fh:
        while chunk := fh.read(1 << 24):
            total += chunk.count(b"\n")
    console = Console(stderr=True)
    with Progress(
        TextColumn("reading {task.fields[name]}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} ops"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as prog:
        task = prog.add_task("read", total=total, name=hist.name)
        ops = iter_any_history(hist, flat, ignore_unknown_f=ignore_unknown_f)
        for n, op in enumerate(ops, 1):
            if n % 20000 == 0:
                prog.update(task, completed=n)
            yield op
        prog.update(task, completed=total)
    console.print(f"read {total:,} ops; analysing (logs, orders, cycles, metrics)...")


def summary(res: dict[str, Any], hist: Path, out: Path | None) -> str:
    verdict = {True: "VALID", False: "INVALID", "unknown": "UNKNOWN"}[res["valid"]]
    st = res["stats"]
    lines = [
        f"{hist}: {verdict}",
        f"  {st['ops']:,} ops ({st['client_ops']:,} client ops, {st['nemesis_ops']:,} nemesis) "
        f"over {st['duration_s']:g} s, {st['keys']} keys, {st['writes']:,} values sent, "
        f"{st['reads']:,} records read; checked in {st['check_time_s']:g} s "
        f"(sub_via={st['options']['sub_via']}, ww_deps={st['options']['ww_deps']}"
        f"{'' if st['options'].get('consumer_rewinds', True) else ', consumer_rewinds=False'})",
    ]
    if res["valid"] == "unknown" and not res["error_types"]:
        lines.append("  nothing could be checked: no ok op read anything")
    bad = set(res["bad_error_types"])
    for name in res["error_types"]:
        if name in VIOLATION_TYPES:
            continue  # liveness_lines() tells these
        a = res["anomalies"][name]
        tag = "BAD " if name in bad else "ok  "
        lines.append(f"  {tag}{name}: {a['count']:,}")
        if a["examples"]:
            lines.append("        e.g. " + clip(a["examples"][0].get("explanation", "")))
    lag = res["metrics"]["realtime_lag"]["worst"]
    if lag.get("key") is not None:
        lines.append(
            f"  worst realtime lag {lag['lag_ms']:,.0f} ms on key {lag['key']} "
            f"(process {lag['process']}, t={lag['time_s']:.1f} s)"
        )
    lines.extend(liveness_lines(res))
    lines.append(f"  results: {out if out is not None else 'not written (see the warning)'}")
    return "\n".join(lines)


CLIP = 1500  # characters of one example shown in the summary


def clip(text: str) -> str:
    """An explanation cut for the terminal (results.json keeps it whole)."""
    if len(text) <= CLIP:
        return text
    return f"{text[:CLIP]}… ({len(text) - CLIP:,} more characters in results.json)"


def liveness_lines(res: dict[str, Any]) -> list[str]:
    """One line per liveness violation type, counted, with its first explanation."""
    live = res.get("metrics", {}).get("liveness")
    if not isinstance(live, dict):
        return []
    by_type: dict[str, list[dict[str, Any]]] = {}
    for v in live.get("violations") or []:
        by_type.setdefault(v["type"], []).append(v)
    bad = set(res.get("bad_error_types") or [])
    out = []
    counts = live.get("violation_counts") or {}
    for t, vs in by_type.items():
        tag = "BAD " if t in bad else "warn"
        n = counts.get(t, len(vs))
        out.append(f"  {tag} liveness {t}: {n:,} — {clip(vs[0].get('explanation', ''))}")
    if by_type and not bad.intersection(by_type):
        out.append("        (liveness is reported, not judged; --liveness-bad fails the run on it)")
    e2e = live.get("e2e_latency_ms") or {}
    if e2e.get("n"):
        out.append(
            f"  end-to-end latency p50 {e2e['p50']:,.0f} ms, p99 {e2e['p99']:,.0f} ms, "
            f"max {e2e['max']:,.0f} ms over {e2e['n']:,} values"
        )
    return out


@click.command("check")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--sub-via",
    type=click.Choice(["assign", "subscribe"]),
    default=None,
    help="How consumers got their partitions (default: test.json, else inferred).",
)
@click.option(
    "--ww-deps/--no-ww-deps",
    default=None,
    help="Infer write-write edges from log order (default: test.json, else on).",
)
@click.option(
    "--consumer-rewinds/--no-consumer-rewinds",
    default=None,
    help="The clients seek back to where a failed or indeterminate op began reading, so "
    "every read must begin right after the consumer's last ok read (Jepsen's rule). "
    "--no-consumer-rewinds for clients known not to rewind after an abort: the next ok "
    "read may then begin up to just after what failed reads returned (default: "
    "test.json's consumer_rewinds, else on).",
)
@click.option(
    "--cycle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Cycle search budget per component (default 10).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to write results (default: results.json in a run directory, "
    "FILE.results.json beside any other history file FILE.jsonl).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the results JSON instead of a summary."
)
@click.option(
    "--max-examples",
    type=click.IntRange(min=0),
    default=None,
    help="Examples kept per anomaly type (default 8).",
)
@click.option(
    "--liveness-bad/--no-liveness-bad",
    default=None,
    help="Liveness violations (starvation, stuck partitions, slow recovery, memory growth, "
    "throughput collapse) "
    "make the run invalid, for soak jobs (default: test.json's liveness_bad, else off).",
)
@click.option(
    "--window",
    "liveness_window_s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Starvation window (default 10).",
)
@click.option(
    "--starvation-ratio",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=None,
    metavar="SHARE",
    help="A window starves when consumers read under this share of what it offered (default 0.97).",
)
@click.option(
    "--starvation-min-offered",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Windows offering fewer values are not judged (default 20).",
)
@click.option(
    "--starvation-lag",
    "starvation_lag_s",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="How long after its window a value may be read and still count "
    "(default: p99 end-to-end latency, clamped to [1 s, one window]).",
)
@click.option(
    "--stuck-after",
    "stuck_s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="A key whose acknowledged value stays unread longer is stuck (default 30).",
)
@click.option(
    "--recovery-within",
    "recovery_s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Sends and reads must succeed again this soon after a fault heals (default 60).",
)
@click.option(
    "--memory-growth",
    "memory_growth_ratio",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SHARE",
    help="Flag a broker whose memory (outside the JVM heap when sampled) kept growing "
    "over the later half of its life by more than this share of its settled size "
    "(default 0.5) and by more than --memory-growth-mib.",
)
@click.option(
    "--memory-growth-mib",
    type=click.FloatRange(min=0),
    default=None,
    metavar="MIB",
    help="Minimum steady-state memory growth to flag, in MiB (default 64).",
)
@click.option(
    "--throughput-ratio",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=None,
    metavar="SHARE",
    help="A window's throughput collapsed when its acknowledged values are under this "
    "share of the run's median window (of its fault-free windows; default 0.1).",
)
@click.option(
    "--ignore-unknown-f",
    is_flag=True,
    help="Skip client ops whose f ktrial does not know (e.g. Poll, produce) with a warning, "
    "counted in results.json's input section, instead of refusing the history.",
)
@click.pass_context
def check(
    ctx: click.Context,
    path: Path,
    sub_via: str | None,
    ww_deps: bool | None,
    consumer_rewinds: bool | None,
    cycle_timeout: float | None,
    out: Path | None,
    as_json: bool,
    max_examples: int | None,
    liveness_bad: bool | None,
    liveness_window_s: float | None,
    starvation_ratio: float | None,
    starvation_min_offered: int | None,
    starvation_lag_s: float | None,
    stuck_s: float | None,
    recovery_s: float | None,
    memory_growth_ratio: float | None,
    memory_growth_mib: float | None,
    throughput_ratio: float | None,
    ignore_unknown_f: bool,
) -> None:
    """Check the history in PATH (a run directory or a history.jsonl file).

    Exit code 0 valid, 1 invalid, 2 unknown, 254 unusable input.
    """
    hist, test = locate(path)
    meta = load_meta(test)
    overrides: dict[str, Any] = {
        "sub_via": sub_via,
        "ww_deps": ww_deps,
        "consumer_rewinds": consumer_rewinds,
        "cycle_timeout_s": cycle_timeout,
        "max_examples": max_examples,
        "liveness_bad": liveness_bad,
        "liveness_window_s": liveness_window_s,
        "starvation_ratio": starvation_ratio,
        "starvation_min_offered": starvation_min_offered,
        "starvation_lag_s": starvation_lag_s,
        "stuck_s": stuck_s,
        "recovery_s": recovery_s,
        "memory_growth_ratio": memory_growth_ratio,
        "memory_growth_min_bytes": _mib(memory_growth_mib),
        "throughput_ratio": throughput_ratio,
    }
    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    try:
        CheckOptions(**given)  # the command line's own values first: blame the right place
    except (TypeError, ValueError) as e:
        raise InputError(f"bad option: {e} ({_flags(e)})") from None
    try:
        opts: CheckOptions = options_from_test_json(meta, overrides)
    except (TypeError, ValueError) as e:
        raise InputError(f"{test}: bad checker option: {e}") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HistoryWarning)
        try:
            ops = _with_progress(hist, not needs_ops(opts, meta), ignore_unknown_f)
            load, load_warning = load_beside(hist)  # a run's load.jsonl (docs/load.md)
            res = run_check(ops, opts, meta, load)
            if load_warning:
                res["warnings"] = [*res.get("warnings", []), load_warning]
        except HistoryError as e:
            if e.line == 0:  # the file itself (cannot open it, no history in a directory)
                raise InputError(str(e)) from None
            raise InputError(
                f"{e}\n  The history is malformed at that line: fix or remove the line "
                f"(a torn last line is skipped automatically), then run ktrial check again."
            ) from None
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)
    res["input"] = input_section([w.message for w in caught])
    if out is None:
        out = default_results_path(hist)
    elif out.is_dir():  # --out DIR: results.json in it
        out = out / "results.json"
    out = out.absolute()
    data = orjson.dumps(res, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    try:
        write_bytes_atomic(out, data)
        written: Path | None = out
    except OSError as e:  # the verdict stands: say so, and keep its exit code
        click.echo(
            f"warning: {out}: cannot write results ({e.strerror or e}); the verdict below "
            f"stands (pass --out FILE to keep results.json)",
            err=True,
        )
        written = None
    if as_json:
        click.echo(data.decode())
    else:
        click.echo(summary(res, hist, written))
    ctx.exit(EXIT_BY_VALID[res["valid"]])


def input_section(caught: list[Warning | str]) -> dict[str, Any]:
    """results.json's account of what reading the history let pass: the warnings, the
    client ops skipped per unknown f (--ignore-unknown-f), the ops of no process."""
    skipped: dict[str, int] = {}
    anonymous = 0
    for w in caught:
        if isinstance(w, UnknownFWarning):
            for f, n in w.counts.items():
                skipped[f] = skipped.get(f, 0) + n
        elif isinstance(w, AnonymousProcessWarning):
            anonymous += w.count
    return {
        "warnings": [str(w) for w in caught],
        "skipped_unknown_f": skipped,
        "anonymous_process_ops": anonymous,
    }


def _mib(mib: float | None) -> int | None:
    """--memory-growth-mib in bytes (an unusable number is the option's usage error)."""
    if mib is None:
        return None
    if not math.isfinite(mib) or mib > MAX_NUMBER / 2**20:
        raise InputError(f"bad option: --memory-growth-mib must be a finite number, got {mib}")
    return int(mib * 1024 * 1024)


_FLAGS = {
    "cycle_timeout_s": "--cycle-timeout",
    "max_examples": "--max-examples",
    "liveness_window_s": "--window",
    "starvation_ratio": "--starvation-ratio",
    "starvation_min_offered": "--starvation-min-offered",
    "starvation_lag_s": "--starvation-lag",
    "stuck_s": "--stuck-after",
    "recovery_s": "--recovery-within",
    "memory_growth_ratio": "--memory-growth",
    "memory_growth_min_bytes": "--memory-growth-mib",
    "throughput_ratio": "--throughput-ratio",
    "sub_via": "--sub-via",
}


def _flags(e: Exception) -> str:
    """The command-line option an options error is about."""
    text = str(e)
    return ", ".join(flag for name, flag in _FLAGS.items() if text.startswith(name)) or "see --help"
