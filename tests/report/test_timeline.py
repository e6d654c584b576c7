"""timeline.html (report/timeline.py): one column per process, one box per op (issue 14 B)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from ktrial.report.judged import Judged
from ktrial.report.scan import scan_history
from ktrial.report.timeline import render_timeline, scale, timeline_html
from ktrial.testing.sample import HOSTILE
from ktrial.tests.histlines import Timeline

BOX = re.compile(
    r'<div class="op (ok|fail|info)( open)?" style="top:([\d.]+)px;height:([\d.]+)px;'
    r'left:(\d+)px;width:\d+px" title="([^"]*)">'
)


def history(tmp_path: Path) -> Path:
    tl = Timeline()
    tl.send(0, 0.1, 0.2, "0", 1, 0)
    tl.send(0, 1.0, 1.5, "0", 2, None, typ="fail")
    tl.pair(1, 0.5, 0.6, "assign", [0], [0])
    tl.poll(1, 2.0, 2.1, {"0": [[0, 1]]})
    tl.pair(2, 3.0, 4.0, "send", [["send", "0", 3]], [["send", "0", 3]], "info", error=HOSTILE)
    tl.nem(1.0, "kill", {"nodes": ["n2", "n3"]})
    tl.nem(3.0, "start", {"nodes": ["n2", "n3"]})
    tl.add(5.0, process=7, type="invoke", f="poll", value=[["poll"]])  # never completes
    tl.add(6.0, process=0, type="invoke", f="send", value=[["send", "0", 4]])
    tl.add(6.5, process=0, type="ok", f="send", value=[["send", "0", [1, 4]]])
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in tl.lines()))
    return path


def test_every_op_is_a_box_in_its_process_column(tmp_path: Path) -> None:
    scan = scan_history(history(tmp_path), timeline=1000)
    page = timeline_html(scan, name="t")
    boxes = BOX.findall(page)
    assert len(boxes) == scan.client_ops == 7
    by_type = [b[0] + b[1] for b in boxes]
    assert sorted(by_type) == ["fail", "info", "info open", "ok", "ok", "ok", "ok"]
    # one column per process, in process order; each box sits in its process's column
    heads = re.findall(r'<div class="col-head" style="left:(\d+)px;[^"]*">([^<]+)</div>', page)
    assert [p for _x, p in heads] == ["0", "1", "2", "7"]
    left = {p: int(x) for x, p in heads}
    for _typ, _open, _top, _h, x, title in boxes:
        process = html.unescape(title).split(" · ")[0].removeprefix("process ")
        assert int(x) == left[process] + 2
    # positioned by time: the box of the op invoked at 3 s starts 3 s down, 1 s high
    px = scale(6.5 - 0.1)
    info = next(b for b in boxes if b[0] == "info" and not b[1])
    assert abs(float(info[2]) - (3.0 - 0.1) * px) < 0.2
    assert abs(float(info[3]) - 1.0 * px) < 0.2
    # the fault band, labelled with its fault and nodes
    assert re.search(r'<div class="fault-label" [^>]*>kill n2,n3</div>', page)
    assert "All 7 client ops." in page


def test_op_details_are_escaped(tmp_path: Path) -> None:
    page = timeline_html(scan_history(history(tmp_path), timeline=1000))
    assert "<script" not in page
    assert html.escape("error: " + json.dumps(HOSTILE), quote=True) in page


def test_a_huge_history_shows_its_first_ops_and_says_so(tmp_path: Path) -> None:
    tl = Timeline()
    for i in range(300):
        tl.send(i % 3, i * 0.1, i * 0.1 + 0.05, "0", i, i)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in tl.lines()))
    scan = scan_history(path, timeline=50)
    assert scan.timeline_cut and scan.client_ops == 300
    page = timeline_html(scan)
    assert len(BOX.findall(page)) == 50
    assert "Showing the first 50 of 300 client ops (by completion), up to 5.0 s of 29.9 s" in page


def test_the_judged_window_is_hatched(tmp_path: Path) -> None:
    scan = scan_history(history(tmp_path), timeline=1000)
    judged = Judged(1.0, 5.0, "the warm-up; the drain", scan.start_s, scan.end_s)
    page = timeline_html(scan, judged)
    assert page.count('<div class="excluded"') == 2
    assert ">warm-up (not judged)</div>" in page and ">drain (not judged)</div>" in page


def test_render_writes_beside_the_report(tmp_path: Path) -> None:
    scan = scan_history(history(tmp_path), timeline=10)
    out = render_timeline(tmp_path, scan, None, "name")
    assert out == tmp_path / "timeline.html"
    assert '<a href="report.html">' in out.read_text()


def test_an_empty_history(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text("")
    page = timeline_html(scan_history(tmp_path / "history.jsonl", timeline=10))
    assert "No client ops in the history." in page
