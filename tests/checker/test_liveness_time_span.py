"""Liveness over histories whose times span more than int64 arithmetic can (issue 13.4).

Times are int64 nanoseconds, but their differences are not: a history with times from
-2**63 to 2**63 - 1 made `liveness.starvation` overflow (a ValueError from
np.bincount: exit 255), and one spread over years made it allocate a counter per
10 s window in between (gigabytes). The starvation windows and stuck partitions must
come out the same whatever the span, exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check_file
from ktrial.cli import main


def history(path: Path, base: int, later: int) -> Path:
    """30 values sent at `base`, 30 at `later`, all read once at `later` + 100 ns."""
    lines: list[dict[str, Any]] = []
    for t, vals in ((base, range(30)), (later, range(30, 60))):
        for v in vals:
            lines.append(
                {"index": len(lines), "time": t + v, "process": 0, "type": "ok", "f": "send",
                 "value": [["send", 1, [v, v]]]}
            )  # fmt: skip
    recs = [[v, v] for v in range(60)]
    lines.append(
        {"index": len(lines), "time": later + 100, "process": 1, "type": "ok", "f": "poll",
         "value": [["poll", {"1": recs}]]}
    )  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("base", "later"),
    [
        (0, 100 * 10**9),
        (0, 2**62),
        (0, 2**63 - 200),
        (-(2**63), 2**63 - 200),  # a span of almost 2**64 ns
        (-(2**63) + 5, -(2**63) + 100 * 10**9),
    ],
)
def test_starvation_and_stuck_keys_are_exact_over_any_span(
    tmp_path: Path, base: int, later: int
) -> None:
    res = check_file(history(tmp_path / "h.jsonl", base, later), CheckOptions(liveness_bad=True))
    live = res["metrics"]["liveness"]
    starv = live["starvation"]
    # the first window offered 30 values, none read within the allowance; the second
    # is not judged (producers stopped after it)
    assert starv["windows_judged"] == 1
    assert starv["starved_windows"] == [
        {"from_s": 0.0, "to_s": 10.0, "offered": 30, "consumed": 0, "ratio": 0.0}
    ]
    (stuck,) = live["stuck_partitions"]["keys"]
    span_ns = later + 100 - base  # value 0 acked at base, first read at later + 100
    assert (stuck["value"], stuck["stuck_s"]) == (0, round(span_ns / 1e9, 3))
    assert {"starvation", "stuck-partition"} <= set(res["bad_error_types"])


@pytest.mark.timeout(30)
def test_check_over_the_widest_span_exits_with_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = history(tmp_path / "history.jsonl", -(2**63), 2**63 - 200)
    with pytest.raises(SystemExit) as e:
        main(["check", str(p)])
    err = capsys.readouterr().err
    assert e.value.code == 0, err  # liveness is reported, not judged, by default
    assert "Traceback" not in err


@pytest.mark.timeout(30)
def test_windows_spread_over_decades_are_counted_sparsely(tmp_path: Path) -> None:
    """Values 60 years apart: the windows between them hold nothing and must not be
    allocated (6e8 of them), yet each one holding values is judged."""
    lines: list[dict[str, Any]] = []
    decades = 60 * 365 * 86400 * 10**9
    for k in range(4):
        for v in range(25):
            val = k * 25 + v
            lines.append(
                {"index": len(lines), "time": k * decades + v, "process": 0, "type": "ok",
                 "f": "send", "value": [["send", 1, [val, val]]]}
            )  # fmt: skip
    lines.append(
        {"index": len(lines), "time": 3 * decades + 50, "process": 1, "type": "ok",
         "f": "poll", "value": [["poll", {"1": [[v, v] for v in range(100)]}]]}
    )  # fmt: skip
    p = tmp_path / "h.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    starv = check_file(p)["metrics"]["liveness"]["starvation"]
    assert starv["windows_judged"] == 3  # the last one is after producers stopped
    assert [w["from_s"] for w in starv["starved_windows"]] == [
        round(k * decades / 1e9, 3) for k in range(3)
    ]
