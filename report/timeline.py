"""timeline.html: every client op of a run as a box, one column per process.

Jepsen's timeline.html in ktrial's style: time runs down the page, each logical
process has a column, and each op is a box from its invoke to its completion,
coloured by outcome (ok green, fail orange, info red: unknown outcome). Fault windows
are bands across every column, labelled with the fault and its nodes; what the
liveness checks leave out (warm-up, drain) is hatched. Hovering a box shows the op:
process, f, times, value and error.

Bounded: only the first TIMELINE_MAX_OPS client ops (in completion order) are drawn,
and the page says so when the history holds more. Like report.html it is one static
file: CSS inline, no JavaScript, nothing fetched, everything escaped.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .faults import FaultWindow, family_colour
from .judged import Judged
from .scan import HistoryScan, TimelineOp

TIMELINE_MAX_OPS = 10_000
TARGET_HEIGHT_PX = 12_000  # the page's height for the ops shown, before clamping
MIN_PX_PER_S, MAX_PX_PER_S = 2.0, 400.0
MIN_BOX_PX = 2.0
GUTTER_PX = 64  # the time axis at the left
MAX_COLUMN_PX, MIN_COLUMN_PX = 70, 16
PAGE_WIDTH_PX = 1800  # columns narrow down to fit this, then the page scrolls sideways

CSS = """
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;
background:#fff}
header{padding:12px 20px;border-bottom:1px solid #ddd;background:#fafafa}
header h1{font-size:18px;margin:0 0 4px}
.legend span{margin-right:14px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:middle;
margin-right:4px}
.note{color:#5f6368;margin:4px 0 0}
.cols{position:sticky;top:0;z-index:6;background:#fff;border-bottom:1px solid #ddd;height:22px}
.col-head{position:absolute;top:3px;font-size:11px;text-align:center;overflow:hidden;
white-space:nowrap;color:#333}
.plane{position:relative}
.tick{position:absolute;left:0;width:100%;border-top:1px solid #eee;font-size:10px;color:#80868b}
.tick span{background:#fff;padding-right:4px}
.lane{position:absolute;top:0;bottom:0;border-left:1px solid #f1f3f4}
.fault{position:absolute;opacity:.18;z-index:4;pointer-events:none}
.fault-label{position:absolute;z-index:5;pointer-events:none;background:rgba(255,255,255,.8);
font-size:11px;font-weight:700;padding-left:3px;white-space:nowrap}
.excluded{position:absolute;z-index:4;pointer-events:none;background:repeating-linear-gradient(135deg,
rgba(154,160,166,.22) 0 6px,transparent 6px 12px)}
.excluded-label{position:absolute;z-index:5;pointer-events:none;background:rgba(255,255,255,.8);
font-size:11px;color:#5f6368;padding-left:3px}
.op{position:absolute;z-index:2;border-radius:2px;box-sizing:border-box;overflow:hidden;
border-top:1px solid rgba(255,255,255,.85);
font-size:10px;line-height:12px;color:#fff;padding-left:2px;white-space:nowrap}
.op.ok{background:#34a853}.op.fail{background:#f29900}.op.info{background:#d93025}
.op.open{background:repeating-linear-gradient(180deg,#d93025 0 4px,#f28b82 4px 8px)}
"""

TYPE_COLOURS = {"ok": "#34a853", "fail": "#f29900", "info": "#d93025"}


def esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def _process_key(p: Any) -> tuple[int, float, str]:
    if isinstance(p, bool):
        return (1, 0.0, str(p))
    if isinstance(p, (int, float)):
        return (0, float(p), "")
    return (1, 0.0, str(p))


def _tick_step(px_per_s: float) -> float:
    """Seconds between time labels: a round number about 80 px apart."""
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600):
        if step * px_per_s >= 80:
            return float(step)
    return 7200.0


def scale(span_s: float) -> float:
    """Pixels per second for a timeline spanning span_s seconds."""
    if span_s <= 0:
        return MAX_PX_PER_S
    return min(MAX_PX_PER_S, max(MIN_PX_PER_S, TARGET_HEIGHT_PX / span_s))


def _title(op: TimelineOp) -> str:
    if op.end_s is None:
        when = f"{op.start_s:,.3f} s → never completed"
    else:
        when = f"{op.start_s:,.3f} s → {op.end_s:,.3f} s ({(op.end_s - op.start_s) * 1000:,.1f} ms)"
    lines = [f"process {op.process} · {op.f} · {op.type}", when, f"op index {op.index}"]
    if op.value:
        lines.append(f"value: {op.value}")
    if op.error:
        lines.append(f"error: {op.error}")
    return "\n".join(lines)


def _bands(
    faults: Iterable[FaultWindow], judged: Judged | None, y: Any, t_end: float, width: float
) -> list[str]:
    out = []
    for w in faults:
        if w.start_s > t_end:
            continue
        top = y(w.start_s)
        h = max(2.0, y(min(w.end_s, t_end)) - top)
        colour = family_colour(w.family)
        out.append(
            f'<div class="fault" style="top:{top:.1f}px;height:{h:.1f}px;left:{GUTTER_PX}px;'
            f'width:{width:.0f}px;background:{colour}"></div>'
            f'<div class="fault-label" style="top:{top:.1f}px;left:{GUTTER_PX}px;'
            f'color:{colour}">{esc(w.label)}{"" if not w.instant else " (instant)"}</div>'
        )
    for a, b, what in judged.spans() if judged is not None else []:
        if a > t_end:
            continue
        top = y(a)
        h = max(2.0, y(min(b, t_end)) - top)
        out.append(
            f'<div class="excluded" style="top:{top:.1f}px;height:{h:.1f}px;left:{GUTTER_PX}px;'
            f'width:{width:.0f}px"></div><div class="excluded-label" style="top:{top + h / 2:.1f}'
            f'px;left:{GUTTER_PX + width / 2:.0f}px">{esc(what)} (not judged)</div>'
        )
    return out


def timeline_html(scan: HistoryScan, judged: Judged | None = None, name: str = "") -> str:
    """The timeline page for the ops the scan kept."""
    ops = scan.timeline
    t0 = min([scan.start_s, *(o.start_s for o in ops)]) if ops else scan.start_s
    shown_end = max(
        (o.end_s if o.end_s is not None else o.start_s for o in ops), default=scan.end_s
    )
    if not scan.timeline_cut:
        shown_end = max(shown_end, scan.end_s)
    px = scale(shown_end - t0)

    def y(t: float) -> float:
        return (t - t0) * px

    procs = sorted({o.process for o in ops}, key=_process_key)
    col_w = max(
        MIN_COLUMN_PX, min(MAX_COLUMN_PX, (PAGE_WIDTH_PX - GUTTER_PX) // max(1, len(procs)))
    )
    lane = {p: GUTTER_PX + i * col_w for i, p in enumerate(procs)}
    width = len(procs) * col_w
    height = y(shown_end) + 40
    parts: list[str] = []
    step = _tick_step(px)
    k = 0
    while k * step <= shown_end - t0 + 1e-9:
        parts.append(
            f'<div class="tick" style="top:{y(t0 + k * step):.1f}px">'
            f"<span>{t0 + k * step:,.{1 if step < 1 else 0}f} s</span></div>"
        )
        k += 1
    parts += [f'<div class="lane" style="left:{x}px;width:{col_w}px"></div>' for x in lane.values()]
    parts += _bands(scan.faults, judged, y, shown_end, width)
    for o in ops:
        top = y(o.start_s)
        end = o.end_s if o.end_s is not None else shown_end
        h = max(MIN_BOX_PX, y(end) - top)
        cls = o.type if o.type in TYPE_COLOURS else "info"
        if o.end_s is None:
            cls += " open"
        label = esc(o.f) if h >= 12 and col_w >= 28 else ""
        left = lane[o.process] + 2
        parts.append(
            f'<div class="op {cls}" style="top:{top:.1f}px;height:{h:.1f}px;left:{left}px;'
            f'width:{col_w - 4}px" title="{esc(_title(o))}">{label}</div>'
        )
    heads = "".join(
        f'<div class="col-head" style="left:{x}px;width:{col_w}px">{esc(p)}</div>'
        for p, x in lane.items()
    )
    legend = "".join(
        f'<span><span class="sw" style="background:{c}"></span>{esc(t)}</span>'
        for t, c in TYPE_COLOURS.items()
    )
    fams = sorted({w.family for w in scan.faults})
    legend += "".join(
        f'<span><span class="sw" style="background:{family_colour(f)};opacity:.5"></span>'
        f"fault: {esc(f)}</span>"
        for f in fams
    )
    if scan.timeline_cut:
        note = (
            f"Showing the first {len(ops):,} of {scan.client_ops:,} client ops (by completion), "
            f"up to {shown_end:,.1f} s of {scan.end_s:,.1f} s; history.jsonl has them all."
        )
    else:
        note = f"All {len(ops):,} client ops."
    note += " One column per process; time runs down; hover a box for the op."
    title = f"ktrial timeline: {name}".strip()
    body = (
        f'<header><h1>{esc(title)}</h1><p><a href="report.html">← report.html</a></p>'
        f'<div class="legend">{legend}</div><p class="note" id="timeline-note">{esc(note)}</p>'
        f"</header>"
        f'<div class="cols" style="width:{GUTTER_PX + width}px">{heads}</div>'
        f'<div class="plane" id="timeline" data-ops="{len(ops)}" '
        f'style="height:{height:.0f}px;width:{GUTTER_PX + width}px">{"".join(parts)}</div>'
    )
    if not ops:
        body = (
            f'<header><h1>{esc(title)}</h1><p><a href="report.html">← report.html</a></p>'
            '<p class="note" id="timeline-note">No client ops in the history.</p></header>'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def render_timeline(
    run_dir: Path, scan: HistoryScan, judged: Judged | None = None, name: str = ""
) -> Path:
    """Write timeline.html beside report.html; return its path."""
    out = Path(run_dir) / "timeline.html"
    tmp = Path(run_dir) / ".timeline.html.tmp"
    tmp.write_text(timeline_html(scan, judged, name), encoding="utf-8")
    tmp.replace(out)
    return out
