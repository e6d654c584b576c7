"""The franz worker's own Go tests (workers/franz/*_test.go: the settings it maps onto
franz-go options, e.g. transaction.version), run when Go is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "workers" / "franz"


def _go() -> str | None:
    return shutil.which("go") or (
        "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None
    )


def test_go_tests_pass() -> None:
    go = _go()
    if go is None:
        pytest.skip("Go is not installed (scripts/setup.sh installs it)")
    done = subprocess.run(
        [go, "test", "-count=1", "."],
        cwd=SRC,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
