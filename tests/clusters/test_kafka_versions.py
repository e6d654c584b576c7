"""The supported Apache Kafka versions (clusters/kafka_versions.py) and docs/systems.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.clusters import kafka_versions as kv
from ktrial.clusters.install import DEFAULT_KAFKA_VERSION

DOC = Path(__file__).resolve().parents[2] / "docs" / "systems.md"


def test_the_table_is_ordered_and_each_tested_version_is_of_its_line() -> None:
    lines = [tuple(map(int, ln.line.split("."))) for ln in kv.LINES]
    assert lines == sorted(lines) and len(set(lines)) == len(lines)
    for ln in kv.LINES:
        assert kv.line_of(ln.tested) is ln
        assert ln.tested.startswith(ln.line + ".")
    assert kv.line_of(DEFAULT_KAFKA_VERSION) is not None  # the default is a supported one


def test_what_each_line_offers() -> None:
    k37, k39, k40, k41 = (kv.check_supported(v) for v in ("3.7.2", "3.9.2", "4.0.2", "4.1.1"))
    # 3.7: format takes no --feature at all; 3.9: transaction.version exists, level 0 only
    assert not k37.format_features and k37.transaction_levels == () and not k37.kraft_only
    assert k39.format_features and k39.transaction_levels == (0,)
    assert k37.choosable_transaction_versions == k39.choosable_transaction_versions == ()
    # 4.x: KRaft only, transactions v1 and v2 to choose, v2 by default, ELR settable
    for k in (k40, k41):
        assert k.kraft_only and k.elr_feature and k.consumer_protocol == "GA"
        assert k.choosable_transaction_versions == (1, 2) and k.default_transaction_level == 2


@pytest.mark.parametrize("version", ["3.7.0", "3.9.1", "4.0.0", "4.1.2", "4.1.1-rc1"])
def test_any_patch_release_of_a_listed_line_is_supported(version: str) -> None:
    assert kv.check_supported(version).line == version[:3]


@pytest.mark.parametrize("version", ["3.5.0", "3.8.1", "2.8.2", "5.0.0"])
def test_an_unsupported_line_is_refused_naming_the_supported_ones(version: str) -> None:
    with pytest.raises(kv.UnsupportedVersion) as e:
        kv.check_supported(version)
    msg = str(e.value)
    assert f"Kafka {version} is not a supported version" in msg
    assert all(f"{ln.line}.x (tested {ln.tested})" in msg for ln in kv.LINES)


@pytest.mark.parametrize("version", ["4.1", "latest", "4.1.1.1", ""])
def test_a_malformed_version_is_refused(version: str) -> None:
    with pytest.raises(kv.UnsupportedVersion, match="not a Kafka version"):
        kv.check_supported(version)


def test_capabilities_of_an_unlisted_installed_version_are_the_nearest_line_below() -> None:
    assert kv.capabilities("4.1.1").line == "4.1"
    assert kv.capabilities("3.8.0").line == "3.7"  # no --feature at format: the safe guess
    assert kv.capabilities("9.9.9").line == kv.LINES[-1].line
    assert kv.capabilities("2.0.0").line == kv.LINES[0].line
    assert kv.capabilities("odd").line == kv.LINES[0].line


def test_transaction_version_is_refused_where_the_line_cannot_format_it() -> None:
    k39, k41 = kv.check_supported("3.9.2"), kv.check_supported("4.1.1")
    kv.check_transaction_version(k41, "4.1.1", 1)
    kv.check_transaction_version(k41, "4.1.1", 2)
    kv.check_transaction_version(k39, "3.9.2", None)  # not asked: nothing to refuse
    with pytest.raises(kv.UnsupportedVersion) as e:
        kv.check_transaction_version(k39, "3.9.2", 2)
    assert "Kafka 3.9.2 has no transaction.version feature" in str(e.value)
    assert "needs Kafka 4.0 or 4.1" in str(e.value)
    with pytest.raises(kv.UnsupportedVersion, match="must be one of 1, 2, not 0"):
        kv.check_transaction_version(k41, "4.1.1", 0)


@given(st.one_of(st.none(), st.integers(-5, 40)))
def test_only_level_two_and_above_is_the_v2_protocol(level: int | None) -> None:
    assert kv.transaction_protocol(level) == ("v2" if level is not None and level >= 2 else "v1")


def _doc_section() -> str:
    text = DOC.read_text()
    start = text.index("## Apache Kafka")
    nxt = text.find("\n## ", start + 1)
    return text[start : nxt if nxt != -1 else len(text)]


def test_docs_systems_md_lists_the_table() -> None:
    """Each line of the table is a row of docs/systems.md's own table, with its tested
    version and its transaction protocols."""
    section = _doc_section()
    rows = {
        m[1]: m[0] for m in re.finditer(r"^\| (\d+\.\d+) \|.*$", section, re.M) if m is not None
    }
    assert set(rows) == {ln.line for ln in kv.LINES}
    for ln in kv.LINES:
        row = rows[ln.line]
        assert f"| {ln.tested} |" in row, row
        want = "v1, v2" if ln.choosable_transaction_versions else "v1 only"
        assert want in row, row
    assert "--transaction-version" in section and "--kafka-version" in section
