"""Which anomalies a hunt counts, and when a replay reproduces (hunt/verdict.py)."""

from __future__ import annotations

import pytest
from ktrial.checker.catalogue import LIVENESS, SAFETY
from ktrial.hunt.verdict import Match, bad_types_of, hits, parse_anomalies, primary


def test_default_targets_are_the_safety_types() -> None:
    got = parse_anomalies(None)
    assert got == {t.name for t in SAFETY}
    assert not got & {t.name for t in LIVENESS}
    assert {"lost-write", "duplicate", "inconsistent-offsets", "G1a"} <= got


def test_groups_and_names_mix_and_unknown_names_are_refused() -> None:
    assert parse_anomalies("lost-write, duplicate") == {"lost-write", "duplicate"}
    assert "starvation" in parse_anomalies("liveness,lost-write")
    with pytest.raises(ValueError, match="unknown anomaly type 'lost-writes'"):
        parse_anomalies("lost-writes")


def test_hits_are_the_targets_among_the_bad_types_most_serious_first() -> None:
    targets = parse_anomalies("safety")
    assert hits(["unseen", "starvation", "lost-write"], targets) == ("lost-write", "unseen")
    assert primary(["duplicate", "unseen", "inconsistent-offsets"]) == "unseen"


def test_same_wants_the_primary_type_any_wants_any_target() -> None:
    targets = parse_anomalies("safety")
    same = Match(targets, ("lost-write", "unseen"), "same")
    assert same.reproduced(["lost-write"]) and not same.reproduced(["unseen"])
    anyone = Match(targets, ("lost-write", "unseen"), "any")
    assert anyone.reproduced(["duplicate"]) and not anyone.reproduced(["starvation"])
    with pytest.raises(ValueError):
        Match(targets, (), "some")


def test_bad_types_only_of_invalid_results() -> None:
    assert bad_types_of({"valid": False, "bad_error_types": ["unseen", "lost-write"]}) == (
        "lost-write",
        "unseen",
    )
    assert bad_types_of({"valid": "unknown", "bad_error_types": ["unseen"]}) == ()
    assert bad_types_of(None) == ()
