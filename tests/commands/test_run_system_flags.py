"""`ktrial run --system / --system-spec`: which system runs on the nodes, refused (254,
naming the flag) where it cannot run, and planned (with its faults and client profile)
where it can."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.cli import main

SPECS = Path(__file__).resolve().parents[2] / "systems" / "specs"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(["run", "--dry-run", *args])
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out + err


def test_system_kfake_is_the_local_backend_running_kfake(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = _run(["--system", "kfake", "--nemesis", "control,kill", "--seed", "4"], capsys)
    assert code == 0, text
    assert "kfake (franz-go), 3 nodes (n1, n2, n3) in one process" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--system", "kfake", "--cluster", "docker"], "--system kfake runs on the local backend"),
        (["--system", "kfake", "--nemesis", "partition"], "partition: kfake is one process"),
        (["--system", "kfake", "--kafka-version", "3.9.2"], "do not apply to --system kfake"),
        (
            ["--system-spec", str(SPECS / "queen.toml")],
            "--system-spec describes a container image: it needs --cluster docker",
        ),
        (
            [
                "--cluster",
                "docker",
                "--system-spec",
                str(SPECS / "queen.toml"),
                "--nemesis",
                "memory",
            ],
            "memory: not checked for Queen",
        ),
        (
            [
                "--cluster",
                "docker",
                "--system-spec",
                str(SPECS / "queen.toml"),
                "--nemesis",
                "control",
            ],
            "control: this system has no control API",
        ),
        (["--cluster", "docker", "--system-spec", "/nonexistent.toml"], "cannot read it"),
    ],
)
def test_a_system_where_it_cannot_run_is_a_usage_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _run(args, capsys)
    assert code == 254, text
    assert message in text and "Traceback" not in text


def test_a_bad_spec_names_its_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "mine.toml"
    spec.write_text(
        'name = "x"\nimage = "x:1"\n[ports]\nclient = 9092\n[environment]\nA = "{idd}"\n'
    )
    code, text = _run(["--cluster", "docker", "--system-spec", str(spec)], capsys)
    assert code == 254 and "Invalid value for --system-spec" in text
    assert "mine.toml: environment.A: unknown placeholder {idd}" in text


def test_a_spec_plans_its_system_and_its_client_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = str(SPECS / "queen.toml")
    code, text = _run(
        ["--cluster", "docker", "--system-spec", spec, "--nemesis", "partition,kill", "--no-txn"],
        capsys,
    )
    assert code == 0, text
    assert f"the system of node spec {spec}" in text
    # the profile's client settings reach the workload (the user's would win)
    assert "'compression.type': 'lz4'" in text and "'group.protocol': 'classic'" in text
