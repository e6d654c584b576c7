"""`ktrial run --cluster ssh --system-spec FILE` with an [installed] table: planned,
refused (254, naming the flag, the file and the key) where the spec or the flags do not
fit, before anything starts (clusters/installed.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.cli import main

SPECS = Path(__file__).resolve().parents[2] / "systems" / "specs"
NODES = ["--cluster", "ssh", "--node", "10.0.0.1,10.0.0.2,10.0.0.3"]
SPEC = """name = "kafka-installed"
[ports]
client = 9092
[installed]
start = "/opt/kafka/bin/start.sh"
pidfile = "/opt/kafka/run/kafka.pid"
"""


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(["run", "--dry-run", *args])
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out + err


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    p = tmp_path / "inst.toml"
    p.write_text(SPEC)
    return p


def test_an_installed_system_is_planned_over_ssh(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*NODES, "--system-spec", str(spec), "--nemesis", "partition,kill,pause,restart"]
    code, text = _run([*args, "--seed", "3"], capsys)
    assert code == 0, text
    assert "the system installed there, driven as node spec" in text
    assert "nothing uploaded; left running as found" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--nemesis", "memory"], "memory: node spec"),
        (["--nemesis", "toxic"], "toxic: an installed system advertises its own listeners"),
        (["--nemesis", "partition-then-kill"], "gives no ports.replication"),
        (["--profile", "unsafe"], "--profile configures the brokers ktrial starts"),
        (["--heap-mb", "256", "--broker-config", "a=b"], "--broker-config, --heap-mb configure"),
        (["--kafka-version", "3.9.2"], "do not apply to --system kfake or --system-spec"),
    ],
)
def test_what_an_installed_system_cannot_take_is_refused(
    spec: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _run([*NODES, "--system-spec", str(spec), *extra], capsys)
    assert code == 254, text
    assert message in text and "Traceback" not in text


def test_specs_that_do_not_fit_the_backend_are_refused(
    tmp_path: Path, spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _run([*NODES, "--system-spec", str(SPECS / "queen.toml")], capsys)
    assert code == 254 and "needs an [installed] table" in text, text
    code, text = _run(["--cluster", "docker", "--system-spec", str(spec)], capsys)
    assert code == 254 and "run it with --cluster ssh" in text, text
    ids = tmp_path / "ids.toml"
    ids.write_text(SPEC + "broker_ids = [1, 2]\n")
    code, text = _run([*NODES, "--system-spec", str(ids)], capsys)
    assert code == 254 and "ids.toml" in text and "broker_ids lists 2 id(s) for 3" in text, text
    bad = tmp_path / "bad.toml"
    bad.write_text(SPEC.replace("pidfile", "pid_file"))
    code, text = _run([*NODES, "--system-spec", str(bad)], capsys)
    assert code == 254 and "bad.toml [installed]: unknown key 'pid_file'" in text, text
