"""report.html for the person on call (issue 14 B): what a real run's report got wrong.

Measured on a default run's report: liveness headlines that were the drain and the
warm-up, four "not bad here" cards before anything else, each example's text printed
twice, "ops" counting history lines, "Showing 5 of 8" when 15 were found, `None` in
the text, a green "ok" for what was never measured, bare librdkafka codes, a cut
nemesis line and ~190 raw configuration rows. Each test here fails on the old report.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import check_file, options_from_test_json
from ktrial.histories.store import write_json
from ktrial.report import render_report
from ktrial.report.errcodes import code_meaning
from ktrial.report.faults import FaultWindow
from ktrial.report.html import (
    _example,
    config_rows,
    examples_note,
    iso_time,
    nemesis_text,
    section_anomalies,
    section_liveness,
    split_explanation,
)
from ktrial.report.scan import HistoryScan
from ktrial.tests.histlines import Timeline, warming_up_consumer

SECRET = "hunter2-not-for-reports"


def real_meta() -> dict[str, Any]:
    """test.json shaped like a default `ktrial run`'s (trimmed)."""
    return {
        "ktrial_version": "0.1.0",
        "name": "queue",
        "seed": 11,
        "time_limit": 45.0,
        "wall_start": 1796162258.1038444,
        "cluster": {
            "kind": "local",
            "broker": "apache-kafka",
            "broker_versions": ["4.1.1"],
            "nodes": 3,
            "profile": "safe",
            "addresses": {"n1": "10.213.0.11", "n2": "10.213.0.12", "n3": "10.213.0.13"},
        },
        "workload": "queue",
        "workload_options": {"txn": True, "concurrency": 16, "n_keys": 32, "rate": 0.0},
        "keys": {str(k): {"topic": f"ktrial-q-{k // 4}", "partition": k % 4} for k in range(32)},
        "topics": {f"ktrial-q-{i}": 4 for i in range(8)},
        "replication_factor": 3,
        "producer_config": {"acks": "all", "enable.idempotence": True, "sasl.password": SECRET},
        "consumer_config": {"isolation.level": "read_committed"},
        "txn": True,
        "idempotence": True,
        "sub_via": "assign",
        "nemesis": {
            "faults": ["partition", "kill", "pause", "memory", "toxic"],
            "schedule": "interval",
            "interval": 6.0,
            "period": 20.0,
            "quiet_p": 0.3,
        },
        "run": {"seed": None, "time_limit": 45.0, "heal_wait": 5.0},
        "drain": {"caught_up": True, "polls": 4, "records": 40, "seconds": 4.2, "started_s": 45.0},
    }


def real_history() -> Timeline:
    """Two clients for 40 s, a kill of n2 from 15 s to 20 s, one op timing out, then the
    drain re-reading from offset 0 (stale by ~35 s)."""
    tl = warming_up_consumer()
    tl.pair(
        3, 16.0, 26.0, "send", [["send", "0", 999]], [["send", "0", 999]], "info",
        error={"name": "_TIMED_OUT", "code": -185, "message": "Local: Timed out"},
    )  # fmt: skip
    tl.nem(15.0, "kill", {"nodes": ["n2"], "signal": "SIGKILL"})
    tl.nem(20.0, "start", {"nodes": ["n2"]})
    tl.pair(2, 45.0, 45.1, "assign", [0], [0], seek_to_beginning=True)
    for j in range(4):
        at = 45.2 + j
        tl.poll(2, at, at + 0.1, {"0": [[o, o] for o in range(10 * j, 10 * j + 10)]})
    return tl


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    meta = real_meta()
    run = real_history().write(tmp_path_factory.mktemp("store") / "queue" / "20261201T2157", meta)
    results = check_file(run / "history.jsonl", options_from_test_json(meta), meta)
    write_json(run / "results.json", results)
    return run, results, render_report(run).read_text()


def section(page: str, start: str, end: str) -> str:
    return page[page.index(start) : page.index(end)]


# -------------------------------------------------------------------- headlines


def test_counts_are_ops_not_history_lines(real_run: tuple[Path, dict[str, Any], str]) -> None:
    run, results, page = real_run
    lines = len((run / "history.jsonl").read_text().splitlines())
    client, nemesis = results["stats"]["client_ops"], results["stats"]["nemesis_ops"]
    assert client < lines - nemesis  # an invoke and its completion are one op
    facts = section(page, 'id="facts"', 'id="nemesis-line"')
    assert f"client ops: <b>{client:,}</b>" in facts
    assert f"nemesis ops: <b>{nemesis}</b>" in facts
    assert f"<b>{lines:,}</b>" not in facts


def test_the_nemesis_line_is_whole_and_says_what_ran() -> None:
    kill = FaultWindow("kill", 15.0, 20.0, "kill", "start", {"nodes": ["n2"]})
    text = nemesis_text(real_meta(), [kill, kill])
    assert text == (
        "asked for partition, kill, pause, memory, toxic (a fault every 6 s); injected kill ×2; "
        "never injected: partition, pause, memory, toxic"
    )
    assert nemesis_text({}, []) == "no fault injected"


def test_liveness_leaves_out_the_drain_and_warm_up(
    real_run: tuple[Path, dict[str, Any], str],
) -> None:
    _, results, page = real_run
    live = section(page, 'id="liveness"', 'id="plots"')
    assert 'id="judged-window"' in live
    assert "Judged from 10.0 s to 45.0 s" in live and "the drain, from 45.0 s" in live
    lag = results["metrics"]["realtime_lag"]
    assert lag["worst"]["process"] == 1 and lag["worst_any_poll"]["process"] == 2
    headline = re.search(r'<p id="lag-worst">(.*?)</p>', page)
    assert headline is not None
    text = headline.group(1)
    assert "Worst in the judged window: <b>0.8 s (key 0, process 1, at 12.0 s)</b>" in text
    assert f"{lag['worst_any_poll']['lag_ms'] / 1000:,.1f} s" in text  # apart, and named
    assert '<span class="missing">Left out (' in text


def test_old_results_get_the_judged_worst_from_the_series(
    real_run: tuple[Path, dict[str, Any], str], tmp_path: Path
) -> None:
    """results.json written before the judged window existed: the report applies it."""
    run, results, _ = real_run
    old = json.loads(json.dumps(results))
    del old["metrics"]["judged_window"]
    old["metrics"]["realtime_lag"]["worst"] = old["metrics"]["realtime_lag"].pop("worst_any_poll")
    page = render_report(_copy_run(run, tmp_path), old).read_text()
    assert "Worst in the judged window: <b>0.8 s (from the sampled series)</b>" in page
    assert "drain included" in page  # the per-key table says what it is


def _copy_run(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "queue" / run.name
    dst.mkdir(parents=True)
    for name in ("history.jsonl", "test.json"):
        (dst / name).write_bytes((run / name).read_bytes())
    return dst


def test_never_measured_is_grey_and_none_never_shows() -> None:
    checks = {
        "starvation": {"ok": True, "bad": False, "value": None, "threshold": 0.97,
                       "explanation": "0 windows of 10 s judged, lowest consumed/offered None"},
        "memory-growth": {"ok": True, "bad": False, "value": None, "threshold": 67108864,
                          "explanation": "no node-stats samples in the history"},
        "slow-recovery": {"ok": True, "bad": False, "value": 2.0, "threshold": 60.0,
                          "explanation": "1 heals; slowest recovery: sends 2.0 s, reads None s"},
    }  # fmt: skip
    live = {
        "checks": checks,
        "starvation": {"windows_judged": 0, "min_ratio": None, "window_s": 10.0},
        "memory": {"nodes": {}, "samples": 0},
        "recovery": {"heals": 1, "max_send_s": 2.0, "max_read_s": None},
        "thresholds": {"liveness_bad": False, "starvation_min_offered": 20},
    }
    out = section_liveness({"metrics": {"liveness": live}})
    assert "None" not in out
    rows = re.findall(r"<tr>(.*?)</tr>", out)[1:]
    assert len(rows) == 3
    for row in rows[:2]:
        assert '<span class="badge none">not measured</span>' in row
        assert "badge ok" not in row
    assert "no window was judged" in rows[0] and "no node-stats samples" in rows[1]
    assert '<span class="badge ok">ok</span>' in rows[2] and "reads not measured" in rows[2]


# -------------------------------------------------------------------- anomalies


def _anomalies() -> dict[str, Any]:
    ex = {"explanation": "op 3 sent value 5 to key 0; no ok op ever read it.", "ops": [3]}
    g0 = [{"explanation": f"cycle {i}", "cycle": [1, 2]} for i in range(8)]
    return {
        "valid": False,
        "bad_error_types": ["lost-write"],
        "anomalies": {
            "G0": {"count": 15, "examples": g0},
            "int-send-skip": {"count": 2, "examples": g0[:2]},
            "poll-skip": {"count": 1, "examples": g0[:1]},
            "lost-write": {"count": 1, "examples": [ex]},
            "unseen": {"count": 3, "examples": g0[:3]},
        },
    }


def test_bad_anomalies_first_benign_ones_collapsed_into_one_line() -> None:
    results = _anomalies()
    results["bad_error_types"] = ["lost-write", "poll-skip"]
    out = section_anomalies(results, HistoryScan())
    benign = out.index('id="benign"')
    assert out.index('id="a-lost-write"') < out.index('id="a-poll-skip"') < benign
    line = re.search(r'<div class="benign-line" id="benign"><p>(.*?)</p>', out)
    assert line is not None
    for t, n in (("int-send-skip", 2), ("unseen", 3), ("G0", 15)):
        assert f">{t}</a> ×{n}" in line.group(1)
    # their cards are there, but folded away below the line
    details = out[benign:]
    assert details.index("<details>") < details.index('id="a-G0"')


def test_examples_note_says_found_and_kept() -> None:
    assert examples_note(15, 8, 5) == "Showing 5 of 15 found (results.json keeps 8)."
    assert examples_note(8, 8, 5) == "Showing 5 of 8 found."
    assert examples_note(None, 8, 5) == "Showing 5 of 8 found."
    assert examples_note(5, 5, 5) == ""
    out = section_anomalies(_anomalies(), HistoryScan())
    assert "Showing 5 of 15 found (results.json keeps 8)." in out
    assert "results.json has all" not in out


G0_EXAMPLE: dict[str, Any] = {
    "cycle": [65, 79],
    "edges": ["ww", "ww"],
    "steps": [
        "op 65 (process 15, ok txn) sent value 2 to key 0, and the next record of key 0 is "
        "value 13, sent by op 79",
        "op 79 (process 9, ok txn) sent value 14 to key 1, and the next record of key 1 is "
        "value 3, sent by op 65",
    ],
}
G0_EXAMPLE["explanation"] = (
    "A G0 cycle of 2 ops: writes of these transactions interleave. "
    f"1. [ww] {G0_EXAMPLE['steps'][0]}. 2. [ww] {G0_EXAMPLE['steps'][1]}. "
    "That leads back to op 65."
)


def test_each_example_is_printed_once() -> None:
    ex: dict[str, Any] = dict(G0_EXAMPLE)
    assert split_explanation(ex["explanation"], ex["steps"]) == (
        "A G0 cycle of 2 ops: writes of these transactions interleave.",
        "That leads back to op 65.",
    )
    out = _example(ex, HistoryScan())
    for step in ex["steps"]:
        assert out.count(html.escape(step, quote=True)) == 1
    assert out.count("writes of these transactions interleave") == 1
    assert "That leads back to op 65." in out
    assert "cycle: op 65 →<sub>ww</sub> op 79 →<sub>ww</sub> op 65" in out
    # steps the text does not embed: both are shown
    other = {"explanation": "Something else.", "steps": ["a step"]}
    assert split_explanation("Something else.", ["a step"]) is None
    out = _example(other, HistoryScan())
    assert "Something else." in out and "<li>a step</li>" in out


# -------------------------------------------------------------------- error codes


@pytest.mark.parametrize(
    "cause,word",
    [
        ("_TIMED_OUT", "gave up waiting"),
        ('{"name":"_MSG_TIMED_OUT","code":-192}', "message.timeout.ms"),
        ("KafkaError{code=NOT_ENOUGH_REPLICAS,val=19}", "min.insync.replicas"),
        ("never completed", "still running"),
    ],
)
def test_error_codes_have_a_meaning(cause: str, word: str) -> None:
    meaning = code_meaning(cause)
    assert meaning is not None and word in meaning


def test_unknown_codes_have_none() -> None:
    assert code_meaning("SOMETHING_ODD") is None and code_meaning("boom") is None


def test_info_causes_and_op_errors_say_what_the_code_means(
    real_run: tuple[Path, dict[str, Any], str],
) -> None:
    _, _, page = real_run
    metrics = section(page, 'id="metrics"', 'id="faults"')
    meaning = html.escape(code_meaning("_TIMED_OUT") or "", quote=True)
    assert f'<td>_TIMED_OUT</td><td class="num">1</td><td>{meaning}</td>' in metrics


# -------------------------------------------------------------------- configuration


def test_configuration_is_a_short_curated_table(
    real_run: tuple[Path, dict[str, Any], str],
) -> None:
    _, _, page = real_run
    rows = dict(config_rows(real_meta()))
    assert rows["system"] == "Apache Kafka 4.1.1"
    assert rows["cluster"] == "local, 3 nodes, Kafka 4.1.1, profile safe"
    assert rows["seed"] == "11" and rows["time limit"] == "45 s"
    assert rows["started"] == "2026-12-01T21:57:38Z"
    assert rows["nemesis"] == "partition, kill, pause, memory, toxic"
    assert rows["keys"] == "32 keys over 8 topics"
    assert rows["producer"] == "acks=all, enable.idempotence=true"
    assert len(rows) < 25
    config = page[page.index('id="config"') : page.index('id="files"')]
    table = config[: config.index('<details id="raw-config">')]
    assert table.count("<tr>") == len(rows) + 1
    assert "run.seed" not in table and "1796162258" not in table
    # the raw test.json is one click away, with its secret masked
    raw = config[config.index('<details id="raw-config">') :]
    assert '<a href="test.json">test.json</a>' in raw and "&quot;keys&quot;" in raw
    assert SECRET not in page


def test_iso_time() -> None:
    assert iso_time(0) == "1970-01-01T00:00:00Z"
    assert iso_time("x") is None and iso_time(1e20) is None and iso_time(None) is None


# -------------------------------------------------------------------- plots and timeline


def test_the_report_links_its_timeline_and_new_plot(
    real_run: tuple[Path, dict[str, Any], str],
) -> None:
    run, _, page = real_run
    assert '<a id="timeline-link" href="timeline.html">' in page
    assert (run / "timeline.html").exists()
    assert 'alt="Latency quantiles over time"' in page
    assert (run / "plots" / "latency-quantiles.png").read_bytes().startswith(b"\x89PNG")
    plots = section(page, 'id="plots"', 'id="plot-latency"')
    assert "each labelled with its fault and nodes" in plots
    assert "Hatched: not judged for liveness (warm-up 0.0–10.0 s, drain 45.0–" in plots


def test_an_unknown_verdict_says_why_and_shows_the_warnings() -> None:
    from ktrial.report.html import section_verdict

    results = {
        "valid": "unknown",
        "faults": {"ok": False},
        "warnings": ["asked for faults partition, kill; never injected: partition"],
    }
    out = section_verdict(results, {}, HistoryScan(), Path("/x/t/r"))
    assert "Not every fault asked for happened" in out and "cycle search" not in out
    assert "⚠ asked for faults partition, kill; never injected: partition" in out
