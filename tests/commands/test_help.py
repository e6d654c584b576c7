"""`ktrial --help`, `-h` and `--version`: every command prints its usage and exits 0;
no command at all is a usage error."""

from __future__ import annotations

import pytest
from ktrial.tests.checker.common import run_main

SUBCOMMANDS = [
    [],
    ["check"],
    ["cluster"],
    ["cluster", "install"],
    ["cluster", "up"],
    ["cluster", "status"],
    ["cluster", "down"],
    ["cluster", "clean"],
    ["report"],
    ["hunt"],
    ["run"],
    ["runs"],
    ["trace"],
]


@pytest.mark.parametrize("cmd", SUBCOMMANDS, ids=lambda c: " ".join(c) or "ktrial")
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_of_every_command_prints_usage_and_exits_0(
    cmd: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_main([*cmd, flag], capsys)
    assert rc == 0, err
    assert out.startswith("Usage: ktrial"), out[:200]
    assert "Traceback" not in out + err


def test_ktrial_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_main(["--help"], capsys)
    for name in ("check", "cluster", "report", "run", "runs", "trace"):
        assert f"\n  {name} " in out


def test_version_and_no_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_main(["--version"], capsys)
    assert rc == 0 and out.startswith("ktrial, version ")
    rc, _, err = run_main([], capsys)  # no command: help on stderr, a usage error
    assert rc == 254 and "Usage:" in err and "Traceback" not in err
