"""`ktrial runs`: list the runs in a store, newest last, with verdict and bad anomalies."""

from __future__ import annotations

from pathlib import Path

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
        )
    return table


@click.command("runs")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("store"),
    show_default=True,
    help="The run store to list.",
)
@click.option("--name", help="Only runs of this test name.")
def runs(store: Path, name: str | None) -> int:
    """List stored runs: date, name, verdict, bad anomaly counts, ops, duration."""
    rows = summarize_store(store, name)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    if not rows:
        what = f"test {name!r} in " if name else ""
        console.print(f"no runs of {what}{store}", markup=False, highlight=False)
        return 0
    console.print(runs_table(rows))
    return 0
