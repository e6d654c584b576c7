"""`ktrial cluster clean --dry-run` previews the nemesis step too (only a dry run here:
a real clean of the whole machine is not a unit test's business)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
from click.testing import CliRunner
from ktrial.cli import cli
from ktrial.clusters.state import is_alive
from ktrial.nemesis.memory import ENV_MARK as BALLOON_MARK


@pytest.mark.skipif(not shutil.which("stress-ng"), reason="needs stress-ng")
def test_dry_run_shows_nemesis_leftovers_and_removes_nothing() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    balloon = subprocess.Popen(
        ["stress-ng", "--sleep", "1", "--timeout", "60", "--quiet"],
        env={**os.environ, BALLOON_MARK: str(dead.pid)},
        start_new_session=True,
    )
    user = subprocess.Popen(
        ["sleep", "60"], env={**os.environ, "KTRIAL_RUN": "notmine"}, start_new_session=True
    )
    try:
        time.sleep(0.5)
        r = CliRunner().invoke(cli, ["cluster", "clean", "--dry-run"])
        assert r.exit_code == 0, r.output
        assert f"would remove stress-ng balloon pid {balloon.pid} " in r.output
        assert f"process {user.pid} " not in r.output
        assert "removed " not in r.output.replace("would remove", "")
        assert is_alive(balloon.pid, None) and is_alive(user.pid, None)
    finally:
        for p in (balloon, user):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
