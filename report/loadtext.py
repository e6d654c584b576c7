"""The report's paragraph on the background load (docs/load.md): did consumption fall
under the `behind` threshold of what was offered, and each consumer's progress, so an
overload run shows whether any consumer starved, not only the totals.

Pure: results' ``metrics.liveness.load`` (checker/behind.py) in, HTML out.
"""

from __future__ import annotations

import html
from typing import Any

from .livetext import num


def _esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def _int(x: Any) -> str:
    v = num(x)
    return "–" if v is None else f"{v:,.0f}"


def _pct(x: Any) -> str:
    v = num(x)
    return "–" if v is None else f"{100 * v:.1f}%"


def summary(load: dict[str, Any]) -> str:
    """One sentence: offered, consumed, and whether consumption fell under the threshold
    of offered in any judged window (and how low)."""
    offered, consumed = num(load.get("offered")), num(load.get("consumed"))
    threshold = num(load.get("ratio_threshold")) or 0.97
    window = num(load.get("window_s")) or 10.0
    judged = int(num(load.get("windows_judged")) or 0)
    low = num(load.get("min_ratio"))
    total = (
        f"{_int(offered)} messages offered, {_int(consumed)} consumed"
        + (f" ({_pct(consumed / offered)})" if offered and consumed is not None else "")
        + f", {_int(load.get('shed'))} shed by the producers' full buffers"
    )
    if not judged or low is None:
        return f"{total}; no {window:g} s window was judged."
    under = int(num(load.get("under_ratio_windows")) or 0)
    if low < threshold:
        verdict = (
            f"consumption <b>fell under {100 * threshold:g}% of offered</b> in "
            f"{under or 'some'} of {judged} windows of {window:g} s (lowest {_pct(low)})"
        )
    else:
        verdict = (
            f"consumption never fell under {100 * threshold:g}% of offered in {judged} "
            f"windows of {window:g} s (lowest {_pct(low)})"
        )
    return f"{_esc(total)}; {verdict}."


def consumers_html(live: dict[str, Any]) -> str:
    """The load paragraph and per-consumer table; '' when the run had no load."""
    load = live.get("load")
    if not isinstance(load, dict):
        return ""
    out = [
        '<h3 id="load-consumers">Background load: consumption and each consumer</h3>',
        f"<p>{summary(load)}</p>",
    ]
    rows = [c for c in load.get("consumers") or () if isinstance(c, dict)]
    if rows:
        body = "".join(
            "<tr>"
            f"<td>{_esc(c.get('consumer'))}</td>"
            f'<td class="num">{_int(c.get("read"))}</td>'
            f'<td class="num">{_pct(c.get("share"))}</td>'
            f'<td class="num">{_int(c.get("min_window_read"))}</td>'
            f'<td class="num">{_int(c.get("idle_windows"))}</td>'
            "</tr>"
            for c in rows
        )
        starved = [c.get("consumer") for c in rows if (num(c.get("idle_windows")) or 0) > 0]
        out.append(
            "<table><thead><tr><th>consumer</th><th>messages read</th><th>share</th>"
            "<th>fewest read in a window</th><th>windows it read nothing while others read"
            f"</th></tr></thead><tbody>{body}</tbody></table>"
        )
        out.append(
            "<p>"
            + (
                f"Consumers {_esc(', '.join(map(str, starved)))} starved in some window."
                if starved
                else "No consumer starved: each read in every judged window."
            )
            + " Per second: <code>jq -c .consumers load.jsonl</code>.</p>"
        )
    return "".join(out)
