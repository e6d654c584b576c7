"""The anomaly catalogue is the one place a type is defined: the doc, the verdict and
the report all follow it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import catalogue
from ktrial.checker.results import combine, is_bad, rank
from ktrial.report.meanings import KNOWN_TYPES, LIVENESS_TYPES, meaning, ordered_types

DOC = Path(__file__).resolve().parents[2] / "docs" / "anomalies.md"


def _documented_types() -> set[str]:
    """Types named (in backticks) in a table row of docs/anomalies.md: the first column
    of the safety tables, the violation column of the liveness table."""
    names: set[str] = set()
    for line in DOC.read_text().splitlines():
        if line.startswith("|"):
            names.update(re.findall(r"`([^`]+)`", line))
    return names


def test_the_doc_defines_every_catalogued_type() -> None:
    missing = [t.name for t in catalogue.CATALOGUE if t.name not in _documented_types()]
    assert not missing, f"docs/anomalies.md has no table row for {missing}"


def test_names_are_unique_and_every_row_has_a_sentence() -> None:
    names = [t.name for t in catalogue.CATALOGUE]
    assert len(names) == len(set(names))
    for t in catalogue.CATALOGUE:
        assert t.meaning.endswith((".", ")")) and len(t.meaning) > 30, t.name


def test_the_report_follows_the_catalogue_order() -> None:
    assert tuple(t.name for t in catalogue.CATALOGUE) == KNOWN_TYPES + LIVENESS_TYPES
    assert ordered_types(["G0", "zzz-new", "lost-write"]) == ["lost-write", "G0", "zzz-new"]
    assert meaning("starvation") == catalogue.BY_NAME["starvation"].meaning
    assert "not in ktrial's catalogue" in meaning("zzz-new")


@pytest.mark.parametrize("t", catalogue.CATALOGUE, ids=lambda t: t.name)
def test_the_verdict_follows_each_rows_rule(t: catalogue.AnomalyType) -> None:
    ex = [{"cycle": [1, 2], "wr_only": False}]
    bad_assign = is_bad(t.name, ex, "assign", ww_deps=True)
    bad_subscribe = is_bad(t.name, ex, "subscribe", ww_deps=True)
    bad_no_ww = is_bad(t.name, ex, "assign", ww_deps=False)
    expected = {
        "always": (True, True, True),
        "liveness": (True, True, True),  # reported as a type only with liveness_bad
        "never": (False, False, False),
        "assign": (True, False, True),
        "cycle": (False, False, True),
    }[t.bad]
    assert (bad_assign, bad_subscribe, bad_no_ww) == expected
    res = combine({t.name: ex}, sub_via="assign", ww_deps=True, max_examples=8,
                  nothing_checked=False)  # fmt: skip
    assert (t.name in res["bad_error_types"]) == bad_assign
    assert res["valid"] is (not bad_assign) or res["valid"] == "unknown"


def test_a_circular_visibility_makes_a_cycle_type_bad_even_with_ww_deps() -> None:
    for name in ("G1c", "G1c-realtime"):
        assert is_bad(name, [{"wr_only": True}], "assign", ww_deps=True)


def test_a_type_without_a_row_is_bad_until_someone_decides() -> None:
    assert is_bad("brand-new", [{}], "subscribe", ww_deps=True)


def test_ranking_follows_the_rows_rank() -> None:
    exs = [{"delta": 1}, {"delta": 5}, {"delta": -3}]
    assert [e["delta"] for e in rank("poll-skip", exs)] == [5, 1, -3]
    assert [e["delta"] for e in rank("nonmonotonic-poll", exs)] == [-3, 1, 5]
    cyc: list[dict[str, Any]] = [
        {"cycle": [1, 2, 3]},
        {"cycle": [1, 2]},
        {"cycle": [1, 2, 3, 4], "wr_only": True},
    ]
    assert [len(e["cycle"]) for e in rank("G1c", cyc)] == [4, 2, 3]
    assert rank("lost-write", exs) == exs
