"""`ktrial report PATH`: regenerate report.html, plots/ and junit.xml from a saved history.

PATH is what `ktrial check` takes:

* a run directory (`store/NAME/STAMP`, `store/NAME/latest`) or a Jepsen run
  directory holding history.edn: the report is written into it;
* a history file anywhere (JSONL, or Jepsen EDN): the report goes into a folder
  beside it, `FILE.report/` for `FILE.jsonl` or `FILE.edn` (report.html,
  timeline.html, plots/, junit.xml and the results.json it shows), with test.json
  looked for beside the file. A file named history.jsonl or history.edn is its
  directory's history, as a run directory.

When no results exist yet (a run cut short before its check, a history never
checked), or with `--recheck`, the history is checked first with the options recorded
in test.json; for a bare file, results `ktrial check FILE` wrote (FILE.results.json)
are used when newer than the report folder's. What reading the history let pass is
printed as `warning: ...` lines (and kept in results.json's input section). Exit code
as `ktrial check`: 0 valid, 1 invalid, 2 unknown, so a CI step can regenerate and gate
in one command; 254 when PATH holds no history. A run directory inside a store also
has the store's index.html rewritten.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import orjson

from ..histories.jsonl import HistoryError, HistoryWarning
from ..histories.store import MAX_TEST_JSON, load_json, write_json
from ..report.verdict import verdict_of
from .check import RUN_HISTORY_NAMES, InputError, default_results_path, locate

EXIT_CODES = {"valid": 0, "invalid": 1, "unknown": 2}
REPORT_SUFFIX = ".report"


@dataclass(frozen=True)
class Target:
    """Where a report's inputs are and where its outputs go."""

    history: Path
    test_json: Path | None
    out: Path  # the folder receiving report.html, plots/, junit.xml, results.json
    bare: bool  # a history file outside a run directory
    name: str | None = None  # junit's test name when test.json has none (None: the folder's)
    run: str | None = None  # junit's run name (None: the output folder's)

    @property
    def results(self) -> Path:
        return self.out / "results.json"

    def result_sources(self) -> list[Path]:
        """Existing results for this history, newest first."""
        found = [self.results]
        if self.bare:
            found.append(default_results_path(self.history))  # `ktrial check FILE`'s
        existing = [p for p in found if p.is_file()]
        return sorted(existing, key=lambda p: p.stat().st_mtime, reverse=True)


def report_dir(history: Path) -> Path:
    """`FILE.report/` beside a bare history file (the extension dropped, as check does)."""
    name = history.name
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return history.parent / f"{stem}{REPORT_SUFFIX}"


def target_of(path: Path) -> Target:
    """The report's target for PATH (InputError, exit 254, when it holds no history)."""
    hist, test = locate(path)
    hist = hist.resolve()
    if path.is_dir() or hist.name in RUN_HISTORY_NAMES:
        return Target(hist, test, hist.parent, bare=False)
    stem = report_dir(hist).name.removesuffix(REPORT_SUFFIX)
    return Target(hist, test, report_dir(hist), bare=True, name=stem, run=stem)


def check_history(target: Target) -> tuple[dict[str, Any], list[Warning | str]]:
    """Check the history with test.json's options; write the results and return them
    with the reader's warnings."""
    from ..checker import check as run_check
    from ..checker import options_from_test_json
    from ..checker.check import needs_ops
    from ..histories.edn import iter_any_history
    from .check import input_section

    meta = _test_meta(target.test_json)
    try:
        opts = options_from_test_json(meta)
    except (TypeError, ValueError) as e:
        raise InputError(f"{target.test_json}: bad checker option: {e}") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HistoryWarning)
        try:
            ops = iter_any_history(target.history, not needs_ops(opts, meta))
            results = run_check(ops, opts, meta)
        except HistoryError as e:
            raise InputError(f"{e} — the history cannot be checked") from None
    said = [w.message for w in caught]
    results["input"] = input_section(said)
    write_json(target.results, results)
    return results, said


def _test_meta(path: Path | None) -> dict[str, Any]:
    """test.json's object for the check ({} without one); unusable: exit 254."""
    if path is None:
        return {}
    try:
        meta = load_json(path, MAX_TEST_JSON)
    except (OSError, orjson.JSONDecodeError) as e:
        raise InputError(
            f"{path}: unreadable test.json ({e}); fix or delete it to check with default options"
        ) from None
    if not isinstance(meta, dict):
        raise InputError(f"{path}: test.json must hold a JSON object; fix or delete it")
    return meta


def load_results(path: Path) -> dict[str, Any]:
    try:
        results = load_json(path)
    except (OSError, orjson.JSONDecodeError) as e:
        raise click.ClickException(
            f"{path}: unreadable ({e}); run `ktrial report --recheck` on the run to check "
            "the history again"
        ) from None
    if not isinstance(results, dict):
        raise click.ClickException(f"{path}: expected a JSON object; use --recheck")
    return results


def say_warnings(messages: Iterable[Warning | str]) -> None:
    """Each warning once, as `warning: ...` on stderr (not Python's warning format)."""
    for text in dict.fromkeys(str(m) for m in messages):
        click.echo(f"warning: {text}", err=True)


def results_of(target: Target, recheck: bool) -> tuple[dict[str, Any], list[Warning | str]]:
    """The results to show (checked now when there are none, or with `recheck`) and the
    warnings checking raised."""
    sources = [] if recheck else target.result_sources()
    if not sources:
        return check_history(target)
    results = load_results(sources[0])
    if sources[0] != target.results:  # FILE.results.json: the report folder keeps a copy
        write_json(target.results, results)
    return results, []


def draw(target: Target, results: dict[str, Any]) -> tuple[Path, list[Warning | str]]:
    """report.html, timeline.html, plots/ and junit.xml into target.out; the report's
    path and the warnings raised meanwhile (the EDN reader's again, among them)."""
    from ..report.html import render_report  # matplotlib: imported only when drawing
    from ..report.junit import write_junit

    history = None if target.history == target.out / "history.jsonl" else target.history
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HistoryWarning)
        try:
            path = render_report(target.out, results, history=history, test_json=target.test_json)
        except HistoryError as e:
            raise InputError(f"{e} — the history cannot be read for the report") from None
        write_junit(
            target.out,
            results,
            test_json=target.test_json,
            name=target.name,
            run=target.run,
            history=target.history if target.bare else None,
        )
    return path, [w.message for w in caught]


@click.command("report")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--recheck", is_flag=True, help="Check the history again even if results.json exists."
)
def report(path: Path, recheck: bool) -> int:
    """Regenerate report.html, plots/ and junit.xml of PATH and print the report's path.

    PATH is a run directory (`store/NAME/STAMP`, `store/NAME/latest`, or a Jepsen run
    directory with history.edn), or a history file (JSONL or Jepsen EDN) whose report
    goes into FILE.report/ beside it.
    """
    target = target_of(path)
    if target.bare:
        try:
            target.out.mkdir(exist_ok=True)
        except OSError as e:
            raise click.ClickException(
                f"{target.out}: cannot create the report folder ({e.strerror or e})"
            ) from None
    results, checked = results_of(target, recheck)
    report_path, drawn = draw(target, results)
    say_warnings([*checked, *drawn])
    if not target.bare:
        from ..report.index import refresh_index

        refresh_index(target.out)
    click.echo(str(report_path))
    return EXIT_CODES.get(verdict_of(results), 2)
