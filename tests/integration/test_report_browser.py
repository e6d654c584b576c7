"""Open report.html in headless Chromium as a reader would: verdict and plots must render.

Renders a report for a small synthetic run (one with anomalies, one valid), takes a
screenshot of the top of the page and dumps the DOM Chromium built, then asserts
the verdict element and the plot images are there. Set KTRIAL_SCREENSHOT=path to
keep the screenshot of the invalid run (docs/report-screenshot.png comes from it).

The on-call tests (issue 14 B) measure the laid-out page: a copy of the page with a
probe script appended (the report itself has no script) records where Chromium put
each element and whether it is rendered at all, so the assertions are about what a
person sees in the first screen: the verdict at the top, the bad anomalies before the
one line of benign ones (whose cards stay folded), the timeline link, and on
timeline.html the boxes of the ops in their columns.
"""

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ktrial.report import render_report
from ktrial.testing.sample import write_sample_run

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed"),
]


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("anomalies,verdict", [(True, "invalid"), (False, "valid")])
def test_report_renders_in_chromium(tmp_path: Path, anomalies: bool, verdict: str) -> None:
    run = write_sample_run(tmp_path / "store" / "sample" / "20261129T200000", anomalies)
    report = render_report(run)
    url = report.resolve().as_uri()

    shot = tmp_path / "top.png"
    res = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1600", url)
    assert shot.exists(), f"no screenshot; chromium said:\n{res.stderr[-2000:]}"
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000  # a blank page is a few KB
    keep = os.environ.get("KTRIAL_SCREENSHOT")
    if keep and anomalies:
        shutil.copyfile(shot, keep)

    dom = chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    m = re.search(
        r'<div id="verdict" class="verdict v-(\w+)" data-verdict="(\w+)">'
        r'<div class="word">([A-Z]+)</div>',
        html,
    )
    assert m is not None and m.groups() == (verdict, verdict, verdict.upper())
    imgs = re.findall(r'<img class="plot-img" alt="([^"]+)"[^>]*src="data:image/png;base64,', html)
    assert imgs == [
        "Latency over time",
        "Latency quantiles over time",
        "Throughput over time",
        "Realtime lag over time",
        "Unseen values over time",
    ]
    if anomalies:
        for t in ("lost-write", "duplicate", "G1c", "G0"):
            assert f'id="a-{t}"' in html
        assert "<script>" not in html  # the hostile text stayed text


PROBE = """<script>
window.addEventListener("load", () => {
  const box = (e) => {
    if (!e) return null;
    const r = e.getBoundingClientRect();
    return {top: r.top, left: r.left, width: r.width, height: r.height,
            // checkVisibility: false inside a closed <details> (content-visibility)
            shown: e.checkVisibility() && r.height > 0,
            text: e.innerText.slice(0, 400),
            colour: getComputedStyle(e).backgroundColor};
  };
  const all = (sel) => [...document.querySelectorAll(sel)].map(box);
  const out = {viewport: innerHeight, PROBES};
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def probe(tmp: Path, page: Path, probes: str, size: str = "1280,900") -> dict:
    """Lay `page` out in Chromium at `size` and return what the probes measured."""
    copy = page.with_name(f".probe-{page.name}")
    copy.write_text(
        page.read_text().replace("</body>", PROBE.replace("PROBES", probes) + "</body>")
    )
    res = chromium(
        tmp, "--dump-dom", "--virtual-time-budget=5000", f"--window-size={size}", copy.as_uri()
    )
    m = re.search(r'<pre id="probe">(.*?)</pre>', res.stdout, re.S)
    assert m is not None, f"the probe did not run; chromium said:\n{res.stderr[-2000:]}"
    return json.loads(html.unescape(m.group(1)))


def test_on_call_reads_verdict_bad_anomalies_and_the_benign_line(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "store" / "sample" / "20261129T200000", True)
    report = render_report(run)
    seen = probe(
        tmp_path,
        report,
        'verdict: box(document.querySelector("#verdict")),'
        ' bad: all(".anomaly:not(.benign)"),'
        ' benign: box(document.querySelector("#benign > p")),'
        ' benignCards: all(".benign-line .anomaly"),'
        ' link: box(document.querySelector("#timeline-link")),'
        ' nemesis: box(document.querySelector("#nemesis-line"))',
    )
    verdict = seen["verdict"]
    # the first thing on the screen: the verdict, big, with why
    assert verdict["shown"] and verdict["top"] < 80 and verdict["height"] > 60
    assert verdict["text"].startswith("INVALID\nBad anomalies found: lost-write ×2, duplicate ×1")
    assert verdict["colour"] == "rgb(197, 34, 31)"
    # bad anomalies, then one line naming the benign ones; their cards folded away
    bad = seen["bad"]
    assert [b["text"].split(" ")[0] for b in bad] == ["lost-write", "duplicate", "G1c"]
    assert all(b["shown"] for b in bad)
    assert bad[0]["top"] < seen["viewport"] * 1.5  # the first bad card is near the top
    assert bad[-1]["top"] < seen["benign"]["top"]
    assert seen["benign"]["text"].startswith("not bad here G0 ×3")
    assert seen["benignCards"] and not any(c["shown"] for c in seen["benignCards"])
    # the nemesis line is whole: it wraps, it is not cut with an ellipsis
    assert "…" not in seen["nemesis"]["text"] and "never injected" not in seen["nemesis"]["text"]
    assert seen["link"]["shown"] and seen["link"]["top"] < seen["viewport"]


def test_the_timeline_link_opens_a_page_of_boxes(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "store" / "sample" / "20261129T200000", True)
    report = render_report(run)
    href = re.search(r'<a id="timeline-link" href="([^"]+)"', report.read_text())
    assert href is not None
    timeline = (report.parent / href.group(1)).resolve()
    assert timeline.exists()
    seen = probe(
        tmp_path,
        timeline,
        'ops: document.querySelectorAll(".op").length,'
        ' shown: all(".op").filter((b) => b.shown && b.width > 4).length,'
        ' heads: all(".col-head").map((b) => [b.text, Math.round(b.left)]),'
        ' first: all(".op").slice(0, 50),'
        ' faults: all(".fault-label").map((b) => b.text),'
        ' note: box(document.querySelector("#timeline-note"))',
        size="1400,1000",
    )
    expected = len([line for line in (run / "history.jsonl").read_text().splitlines()
                    if '"invoke"' not in line and "nemesis" not in line])  # fmt: skip
    assert seen["ops"] == seen["shown"] == expected
    assert [h[0] for h in seen["heads"]] == ["0", "1", "2", "3", "4", "5"]
    lefts = {h[1] for h in seen["heads"]}
    assert len(lefts) == 6  # one column each
    colours = {b["colour"] for b in seen["first"]}
    assert colours <= {"rgb(52, 168, 83)", "rgb(242, 153, 0)", "rgb(217, 48, 37)"}
    assert "rgb(52, 168, 83)" in colours  # ok ops, green
    assert seen["faults"][:2] == ["partition n1", "kill n2"]
    assert seen["note"]["text"].startswith(f"All {expected:,} client ops.")
    shot = tmp_path / "timeline.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", timeline.as_uri())
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
