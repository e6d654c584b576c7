"""Shared pytest configuration. Integration fixtures live in tests/integration/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ktrial.tests.processes import Procs


@pytest.fixture
def procs() -> Iterator[Procs]:
    """Processes the test starts, killed and reaped when it ends (tests/processes.py)."""
    ps = Procs()
    try:
        yield ps
    finally:
        ps.close()
