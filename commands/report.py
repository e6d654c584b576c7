"""`ktrial report RUN_DIR`: regenerate report.html, plots/ and junit.xml from a saved run.

When results.json is missing (a run cut short before its check) or with
`--recheck`, the history is checked first with the options recorded in
test.json. Exit code as `ktrial check`: 0 valid, 1 invalid, 2 unknown, so a CI
step can regenerate and gate in one command; 254 when RUN_DIR is not a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson

from ..histories.store import RunDir, load_json, write_json
from ..report.verdict import verdict_of

EXIT_CODES = {"valid": 0, "invalid": 1, "unknown": 2}


def check_run(rd: RunDir) -> dict[str, Any]:
    """Run the checker on rd's history with test.json's options; write and return results."""
    from ..checker import check_file
    from ..checker.options import options_from_test_json
    from ..histories import HistoryError

    try:
        test = rd.read_test()
    except (OSError, orjson.JSONDecodeError) as e:
        raise click.ClickException(
            f"{rd.test_json}: unreadable test.json ({e}); fix or delete "
            "it to check with default options"
        ) from None
    try:
        results = check_file(rd.history, options_from_test_json(test), test)
    except HistoryError as e:
        raise click.ClickException(f"{e} — the history cannot be checked") from None
    write_json(rd.results, results)
    return results


def load_results(rd: RunDir) -> dict[str, Any]:
    try:
        results = load_json(rd.results)
    except (OSError, orjson.JSONDecodeError) as e:
        raise click.ClickException(
            f"{rd.results}: unreadable ({e}); run `ktrial report --recheck {rd.path}` "
            "to check the history again"
        ) from None
    if not isinstance(results, dict):
        raise click.ClickException(f"{rd.results}: expected a JSON object; use --recheck")
    return results


@click.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--recheck", is_flag=True, help="Check the history again even if results.json exists."
)
def report(run_dir: Path, recheck: bool) -> int:
    """Regenerate report.html, plots/ and junit.xml of RUN_DIR and print the report's path.

    RUN_DIR is a run directory (`store/NAME/STAMP`, or `store/NAME/latest`).
    """
    rd = RunDir(run_dir.resolve())
    if not rd.history.exists():
        raise click.UsageError(f"{run_dir} is not a run directory: it has no history.jsonl")
    results = check_run(rd) if recheck or not rd.results.exists() else load_results(rd)
    from ..report.html import render_report  # matplotlib: imported only when drawing
    from ..report.junit import write_junit

    path = render_report(rd.path, results)
    write_junit(rd.path, results)
    click.echo(str(path))
    return EXIT_CODES.get(verdict_of(results), 2)
