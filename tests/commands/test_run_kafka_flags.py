"""`ktrial run --kafka-version / --transaction-version`: refused (254, naming the flag and
what is supported) before anything starts; accepted ones reach the plan."""

from __future__ import annotations

import pytest
from ktrial.cli import main


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(["run", "--dry-run", *args])
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--kafka-version", "3.9.2", "--transaction-version", "2"],
            "Invalid value for --transaction-version: Kafka 3.9.2 has no transaction.version",
        ),
        (
            ["--kafka-version", "3.5.0"],
            "Invalid value for --kafka-version: Kafka 3.5.0 is not a supported version; "
            "supported: 3.7.x (tested 3.7.2)",
        ),
        (["--kafka-version", "latest"], "Invalid value for --kafka-version: not a Kafka version"),
        (["--transaction-version", "3"], "'3' is not one of '1', '2'"),
        (
            ["--cluster", "external", "--bootstrap", "h:9092", "--transaction-version", "1"],
            "--transaction-version formats the Apache Kafka brokers ktrial starts",
        ),
    ],
)
def test_unsupported_choices_are_usage_errors(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    code, _, err = _run(args, capsys)
    assert code == 254, err
    assert message in err
    assert "Traceback" not in err


def test_a_transaction_version_reaches_the_plan(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    code, out, err = _run(["--kafka-version", "4.0.2", "--transaction-version", "1"], capsys)
    assert code == 0, err
    assert "Kafka 4.0.2" in out and "transaction.version=1" in out
    code, out, err = _run(["--transaction-version", "2"], capsys)  # the default version: 4.1.1
    assert code == 0 and "transaction.version=2" in out, err
