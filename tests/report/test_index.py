"""store/index.html (report/index.py): every run on one static page with verdicts, bad
anomaly counts, faults injected, seeds and working relative links; escaped; rewritten
after a run (trial.py), by `ktrial report` and by `ktrial runs --html`."""

from __future__ import annotations

import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
from ktrial.cli import main
from ktrial.histories.store import create_run, load_json, write_json
from ktrial.report import index as index_mod
from ktrial.report import runs as runs_mod
from ktrial.report.index import INDEX, refresh_index, store_of, write_index
from ktrial.testing.sample import write_sample_run

HOSTILE = '<img src=x onerror=alert(1)> & "q" #x ?y %z'  # a directory name: no slash


class Page(HTMLParser):
    """The page's links, its runs-table rows (cell texts) and its tag balance."""

    VOID = frozenset({"meta", "br", "img", "link", "input", "hr"})

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.rows: list[list[str]] = []
        self.stack: list[str] = []
        self.in_runs = False
        self.cell: list[str] | None = None
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "a" and a.get("href"):
            self.links.append(str(a["href"]))
        if tag == "table":
            self.in_runs = a.get("id") == "runs-table"
        if self.in_runs and tag == "tr":
            self.rows.append([])  # the header row stays empty (th cells)
        if self.in_runs and tag == "td":
            self.cell = []
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-3:])
        self.stack.pop()
        if tag == "td" and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None
        if tag == "table":
            self.in_runs = False

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def read_page(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    assert page.stack == [], "unclosed tags"
    page.rows = [r for r in page.rows if r]
    return page


def _with_stats(run: Path) -> None:
    """results.json's stats as the checker writes them (the sample's lack duration_s)."""
    results = load_json(run / "results.json")
    results["stats"]["duration_s"] = 60.0
    write_json(run / "results.json", results)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    now = time.time()
    bad = create_run(root, "queue", now=now - 300)
    write_sample_run(bad.path, anomalies=True, seed=11)
    _with_stats(bad.path)
    (bad.path / "report.html").write_text("<p>report</p>")
    (bad.path / "timeline.html").write_text("<p>timeline</p>")
    ok = create_run(root, "queue", now=now - 200)
    write_sample_run(ok.path, anomalies=False, seed=12)
    _with_stats(ok.path)
    (ok.path / "report.html").write_text("<p>report</p>")
    # a run whose results say the asked faults did not all happen
    results = load_json(ok.results)
    results["faults"] = {
        "asked": ["partition", "kill", "pause"],
        "injected": {"partition": 2, "kill": 0},
        "not_injected": ["kill", "pause"],
        "ok": False,
        "warnings": ["asked for faults partition, kill, pause; never injected: kill, pause"],
    }
    write_json(ok.results, results)
    odd = create_run(root, HOSTILE, now=now - 100)  # a test name is data: escape, quote
    write_sample_run(odd.path, anomalies=False, seed=13)
    odd.results.unlink()  # cut short before its check
    (odd.path / "report.html").write_text("<p>report</p>")
    test = load_json(odd.test_json)
    test["name"] = HOSTILE
    write_json(odd.test_json, test)
    return root


def test_the_index_lists_every_run_newest_first(store: Path) -> None:
    path = write_index(store)
    assert path == store / INDEX
    page = read_page(path)
    assert page.scripts == 0
    rows = page.rows
    assert len(rows) == 3
    date, test, run, verdict, bad, faults, seed, ops, duration, files = rows[0]
    assert test == HOSTILE and verdict == "not checked" and seed == "13"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", date)
    assert faults == "asked: partition, kill, pause (injected: not recorded)"
    assert "report" in files and "results.json" not in files
    _, _, run, verdict, bad, faults, seed, ops, duration, files = rows[1]
    assert verdict == "valid" and seed == "12" and "latest" in run
    assert duration == "60 s" and "timeline" not in files
    assert faults == "⚠ partition ×2 (asked: partition, kill, pause; never injected: kill, pause)"
    _, test, run, verdict, bad, faults, seed, ops, duration, files = rows[2]
    assert int(ops.replace(",", "")) > 1000  # results.json's stats.ops
    assert test == "queue" and verdict == "invalid" and seed == "11"
    assert bad == "G1c ×1, duplicate ×1, lost-write ×2"
    assert "latest" not in run and "report" in files and "timeline" in files
    text = path.read_text()
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt; &amp; &quot;q&quot;" in text
    assert "1 invalid, 1 valid, 1 not checked" in text
    assert 'id="tests-table"' in text


def test_every_link_is_relative_and_opens_a_file(store: Path) -> None:
    page = read_page(write_index(store))
    assert page.links
    for href in page.links:
        assert not href.startswith(("/", "http:", "https:", "file:")), href
        target = store / unquote(href)
        assert target.is_file(), href
    hrefs = set(page.links)
    assert any(h.endswith("/report.html") for h in hrefs)
    assert any(h.endswith("/timeline.html") for h in hrefs)
    # the odd test's files are linked with its name quoted (%, #, ?, spaces)
    odd = [h for h in hrefs if h.startswith("%3Cimg")]
    assert odd and all("#" not in h and "?" not in h and " " not in h for h in odd)


def test_the_index_does_not_read_checked_histories(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cheap for a big store: a checked run's ops and duration come from results.json."""
    read: list[Path] = []
    real = runs_mod.count_lines

    def counting(path: Path) -> int:
        read.append(path)
        return real(path)

    monkeypatch.setattr(runs_mod, "count_lines", counting)
    monkeypatch.setattr(runs_mod, "last_time_s", lambda path: read.append(path))
    write_index(store)
    assert {p.parent.parent.name for p in read} == {HOSTILE}  # only the unchecked run


def test_an_empty_store_says_so(tmp_path: Path) -> None:
    text = write_index(tmp_path).read_text()
    assert "No runs yet" in text


def test_refresh_writes_only_into_a_store(store: Path, tmp_path: Path) -> None:
    run = next((store / "queue").iterdir())
    assert store_of(run) == store
    assert refresh_index(run) == store / INDEX
    loose = tmp_path / "loose" / "t" / "r"  # no `latest` link beside it: not a store
    write_sample_run(loose)
    assert store_of(loose) is None and refresh_index(loose) is None
    assert not (tmp_path / "loose" / INDEX).exists()


def test_refresh_never_raises(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(_: object) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(index_mod, "write_index", fail)
    assert refresh_index(next((store / "queue").iterdir())) is None


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def test_runs_html_writes_the_index(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(["runs", "--store", str(store), "--html"], capsys)
    assert rc == 0 and out.strip() == str((store / INDEX).absolute())
    assert len(read_page(store / INDEX).rows) == 3
    rc, _, err = _cli(["runs", "--store", str(store), "--html", "--name", "queue"], capsys)
    assert rc == 254 and "whole store" in err


def test_report_command_rewrites_the_index(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert not (store / INDEX).exists()
    run = store / "queue" / "latest"
    rc, out, _ = _cli(["report", str(run)], capsys)
    assert rc in (0, 1, 2) and out.strip() == str(run.resolve() / "report.html")
    page = read_page(store / INDEX)
    assert len(page.rows) == 3


def test_runs_json_carries_seed_and_faults(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(["runs", "--store", str(store), "--json"], capsys)
    rows = {r["seed"]: r for r in json.loads(out)}
    assert rc == 0 and set(rows) == {11, 12, 13}
    assert rows[12]["faults_injected"] == {"partition": 2, "kill": 0}
    assert rows[12]["faults_ok"] is False
    assert rows[13]["faults_injected"] is None  # not checked: nothing recorded
    assert rows[13]["faults_asked"] == ["partition", "kill", "pause"]
