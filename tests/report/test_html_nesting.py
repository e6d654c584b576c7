"""`ktrial report` on nemesis values nested deeper than JSON writers go (issue 13.4).

The report reads the history itself (leniently: a damaged history still gets a
report), so a nemesis value nested 1,000 deep reached the fault table: orjson gave up
at 255 levels and the repr() fallback raised RecursionError (exit 255).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ktrial.cli import main
from ktrial.report.faults import targets
from ktrial.report.html import MAX_VALUE_CHARS, to_json

CLEAN = [
    {"index": 0, "time": 0, "process": 0, "type": "ok", "f": "send",
     "value": [["send", 1, [0, 1]]]},
    {"index": 1, "time": 10, "process": 1, "type": "ok", "f": "poll",
     "value": [["poll", {"1": [[0, 1]]}]]},
]  # fmt: skip


def deep_list(depth: int) -> str:
    return "[" * depth + '"n1"' + "]" * depth


def deep_dict(depth: int) -> str:
    return '{"nodes": ' * depth + '["n1"]' + "}" * depth


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [deep_list(1000), deep_dict(1000)], ids=["list", "dict"])
def test_report_on_a_nemesis_value_nested_1000_deep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    h = run / "history.jsonl"
    h.write_text("".join(json.dumps(x) + "\n" for x in CLEAN))
    with pytest.raises(SystemExit) as e:  # results.json of the clean history
        main(["check", str(run)])
    assert e.value.code == 0
    with h.open("a") as fh:
        for i, f in ((2, "start-partition"), (3, "stop-partition")):
            fh.write(
                f'{{"index": {i}, "time": {i * 10}, "process": "nemesis", "type": "info", '
                f'"f": "{f}", "value": {value}}}\n'
            )
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["report", str(run)])
    _out, err = capsys.readouterr()
    assert e.value.code == 0, err
    assert "Traceback" not in err
    html = (run / "report.html").read_text()
    assert "partition" in html
    # the history is refused by the checker itself (its nesting limit), with exit 254
    with pytest.raises(SystemExit) as e:
        main(["report", "--recheck", str(run)])
    err = capsys.readouterr().err
    assert e.value.code == 254 and "nested more than 100 deep" in err and "Traceback" not in err


def test_to_json_of_a_value_too_deep_for_json_is_a_short_repr() -> None:
    v: object = "x"
    for _ in range(5000):
        v = [v]
    s = to_json(v)
    assert s.startswith("[[[[") and "..." in s
    assert len(s) <= MAX_VALUE_CHARS + 60


def test_fault_targets_stop_after_a_few_levels() -> None:
    v: object = ["n1", "n2"]
    for _ in range(3):
        v = {"nodes": v}
    assert targets(v) == frozenset({"n1", "n2"})
    for _ in range(5000):
        v = {"nodes": v}
    assert targets(v) == frozenset()
