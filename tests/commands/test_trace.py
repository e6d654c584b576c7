"""`ktrial trace`: a run directory whose test.json is unusable is a usage error, not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.cli import main


@pytest.mark.parametrize(
    ("text", "why"),
    [("[1]", "it must hold a JSON object, not list"), ("{oops", "unreadable test.json")],
)
def test_an_unusable_test_json_is_a_usage_error(
    tmp_path: Path, text: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "history.jsonl").write_text("")
    (tmp_path / "test.json").write_text(text)
    with pytest.raises(SystemExit) as e:
        main(["trace", str(tmp_path), "--key", "0", "--offset", "1"])
    err = capsys.readouterr().err
    assert e.value.code == 254, err
    assert f"{tmp_path / 'test.json'}: unreadable test.json" in err and why in err
    assert "Traceback" not in err
