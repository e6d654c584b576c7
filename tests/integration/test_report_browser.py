"""Open report.html in headless Chromium as a reader would: verdict and plots must render.

Renders a report for a small synthetic run (one with anomalies, one valid), takes a
screenshot of the top of the page and dumps the DOM Chromium built, then asserts
the verdict element and the plot images are there. Set KTRIAL_SCREENSHOT=path to
keep the screenshot of the invalid run (docs/report-screenshot.png comes from it).
"""

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
        "Throughput over time",
        "Realtime lag over time",
        "Unseen values over time",
    ]
    if anomalies:
        for t in ("lost-write", "duplicate", "G1c", "G0"):
            assert f'id="a-{t}"' in html
        assert "<script>" not in html  # the hostile text stayed text
