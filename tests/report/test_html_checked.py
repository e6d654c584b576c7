"""The report on real checker output: a generated history with injected faults, checked.

Guards against drift between the checker's example shapes and the report: every
anomaly the checker reports must appear with its count and every explanation,
every op an example cites must be found in the history and shown, and the
junit failures must be exactly the checker's bad types.
"""

import html
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ktrial.checker import check_file, options_from_test_json
from ktrial.histories.store import write_json
from ktrial.report import render_report, write_junit
from ktrial.report.html import MAX_EXAMPLES, MAX_OPS, split_explanation
from ktrial.testing.gen import Generated, GenParams, generate, to_jsonl
from ktrial.testing.mutate import circular_visibility, duplicate, lost_write


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    g = generate(GenParams(seed=3, keys=3, processes=4, ops=300))
    rng = random.Random(5)
    for inject in (lost_write, duplicate, circular_visibility):
        fault = inject(g, rng)
        assert fault is not None, inject.__name__
        g = Generated(g.params, fault.ops, g.truth)
    run = tmp_path_factory.mktemp("store") / "gen" / "20261129T200000"
    run.mkdir(parents=True)
    to_jsonl(g.ops, run / "history.jsonl")
    test = {"name": "gen", "workload": {"name": "queue", "sub_via": "assign"}}
    write_json(run / "test.json", test)
    results = check_file(run / "history.jsonl", options_from_test_json(test), test)
    write_json(run / "results.json", results)
    return run, results, render_report(run).read_text()


def test_every_reported_anomaly_is_explained(checked: tuple[Path, dict, str]) -> None:
    _, results, page = checked
    assert results["valid"] is False
    assert {"lost-write", "duplicate"} <= set(results["bad_error_types"])
    assert 'data-verdict="invalid"' in page
    for t, a in results["anomalies"].items():
        start = page.index(f'id="a-{t}"')
        nxt = page.find('<div class="anomaly', start + 1)
        section = page[start : nxt if nxt > 0 else page.index('id="plots"')]
        assert f"×{a['count']:,}" in section
        for ex in a["examples"][:MAX_EXAMPLES]:
            split = split_explanation(ex["explanation"], ex.get("steps", []))
            if split is None:
                assert html.escape(ex["explanation"], quote=True) in section, t
            else:  # the steps are printed once, as a list, not again inside the paragraph
                assert html.escape(ex["explanation"], quote=True) not in section, t
                assert all(html.escape(part, quote=True) in section for part in split), t
            for step in ex.get("steps", []):
                assert f"<li>{html.escape(step, quote=True)}</li>" in section
            cited = list(dict.fromkeys([*ex.get("ops", []), *ex.get("cycle", [])]))
            for i in cited[:MAX_OPS]:
                assert re.search(
                    rf'<tr><td class="num">{i}</td><td class="num">[0-9.,]+</td>', section
                ), (t, i)
    assert "not in the history" not in page


def test_junit_failures_are_the_bad_types(checked: tuple[Path, dict, str]) -> None:
    run, results, _ = checked
    root = ET.parse(write_junit(run, results)).getroot()
    failed = {
        c.get("name")
        for c in root.iter("testcase")
        if c.get("classname", "").endswith(".anomalies") and c.find("failure") is not None
    }
    assert failed == set(results["bad_error_types"])
