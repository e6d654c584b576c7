"""`ktrial run` end to end, as a user runs it: a subprocess, real brokers, real faults.

* the main job, shortened for CI: valid verdict, report, junit, nemesis ops in the history;
* Ctrl-C mid-run: the partial history is kept and checked, the cluster is torn down and
  nothing of the run remains.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KTRIAL = [sys.executable, "-m", "ktrial"]


@pytest.fixture(autouse=True)
def _need_cluster() -> None:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)


def _latest(store: Path, name: str) -> Path:
    return (store / name / "latest").resolve()


def _ops(history: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in history.read_bytes().splitlines() if line.strip()]


def _residue(run_id: str) -> list[str]:
    """Everything named after this run that still exists on the machine."""
    out: list[str] = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out += [f"netns {line}" for line in ns.splitlines() if run_id in line]
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    out += [f"link {line}" for line in links.splitlines() if run_id in line]
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    out += [f"rule {line}" for line in rules.splitlines() if run_id in line]
    for root in (Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")):
        if root.is_dir():
            out += [f"cgroup {p}" for p in root.rglob(f"*{run_id}*") if p.is_dir()]
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    out += [f"process {line.strip()}" for line in ps.splitlines() if run_id in line]
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            env = (p / "environ").read_bytes()
        except OSError:
            continue
        if f"KTRIAL_RUN={run_id}".encode() in env:
            out.append(f"process {p.name} with KTRIAL_RUN={run_id}")
    return out


def test_main_job_short(tmp_path: Path) -> None:
    """The README's main job: 3 nodes, queue with transactions, all five fault families
    in 60 s (the default interval is fitted so that each family runs)."""
    store = tmp_path / "store"
    families = ["partition", "kill", "pause", "memory", "toxic"]
    proc = subprocess.run(
        [
            *KTRIAL,
            "run",
            "--store",
            str(store),
            "--name",
            "ci",
            "--time-limit",
            "60",
            "--nemesis",
            ",".join(families),
            "--seed",
            "11",
            "--no-live",
            "--keep-data",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    run = _latest(store, "ci")
    # An invalid verdict comes with the brokers' own account of each lost write.
    assert proc.returncode == 0, out[-4000:] + _trace(run, [])
    assert "verdict: VALID" in proc.stdout
    assert f"report: {run / 'report.html'}" in proc.stdout

    results = orjson.loads((run / "results.json").read_bytes())
    assert results["valid"] is True and results["bad_error_types"] == []
    # every family asked for happened, and the summary says so
    assert results["faults"]["ok"] is True, results["faults"]
    assert sorted(results["faults"]["injected"]) == sorted(families)
    summary = next(ln for ln in proc.stdout.splitlines() if ln.startswith("faults: "))
    assert all(f"{f} ×" in summary for f in families), summary
    ops = _ops(run / "history.jsonl")
    nemesis = [o for o in ops if o["process"] == "nemesis"]
    assert any(o["f"] not in ("heal", "quiet-period") for o in nemesis), nemesis
    ok = [o for o in ops if o["type"] == "ok" and o["f"] in ("txn", "send", "poll")]
    assert len(ok) >= 100, f"only {len(ok)} ok data ops"

    html = (run / "report.html").read_text()
    assert "VALID" in html and html.count("<img") >= 4
    suite = ET.parse(run / "junit.xml").getroot()
    assert int(suite.get("failures", "0") or 0) == 0 and int(suite.get("tests", "0")) > 10

    meta = orjson.loads((run / "test.json").read_bytes())
    assert _residue(meta["cluster"]["run_id"]) == []

    # --keep-data + `ktrial trace`: an acknowledged, committed value is found on disk
    # at the offset its delivery report gave, in every replica, tied to its op.
    sent = next(
        (o, m)
        for o in ops
        if o["type"] == "ok" and o["f"] == "txn"
        for m in o["value"]
        if m[0] == "send" and isinstance(m[2], list) and m[2][0] is not None
    )
    (op, (_, key, (offset, value))) = sent
    shown = _trace(run, ["--key", str(key), "--offset", str(offset), "--radius", "1"])
    mark = f">> offset {offset}: value {value} (transactional)"
    assert shown.count(mark) == 3, shown
    assert f"<- op {op['index']} " in shown and "__transaction_state" in shown, shown


def _trace(run: Path, args: list[str]) -> str:
    proc = subprocess.run(
        [*KTRIAL, "trace", str(run), *args], capture_output=True, text=True, timeout=300
    )
    return (
        f"\n--- ktrial trace {' '.join(args)} (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
    )


def test_ctrl_c_keeps_and_checks_the_partial_history_and_leaves_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [
            *KTRIAL,
            "run",
            "--store",
            str(store),
            "--name",
            "int",
            "--time-limit",
            "300",
            "--nemesis",
            "partition,pause,memory",
            "--nemesis-interval",
            "4",
            "--seed",
            "5",
            "--no-live",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        history = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            runs = list(store.glob("int/2*/history.jsonl"))
            if runs:
                history = runs[0]
                ops = _ops(history) if history.stat().st_size else []
                started = [
                    o
                    for o in ops
                    if o["process"] == "nemesis"
                    and o["f"].startswith(("start-", "pause", "memory-squeeze"))
                ]
                if started and sum(o["type"] == "ok" for o in ops) >= 10:
                    break
            time.sleep(1)
        else:
            pytest.fail("the run never got going (no fault and ten ok ops within 300 s)")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert history is not None
    run = history.parent
    assert proc.returncode in (0, 1, 2), out[-4000:]
    assert "interrupted" in out
    assert (run / "results.json").exists() and (run / "report.html").exists()
    meta = orjson.loads((run / "test.json").read_bytes())
    assert meta.get("interrupted") is True
    ops = _ops(run / "history.jsonl")
    assert any(o["process"] == "nemesis" for o in ops)
    assert _residue(meta["cluster"]["run_id"]) == []
