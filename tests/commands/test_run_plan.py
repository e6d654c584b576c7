"""`ktrial run --dry-run`, the recorded command line and `ktrial run --from RUN_DIR`.

--dry-run resolves every option and prints the plan (cluster, workload, the seeded
fault schedule with times and targets) and exits 0 without building a trial, calling
a cluster factory or creating the store. A run records its argv and resolved options;
--from repeats them (seed included) with the flags given besides it winning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ktrial.cli import main
from ktrial.commands import run as run_cmd
from ktrial.histories.testmeta import TestMeta
from ktrial.trial import Trial, TrialOutcome

FIVE = "partition,kill,pause,memory,toxic"


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


@pytest.fixture
def no_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("--dry-run built a trial or a cluster")

    monkeypatch.setattr(Trial, "__init__", refuse)
    monkeypatch.setattr(Trial, "_make_cluster", refuse)


@pytest.mark.usefixtures("no_trial")
def test_dry_run_prints_the_plan_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    args = ["run", "--store", str(store), "--nemesis", FIVE, "--seed", "7", "--dry-run"]
    code, out, err = _main(args, capsys)
    assert code == 0, err
    assert not store.exists()
    lines = out.splitlines()
    assert lines[0] == "plan (--dry-run: nothing started, nothing written)"
    assert "  seed: 7" in lines
    assert any(
        ln.startswith("  cluster: local, 3 nodes (n1, n2, n3), safe profile") for ln in lines
    )
    assert any(ln.startswith("  workload: queue: ") and "txn=True" in ln for ln in lines)
    assert any(ln.startswith("  workload: queue: ") and "driver=confluent" in ln for ln in lines)
    assert (
        "  faults: interval schedule: each fault held 5.455 s after as long quiet "
        "(fitted: 5 families in 60 s); seed 7"
    ) in lines
    faults = [ln.split() for ln in lines if ln.startswith("    ") and " s  " in ln]
    assert sorted(f[2] for f in faults) == sorted(FIVE.split(","))  # each family once
    assert [float(f[0]) for f in faults] == pytest.approx(
        [5.455 * (2 * i + 1) for i in range(5)], abs=0.06
    )
    assert "    families: " in out and "will not run" not in out
    # the same seed gives the same plan; another seed another order
    assert _main(args, capsys)[1] == out
    other = _main([*args[:-2], "8", "--dry-run"], capsys)[1]
    assert other != out


@pytest.mark.usefixtures("no_trial")
def test_dry_run_says_what_is_resolved_only_when_the_fault_fires_and_what_will_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _main(
        [
            "run",
            "--store",
            str(tmp_path / "s"),
            "--nemesis",
            FIVE,
            "--nemesis-interval",
            "10",
            "--nemesis-param",
            "kill.targets=controller",
            "--nemesis-param",
            "pause.targets=leaders",
            "--seed",
            "3",
            "--dry-run",
        ],
        capsys,
    )
    assert code == 0
    planned = [ln for ln in out.splitlines() if ln.startswith("    ") and " s  " in ln]
    assert len(planned) == 3  # 10 s quiet + 10 s fault, three times in 60 s
    for ln in planned:
        if " kill " in ln:
            assert ln.endswith("on the active controller (resolved when the fault fires)")
        if " pause " in ln:
            assert "leader of one of the workload's partitions (resolved when" in ln
    assert "will not run within 60 s" in out and "the verdict will be unknown" in out


@pytest.mark.usefixtures("no_trial")
def test_dry_run_of_an_external_cluster_names_no_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _main(
        [
            "run",
            "--cluster",
            "external",
            "--bootstrap",
            "h1:9092",
            "--hook",
            "kill=true",
            "--hook",
            "start=true",
            "--nemesis",
            "kill",
            "--seed",
            "1",
            "--dry-run",
        ],
        capsys,
    )
    assert code == 0, err
    assert (
        "cluster: external at h1:9092 (nodes discovered when it starts); hooks: kill, start" in out
    )
    assert "(nodes drawn when the fault fires)" in out or "resolved when the fault fires" in out


def _capture_spec(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace the trial by one that keeps its spec and stops the command."""
    seen: dict[str, Any] = {}

    class FakeTrial:
        def __init__(self, spec: Any, say: Any = None, **kw: Any) -> None:
            seen["spec"] = spec

        def execute(self) -> TrialOutcome:
            raise SystemExit(99)  # stop the command here

    monkeypatch.setattr(run_cmd, "Trial", FakeTrial)
    return seen


def test_the_command_line_and_resolved_options_reach_the_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _capture_spec(monkeypatch)
    argv = ["run", "--store", str(tmp_path), "--nemesis", "kill", "--time-limit", "30"]
    with pytest.raises(SystemExit, match="99"):
        main(argv)
    spec = seen["spec"]
    assert list(spec.argv) == argv
    opts = spec.cli_options
    assert opts["nemesis_faults"] == "kill" and opts["time_limit"] == 30.0
    assert opts["nodes"] == 3 and opts["nemesis_interval"] is None and "dry_run" not in opts


def _recorded_run(tmp_path: Path, options: dict[str, Any], seed: int = 4242) -> Path:
    run = tmp_path / "store" / "queue" / "20260101T000000"
    run.mkdir(parents=True)
    TestMeta(name="queue", seed=seed, cli_options={**options, "seed": seed}).write(
        run / "test.json"
    )
    return run


def test_from_repeats_the_options_and_seed_and_flags_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _recorded_run(
        tmp_path,
        {
            "store": str(tmp_path / "store"),
            "nemesis_faults": "kill,pause",
            "time_limit": 45.0,
            "nodes": 5,
            "producer_config": ["linger.ms=5", "sasl.password=hunter2"],
            "dry_run": True,
        },
    )
    seen = _capture_spec(monkeypatch)
    with pytest.raises(SystemExit, match="99"):
        main(["run", "--from", str(run), "--nodes", "3"])
    spec = seen["spec"]
    assert spec.seed == 4242 and spec.time_limit == 45.0 and spec.nodes == 3  # the flag won
    assert spec.nemesis.faults == ("kill", "pause")
    # test.json masked the password: it is not repeated as "***", and the user is told
    assert spec.workload_opts["producer_config"] == {"linger.ms": "5"}
    _, err = capsys.readouterr()
    assert "secrets were masked in test.json and are not repeated" in err
    assert "--producer-config sasl.password" in err


def test_from_a_run_without_recorded_options_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "old"
    run.mkdir()
    TestMeta(name="old", seed=9).write(run / "test.json")
    code, _, err = _main(["run", "--from", str(run)], capsys)
    assert code == 254 and "records no options" in err and "--seed 9" in err
    code, _, err = _main(["run", "--from", str(tmp_path)], capsys)
    assert code == 254 and "no test.json here" in err


def test_running_checks_from_flags_and_from_a_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _capture_spec(monkeypatch)
    with pytest.raises(SystemExit, match="99"):
        main(["run", "--store", str(tmp_path)])
    assert seen["spec"].check_every == 60.0 and seen["spec"].stop_on_anomaly is False
    config = tmp_path / "soak.toml"
    config.write_text("check-every = 120\nstop-on-anomaly = true\n")
    with pytest.raises(SystemExit, match="99"):
        main(["run", "--config", str(config), "--store", str(tmp_path)])
    spec = seen["spec"]
    assert spec.check_every == 120.0 and spec.stop_on_anomaly is True
    assert spec.cli_options["check_every"] == 120.0 and spec.cli_options["stop_on_anomaly"]
    with pytest.raises(SystemExit, match="99"):  # a flag wins over the file
        main(["run", "--config", str(config), "--store", str(tmp_path), "--check-every", "30"])
    assert seen["spec"].check_every == 30.0
