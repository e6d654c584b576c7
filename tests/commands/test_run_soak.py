"""`ktrial run --soak` and `--liveness-bad`: a nightly job's defaults, and the verdict rule
recorded where every later check reads it.

--soak only sets defaults: --config, --from and flags win over it, in whatever order
they are given. `--liveness-bad` (on under --soak) goes to test.json's checker section,
so the run's own check, `ktrial check RUN` and `ktrial report --recheck` all judge
liveness the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import options_from_test_json
from ktrial.cli import main
from ktrial.commands import run as run_cmd
from ktrial.commands.run import SOAK_PRESET
from ktrial.histories.testmeta import TestMeta
from ktrial.trial import TrialOutcome


def _spec_of(args: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The TrialSpec `ktrial run ARGS` would execute."""
    seen: dict[str, Any] = {}

    class FakeTrial:
        def __init__(self, spec: Any, say: Any = None, **kw: Any) -> None:
            seen["spec"] = spec

        def execute(self) -> TrialOutcome:
            raise SystemExit(99)

    monkeypatch.setattr(run_cmd, "Trial", FakeTrial)
    with pytest.raises(SystemExit) as e:
        main(["run", *args])
    assert e.value.code == 99, "the command stopped before it made a trial"
    return seen["spec"]


def test_soak_sets_the_nightly_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec_of(["--soak"], monkeypatch)
    assert spec.soak and spec.liveness_bad
    assert spec.name == "soak" and spec.time_limit == 1800.0
    assert spec.nemesis.faults == ("partition", "kill", "pause", "memory", "toxic")
    assert spec.check_every == 60.0 and spec.node_stats_interval == 5.0
    assert spec.cli_options["soak"] is True and spec.cli_options["liveness_bad"] is True


def test_without_soak_liveness_is_reported_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec_of([], monkeypatch)
    assert not spec.soak and not spec.liveness_bad
    assert spec.name == "queue" and spec.time_limit == 60.0


@pytest.mark.parametrize("order", ["soak-first", "config-first"])
def test_flags_and_config_win_over_the_preset(
    order: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "night.toml"
    cfg.write_text('time-limit = 600\nnemesis = "kill"\n')
    soak, config = ["--soak"], ["--config", str(cfg)]
    given = soak + config if order == "soak-first" else config + soak
    spec = _spec_of([*given, "--no-liveness-bad", "--name", "mine"], monkeypatch)
    assert spec.time_limit == 600.0 and spec.nemesis.faults == ("kill",)  # the config won
    assert not spec.liveness_bad and spec.name == "mine"  # the flags won
    assert spec.check_every == SOAK_PRESET["check_every"]  # the rest is the preset's


def test_from_a_soak_run_repeats_it_as_a_soak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _spec_of(["--soak", "--time-limit", "120"], monkeypatch)
    run = tmp_path / "run"
    run.mkdir()
    TestMeta(seed=9, cli_options={**first.cli_options, "seed": 9}).write(run / "test.json")
    again = _spec_of(["--from", str(run)], monkeypatch)
    assert again.soak and again.liveness_bad and again.time_limit == 120.0 and again.seed == 9


def test_the_recorded_rule_is_what_the_checker_reads() -> None:
    meta = TestMeta(ktrial_version="x", checker={"liveness_bad": True, "soak": True})
    back = TestMeta.from_json(meta.to_json())
    assert back.checker == {"liveness_bad": True, "soak": True}
    assert options_from_test_json(back).liveness_bad is True
    # the command line still wins over the record
    assert options_from_test_json(back, {"liveness_bad": False}).liveness_bad is False
    assert options_from_test_json(TestMeta(ktrial_version="x")).liveness_bad is False


def test_the_plan_says_how_the_run_is_judged(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--soak", "--seed", "1", "--dry-run"])
    out = capsys.readouterr().out
    assert "store/soak/" in out.replace("\\", "/")
    assert "  checks: safety every 60 s while running; final check after the drain; " in out
    assert "liveness violations make the run invalid (--liveness-bad) (--soak)" in out
