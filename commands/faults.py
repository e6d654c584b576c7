"""`ktrial faults export RUN_DIR`: the faults that happened, as a --nemesis-script file.

A failing run's schedule can then be replayed exactly (the same faults on the same
nodes at the same times): ``ktrial run --from RUN_DIR --nemesis-script FILE``.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..histories.jsonl import iter_history
from ..histories.store import RunDir
from ..histories.testmeta import TestMeta
from ..nemesis.export import export_faults
from ..nemesis.schedule import format_script, load_script


@click.group("faults")
def faults() -> None:
    """The faults of stored runs."""


@faults.command("export")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the script. [default: RUN_DIR/faults.toml; - for stdout]",
)
def export(run_dir: Path, output: Path | None) -> None:
    """Write the faults that happened in RUN_DIR as a --nemesis-script TOML file.

    \b
    Each fault that started is one [[entry]]: its time after the schedule began, its
    family, the nodes it hit and its parameters as recorded, and how long it lasted.
    Faults that failed to start are left out (they did not happen).
    Replay: ktrial run --from RUN_DIR --nemesis-script FILE
    """
    rd = RunDir(run_dir)
    if not rd.history.is_file():
        raise click.BadParameter(
            f"{run_dir}: no history.jsonl here; give a run directory (`ktrial runs` lists them)",
            param_hint="RUN_DIR",
        )
    try:
        meta = TestMeta.read(rd.test_json)
    except ValueError as e:
        raise click.BadParameter(f"{rd.test_json}: {e}", param_hint="RUN_DIR") from None
    exported = export_faults(iter_history(rd.history), meta.nemesis)
    header = [
        f"Faults that happened in {run_dir}"
        + (f" (test {meta.name}, seed {meta.seed})" if meta.name else ""),
        f"written by `ktrial faults export`; `at` counts from {exported.clock}.",
        f"Replay: ktrial run --from {run_dir} --nemesis-script THIS_FILE",
    ]
    if exported.failed:
        header.append(f"{exported.failed} fault(s) failed to start and are not included.")
    if not exported.entries:
        header.append("No fault happened in this run: the script has no entries.")
    text = format_script(exported.entries, "\n".join(header))
    if output is not None and str(output) == "-":
        click.echo(text, nl=False)
        return
    path = output or rd.path / "faults.toml"
    path.write_text(text)
    if exported.entries:
        load_script(path)  # what was written must be what --nemesis-script reads
    click.echo(f"{len(exported.entries)} fault(s) written to {path}")
