"""`ktrial runs`: list the runs in a store, newest last, with verdict and bad anomalies.

`--html` writes the store's static index.html instead (report/index.py; `ktrial run`
rewrites it after every run) and prints its path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..report.runs import RunSummary, summarize_store

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
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@click.option(
    "--html",
    "as_html",
    is_flag=True,
    help="Write the store's index.html (every run: verdict, bad anomalies, faults, seed, "
    "links to its report) and print its path; `ktrial run` rewrites it after each run.",
)
def runs(store: Path, name: str | None, as_json: bool, as_html: bool) -> int:
    """List stored runs: date, name, verdict, bad anomaly counts, ops, duration, path."""
    if not store.is_dir():
        raise click.UsageError(
            f"no run store at {store}: run `ktrial run` first, or name one with --store "
            "or $KTRIAL_STORE"
        )
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
