"""report.html: verdict first, anomalies explained, escaped, plots embedded, faults shown."""

import html
import re
from pathlib import Path

import numpy as np
import orjson
import pytest
from ktrial.histories.store import write_json
from ktrial.report import render_report
from ktrial.report.meanings import KNOWN_TYPES, MEANINGS
from ktrial.report.plots import downsample
from ktrial.testing.sample import HOSTILE, write_sample_run


@pytest.fixture(scope="module")
def invalid_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run = write_sample_run(tmp_path_factory.mktemp("store") / "t" / "20261129T200000")
    return run, render_report(run).read_text()


def test_verdict_comes_first(invalid_run: tuple[Path, str]) -> None:
    _, page = invalid_run
    m = re.search(
        r'<div id="verdict" class="verdict v-invalid" data-verdict="invalid">'
        r'<div class="word">INVALID</div>',
        page,
    )
    assert m is not None
    assert (
        m.start()
        < page.index('id="anomalies"')
        < page.index('id="plots"')
        < page.index('id="metrics"')
        < page.index('id="config"')
    )
    # the summary names each bad type with its count
    why = page[m.end() : page.index("</div></div>", m.end())]
    for t, n in (("lost-write", 2), ("duplicate", 1), ("G1c", 1)):
        assert f">{t}</a> ×{n}" in why
    assert "not bad here" in why and ">G0</a> ×3" in why


def test_each_anomaly_has_count_meaning_and_explanation(invalid_run: tuple[Path, str]) -> None:
    run, page = invalid_run
    results = orjson.loads((run / "results.json").read_bytes())
    for t, a in results["anomalies"].items():
        section = page[page.index(f'id="a-{t}"') :]
        section = section[: section.index("</div>\n") if "</div>\n" in section else None]
        assert f'<span class="count">×{a["count"]}</span>' in section
        assert html.escape(MEANINGS[t], quote=True) in section
        for ex in a["examples"]:
            assert html.escape(ex["explanation"], quote=True) in section
    # bad anomalies are listed before benign ones
    assert page.index('id="a-G1c"') < page.index('id="a-G0"')


def test_cycles_are_explained_step_by_step(invalid_run: tuple[Path, str]) -> None:
    run, page = invalid_run
    ex = orjson.loads((run / "results.json").read_bytes())["anomalies"]["G1c"]["examples"][0]
    a, b = ex["cycle"]
    g1c = page[page.index('id="a-G1c"') : page.index('id="a-G0"')]
    assert f"cycle: op {a} → op {b} → op {a}" in g1c
    steps = re.findall(r"<li>(.*?)</li>", g1c[g1c.index('<ol class="steps">') :])
    assert steps[:2] == [html.escape(s, quote=True) for s in ex["steps"]]
    assert "read it at offset 900" in steps[0]
    # the ops of the cycle are shown from the history, not just named
    for i, process in ((a, 4), (b, 5)):
        assert re.search(
            rf'<td class="num">{i}</td><td class="num">[0-9.]+</td><td>{process}</td>'
            r"<td>ok</td><td>txn</td>",
            g1c,
        )


def test_history_content_is_escaped(invalid_run: tuple[Path, str]) -> None:
    _, page = invalid_run
    assert "<script" not in page
    assert html.escape(HOSTILE, quote=True) in page  # from results.json and test.json


def test_plots_are_embedded_and_written(invalid_run: tuple[Path, str]) -> None:
    run, page = invalid_run
    imgs = re.findall(
        r'<img class="plot-img" alt="([^"]+)" data-file="(plots/[^"]+)" '
        r'src="data:image/png;base64,([A-Za-z0-9+/=]+)">',
        page,
    )
    assert [a for a, _, _ in imgs] == [
        "Latency over time",
        "Latency quantiles over time",
        "Throughput over time",
        "Realtime lag over time",
        "Unseen values over time",
    ]
    for _, rel, b64 in imgs:
        data = (run / rel).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
        assert len(b64) > 5000
    assert "http://" not in page and "https://" not in page  # nothing fetched


def test_fault_windows_are_listed_with_colours(invalid_run: tuple[Path, str]) -> None:
    _, page = invalid_run
    faults = page[page.index('id="faults"') : page.index('id="config"')]
    rows = re.findall(
        r"</span>(\w+)</td><td class=\"num\">([\d.,]+)</td>"
        r"<td class=\"num\">([^<]+)</td>",
        faults,
    )
    assert rows[0] == ("partition", "10.0", "20.0")
    assert rows[1] == ("kill", "30.0", "38.0")
    assert rows[2][0] == "pause" and rows[2][2].endswith("(end of run)")
    legend = page[page.index('id="plots"') : page.index('id="plot-latency"')]
    for fam in ("partition", "kill", "pause"):
        assert f"></span>{fam}" in legend


def test_metrics_and_config_tables(invalid_run: tuple[Path, str]) -> None:
    _, page = invalid_run
    metrics = page[page.index('id="metrics"') : page.index('id="faults"')]
    assert '<td>send</td><td class="num">5,400</td><td class="num">110</td>' in metrics
    assert '<td>REQUEST_TIMED_OUT</td><td class="num">60</td>' in metrics
    assert '<td class="num">180.0</td>' in metrics  # send ok p99
    config = page[page.index('id="config"') :]
    # a short curated table (issue 14 B), the raw test.json one click away
    assert '<td>system</td><td><span class="mono">Kafka 4.1.0</span></td>' in config
    assert "<td>workload</td>" in config and '<details id="raw-config">' in config


def test_valid_run(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "t" / "20261129T210000", anomalies=False)
    page = render_report(run).read_text()
    assert 'data-verdict="valid"' in page and ">VALID<" in page
    assert "None found." in page


def test_missing_metrics_say_not_computed(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "t" / "20261129T220000", anomalies=False)
    write_json(run / "results.json", {"valid": "unknown"})
    page = render_report(run).read_text()
    assert 'data-verdict="unknown"' in page
    for what in (
        "Realtime lag over time",
        "Unseen values over time",
        "Info causes",
        "Latency quantiles",
    ):
        assert f"{what}: not computed." in page
    # latency, its quantiles and throughput come from the history itself
    assert page.count('class="plot-img"') == 3
    assert "From the history" in page


def test_unchecked_run_and_empty_history(tmp_path: Path) -> None:
    run = tmp_path / "t" / "x"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_text("")
    page = render_report(run).read_text()
    assert 'data-verdict="not checked"' in page and "NOT CHECKED" in page
    assert page.count('class="plot-img"') == 0


def test_torn_and_odd_lines_do_not_break_the_report(tmp_path: Path) -> None:
    run = tmp_path / "t" / "x"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_bytes(
        b'{"index":0,"time":0,"process":0,"type":"invoke","f":"send","value":[["send",1,1]]}\n'
        b'{"index":1,"time":5000000,"process":0,"type":"ok","f":"send",'
        b'"value":[["send",1,[0,1]]]}\n[1,2]\n{"index":3,"ti'
    )
    page = render_report(run, {"valid": True}).read_text()
    assert "unreadable lines skipped: <b>2</b>" in page
    assert page.count('class="plot-img"') == 3


def test_every_known_type_has_a_meaning() -> None:
    assert len(KNOWN_TYPES) == 21
    assert all(MEANINGS[t].endswith(")") or MEANINGS[t].endswith(".") for t in KNOWN_TYPES)


def test_downsample_keeps_spikes() -> None:
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(0, 1000, 300_000))
    y = rng.uniform(1, 10, 300_000)
    y[123_456] = 9_999.0
    idx = downsample(t, y, 10_000)
    assert len(idx) <= 10_000 + 400
    assert 123_456 in set(idx.tolist())
    assert len(downsample(t[:50], y[:50], 10_000)) == 50


def test_op_values_mark_the_example_values_and_stay_escaped() -> None:
    from ktrial.report.html import highlight_values, op_value_html

    assert highlight_values({"value": 5, "values": [6, 7], "lost": [["0", 8]]}) == {5, 6, 7, 8}
    out = op_value_html([["send", 0, [115, 27]], "<b>it's 27</b>", [1, 270]], {27})
    assert out.count("<mark>27</mark>") == 2 and "270" in out and "<b>" not in out
    # a long drain poll is cut around the marked value, not at its start
    big = [["poll", {"0": [[i, 1000 + i] for i in range(300)]}]]
    out = op_value_html(big, {1250})
    assert "<mark>1250</mark>" in out and out.startswith("…")


def test_over_time_plot_with_one_huge_spike(tmp_path: Path) -> None:
    from ktrial.report.plots import plot_over_time
    from ktrial.report.scan import HistoryScan

    points = [[t / 10, 5.0] for t in range(300)] + [[30.0, 90_000.0]]
    out = plot_over_time(
        points, HistoryScan(end_s=31.0), tmp_path / "lag.png", "lag", "ms", "#1f77b4"
    )
    assert out is not None and out.read_bytes().startswith(b"\x89PNG")
    assert plot_over_time([], HistoryScan(), tmp_path / "x.png", "t", "y", "#000") is None
    assert plot_over_time([[1, "x"]], HistoryScan(), tmp_path / "x.png", "t", "y", "#000") is None


def test_liveness_section_after_anomalies(tmp_path: Path) -> None:
    from ktrial.checker import CheckOptions, check_file

    run = write_sample_run(tmp_path / "t" / "r", anomalies=False)
    # tiny bounds: the sample run's faults excuse nothing, so the checks go bad
    opts = CheckOptions(stuck_s=0.001, recovery_s=0.0001, liveness_bad=True)
    res = check_file(run / "history.jsonl", opts)
    page = render_report(run, res).read_text()
    assert page.index('id="anomalies"') < page.index('id="liveness"') < page.index('id="plots"')
    section = page[page.index('id="liveness"') : page.index('id="plots"')]
    for name in ("e2e-latency", "commit-latency", "starvation", "stuck-partition",
                 "slow-recovery", "memory-growth"):  # fmt: skip
        assert f">{name}</span>" in section
    checks = res["metrics"]["liveness"]["checks"]
    assert checks["stuck-partition"]["bad"] is True
    assert '<span class="badge bad">bad</span>' in section
    assert "Violations (" in section
    first = res["metrics"]["liveness"]["violations"][0]["explanation"]
    assert html.escape(first, quote=True) in section
