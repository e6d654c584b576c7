"""Run a Go module's own tests from pytest (the workers' and the load generator's)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def go_binary() -> str | None:
    """The go command: on PATH, or where scripts/setup.sh installs it."""
    return shutil.which("go") or (
        "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None
    )


def assert_go_tests_pass(src: Path) -> None:
    """`go test` in `src` passes (skipped when Go is not installed)."""
    go = go_binary()
    if go is None:
        pytest.skip("Go is not installed (scripts/setup.sh installs it)")
    done = subprocess.run(
        [go, "test", "-count=1", "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
