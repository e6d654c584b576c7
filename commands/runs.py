"""`ktrial runs`: list the runs in a store, newest last, with verdict and bad anomalies.

`--html` writes the store's static index.html instead (report/index.py; `ktrial run`
rewrites it after every run) and prints its path. `--trend NAME` shows the key figures
of test NAME's newest runs and judges the newest against the ones before
(report/trend.py; exit 1 on a regression, 2 when nothing could be judged yet).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..report.runs import RunSummary, summarize_store

if TYPE_CHECKING:
    from ..report.trend import Trend

VERDICT_STYLE = {"valid": "green", "invalid": "bold red", "unknown": "yellow"}


def _duration(s: float | None) -> str:
    if s is None:
        return "–"
    if s < 120:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min"


def runs_table(rows: list[RunSummary]) -> Table:
    table = Table(show_edge=False, header_style="bold")
    for col, justify in (
        ("date", "left"),
        ("name", "left"),
        ("run", "left"),
        ("verdict", "left"),
        ("bad anomalies", "left"),
        ("ops", "right"),
        ("duration", "right"),
        ("latest", "center"),
        ("path", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        bad = ", ".join(f"{t} ×{n}" for t, n in sorted(r.bad.items())) or "–"
        verdict = Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "dim"))
        table.add_row(
            r.date,
            Text(r.name),
            Text(r.run.path.name),
            verdict,
            Text(bad),
            f"{r.ops:,}",
            _duration(r.duration_s),
            "← latest" if r.latest else "",
            Text(str(r.run.path)),
        )
    return table


def summary_json(r: RunSummary) -> dict[str, Any]:
    """One run as `ktrial runs --json` prints it."""
    return {
        "path": str(r.run.path),
        "name": r.name,
        "run": r.run.path.name,
        "date": r.date,
        "verdict": r.verdict,
        "bad": dict(sorted(r.bad.items())),
        "ops": r.ops,
        "duration_s": r.duration_s,
        "latest": r.latest,
        "seed": r.seed,
        "faults_injected": r.faults,
        "faults_asked": list(r.faults_asked),
        "faults_ok": r.faults_ok,
    }


EXIT_REGRESSION = 1  # like an invalid run
EXIT_NO_HISTORY = 2  # like an unknown verdict: nothing could be judged yet
STATUS_STYLE = {"regression": "bold red", "better": "green", "ok": "", "missing": "dim"}


def _short_date(date: str) -> str:
    """'2026-12-01 23:14:54' -> '12-01 23:14'."""
    return date[5:16] if len(date) >= 16 else date


def trend_table(trend: Trend) -> Table:
    """Figures down, runs across (oldest first, the newest last), then the baseline,
    the limit and the judgement; a regressed figure's row in red."""
    from ..report.figures import spec
    from ..report.trend import fmt

    table = Table(show_edge=False, header_style="bold")
    table.add_column("figure")
    table.add_column("unit")
    n = len(trend.runs)
    for i in range(n):  # headed by how many runs before the newest: -3, -2, -1, newest
        newest = i == n - 1
        table.add_column(
            "newest" if newest else str(i - n + 1),
            justify="right",
            style="bold" if newest else None,
        )
    for col in ("median", "limit", "judgement"):
        table.add_column(col, justify="left" if col == "judgement" else "right")
    blank = ["", "", ""]
    table.add_row("date", "", *(_short_date(r.date) for r in trend.runs), *blank)
    table.add_row("run", "", *(Text(r.run) for r in trend.runs), *blank)
    seeds = ("–" if r.figures.seed is None else str(r.figures.seed) for r in trend.runs)
    table.add_row("seed", "", *seeds, *blank)
    table.add_row(
        "verdict",
        "",
        *(
            Text(r.figures.verdict, style=VERDICT_STYLE.get(r.figures.verdict, "dim"))
            for r in trend.runs
        ),
        *blank,
    )
    table.add_row(
        "duration",
        "",
        *(_duration(r.figures.duration_s) for r in trend.runs),
        *blank,
        end_section=True,
    )
    for j in trend.judgements:
        style = STATUS_STYLE.get(j.status, "yellow")
        mark = "▲ " if j.status == "regression" else ""
        unit = spec(j.figure)
        table.add_row(
            Text(j.figure, style=style),
            unit.unit if unit else "",
            *(fmt(j.figure, v) for v in trend.values(j.figure)),
            fmt(j.figure, j.baseline),
            fmt(j.figure, j.limit),
            Text(mark + j.status, style=style),
        )
    return table


def print_trend(trend: Trend, console: Console) -> None:
    from ..report.trend import describe

    n = len(trend.runs) - 1
    console.print(
        f"{trend.key.describe()}\nnewest run {trend.newest.run} against the median of the "
        f"{n} run{'s' if n != 1 else ''} before it (at most {trend.last}, at least "
        f"{trend.min_history} needed); tolerance {trend.tolerances.default:.0%}"
        + "".join(f", {k} {v:.0%}" for k, v in sorted(trend.tolerances.per.items())),
        markup=False,
        highlight=False,
    )
    console.print(trend_table(trend))
    for x in trend.left_out:
        console.print(f"left out {x.run}: {x.why}", markup=False, highlight=False, style="dim")
    if trend.regressions:
        for j in trend.regressions:
            console.print(
                Text(f"REGRESSION {j.figure}: {describe(j)}", style="bold red"), highlight=False
            )
    elif trend.status == "ok":
        console.print("no regression", style="green", highlight=False)
    else:
        console.print(
            f"not enough history: each figure needs {trend.min_history} earlier runs of this "
            "test (exit 2)",
            style="yellow",
            highlight=False,
        )


def run_trend(
    store: Path, name: str, last: int, tolerance: tuple[str, ...], as_json: bool, junit: Path | None
) -> int:
    """`ktrial runs --trend NAME`: print the trend, write junit, return the exit code."""
    from ..report.trend import (
        NoCheckedRun,
        UnknownTest,
        load_trend,
        parse_tolerances,
    )
    from ..report.trendjunit import write_trend_junit

    try:
        tolerances = parse_tolerances(tolerance)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--tolerance") from None
    try:
        trend = load_trend(store, name, last=last, tolerances=tolerances)
    except UnknownTest as e:
        known = ", ".join(e.known) or "none"
        raise click.UsageError(
            f"no runs of test {name!r} in {store}; tests there: {known}"
        ) from None
    except NoCheckedRun:
        raise click.UsageError(
            f"no run of test {name!r} in {store} has a readable results.json: "
            "check one with `ktrial check RUN_DIR`"
        ) from None
    if junit is not None:
        try:
            write_trend_junit(trend, junit)
        except OSError as e:
            raise click.ClickException(f"{junit}: cannot write ({e.strerror or e})") from None
    if as_json:
        click.echo(json.dumps(trend.to_json(), indent=2))
    else:
        console = Console()
        if not console.is_terminal:
            console = Console(width=240)
        print_trend(trend, console)
    if trend.status == "regression":
        return EXIT_REGRESSION
    return EXIT_NO_HISTORY if trend.status != "ok" else 0


@click.command("runs")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("store"),
    envvar="KTRIAL_STORE",
    show_default="./store or $KTRIAL_STORE",
    help="The run store to list (the same default as `ktrial run`).",
)
@click.option("--name", help="Only runs of this test name.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--html",
    "as_html",
    is_flag=True,
    help="Write the store's index.html (every run: verdict, bad anomalies, faults, seed, "
    "links to its report) and print its path; `ktrial run` rewrites it after each run.",
)
@click.option(
    "--trend",
    metavar="NAME",
    help="Night over night: the key figures (throughput, e2e and commit latency p50/p99, "
    "recovery, memory slope, anomaly counts) of test NAME's newest run and the runs of the "
    "same test before it; exit 1 when a figure regressed past its tolerance against the "
    "median of those runs, 2 when there is not enough history to judge.",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    default=None,
    show_default="5",
    help="With --trend: judge against at most this many earlier runs (3 needed).",
)
@click.option(
    "--tolerance",
    multiple=True,
    metavar="[FIGURE=]X",
    help="With --trend: how much worse than the median is allowed, as a fraction or a "
    "percentage: a factor 1+X either way (default 0.25: latency up to 1.25x, throughput "
    "down to 1/1.25x). FIGURE=X for one figure or family (e2e_p99=0.5, anomaly=1, "
    "mem_slope=100%). Repeatable.",
)
@click.option(
    "--junit",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --trend: also write a junit XML file, one testcase per figure, a failure "
    "per regression.",
)
def runs(
    store: Path,
    name: str | None,
    as_json: bool,
    as_html: bool,
    trend: str | None,
    last: int | None,
    tolerance: tuple[str, ...],
    junit: Path | None,
) -> int:
    """List stored runs: date, name, verdict, bad anomaly counts, ops, duration, path.

    With --trend NAME, show test NAME's key figures run after run and flag regressions
    (docs/trend.md).
    """
    if not store.is_dir():
        raise click.UsageError(
            f"no run store at {store}: run `ktrial run` first, or name one with --store "
            "or $KTRIAL_STORE"
        )
    if trend is None and (tolerance or junit is not None or last is not None):
        raise click.UsageError("--last, --tolerance and --junit go with --trend NAME")
    if trend is not None:
        if as_html or name is not None:
            raise click.UsageError("--trend NAME shows one test: drop --html and --name")
        return run_trend(store, trend, last or 5, tolerance, as_json, junit)
    if as_html:
        if name is not None or as_json:
            raise click.UsageError(
                "--html writes the index of the whole store: drop --name and --json"
            )
        from ..report.index import write_index

        try:
            path = write_index(store)
        except OSError as e:
            raise click.ClickException(
                f"{store}: cannot write index.html ({e.strerror or e})"
            ) from None
        click.echo(str(path.absolute()))
        return 0
    rows = summarize_store(store, name)
    if as_json:
        click.echo(json.dumps([summary_json(r) for r in rows], indent=2))
        return 0
    console = Console()
    if not console.is_terminal:
        console = Console(width=240)
    if not rows:
        what = f"test {name!r} in " if name else ""
        console.print(f"no runs of {what}{store}", markup=False, highlight=False)
        return 0
    console.print(runs_table(rows))
    return 0
