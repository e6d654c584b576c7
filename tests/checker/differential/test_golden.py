"""The checker's golden results: ~970 generated histories (valid shapes and each with
every injectable anomaly) checked under two option sets must give exactly the results
recorded in tests/data/golden-results.txt (a digest per history).

A refactoring or speed-up may change no verdict, example or count. A change meant to
alter results rewrites the file (`python -m ktrial.testing.golden digests
tests/data/golden-results.txt`) and says in its commit which histories changed and why.
"""

from __future__ import annotations

from pathlib import Path

from ktrial.testing import golden

RECORDED = Path(__file__).resolve().parents[2] / "data" / "golden-results.txt"


def test_results_on_the_golden_histories_are_unchanged() -> None:
    want = dict(line.split() for line in RECORDED.read_text().splitlines())
    got = dict(golden.digests())
    assert sorted(got) == sorted(want), "the golden set itself changed (generator or injectors)"
    changed = sorted(n for n in want if got[n] != want[n])
    assert not changed, (
        f"{len(changed)} of {len(want)} histories give other results than recorded: "
        f"{changed[:20]}; compare in detail with `python -m ktrial.testing.golden write` "
        "before and after your change"
    )
