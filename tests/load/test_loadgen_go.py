"""The load generator's own Go tests (workers/loadgen/*_test.go: the latency histogram
and its quantiles, the flags and their defaults), run when Go is installed."""

from __future__ import annotations

from pathlib import Path

from ktrial.testing.gotest import assert_go_tests_pass

SRC = Path(__file__).resolve().parents[2] / "workers" / "loadgen"


def test_go_tests_pass() -> None:
    assert_go_tests_pass(SRC)
