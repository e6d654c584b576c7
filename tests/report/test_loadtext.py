"""The report's background-load paragraph and per-consumer table (report/loadtext.py)."""

from __future__ import annotations

from ktrial.checker.behind import add_to_liveness
from ktrial.histories.loadlog import LoadLog, LoadSecond
from ktrial.report.html import section_liveness
from ktrial.report.loadtext import consumers_html, summary


def second(t: int, consumers: tuple[int, ...], offered: int = 1000) -> LoadSecond:
    return LoadSecond(
        t=float(t),
        time=1000.0 + t,
        dt=1.0,
        offered=offered,
        produced=offered,
        consumed=sum(consumers),
        consumers=consumers,
        e2e_p99_ms=50.0,
    )


def live_of(seconds: list[LoadSecond]) -> dict[str, object]:
    live: dict[str, object] = {}
    log = LoadLog(start={"type": "start", "time": 1000.0}, seconds=seconds)
    add_to_liveness(live, log, [], 0.0, 10.0, liveness_bad=False)
    return live


def test_overload_report_says_consumption_fell_under_97_percent_and_names_the_starved() -> None:
    """2x the knee: 1,000 offered a second, the cluster sustains ~500; consumer 2 starves
    after 10 s. The report must say both, per consumer."""
    seconds = [second(t, (200, 200, 100)) for t in range(1, 11)]
    seconds += [second(t, (250, 250, 0)) for t in range(11, 31)]
    live = live_of(seconds)
    page = section_liveness({"metrics": {"liveness": live}})
    assert 'id="load-consumers"' in page
    assert "fell under 97% of offered</b> in 3 of 3 windows" in page
    assert "lowest 50.0%" in page
    assert "Consumers 2 starved in some window." in page
    # one row per consumer: read, share, fewest in a window, windows it read nothing
    assert (
        '<td>2</td><td class="num">1,000</td><td class="num">6.7%</td>'
        '<td class="num">0</td><td class="num">2</td>'
    ) in page
    assert page.count("<tr><td>") == 3 + len(live["checks"])  # type: ignore[arg-type]


def test_a_load_that_keeps_up_says_so_and_no_load_adds_nothing() -> None:
    live = live_of([second(t, (500, 500)) for t in range(1, 21)])
    text = consumers_html(live)
    assert "never fell under 97% of offered in 2 windows of 10 s (lowest 100.0%)" in text
    assert "No consumer starved" in text
    assert consumers_html({}) == ""
    assert "no 10 s window was judged" in summary({"offered": 5, "consumed": 5})
