"""The live view: what it shows, plain lines without a terminal, clean stop on Ctrl-C."""

import io
import threading
from collections import Counter, deque
from pathlib import Path

import pytest
from ktrial.histories import HistoryWriter, Recorder
from ktrial.report.live import LiveView, plain_line, progress
from rich.console import Console


def recorder(tmp_path: Path) -> tuple[Recorder, HistoryWriter]:
    w = HistoryWriter(tmp_path / "history.jsonl")
    return Recorder(w), w


def record_some(rec: Recorder) -> None:
    for _ in range(3):
        inv = rec.invoke(0, "send", [["send", 1, 1]])
        rec.complete(inv, "ok", [["send", 1, [0, 1]]])
    inv = rec.invoke(1, "poll", [["poll"]])
    rec.complete(inv, "info", [["poll", {}]], error="timeout")
    rec.nemesis("kill", ["n1"])
    rec.fault_started("kill-1", {"nodes": ["n1"]})


def test_progress_rates_and_counts() -> None:
    before = Counter({("send", "invoke"): 10, ("send", "ok"): 10})
    after = Counter(
        {("send", "invoke"): 30, ("send", "ok"): 28, ("send", "info"): 1, ("kill", "info"): 1}
    )
    p = progress(deque([(1.0, before), (5.0, after)]), 60.0, {"kill-1": ["n1"]}, 7)
    assert p.rates == {"send": pytest.approx(19 / 4)}  # nemesis ops are not client ops
    assert p.totals == {"ok": 28, "fail": 0, "info": 1}
    assert p.remaining_s == 55.0
    line = plain_line(p)
    assert line.startswith("[    5.0s/60s] send 4.8/s | ok 28 fail 0 info 1")
    assert "faults: kill-1 [n1]" in line and line.endswith("| unseen 7")
    p = progress(deque([(1.0, after)]), None, {"a1b2-3-partition": {"nodes": ["n2", "n1"]}}, None)
    assert plain_line(p).endswith("| faults: partition#3 [n1,n2]")


def test_plain_lines_without_a_terminal(tmp_path: Path) -> None:
    rec, w = recorder(tmp_path)
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with LiveView(
        rec, 60, unseen_fn=lambda: 2, console=console, refresh_s=0.01, plain_every_s=0.01
    ) as view:
        assert not view.interactive
        record_some(rec)
        seen = threading.Event()
        for _ in range(500):  # wait for the thread to print at least one line
            if "kill-1" in out.getvalue():
                seen.set()
                break
            seen.wait(0.01)
    w.close()
    lines = out.getvalue().splitlines()
    assert lines and all(ln.startswith("[") for ln in lines)
    final = lines[-1]  # printed on exit, after everything was recorded
    assert "send" in final and "poll" in final and "ok 3 fail 0 info 1" in final
    assert "kill-1" in final and final.endswith("unseen 2")
    assert not [t for t in threading.enumerate() if t.name == "ktrial-live"]


def test_rich_panel_on_a_terminal(tmp_path: Path) -> None:
    rec, w = recorder(tmp_path)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    record_some(rec)
    with LiveView(rec, 30, console=console, refresh_s=0.01) as view:
        assert view.interactive
    w.close()
    text = out.getvalue()
    assert "elapsed" in text and "remaining" in text and "of 30 s" in text
    assert "active faults: kill-1" in text
    assert "unseen" not in text  # no unseen_fn given


def test_stops_cleanly_on_ctrl_c_and_a_broken_unseen_fn(tmp_path: Path) -> None:
    rec, w = recorder(tmp_path)

    def broken() -> int:
        raise RuntimeError("cluster gone")

    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    view = LiveView(rec, 10, unseen_fn=broken, console=console, refresh_s=0.01)
    with pytest.raises(KeyboardInterrupt), view:
        record_some(rec)
        raise KeyboardInterrupt
    w.close()
    assert view._thread is None and view._live is None
    assert not [t for t in threading.enumerate() if t.name == "ktrial-live"]
    view.close()  # idempotent


def test_the_running_check_shows_in_the_panel_and_the_plain_line(tmp_path: Path) -> None:
    rec, w = recorder(tmp_path)
    record_some(rec)
    state = {"line": ("safety check at 60 s: no anomaly in 7 ops (0.4 s; next in 60 s)", False)}
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    view = LiveView(rec, 30, console=console, refresh_s=0.01, watch_fn=lambda: state["line"])
    p = view.current()
    assert p.watch == state["line"][0] and p.alarm is False
    assert plain_line(p).endswith(
        "| safety check at 60 s: no anomaly in 7 ops (0.4 s; next in 60 s)"
    )
    state["line"] = ("ANOMALY while running: duplicate ×1", True)
    with view:
        pass
    w.close()
    assert "ANOMALY while running: duplicate ×1" in out.getvalue()  # the final panel
    assert view.current().alarm is True


def test_a_broken_watch_fn_leaves_the_view_alone(tmp_path: Path) -> None:
    rec, w = recorder(tmp_path)

    def broken() -> tuple[str, bool]:
        raise RuntimeError("gone")

    view = LiveView(rec, 10, console=Console(file=io.StringIO()), watch_fn=broken)
    p = view.current()
    w.close()
    assert p.watch is None and p.alarm is False
