"""load.jsonl: the load generator's telemetry read as data (histories/loadlog.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.histories.loadlog import LoadLogError, merge, parse_loadlog, quantile, read_loadlog

# Written by the real generator (workers/bin/ktrial-loadgen, 3,000 msg/s, 2 consumers,
# 4 s) against franz-go's kfake: a start line, five seconds, a final line.
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "load" / "kfake-3000.jsonl"


def test_reads_the_generators_own_output() -> None:
    log = read_loadlog(SAMPLE)
    assert log.config["rate"] == 3000 and log.config["acks"] == "all"
    assert log.config["compression"] == "lz4" and log.config["size"] == 256
    assert log.start_time is not None and log.final is not None
    assert len(log.seconds) >= 4
    first = log.seconds[0]
    assert first.t > 0 and first.dt > 0 and len(first.consumers) == 2
    assert first.e2e_hist and first.produce_hist  # sparse histograms
    assert sum(n for _ms, n in first.e2e_hist) == first.consumed  # one stamp per message read
    # the totals of the seconds are the final line's
    assert sum(s.offered for s in log.seconds) == log.final["offered"]
    assert sum(s.consumed for s in log.seconds) == log.final["consumed"]
    assert [sum(x) for x in zip(*(s.consumers for s in log.seconds), strict=True)] == (
        log.final["consumers"]
    )
    # the per-second p99 is the histogram's
    h = merge([first.e2e_hist])
    assert quantile(h, 0.99) == pytest.approx(first.e2e_p99_ms, rel=0.001)


def test_torn_last_line_is_skipped_other_bad_lines_name_the_line(tmp_path: Path) -> None:
    lines = SAMPLE.read_text().splitlines()
    torn = tmp_path / "load.jsonl"
    torn.write_text("\n".join(lines) + "\n" + lines[2][:40])
    log = read_loadlog(torn)
    assert log.torn and len(log.seconds) == len(read_loadlog(SAMPLE).seconds)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    with pytest.raises(LoadLogError, match=r"bad\.jsonl:2: not JSON"):
        read_loadlog(bad)
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({"type": "second", "t": 1, "time": 5, "offered": "x"}) + "\n")
    with pytest.raises(LoadLogError, match=r"wrong\.jsonl:1: 'offered' must be a number"):
        read_loadlog(wrong)
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"type": "second", "t": 1, "time": 5}) + "\n")
    with pytest.raises(LoadLogError, match="missing 'offered'"):
        read_loadlog(missing)


def test_error_lines_and_unknown_types() -> None:
    log = parse_loadlog(
        [
            '{"type": "error", "message": "creating topic: boom"}',
            '{"type": "future-thing", "x": 1}',
            "",
        ]
    )
    assert log.errors == ["creating topic: boom"] and not log.seconds


@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=300))
def test_quantile_of_a_histogram_is_the_sorted_samples_element(xs: list[int]) -> None:
    """Each value its own bucket: the histogram quantile is the order statistic at
    rank ceil(q*n) (1-based), as the generator computes it."""
    import math

    h = merge([[(float(x), 1) for x in xs]])
    s = sorted(xs)
    for q in (0.5, 0.99, 1.0):
        assert quantile(h, q) == s[max(1, math.ceil(q * len(s))) - 1]
    assert quantile({}, 0.5) is None
