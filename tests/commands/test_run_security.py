"""`ktrial run` with --security-config(-file), --broker-security, --topic-prefix and
--use-existing-topics: bad combinations are usage errors (254) before anything starts,
--dry-run shows the settings with the password masked, and the options reach the
TrialSpec and the workload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ktrial.cli import main
from ktrial.trial import Trial

PASSWORD = "cl1-Secret-zz"


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


@pytest.fixture
def creds(tmp_path: Path) -> Path:
    p = tmp_path / "client.properties"
    p.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f"sasl.username=alice\nsasl.password={PASSWORD}\n"
    )
    return p


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--cluster", "external", "--bootstrap", "h:1", "--broker-security", "sasl-plain"],
            "--broker-security sets up the brokers ktrial starts with --cluster local",
        ),
        (["--security-config", "security.protocol=SSL"], "the local cluster ktrial starts"),
        (["--use-existing-topics"], "--use-existing-topics needs --topic-prefix"),
        (["--security-config", "sasl.passwrd=x"], "unknown security setting 'sasl.passwrd'"),
        (["--topic-prefix", "bad name"], "topic prefix 'bad name'"),
        (
            [
                "--broker-security",
                "ssl",
                "--security-config",
                "security.protocol=SASL_SSL",
                "--security-config",
                "sasl.mechanism=PLAIN",
                "--security-config",
                "sasl.username=u",
                "--security-config",
                f"sasl.password={PASSWORD}",
            ],
            "--broker-security ssl serves SSL",
        ),
    ],
)
def test_bad_combinations_are_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(["run", "--dry-run", *args], capsys)
    assert code == 254, err
    assert message in " ".join(err.split())
    assert PASSWORD not in err and "Traceback" not in err


def test_dry_run_shows_the_security_masked(creds: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(
        ["run", "--dry-run", "--broker-security", "sasl-plain", "--security-config-file",
         str(creds), "--topic-prefix", "kt.test"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "brokers: client listener secured (sasl-plain)" in out
    assert "sasl.password=***" in out and "sasl.username=alice" in out
    assert "topic_prefix=kt.test" in out
    assert PASSWORD not in out + err


def test_the_options_reach_the_trial(
    creds: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_init(self: Trial, spec: Any, say: Any = None, **kw: Any) -> None:
        seen["spec"] = spec
        raise SystemExit(0)

    monkeypatch.setattr(Trial, "__init__", fake_init)
    code, _, err = _main(
        ["run", "--cluster", "external", "--bootstrap", "h:9092", "--security-config-file",
         str(creds), "--security-config", "sasl.username=bob", "--topic-prefix", "pre",
         "--use-existing-topics"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    spec = seen["spec"]
    assert spec.security["sasl.username"] == "bob"
    assert spec.security["sasl.password"] == PASSWORD
    assert spec.use_existing_topics is True and spec.broker_security == ""
    assert spec.workload_opts["topic_prefix"] == "pre"


def test_a_config_file_table_of_security_settings(tmp_path: Path, capsys: Any) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text('bootstrap = "h:1"\n[security-config]\n"security.protocol" = "SSL"\n')
    code, out, err = _main(
        ["run", "--dry-run", "--cluster", "external", "--config", str(cfg)], capsys
    )
    assert code == 0, err
    assert "client security: security.protocol=SSL" in out
