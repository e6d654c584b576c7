"""report.html: the human view of one run, verdict first.

Layout, top to bottom: the verdict (big and coloured) with a one-line summary;
each anomaly type found, with its count, its one-sentence meaning and its best
examples explained (the ops involved, keys, values, offsets; cycles step by
step); the plots with fault windows shaded; the metrics tables; the fault
windows; the run's configuration and versions.

The file is self-contained: plots are embedded as data: URIs (and also written
to plots/*.png), CSS is inline, there is no JavaScript and nothing is fetched,
so it reads the same offline, as a CI artifact, or mailed around. Everything
that comes from the history, results or test.json is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import re
import reprlib
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ..histories.redact import redact
from ..histories.store import RunDir, load_json
from .faults import FaultWindow, family_colour
from .meanings import meaning, ordered_types
from .plots import all_plots
from .scan import NS, HistoryScan, scan_history
from .verdict import verdict_of

MAX_EXAMPLES = 5
MAX_VALUE_CHARS = 400
MAX_ROWS = 200
MAX_OPS = 10  # ops shown per example


_REPR = reprlib.Repr()
_REPR.maxlevel = 20
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 100
_REPR.maxstring = _REPR.maxother = MAX_VALUE_CHARS


def esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def to_json(x: object, limit: int | None = MAX_VALUE_CHARS) -> str:
    """Compact JSON of x (falls back to a repr), cut to `limit` characters."""
    try:
        s = orjson.dumps(x, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # not JSON, or nested deeper than orjson writes (255 levels)
        s = _REPR.repr(x)  # bounded in depth and size: never a RecursionError
    if limit is not None and len(s) > limit:
        s = s[:limit] + f"… ({len(s) - limit} more characters)"
    return s


def example_op_indices(results: dict[str, Any] | None, per_type: int = MAX_EXAMPLES) -> set[int]:
    """Indices of the ops the shown examples cite, so one history pass can fetch them."""
    out: set[int] = set()
    anomalies = (results or {}).get("anomalies")
    if not isinstance(anomalies, dict):
        return out
    for a in anomalies.values():
        for ex in _examples(a)[:per_type]:
            for k in ("ops", "cycle"):
                for i in ex.get(k) or ():
                    if isinstance(i, int) and not isinstance(i, bool):
                        out.add(i)
            if isinstance(ex.get("op"), int):
                out.add(ex["op"])
    return out


def _examples(a: Any) -> list[dict[str, Any]]:
    if not isinstance(a, dict):
        return []
    exs = a.get("examples")
    if not isinstance(exs, list):
        return []
    return [e if isinstance(e, dict) else {"explanation": to_json(e)} for e in exs]


def _count(a: Any) -> int | None:
    if isinstance(a, dict) and isinstance(a.get("count"), int):
        return int(a["count"])
    return None


def _load(path: Path) -> Any:
    try:
        return load_json(path)
    except (OSError, orjson.JSONDecodeError):
        return None


# ---------------------------------------------------------------------------- sections

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;
background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:20px;margin:4px 0 10px;color:#444;font-weight:600}
h2{font-size:19px;margin:34px 0 10px;border-bottom:2px solid #ddd;padding-bottom:4px}
h3{font-size:16px;margin:22px 0 6px}
.verdict{border-radius:10px;padding:18px 24px;color:#fff;margin:8px 0 14px}
.verdict .word{font-size:44px;font-weight:800;letter-spacing:2px;line-height:1}
.verdict .why{font-size:16px;margin-top:8px}
.v-valid{background:#1e8e3e}.v-invalid{background:#c5221f}.v-unknown{background:#e37400}
.v-not-checked{background:#70757a}
.facts{display:flex;flex-wrap:wrap;gap:6px 22px;color:#333;margin-bottom:6px}
.facts b{color:#000}
nav a{margin-right:14px}
.anomaly{background:#fff;border:1px solid #ddd;border-left:6px solid #c5221f;border-radius:6px;
padding:4px 16px 8px;margin:12px 0}
.anomaly.benign{border-left-color:#9aa0a6}
.badge{display:inline-block;font-size:12px;padding:1px 8px;border-radius:9px;color:#fff;
vertical-align:middle;margin-left:6px}
.badge.bad{background:#c5221f}.badge.benign{background:#9aa0a6}
.badge.ok{background:#1e8e3e}.badge.warn{background:#e37400}
.meaning{color:#333;margin:4px 0 8px}
.example{border-top:1px dashed #ddd;padding:6px 0}
.fields span{margin-right:18px}.fields code{background:#f1f3f4;padding:1px 5px;border-radius:3px}
summary{cursor:pointer;color:#1a73e8}
.expl{font-weight:500;margin:4px 0}
.anomaly h3{margin:10px 0 2px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13.5px;background:#fff}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f1f3f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
td.mono{word-break:break-all;max-width:640px}
ol.steps{margin:4px 0 8px;padding-left:26px}
ol.steps li{margin:2px 0}
ol.steps li::marker{color:#c5221f;font-weight:700}
.cycle{font-family:ui-monospace,monospace;color:#555}
.plot{margin:8px 0 18px}
.plot img{max-width:100%;border:1px solid #e0e0e0;background:#fff}
.missing{color:#80868b;font-style:italic}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:middle;
margin-right:5px}
details{margin:6px 0}
mark{background:#ffe08a;padding:0 1px}
pre{background:#fff;border:1px solid #ddd;padding:8px;overflow:auto;max-height:420px}
"""


def _table(headers: Iterable[str], rows: Iterable[Iterable[tuple[str, bool]]]) -> str:
    """rows of (already-escaped cell html, numeric?)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if num else f"<td>{c}</td>" for c, num in r)
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _num(x: Any) -> tuple[str, bool]:
    if isinstance(x, float):
        return esc(f"{x:,.1f}"), True
    if isinstance(x, int) and not isinstance(x, bool):
        return esc(f"{x:,}"), True
    return (esc(x) if x is not None else '<span class="missing">–</span>'), False


def _brief(d: dict[str, Any], limit: int = 100) -> str:
    """`a: x, y; b: 3` — a dict as one short line for the facts bar."""
    parts = []
    for k, v in d.items():
        if isinstance(v, list):
            v = ", ".join(str(x) for x in v)
        elif isinstance(v, dict):
            v = to_json(v, 40)
        parts.append(f"{k}: {v}")
    s = "; ".join(parts)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _missing(what: str) -> str:
    return f'<p class="missing">{esc(what)}: not computed.</p>'


def _fmt_s(t: float) -> str:
    return f"{t:,.1f} s"


def section_verdict(
    results: dict[str, Any] | None, test: dict[str, Any], scan: HistoryScan, run_dir: Path
) -> str:
    v = verdict_of(results)
    anomalies = (results or {}).get("anomalies") or {}
    bad = set((results or {}).get("bad_error_types") or [])
    found = ordered_types(anomalies if isinstance(anomalies, dict) else {})
    bad_found = [t for t in found if t in bad]
    benign = [t for t in found if t not in bad]

    def listing(types: list[str]) -> str:
        parts = []
        for t in types:
            c = _count(anomalies.get(t))
            parts.append(
                f'<a href="#a-{esc(t)}" style="color:inherit">{esc(t)}</a>'
                + (f" ×{c:,}" if c is not None else "")
            )
        return ", ".join(parts)

    if v == "invalid":
        why = (
            f"Bad anomalies found: {listing(bad_found)}."
            if bad_found
            else ("The checker found the history invalid.")
        )
    elif v == "valid":
        why = "No bad anomaly: nothing acknowledged was lost, duplicated or read while aborted."
    elif v == "unknown":
        why = "The checker could not decide (no reads at all, or the cycle search timed out)."
    else:
        why = "This run has no results.json yet: run <code>ktrial report --recheck</code>."
    if benign:
        why += f"<br>Also found, not bad here: {listing(benign)}."
    facts = [
        ("test", test.get("name") or run_dir.parent.name),
        ("run", run_dir.name),
        ("ops", f"{scan.ops:,}"),
        ("duration", _fmt_s(scan.end_s)),
    ]
    for k in ("workload", "nemesis", "seed", "cluster"):
        val = test.get(k)
        if isinstance(val, dict):
            val = val.get("name") or val.get("kind") or _brief(val)
        if val is not None:
            facts.append((k, val))
    if scan.faults:
        facts.append(("faults", f"{sum(1 for w in scan.faults if not w.instant)} windows"))
    if scan.bad_lines:
        facts.append(("unreadable lines skipped", scan.bad_lines))
    facts_html = "".join(f"<span>{esc(k)}: <b>{esc(val)}</b></span>" for k, val in facts)
    cls = "v-" + v.replace(" ", "-")
    return (
        f'<div id="verdict" class="verdict {cls}" data-verdict="{esc(v)}">'
        f'<div class="word">{esc(v.upper())}</div><div class="why">{why}</div></div>'
        f'<div class="facts">{facts_html}</div>'
    )


def highlight_values(ex: dict[str, Any]) -> set[int]:
    """Integer values an example is about (value/values/skipped), to mark in op values."""
    out: set[int] = set()
    for k in ("value", "values", "skipped", "lost", "visible", "max_read_value"):
        v = ex.get(k)
        items = v if isinstance(v, list) else [v]
        for x in items[:50]:
            if isinstance(x, list) and x:  # [key, value] pairs
                x = x[-1]
            if isinstance(x, int) and not isinstance(x, bool):
                out.add(x)
    return out


def op_value_html(value: Any, marks: set[int], limit: int = MAX_VALUE_CHARS) -> str:
    """Escaped compact JSON of an op's value with the example's values marked.

    A long value (a drain poll) is cut around the first marked value rather than at
    its start, so the record the explanation talks about stays visible.
    """
    text = to_json(value, None)
    pattern = (
        re.compile(r"(?<![\w.#])(" + "|".join(str(m) for m in sorted(marks)) + r")(?![\w.])")
        if marks
        else None
    )
    if len(text) > limit:
        m = pattern.search(text) if pattern else None
        start = max(0, m.start() - limit // 3) if m else 0
        end = min(len(text), start + limit)
        text = (
            ("…" if start else "")
            + text[start:end]
            + (
                f"… ({len(text) - (end - start)} more characters)"
                if end < len(text) or start
                else ""
            )
        )
    escaped = esc(text)
    if pattern:
        escaped = pattern.sub(r"<mark>\1</mark>", escaped)
    return escaped


def _op_rows(indices: Iterable[int], scan: HistoryScan, marks: set[int] | None = None) -> str:
    rows = []
    for i in indices:
        op = scan.ops_by_index.get(i)
        if op is None:
            rows.append(
                [
                    (esc(i), True),
                    ('<span class="missing">not in the history</span>', False),
                    ("", False),
                    ("", False),
                    ("", False),
                    ("", False),
                    ("", False),
                ]
            )
            continue
        t = op.get("time")
        t_txt = f"{t / NS:,.3f}" if isinstance(t, (int, float)) else to_json(t)
        err = op.get("error")
        rows.append(
            [
                (esc(i), True),
                (esc(t_txt), True),
                (esc(op.get("process")), False),
                (esc(op.get("type")), False),
                (esc(op.get("f")), False),
                (
                    f'<span class="mono">{op_value_html(op.get("value"), marks or set())}</span>',
                    False,
                ),
                (esc(to_json(err, 160)) if err is not None else "", False),
            ]
        )
    return _table(["op", "time (s)", "process", "type", "f", "value", "error"], rows)


def _example(ex: dict[str, Any], scan: HistoryScan) -> str:
    parts = ['<div class="example">']
    expl = ex.get("explanation")
    if expl:
        parts.append(f'<p class="expl">{esc(expl)}</p>')
    fields = [
        (k, v) for k, v in ex.items() if k not in ("explanation", "ops", "cycle", "steps", "op")
    ]
    if fields:
        parts.append(
            '<p class="fields">'
            + "".join(
                f"<span>{esc(k)} <code>{esc(v if isinstance(v, str) else to_json(v))}</code></span>"
                for k, v in fields
            )
            + "</p>"
        )
    steps = ex.get("steps")
    cycle = [i for i in (ex.get("cycle") or []) if isinstance(i, int)]
    if cycle:
        loop = cycle + ([cycle[0]] if cycle[0] != cycle[-1] else [])
        parts.append('<p class="cycle">cycle: ' + " → ".join(f"op {esc(i)}" for i in loop) + "</p>")
    if isinstance(steps, list) and steps:
        parts.append('<ol class="steps">' + "".join(f"<li>{esc(s)}</li>" for s in steps) + "</ol>")
    op_ids: list[int] = []
    for i in [*(ex.get("ops") or []), *cycle, ex.get("op")]:
        if isinstance(i, int) and not isinstance(i, bool) and i not in op_ids:
            op_ids.append(i)
    if op_ids:
        parts.append(_op_rows(op_ids[:MAX_OPS], scan, highlight_values(ex)))
        if len(op_ids) > MAX_OPS:
            rest = ", ".join(str(i) for i in op_ids[MAX_OPS : MAX_OPS + 40])
            parts.append(
                f'<p class="missing">{len(op_ids) - MAX_OPS} more ops: {esc(rest)}'
                f"{'…' if len(op_ids) > MAX_OPS + 40 else ''}</p>"
            )
    parts.append("</div>")
    return "".join(parts)


def section_anomalies(results: dict[str, Any] | None, scan: HistoryScan) -> str:
    out = ['<h2 id="anomalies">Anomalies</h2>']
    anomalies = (results or {}).get("anomalies")
    if results is None:
        return out[0] + _missing("Anomalies (no results.json)")
    if not isinstance(anomalies, dict) or not anomalies:
        return out[0] + "<p>None found.</p>"
    bad = set(results.get("bad_error_types") or [])
    types = ordered_types(anomalies)
    types.sort(key=lambda t: t not in bad)  # bad ones first, catalogue order kept
    for t in types:
        a = anomalies[t]
        c = _count(a)
        exs = _examples(a)
        is_bad = t in bad
        badge = (
            '<span class="badge bad">bad</span>'
            if is_bad
            else '<span class="badge benign">not bad here</span>'
        )
        shown = exs[:MAX_EXAMPLES]
        rest = "".join(_example(ex, scan) for ex in shown[1:])
        if rest:
            rest = (
                f"<details><summary>{len(shown) - 1} more example"
                f"{'s' if len(shown) > 2 else ''}</summary>{rest}</details>"
            )
        more = (
            f'<p class="missing">Showing {len(shown)} of {len(exs)} examples '
            f"(results.json has all).</p>"
            if len(exs) > len(shown)
            else ""
        )
        out.append(
            f'<div class="anomaly{"" if is_bad else " benign"}" id="a-{esc(t)}">'
            f'<h3>{esc(t)} <span class="count">×{esc(f"{c:,}" if c is not None else "?")}</span>'
            f"{badge}</h3>"
            f'<p class="meaning">{esc(meaning(t))}</p>'
            + (
                ("".join(_example(ex, scan) for ex in shown[:1]) + rest)
                if is_bad
                else (
                    f"<details><summary>{len(shown)} example{'s' if len(shown) > 1 else ''}"
                    f"</summary>{''.join(_example(ex, scan) for ex in shown)}</details>"
                    if shown
                    else ""
                )
            )
            + (more if shown else '<p class="missing">No examples recorded.</p>')
            + "</div>"
        )
    return "".join(out)


# check name -> (label, unit of value and threshold)
LIVENESS_ROWS: dict[str, tuple[str, str]] = {
    "e2e-latency": ("end-to-end latency p99", "ms"),
    "commit-latency": ("commit latency p99", "ms"),
    "starvation": ("lowest consumed/offered per window", "share"),
    "stuck-partition": ("longest unread acknowledged value", "s"),
    "slow-recovery": ("slowest recovery after a heal", "s"),
    "memory-growth": ("largest node RSS growth", "bytes"),
}
MAX_VIOLATIONS = 10


def _live_value(x: Any, unit: str) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return '<span class="missing">–</span>'
    if unit == "bytes":
        return esc(f"{x / 1048576:,.0f} MiB")
    if unit == "share":
        return esc(f"{100 * x:.1f}%")
    return esc(f"{x:,.1f} {unit}")


def section_liveness(results: dict[str, Any] | None) -> str:
    """One row per liveness check: value, threshold, verdict; then the violations."""
    out = ['<h2 id="liveness">Liveness</h2>']
    metrics = (results or {}).get("metrics")
    live = metrics.get("liveness") if isinstance(metrics, dict) else None
    checks = live.get("checks") if isinstance(live, dict) else None
    if not isinstance(checks, dict) or not checks:
        return out[0] + _missing("Liveness metrics")
    assert isinstance(live, dict)
    rows = []
    for name, item in checks.items():
        if not isinstance(item, dict):
            continue
        label, unit = LIVENESS_ROWS.get(name, (name, ""))
        if item.get("ok") is False:
            verdict = (
                '<span class="badge bad">bad</span>'
                if item.get("bad")
                else '<span class="badge warn">over threshold (not judged)</span>'
            )
        elif item.get("threshold") is None:
            verdict = '<span class="badge benign">measured</span>'
        else:
            verdict = '<span class="badge ok">ok</span>'
        rows.append(
            [
                (f'<span title="{esc(meaning(name))}">{esc(name)}</span>: {esc(label)}', False),
                (_live_value(item.get("value"), unit), True),
                (_live_value(item.get("threshold"), unit), True),
                (verdict, False),
                (esc(item.get("explanation", "")), False),
            ]
        )
    out.append(_table(["metric", "value", "threshold", "verdict", "detail"], rows))
    th = live.get("thresholds")
    if isinstance(th, dict) and not th.get("liveness_bad"):
        out.append(
            '<p class="missing">Liveness is reported, not judged: faults legitimately slow a '
            "run down. Check with <code>--liveness-bad</code> to fail the run on it.</p>"
        )
    viol = live.get("violations")
    if isinstance(viol, list) and viol:
        items = "".join(
            f"<li><b>{esc(v.get('type'))}</b>: {esc(v.get('explanation', ''))}</li>"
            for v in viol[:MAX_VIOLATIONS]
            if isinstance(v, dict)
        )
        counts = live.get("violation_counts")
        total = sum(counts.values()) if isinstance(counts, dict) else len(viol)
        shown = min(len(viol), MAX_VIOLATIONS)
        more = (
            f'<p class="missing">Showing {shown} of {total:,} (results.json lists up to '
            "20 of each type, and counts them all).</p>"
            if total > shown
            else ""
        )
        out.append(f"<h3>Violations ({total:,})</h3><ul>{items}</ul>{more}")
    return "".join(out)


PLOT_TITLES = {
    "latency": "Latency over time",
    "throughput": "Throughput over time",
    "realtime-lag": "Realtime lag over time",
    "unseen": "Unseen values over time",
}


def section_plots(plots: dict[str, Path | None], faults: list[FaultWindow]) -> str:
    out = ['<h2 id="plots">Plots</h2>']
    fams = sorted({w.family for w in faults})
    if fams:
        out.append(
            "<p>Shaded: fault windows — "
            + ", ".join(
                f'<span class="swatch" style="background:{family_colour(f)}"></span>{esc(f)}'
                for f in fams
            )
            + ".</p>"
        )
    else:
        out.append("<p>No faults were injected in this run.</p>")
    for name, title in PLOT_TITLES.items():
        p = plots.get(name)
        if p is None or not p.exists():
            out.append(
                f'<div class="plot" id="plot-{name}"><h3>{esc(title)}</h3>{_missing(title)}</div>'
            )
            continue
        data = base64.b64encode(p.read_bytes()).decode()
        out.append(
            f'<div class="plot" id="plot-{name}"><h3>{esc(title)}</h3>'
            f'<img class="plot-img" alt="{esc(title)}" '
            f'data-file="plots/{esc(p.name)}" src="data:image/png;base64,{data}"></div>'
        )
    return "".join(out)


def section_metrics(results: dict[str, Any] | None, scan: HistoryScan) -> str:
    out = ['<h2 id="metrics">Metrics</h2>']
    metrics = (results or {}).get("metrics")
    metrics = metrics if isinstance(metrics, dict) else {}

    out.append("<h3>Operations by outcome</h3>")
    counts = metrics.get("counts")
    source = ""
    if not isinstance(counts, dict):
        counts = {}
        for (f, typ), n in scan.counts.items():
            counts.setdefault(f, {})[typ] = n
        source = '<p class="missing">From the history (the checker reported no counts).</p>'
    if counts:
        rows = []
        for f, c in sorted(counts.items()):
            c = c if isinstance(c, dict) else {}
            vals = [c.get(k) for k in ("ok", "fail", "info")]
            total = sum(v for v in vals if isinstance(v, int))
            rows.append([(esc(f), False), *(_num(v) for v in vals), _num(total)])
        out.append(_table(["f", "ok", "fail", "info", "total"], rows) + source)
    else:
        out.append(_missing("Counts"))

    out.append("<h3>Causes of info (unknown outcome) ops</h3>")
    causes = metrics.get("info_causes")
    if isinstance(causes, dict) and causes:
        rows = [
            [(esc(k), False), _num(v)]
            for k, v in sorted(
                causes.items(), key=lambda kv: -kv[1] if isinstance(kv[1], int) else 0
            )
        ]
        out.append(_table(["cause", "ops"], rows[:MAX_ROWS]))
    elif isinstance(causes, dict):
        out.append("<p>No info ops.</p>")
    else:
        out.append(_missing("Info causes"))

    out.append("<h3>Latency quantiles (ms)</h3>")
    lat = metrics.get("latency_ms")
    if isinstance(lat, dict) and lat:
        rows = []
        for f, by_type in sorted(lat.items()):
            if not isinstance(by_type, dict):
                continue
            for typ, q in sorted(by_type.items()):
                q = q if isinstance(q, dict) else {}
                rows.append(
                    [
                        (esc(f), False),
                        (esc(typ), False),
                        *(_num(q.get(k)) for k in ("count", "p50", "p90", "p99", "max")),
                    ]
                )
        out.append(_table(["f", "type", "count", "p50", "p90", "p99", "max"], rows))
    else:
        out.append(_missing("Latency quantiles"))

    out.append("<h3>Realtime lag</h3>")
    lag = metrics.get("realtime_lag")
    if isinstance(lag, dict):
        worst = lag.get("worst")
        if isinstance(worst, dict) and worst:
            out.append(
                "<p>Worst:</p>"
                + _table(
                    ["field", "value"],
                    [
                        [(esc(k), False), (f'<span class="mono">{esc(to_json(v))}</span>', False)]
                        for k, v in worst.items()
                    ],
                )
            )
        per_key = lag.get("per_key")
        if isinstance(per_key, dict) and per_key:
            top = sorted(
                per_key.items(), key=lambda kv: -(kv[1] if isinstance(kv[1], (int, float)) else 0)
            )[:20]
            out.append(
                "<p>Worst keys (ms):</p>"
                + _table(["key", "lag (ms)"], [[(esc(k), False), _num(v)] for k, v in top])
            )
        if not worst and not per_key:
            out.append("<p>No lag recorded.</p>")
    else:
        out.append(_missing("Realtime lag"))

    out.append("<h3>Unseen at the end</h3>")
    unseen = metrics.get("unseen")
    if isinstance(unseen, dict) and "final" in unseen:
        out.append(f"<p>{esc(unseen.get('final'))} acknowledged values were never read.</p>")
    else:
        out.append(_missing("Unseen"))

    rest = {
        k: v
        for k, v in metrics.items()
        if k not in ("counts", "info_causes", "latency_ms", "realtime_lag", "unseen")
    }
    if rest:
        out.append(
            "<h3>Other metrics</h3><details><summary>show</summary><pre>"
            + esc(to_json_pretty(rest))
            + "</pre></details>"
        )
    stats = (results or {}).get("stats")
    if stats:
        out.append(
            "<h3>Checker statistics</h3><details><summary>show</summary><pre>"
            + esc(to_json_pretty(stats))
            + "</pre></details>"
        )
    if scan.in_flight:
        out.append(
            f"<p>{scan.in_flight:,} ops were still in flight when the history ended "
            "(they count as info).</p>"
        )
    return "".join(out)


def to_json_pretty(x: object) -> str:
    try:
        return orjson.dumps(x, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(x)


def section_faults(faults: list[FaultWindow]) -> str:
    out = ['<h2 id="faults">Faults</h2>']
    if not faults:
        return out[0] + "<p>No nemesis ops in the history.</p>"
    rows = []
    for w in faults[:MAX_ROWS]:
        end = "instant" if w.instant else (f"{w.end_s:,.1f}" + ("" if w.end_f else " (end of run)"))
        rows.append(
            [
                (
                    f'<span class="swatch" style="background:{family_colour(w.family)}"></span>'
                    f"{esc(w.family)}",
                    False,
                ),
                (esc(f"{w.start_s:,.1f}"), True),
                (esc(end), True),
                (esc(w.start_f) + (f" → {esc(w.end_f)}" if w.end_f else ""), False),
                (f'<span class="mono">{esc(to_json(w.value, 200))}</span>', False),
            ]
        )
    more = (
        f'<p class="missing">First {MAX_ROWS} of {len(faults)} windows.</p>'
        if len(faults) > MAX_ROWS
        else ""
    )
    return out[0] + _table(["family", "start (s)", "end (s)", "ops", "targets"], rows) + more


def _flatten(d: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(d, dict) and d:
        for k, v in d.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, d


def section_config(test: dict[str, Any]) -> str:
    out = ['<h2 id="config">Configuration and versions</h2>']
    if not test:
        return out[0] + _missing("test.json")
    flat = list(_flatten(test))
    versions = [(k, v) for k, v in flat if "version" in k.lower()]
    if versions:
        out.append(
            "<h3>Versions</h3>"
            + _table(
                ["what", "version"],
                [
                    [(esc(k), False), (f'<span class="mono">{esc(to_json(v))}</span>', False)]
                    for k, v in versions
                ],
            )
        )
    out.append("<h3>Configuration (test.json)</h3>")
    rows = [
        [(esc(k), False), (f'<span class="mono">{esc(to_json(v))}</span>', False)]
        for k, v in flat
        if "version" not in k.lower()
    ]
    out.append(_table(["setting", "value"], rows[:1000]))
    return "".join(out)


def _files(run_dir: Path) -> str:
    """Relative links to the run's other files (they open offline, beside this report)."""
    names = ["history.jsonl", "results.json", "test.json", "junit.xml", "plots/", "logs/"]
    links = [
        f'<a href="{esc(n)}">{esc(n)}</a>'
        for n in names
        if n == "junit.xml" or (run_dir / n.rstrip("/")).exists()
    ]
    return '<h2 id="files">Files of this run</h2><p>' + " · ".join(links) + "</p>"


def build_html(
    run_dir: Path,
    results: dict[str, Any] | None,
    test: dict[str, Any],
    scan: HistoryScan,
    plots: dict[str, Path | None],
) -> str:
    test = redact(test)  # test.json of an older run may hold passwords in clear
    title = f"ktrial: {test.get('name') or run_dir.parent.name} {run_dir.name}"
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    body = "".join(
        [
            f"<h1>{esc(title)}</h1>",
            section_verdict(results, test, scan, run_dir),
            '<nav><a href="#anomalies">Anomalies</a><a href="#liveness">Liveness</a>'
            '<a href="#plots">Plots</a>'
            '<a href="#metrics">Metrics</a><a href="#faults">Faults</a>'
            '<a href="#config">Configuration</a></nav>',
            section_anomalies(results, scan),
            section_liveness(results),
            section_plots(plots, scan.faults),
            section_metrics(results, scan),
            section_faults(scan.faults),
            section_config(test),
            _files(run_dir),
            f'<p class="missing">Generated {esc(generated)} from {esc(run_dir)}.</p>',
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width"><title>{esc(title)}</title>'
        f"<style>{CSS}</style></head><body><main>{body}</main></body></html>\n"
    )


def render_report(run_dir: Path, results: dict[str, Any] | None = None) -> Path:
    """Write report.html (and plots/*.png) for `run_dir`; return the report's path.

    `results` defaults to the run's results.json (if any). Reads history.jsonl once.
    """
    rd = RunDir(Path(run_dir))
    if results is None and rd.results.exists():
        loaded = _load(rd.results)
        results = loaded if isinstance(loaded, dict) else None
    test = _load(rd.test_json) if rd.test_json.exists() else {}
    test = test if isinstance(test, dict) else {}
    scan = scan_history(rd.history, example_op_indices(results))
    metrics = (results or {}).get("metrics")
    plots = all_plots(scan, metrics if isinstance(metrics, dict) else {}, rd.plots)
    text = build_html(rd.path, results, test, scan, plots)
    tmp = rd.path / ".report.html.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(rd.report)
    return rd.report
