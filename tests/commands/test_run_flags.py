"""`ktrial run` flags: a bad nemesis or workload setting is a usage error (254) naming the
flag, before any broker starts. The parsing is the nemesis's and the workloads' own
(pure, ValueErrors); commands/ only names the flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.cli import main


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(["run", *args])
    _, err = capsys.readouterr()
    return int(e.value.code or 0), err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nemesis", "kill,nuke"], "Invalid value for --nemesis: unknown fault(s) ['nuke']"),
        (
            ["--nemesis-param", "kill.probability=0.1"],
            "Invalid value for --nemesis-param: fault 'kill' takes no parameter(s)",
        ),
        (
            ["--nemesis-param", "memory"],
            "Invalid value for --nemesis-param: 'memory': expected FAULT.PARAM=VALUE",
        ),
        (
            ["--nemesis-schedule", "script"],
            "Invalid value for --nemesis-script: --nemesis-schedule script needs",
        ),
        (["--workload", "copy", "--txn"], "--txn, --no-idempotence and --sub-via apply to the"),
        (["--workload", "txn-cost", "--no-idempotence"], "apply to the queue workload"),
        (
            ["--workload", "txn-cost", "--concurrency", "8"],
            "(--concurrency does not apply: use --workload-opt producers=4,16)",
        ),
        (["--workload", "txn-cost", "--abort-p", "0.1"], "unknown options ['abort_p']"),
    ],
)
def test_bad_settings_are_usage_errors_naming_the_flag(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(args, capsys)
    assert code == 254, err
    assert message in err
    assert "Traceback" not in err and "run directory" not in err  # refused before the run


def test_a_bad_schedule_script_names_the_script_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "s.toml"
    script.write_text("entry = 3\n")
    code, err = _run(["--nemesis-script", str(script)], capsys)
    assert code == 254
    assert f"Invalid value for --nemesis-script: {script}: a schedule needs [[entry]]" in err


def test_stop_on_anomaly_needs_running_checks(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["--stop-on-anomaly", "--check-every", "0"], capsys)
    assert code == 254
    assert "--stop-on-anomaly needs running checks: --check-every > 0" in err


def test_the_help_explains_the_running_checks(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    text = " ".join(out.split())
    assert "--check-every SECONDS" in text and "[default: 60.0]" in text
    assert "not lost or unseen writes" in text and "at most 10% of the time" in text
    assert "--stop-on-anomaly" in text and "the final check gives the verdict" in text
