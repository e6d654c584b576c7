"""store/index.html: every run of a store on one static page, newest first.

The offline counterpart of Jepsen's ``lein run serve``: no server, no JavaScript, no
external asset; open it from disk, a CI artifact or a file share. For each run it
shows the date, the test, the verdict, the bad anomaly counts, the fault families
injected (with a warning when asked faults did not all happen), the seed, the op count
and the duration, and links to the run's report.html, timeline.html, results.json and
junit.xml (relative, so a store that moves keeps working links). A table of tests on
top gives each test's latest verdict.

The rows come from report/runs.py's summaries without reading any checked run's
history (results.json counts its ops), so rewriting the page after every run stays
cheap for a big store. ``ktrial run`` rewrites it after each run (trial.py), ``ktrial
report`` after redrawing a stored run, ``ktrial runs --html`` on demand. Everything
shown is HTML-escaped and every link URL-quoted: test names and results are data.
"""

from __future__ import annotations

import html
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from ..histories.store import RunDir, fsync_dir
from .runs import RunSummary, summarize_store

INDEX = "index.html"
log = logging.getLogger("ktrial.report")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1b1f24;
background:#fff}
main{max-width:1400px;margin:0 auto;padding:16px 24px}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:22px 0 8px}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #d8dee4;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
td.date{white-space:nowrap}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.v{font-weight:700;padding:1px 6px;border-radius:4px;white-space:nowrap}
.v-valid{background:#dafbe1;color:#116329}.v-invalid{background:#ffebe9;color:#a40e26}
.v-unknown{background:#fff8c5;color:#7d4e00}.v-other{background:#eaeef2;color:#57606a}
.warn{color:#9a6700}.dim{color:#57606a}.links a{margin-right:8px}
.summary{margin:6px 0 12px}.latest{font-size:12px;color:#0969da}
"""

VERDICT_CLASS = {"valid": "v-valid", "invalid": "v-invalid", "unknown": "v-unknown"}


def esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def _href(*parts: str) -> str:
    """A relative URL from the store's root, each path part quoted (spaces, #, ?, %)."""
    return esc("/".join(quote(p, safe="") for p in parts))


def _verdict(v: str) -> str:
    return f'<span class="v {VERDICT_CLASS.get(v, "v-other")}">{esc(v)}</span>'


def _duration(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _bad(r: RunSummary) -> str:
    if not r.bad:
        return '<span class="dim">–</span>'
    return ", ".join(f"{esc(t)} ×{n:,}" for t, n in sorted(r.bad.items()))


def fault_text(r: RunSummary) -> tuple[str, bool]:
    """(plain text of the faults injected, whether to warn)."""
    injected = r.faults
    if injected is None:
        if r.faults_asked:
            return f"asked: {', '.join(r.faults_asked)} (injected: not recorded)", False
        return "–", False
    done = ", ".join(f"{f} ×{n}" for f, n in injected.items() if n) or "none"
    if r.faults_ok is False:
        missing = [f for f in r.faults_asked if not injected.get(f)]
        lack = f"; never injected: {', '.join(missing)}" if missing else ""
        return f"{done} (asked: {', '.join(r.faults_asked)}{lack})", True
    return done, False


def _faults(r: RunSummary) -> str:
    text, warn = fault_text(r)
    if warn:
        return f'<span class="warn" title="asked faults did not all happen">⚠ {esc(text)}</span>'
    return esc(text) if text != "–" else '<span class="dim">–</span>'


def _links(r: RunSummary) -> str:
    test, run = r.run.path.parent.name, r.run.path.name
    out = []
    for name, label in (
        ("report.html", "report"),
        ("timeline.html", "timeline"),
        ("results.json", "results.json"),
        ("junit.xml", "junit.xml"),
    ):
        if (r.run.path / name).exists():
            out.append(f'<a href="{_href(test, run, name)}">{esc(label)}</a>')
    if not (r.run.path / "report.html").exists():
        out.append('<span class="dim">no report: run <code>ktrial report</code> on it</span>')
    return '<span class="links">' + "".join(out) + "</span>"


def _run_row(r: RunSummary) -> str:
    test, run = r.run.path.parent.name, r.run.path.name
    report = r.run.path / "report.html"
    run_cell = (
        f'<a href="{_href(test, run, "report.html")}">{esc(run)}</a>'
        if report.exists()
        else esc(run)
    )
    if r.latest:
        run_cell += ' <span class="latest">latest</span>'
    cells = [
        esc(r.name),
        run_cell,
        _verdict(r.verdict),
        _bad(r),
        _faults(r),
        esc(r.seed) if r.seed is not None else '<span class="dim">–</span>',
    ]
    nums = [f"{r.ops:,}", _duration(r.duration_s)]
    return (
        f'<tr><td class="date">{esc(r.date)}</td>'
        + "".join(f"<td>{c}</td>" for c in cells)
        + "".join(f'<td class="num">{esc(n)}</td>' for n in nums)
        + f"<td>{_links(r)}</td></tr>"
    )


def _tests_table(rows: list[RunSummary]) -> str:
    """One row per test: its runs, how many invalid or unknown, its latest verdict."""
    by_test: dict[str, list[RunSummary]] = {}
    for r in rows:
        by_test.setdefault(r.run.path.parent.name, []).append(r)
    out = []
    for test, runs in sorted(by_test.items()):
        latest = next((r for r in runs if r.latest), runs[-1])
        run = latest.run.path.name
        link = (
            f'<a href="{_href(test, run, "report.html")}">{esc(run)}</a>'
            if (latest.run.path / "report.html").exists()
            else esc(run)
        )
        n_bad = sum(r.verdict == "invalid" for r in runs)
        n_unknown = sum(r.verdict == "unknown" for r in runs)
        out.append(
            f'<tr><td>{esc(test)}</td><td class="num">{len(runs):,}</td>'
            f'<td class="num">{n_bad:,}</td><td class="num">{n_unknown:,}</td>'
            f"<td>{_verdict(latest.verdict)} {link}</td></tr>"
        )
    return (
        '<h2 id="tests">Tests</h2><table id="tests-table"><thead><tr><th>test</th><th>runs</th>'
        "<th>invalid</th><th>unknown</th><th>latest run</th></tr></thead><tbody>"
        + "".join(out)
        + "</tbody></table>"
    )


def _counts(rows: Iterable[RunSummary]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    order = ["invalid", "unknown", "valid", "not checked", "unreadable"]
    return ", ".join(f"{counts[v]:,} {v}" for v in order if counts.get(v))


def build_index(store: Path, rows: list[RunSummary], generated: str | None = None) -> str:
    """The page for `rows` (oldest first, as summarize_store returns them)."""
    generated = generated or time.strftime("%Y-%m-%d %H:%M:%S %Z")
    title = f"ktrial runs: {store.name or store}"
    if rows:
        n_tests = len({r.run.path.parent.name for r in rows})
        head = (
            f'<p class="summary">{len(rows):,} runs of {n_tests:,} '
            f"test{'s' if n_tests != 1 else ''}: {esc(_counts(rows))}.</p>"
        )
        header = "".join(
            f"<th>{h}</th>"
            for h in (
                "date",
                "test",
                "run",
                "verdict",
                "bad anomalies",
                "faults injected",
                "seed",
                "ops",
                "duration",
                "files",
            )
        )
        body = (
            head
            + _tests_table(rows)
            + '<h2 id="runs">Runs, newest first</h2><table id="runs-table"><thead><tr>'
            + header
            + "</tr></thead><tbody>"
            + "".join(_run_row(r) for r in reversed(rows))
            + "</tbody></table>"
        )
    else:
        body = '<p class="summary">No runs yet: <code>ktrial run</code> stores them here.</p>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width"><title>{esc(title)}</title>'
        f"<style>{CSS}</style></head><body><main><h1>{esc(title)}</h1>{body}"
        f'<p class="dim">Generated {esc(generated)} from {esc(store.resolve())}. '
        "<code>ktrial runs --html</code> rewrites this page; <code>ktrial runs</code> "
        "lists the same runs in a terminal.</p></main></body></html>\n"
    )


def write_index(store: str | os.PathLike[str]) -> Path:
    """Write `store`/index.html (atomically) and return its path."""
    root = Path(store)
    text = build_index(root, summarize_store(root, history=False))
    path = root / INDEX
    tmp = root / f".{INDEX}.{os.getpid()}.tmp"  # two runs finishing at once: own files
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(root)
    return path


def store_of(run_dir: RunDir | Path) -> Path | None:
    """The store a run directory belongs to: `<store>/<test>/<run>`, recognised by the
    `latest` link create_run() keeps in `<store>/<test>`; None for any other directory
    (a test's scratch run, a Jepsen directory), where no index is written."""
    path = run_dir.path if isinstance(run_dir, RunDir) else Path(run_dir)
    test_dir = path.parent
    if not (test_dir / "latest").is_symlink():
        return None
    return test_dir.parent


def refresh_index(run_dir: RunDir | Path) -> Path | None:
    """Rewrite the index of the store `run_dir` is in, after a run or a redrawn report.

    Never raises for the run's sake: a failure is logged and None returned (the run's
    own files are what matter)."""
    store = store_of(run_dir)
    if store is None:
        return None
    try:
        return write_index(store)
    except (OSError, ValueError) as e:
        log.warning("could not rewrite %s: %s", store / INDEX, e)
        return None
