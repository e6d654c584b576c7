"""report/judged.py: what faults excused, as the Liveness section tells it (the stretches
judged with no fault near, each fault's allowance, the stalls excused), and the rows'
own sentences using the figures no fault excused."""

from __future__ import annotations

import html
import re

from ktrial.report.html import section_liveness
from ktrial.report.judged import excused_html
from ktrial.report.livetext import liveness_detail
from ktrial.tests.checker.test_excuse import stalled_history


def text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_the_liveness_section_says_what_was_judged_and_what_a_fault_excused() -> None:
    res = stalled_history(38.0).check({"cluster": {"nodes": 3}}, liveness_bad=True)
    live = res["metrics"]["liveness"]
    part = excused_html(live)
    assert part.startswith('<div class="judged" id="fault-windows">')
    words = text(part)
    assert "for 60 s after its heal" in words
    assert "Judged with no fault active or recovering: 0.0–37.0 s (37.0 s)." in words
    assert "37.0–103.0 s: kill n1 (#1): active 38-43 s, then 60 s to recover" in words
    assert "Stalls excused (1), not violations" in words
    assert "key 2 waited: value 7 at offset 0" in words and "within what kill n1 (#1)" in words
    assert part in section_liveness(res)
    detail = liveness_detail("stuck-partition", live)
    assert detail is not None and "no fault excusing it: 0.1 s" in detail
    assert "(of all: 45.0 s; 1 keys excused by faults)" in detail


def test_without_faults_nothing_is_said_about_them() -> None:
    res = stalled_history(None).check(liveness_bad=True)
    live = res["metrics"]["liveness"]
    assert excused_html(live) == "" and excused_html(None) == ""
    assert 'id="fault-windows"' not in section_liveness(res)
    detail = liveness_detail("stuck-partition", live)
    assert detail == "longest an acknowledged value waited for its first read: 45.0 s"
