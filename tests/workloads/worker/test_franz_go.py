"""The franz worker's own Go tests (workers/franz/*_test.go: the settings it maps onto
franz-go options, e.g. transaction.version), run when Go is installed."""

from __future__ import annotations

from pathlib import Path

from ktrial.testing.gotest import assert_go_tests_pass

SRC = Path(__file__).resolve().parents[3] / "workers" / "franz"


def test_go_tests_pass() -> None:
    assert_go_tests_pass(SRC)
