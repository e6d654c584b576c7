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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from ..histories.redact import redact
from ..histories.store import RunDir, load_json
from ..histories.testmeta import TestMeta
from .errcodes import code_meaning
from .faults import FaultWindow, family_colour
from .judged import Judged, excused_html, judged_of
from .livetext import liveness_detail
from .livetext import num as _n
from .loadtext import consumers_html
from .meanings import meaning, ordered_types
from .plots import all_plots
from .runfacts import (
    driver_name,
    driver_text,
    system_text,
    transaction_protocol,
    transaction_text,
)
from .scan import NS, HistoryScan, scan_history
from .timeline import TIMELINE_MAX_OPS, render_timeline
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
.badge.none{background:#e8eaed;color:#3c4043}
.nemesis-line{margin:2px 0 8px;color:#333}
.benign-line{background:#fff;border:1px solid #ddd;border-left:6px solid #9aa0a6;border-radius:6px;
padding:4px 16px;margin:12px 0}
.benign-line .anomaly{margin:8px 0}
.judged{background:#f1f3f4;border-radius:6px;padding:6px 10px}
.code-meaning{color:#5f6368;font-size:12px}
.expl-tail{color:#333;margin:2px 0 8px}
.cycle sub{font-size:11px;color:#c5221f}
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


def _stat(results: dict[str, Any] | None, name: str) -> int | None:
    stats = (results or {}).get("stats")
    v = stats.get(name) if isinstance(stats, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def op_counts(results: dict[str, Any] | None, scan: HistoryScan) -> tuple[int, int]:
    """(client ops, nemesis ops): logical ops, an invoke and its completion being one op,
    as the checker counted them (else as the history scan did)."""
    client = _stat(results, "client_ops")
    nemesis = _stat(results, "nemesis_ops")
    return (
        client if client is not None else scan.client_ops,
        nemesis if nemesis is not None else scan.nemesis_ops,
    )


def cluster_text(test: dict[str, Any]) -> str | None:
    """ "local, 3 nodes, Kafka 4.1.1, profile safe" from test.json's cluster section."""
    c = test.get("cluster")
    if isinstance(c, str):
        return c
    if not isinstance(c, dict):
        return None
    parts = [str(c.get("kind") or c.get("name") or "cluster")]
    nodes = c.get("nodes")
    if isinstance(nodes, (list, dict)):
        nodes = len(nodes)
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        parts.append(f"{nodes} node{'s' if nodes != 1 else ''}")
    versions = c.get("broker_versions")
    if isinstance(c.get("broker_version"), str) and not versions:
        versions = [c["broker_version"]]
    if isinstance(versions, list) and versions:
        broker = "Kafka" if c.get("broker") in (None, "apache-kafka") else str(c.get("broker"))
        parts.append(f"{broker} {', '.join(str(v) for v in dict.fromkeys(versions))}")
    if c.get("profile"):
        parts.append(f"profile {c['profile']}")
    return ", ".join(parts)


def nemesis_text(test: dict[str, Any], faults: list[FaultWindow]) -> str:
    """What faults were asked for (test.json) and which were injected (the history), in
    full: the line wraps rather than being cut."""
    asked = test.get("nemesis")
    wanted: list[str] = []
    how = ""
    if isinstance(asked, dict):
        fs = asked.get("faults")
        wanted = [str(f) for f in fs] if isinstance(fs, list) else []
        sched = asked.get("schedule")
        if sched == "interval" and isinstance(asked.get("interval"), (int, float)):
            how = f"a fault every {asked['interval']:g} s"
        elif sched:
            how = f"{sched} schedule"
    elif isinstance(asked, list):
        wanted = [str(f) for f in asked]
    elif isinstance(asked, str) and asked:
        wanted = [asked]
    ran: dict[str, int] = {}
    for w in faults:
        ran[w.family] = ran.get(w.family, 0) + 1
    injected = ", ".join(f"{f} ×{n}" for f, n in sorted(ran.items(), key=lambda kv: -kv[1]))
    parts = []
    if wanted:
        parts.append(f"asked for {', '.join(wanted)}" + (f" ({how})" if how else ""))
    parts.append(f"injected {injected}" if injected else "no fault injected")
    missing = [f for f in wanted if f not in ran]
    if wanted and ran and missing:
        parts.append(f"never injected: {', '.join(missing)}")
    return "; ".join(parts)


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
        faults = (results or {}).get("faults")
        if isinstance(faults, dict) and faults.get("ok") is False:
            why = (
                "Not every fault asked for happened: this run does not test the ones that did not."
            )
        else:
            why = "The checker could not decide (no reads at all, or the cycle search timed out)."
    else:
        why = "This run has no results.json yet: run <code>ktrial report --recheck</code>."
    if benign:
        why += f"<br>Also found, not bad here: {listing(benign)}."
    warnings = (results or {}).get("warnings")
    if isinstance(warnings, list) and warnings:
        why += "".join(f'<br><span class="warning">⚠ {esc(w)}</span>' for w in warnings[:5])
    client, nemesis = op_counts(results, scan)
    facts: list[tuple[str, Any]] = [
        ("test", test.get("name") or run_dir.parent.name),
        ("run", run_dir.name),
        ("client ops", f"{client:,}"),
        ("nemesis ops", f"{nemesis:,}"),
        ("duration", _fmt_s(max(0.0, scan.end_s - scan.start_s))),
    ]
    workload = test.get("workload")
    if isinstance(workload, dict):
        workload = workload.get("name") or workload.get("kind") or _brief(workload)
    if workload is not None:
        facts.append(("workload", workload))
    if test.get("seed") is not None:
        facts.append(("seed", test["seed"]))
    cluster = cluster_text(test)
    if cluster:
        facts.append(("cluster", cluster))
    meta = TestMeta.from_json(test)
    protocol = transaction_protocol(meta)
    if protocol is not None:
        facts.append(("txn protocol", protocol))
    driver = driver_name(meta)
    if driver is not None:
        facts.append(("driver", driver))
    if scan.bad_lines:
        facts.append(("unreadable lines skipped", scan.bad_lines))
    facts_html = "".join(f"<span>{esc(k)}: <b>{esc(val)}</b></span>" for k, val in facts)
    nem = nemesis_text(test, scan.faults)
    cls = "v-" + v.replace(" ", "-")
    return (
        f'<div id="verdict" class="verdict {cls}" data-verdict="{esc(v)}">'
        f'<div class="word">{esc(v.upper())}</div><div class="why">{why}</div></div>'
        f'<div class="facts" id="facts">{facts_html}</div>'
        f'<p class="nemesis-line" id="nemesis-line">nemesis: <b>{esc(nem)}</b></p>'
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
                (_error_html(err), False),
            ]
        )
    return _table(["op", "time (s)", "process", "type", "f", "value", "error"], rows)


def _error_html(err: Any) -> str:
    """An op's error as recorded, with what its code means when the table knows it."""
    if err is None:
        return ""
    text = to_json(err, 160)
    what = code_meaning(err.get("name") if isinstance(err, dict) and err.get("name") else text)
    return esc(text) + (f'<br><span class="code-meaning">{esc(what)}</span>' if what else "")


_STEP_NUMBER = re.compile(r"\s*1\.\s*(\[[^\]]*\]\s*)?$")


def split_explanation(expl: str, steps: list[str]) -> tuple[str, str] | None:
    """(lead-in, conclusion) of an explanation that embeds its numbered steps, so the
    steps are printed once, as a list; None when the steps are not in the text."""
    if not steps or not all(isinstance(x, str) and x for x in steps):
        return None
    i, j = expl.find(steps[0]), expl.rfind(steps[-1])
    if i < 0 or j < i:
        return None
    head = _STEP_NUMBER.sub("", expl[:i]).strip()
    tail = expl[j + len(steps[-1]) :].lstrip(". ").strip()
    return head, tail


def _example(ex: dict[str, Any], scan: HistoryScan) -> str:
    parts = ['<div class="example">']
    expl = ex.get("explanation")
    steps = ex.get("steps")
    steps = [str(x) for x in steps] if isinstance(steps, list) else []
    split = split_explanation(str(expl), steps) if expl and steps else None
    if split is not None:
        head = split[0]
        if head:
            parts.append(f'<p class="expl">{esc(head)}</p>')
    elif expl:
        parts.append(f'<p class="expl">{esc(expl)}</p>')
    fields = [
        (k, v)
        for k, v in ex.items()
        if k not in ("explanation", "ops", "cycle", "steps", "op", "edges", "type")
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
    cycle = [i for i in (ex.get("cycle") or []) if isinstance(i, int)]
    if cycle:
        loop = cycle + ([cycle[0]] if cycle[0] != cycle[-1] else [])
        edges = ex.get("edges")
        if not (isinstance(edges, list) and len(edges) == len(loop) - 1):
            edges = [""] * (len(loop) - 1)
        text = f"op {esc(loop[0])}" + "".join(
            (f" →<sub>{esc(e)}</sub> " if e else " → ") + f"op {esc(i)}"
            for e, i in zip(edges, loop[1:], strict=True)
        )
        parts.append(f'<p class="cycle">cycle: {text}</p>')
    if steps:
        parts.append('<ol class="steps">' + "".join(f"<li>{esc(x)}</li>" for x in steps) + "</ol>")
        if split is not None and split[1]:
            parts.append(f'<p class="expl-tail">{esc(split[1])}</p>')
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


def examples_note(count: int | None, kept: int, shown: int) -> str:
    """ "Showing 5 of 15 found (results.json keeps 8)." — or "" when all are shown."""
    found = count if count is not None and count >= kept else kept
    if shown >= found:
        return ""
    keeps = f" (results.json keeps {kept:,})" if kept < found else ""
    return f"Showing {shown:,} of {found:,} found{keeps}."


def _card(t: str, a: Any, is_bad: bool, scan: HistoryScan) -> str:
    """One anomaly type: count, meaning, examples (the first open when it is bad)."""
    c = _count(a)
    exs = _examples(a)
    badge = (
        '<span class="badge bad">bad</span>'
        if is_bad
        else '<span class="badge benign">not bad here</span>'
    )
    shown = exs[:MAX_EXAMPLES]
    note = examples_note(c, len(exs), len(shown))
    more = f'<p class="missing">{esc(note)}</p>' if note else ""
    if not shown:
        body = '<p class="missing">No examples recorded.</p>'
    elif is_bad:
        rest = "".join(_example(ex, scan) for ex in shown[1:])
        if rest:
            rest = (
                f"<details><summary>{len(shown) - 1} more example"
                f"{'s' if len(shown) > 2 else ''}</summary>{rest}</details>"
            )
        body = _example(shown[0], scan) + rest + more
    else:
        body = (
            f"<details><summary>{len(shown)} example{'s' if len(shown) > 1 else ''}"
            f"</summary>{''.join(_example(ex, scan) for ex in shown)}</details>" + more
        )
    return (
        f'<div class="anomaly{"" if is_bad else " benign"}" id="a-{esc(t)}">'
        f'<h3>{esc(t)} <span class="count">×{esc(f"{c:,}" if c is not None else "?")}</span>'
        f"{badge}</h3>"
        f'<p class="meaning">{esc(meaning(t))}</p>{body}</div>'
    )


def section_anomalies(results: dict[str, Any] | None, scan: HistoryScan) -> str:
    """Bad types first, each as a card; the types that are not bad here collapsed into
    one line below them (their cards one click away)."""
    out = ['<h2 id="anomalies">Anomalies</h2>']
    anomalies = (results or {}).get("anomalies")
    if results is None:
        return out[0] + _missing("Anomalies (no results.json)")
    if not isinstance(anomalies, dict) or not anomalies:
        return out[0] + "<p>None found.</p>"
    bad = set(results.get("bad_error_types") or [])
    types = ordered_types(anomalies)
    bad_types = [t for t in types if t in bad]
    benign = [t for t in types if t not in bad]
    out.extend(_card(t, anomalies[t], True, scan) for t in bad_types)
    if not bad_types:
        out.append("<p>No bad anomaly.</p>")
    if benign:
        names = " · ".join(
            f'<a href="#a-{esc(t)}" title="{esc(meaning(t))}">{esc(t)}</a>'
            + (f" ×{c:,}" if (c := _count(anomalies[t])) is not None else "")
            for t in benign
        )
        cards = "".join(_card(t, anomalies[t], False, scan) for t in benign)
        out.append(
            f'<div class="benign-line" id="benign"><p><span class="badge benign">not bad here'
            f"</span> {names} — expected with this run's settings (each one's meaning says why)."
            f"</p><details><summary>what they mean, with examples"
            f"</summary>{cards}</details></div>"
        )
    return "".join(out)


# check name -> (label, unit of value and threshold)
LIVENESS_ROWS: dict[str, tuple[str, str]] = {
    "e2e-latency": ("end-to-end latency p99", "ms"),
    "commit-latency": ("commit latency p99", "ms"),
    "starvation": ("lowest consumed/offered per window", "share"),
    "stuck-partition": ("longest unread acknowledged value", "s"),
    "slow-recovery": ("slowest recovery after a heal", "s"),
    "memory-growth": ("largest steady-state memory growth", "bytes"),
    "throughput-collapse": ("lowest values acknowledged per window / run median", "share"),
    "behind": ("background load: lowest consumed/offered per window", "share"),
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


def section_liveness(results: dict[str, Any] | None, judged: Judged | None = None) -> str:
    """One row per liveness check: value, threshold, verdict; then the violations."""
    out = ['<h2 id="liveness">Liveness</h2>']
    metrics = (results or {}).get("metrics")
    live = metrics.get("liveness") if isinstance(metrics, dict) else None
    checks = live.get("checks") if isinstance(live, dict) else None
    if not isinstance(checks, dict) or not checks:
        return out[0] + _missing("Liveness metrics")
    assert isinstance(live, dict)
    if judged is not None and judged.excluded:
        out.append(
            f'<p class="judged" id="judged-window">Judged from {judged.from_s:,.1f} s to '
            f"{judged.to_s:,.1f} s. Left out: {esc(judged.why)} "
            '(<a href="#plots">hatched on the plots</a>; docs/anomalies.md, Liveness).</p>'
        )
    out.append(excused_html(live))
    rows = []
    for name, item in checks.items():
        if not isinstance(item, dict):
            continue
        label, unit = LIVENESS_ROWS.get(name, (name, ""))
        value = item.get("value")
        measured = _n(value) is not None
        if item.get("ok") is False:
            verdict = (
                '<span class="badge bad">bad</span>'
                if item.get("bad")
                else '<span class="badge warn">over threshold (not judged)</span>'
            )
            detail = str(item.get("explanation", ""))
        elif not measured:
            verdict = '<span class="badge none">not measured</span>'
            detail = liveness_detail(name, live) or "not measured"
        elif item.get("threshold") is None:
            verdict = '<span class="badge benign">measured</span>'
            detail = liveness_detail(name, live) or str(item.get("explanation", ""))
        else:
            verdict = '<span class="badge ok">ok</span>'
            detail = liveness_detail(name, live) or str(item.get("explanation", ""))
        rows.append(
            [
                (f'<span title="{esc(meaning(name))}">{esc(name)}</span>: {esc(label)}', False),
                (_live_value(value, unit), True),
                (_live_value(item.get("threshold"), unit), True),
                (verdict, False),
                (esc(detail), False),
            ]
        )
    out.append(_table(["metric", "value", "threshold", "verdict", "detail"], rows))
    out.append(consumers_html(live))  # the background load, if any
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
    "latency-quantiles": "Latency quantiles over time",
    "throughput": "Throughput over time",
    "realtime-lag": "Realtime lag over time",
    "unseen": "Unseen values over time",
}


def section_plots(
    plots: dict[str, Path | None], faults: list[FaultWindow], judged: Judged | None = None
) -> str:
    out = ['<h2 id="plots">Plots</h2>']
    fams = sorted({w.family for w in faults})
    if fams:
        out.append(
            "<p>Shaded: fault windows, each labelled with its fault and nodes — "
            + ", ".join(
                f'<span class="swatch" style="background:{family_colour(f)}"></span>{esc(f)}'
                for f in fams
            )
            + ".</p>"
        )
    else:
        out.append("<p>No faults were injected in this run.</p>")
    if judged is not None and judged.excluded:
        spans = ", ".join(f"{w} {a:,.1f}–{b:,.1f} s" for a, b, w in judged.spans())
        out.append(
            f"<p>Hatched: not judged for liveness ({esc(spans)}); the realtime lag there "
            "is drawn grey.</p>"
        )
    from .loadplots import LOAD_PLOT_TITLES

    titles = {**PLOT_TITLES, **{k: v for k, v in LOAD_PLOT_TITLES.items() if k in plots}}
    for name, title in titles.items():
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


def _lag_text(w: dict[str, Any]) -> str:
    lag = _n(w.get("lag_ms"))
    if lag is None:
        return "not measured"
    where = []
    if w.get("key") is not None:
        where.append(f"key {w['key']}")
    if w.get("process") is not None:
        where.append(f"process {w['process']}")
    t = _n(w.get("time_s"))
    if t is not None:
        where.append(f"at {t:,.1f} s")
    return f"{lag / 1000:,.1f} s" + (f" ({', '.join(where)})" if where else "")


def realtime_lag_headline(lag: dict[str, Any], judged: Judged | None, by_checker: bool) -> str:
    """The worst realtime lag inside the judged window, and (apart) the worst of the
    stretches left out, which is the drain re-reading from offset 0."""
    worst = lag.get("worst")
    if not isinstance(worst, dict):
        return '<p class="missing">Worst: not computed.</p>'
    if judged is None or not judged.excluded:
        return f'<p id="lag-worst">Worst: <b>{esc(_lag_text(worst))}</b>.</p>'
    if by_checker:
        judged_worst = _lag_text(worst)
        anyp = lag.get("worst_any_poll")
        left_out = _lag_text(anyp) if isinstance(anyp, dict) and anyp != worst else None
    else:  # results from before the judged window: from the sampled series
        raw = lag.get("over_time")
        pts: list[Any] = raw if isinstance(raw, list) else []
        ok = [
            (judged.start_s + p[0], p[1])
            for p in pts
            if isinstance(p, list) and len(p) >= 2 and _n(p[0]) is not None and _n(p[1]) is not None
        ]
        inside = [y for t, y in ok if judged.contains(t)]
        outside = [y for t, y in ok if not judged.contains(t)]
        judged_worst = f"{max(inside) / 1000:,.1f} s (from the sampled series)" if inside else "–"
        left_out = f"{max(outside) / 1000:,.1f} s" if outside else None
    return (
        f'<p id="lag-worst">Worst in the judged window: <b>{esc(judged_worst)}</b>.'
        + (
            f' <span class="missing">Left out ({esc(judged.why)}): {esc(left_out)}.</span>'
            if left_out
            else ""
        )
        + "</p>"
    )


def section_metrics(
    results: dict[str, Any] | None, scan: HistoryScan, judged: Judged | None = None
) -> str:
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
            [(esc(k), False), _num(v), (esc(code_meaning(k) or ""), False)]
            for k, v in sorted(
                causes.items(), key=lambda kv: -kv[1] if isinstance(kv[1], int) else 0
            )
        ]
        out.append(_table(["cause", "ops", "what it means"], rows[:MAX_ROWS]))
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
        out.append(realtime_lag_headline(lag, judged, "judged_window" in metrics))
        per_key = lag.get("per_key")
        if isinstance(per_key, dict) and per_key:
            top = sorted(
                ((k, v) for k, v in per_key.items() if _n(v)),
                key=lambda kv: -float(kv[1]),
            )[:10]
            whole = (
                " — of the whole history, drain included (these results predate the judged "
                "window: <code>ktrial report --recheck</code> recomputes them)"
                if judged is not None and judged.excluded and "judged_window" not in metrics
                else ""
            )
            if top:
                out.append(
                    f"<p>Stalest keys{whole}:</p>"
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


PRODUCER_KEYS = (
    "acks",
    "enable.idempotence",
    "max.in.flight.requests.per.connection",
    "request.timeout.ms",
    "message.timeout.ms",
    "transaction.timeout.ms",
)
CONSUMER_KEYS = ("isolation.level", "auto.offset.reset", "enable.auto.commit", "fetch.wait.max.ms")
WORKLOAD_KEYS = (
    "concurrency",
    "n_keys",
    "active_keys",
    "rate",
    "abort_p",
    "crash_clients",
    "max_txn_len",
    "poll_ms",
    "txn_poll_ms",
)


def _kv(d: Any, keys: Iterable[str]) -> str:
    if not isinstance(d, dict):
        return ""
    return ", ".join(f"{k}={_plain(d[k])}" for k in keys if k in d and d[k] is not None)


def _plain(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_plain(x) for x in v)
    return v if isinstance(v, str) else to_json(v, 120)


def iso_time(epoch: Any) -> str | None:
    """An epoch-seconds time as ISO 8601 in UTC ("2026-12-01T21:57:38Z")."""
    x = _n(epoch)
    if x is None or not 0 <= x < 253402300800:  # up to year 9999
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(x))


def config_rows(test: dict[str, Any]) -> list[tuple[str, str]]:
    """The settings a reader needs to understand the run, one short row each."""
    rows: list[tuple[str, str]] = []

    def add(what: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            rows.append((what, value if isinstance(value, str) else _plain(value)))

    c = test.get("cluster")
    cluster: dict[str, Any] = c if isinstance(c, dict) else {}
    meta = TestMeta.from_json(test)
    add("system", system_text(meta))
    add("transaction protocol", transaction_text(meta))
    add("client driver", driver_text(meta))
    add("cluster", cluster_text(test) if cluster else test.get("cluster"))
    add("replication factor", test.get("replication_factor"))
    wl = test.get("workload")
    wl_name = wl.get("name") or wl.get("kind") if isinstance(wl, dict) else wl
    add("workload", wl_name)
    opts = test.get("workload_options")
    add("workload settings", _kv(opts if isinstance(opts, dict) else wl, WORKLOAD_KEYS))
    txn, idem = test.get("txn"), test.get("idempotence")
    if txn is not None or idem is not None:
        add(
            "transactions",
            ("on" if txn else "off") + ("" if idem is None else f", idempotence {_plain(idem)}"),
        )
    add("producer", _kv(test.get("producer_config"), PRODUCER_KEYS))
    add("consumer", _kv(test.get("consumer_config"), CONSUMER_KEYS))
    checker = [(k, test.get(k)) for k in ("sub_via", "ww_deps", "consumer_rewinds")]
    add("checker", ", ".join(f"{k}={_plain(v)}" for k, v in checker if v is not None))
    nem = test.get("nemesis")
    if isinstance(nem, dict):
        add(
            "nemesis",
            ", ".join(str(f) for f in nem.get("faults") or []) or "none",
        )
        add("fault schedule", _kv(nem, ("schedule", "interval", "period", "quiet_p")))
    else:
        add("nemesis", nem)
    add("seed", test.get("seed"))
    tl = _n(test.get("time_limit"))
    add("time limit", None if tl is None else f"{tl:g} s")
    add("started", iso_time(test.get("wall_start")))
    add("ktrial", test.get("ktrial_version"))
    keys = test.get("keys")
    topics = test.get("topics")
    if isinstance(keys, dict) and keys:
        add(
            "keys",
            f"{len(keys)} keys"
            + (f" over {len(topics)} topics" if isinstance(topics, dict) and topics else ""),
        )
    return rows


def section_config(test: dict[str, Any]) -> str:
    """A short curated table; the whole test.json (secrets masked) one click away."""
    out = ['<h2 id="config">Configuration</h2>']
    if not test:
        return out[0] + _missing("test.json")
    rows = config_rows(test)
    out.append(
        _table(
            ["setting", "value"],
            [[(esc(k), False), (f'<span class="mono">{esc(v)}</span>', False)] for k, v in rows],
        )
    )
    out.append(
        '<details id="raw-config"><summary>test.json as written (secrets masked) — '
        f'or open <a href="test.json">test.json</a></summary><pre>{esc(to_json_pretty(test))}'
        "</pre></details>"
    )
    return "".join(out)


def _files(run_dir: Path) -> str:
    """Relative links to the run's other files (they open offline, beside this report)."""
    names = [
        "timeline.html",
        "history.jsonl",
        "history.edn",
        "results.json",
        "test.json",
        "junit.xml",
        "plots/",
        "logs/",
    ]
    links = [
        f'<a href="{esc(n)}">{esc(n)}</a>'
        for n in names
        if n in ("junit.xml", "timeline.html") or (run_dir / n.rstrip("/")).exists()
    ]
    return '<h2 id="files">Files of this run</h2><p>' + " · ".join(links) + "</p>"


def build_html(
    run_dir: Path,
    results: dict[str, Any] | None,
    test: dict[str, Any],
    scan: HistoryScan,
    plots: dict[str, Path | None],
    judged: Judged | None = None,
) -> str:
    test = redact(test)  # test.json of an older run may hold passwords in clear
    if judged is None:
        judged = judged_of(results, test, scan)
    title = f"ktrial: {test.get('name') or run_dir.parent.name} {run_dir.name}"
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    body = "".join(
        [
            f"<h1>{esc(title)}</h1>",
            section_verdict(results, test, scan, run_dir),
            '<nav><a href="#anomalies">Anomalies</a><a href="#liveness">Liveness</a>'
            '<a href="#plots">Plots</a>'
            '<a href="#metrics">Metrics</a><a href="#faults">Faults</a>'
            '<a href="#config">Configuration</a>'
            '<a id="timeline-link" href="timeline.html">Timeline of every op ↗</a></nav>',
            section_anomalies(results, scan),
            section_liveness(results, judged),
            section_plots(plots, scan.faults, judged),
            section_metrics(results, scan, judged),
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


def render_report(
    run_dir: Path,
    results: dict[str, Any] | None = None,
    *,
    history: Path | None = None,
    test_json: Path | None = None,
) -> Path:
    """Write report.html, timeline.html and plots/*.png for `run_dir`; return the
    report's path.

    `results` defaults to the run's results.json (if any). Reads the history once:
    `history` (a history.jsonl or a Jepsen history.edn anywhere, see scan.py) defaults
    to the run's history.jsonl, `test_json` to the run's test.json.
    """
    rd = RunDir(Path(run_dir))
    if results is None and rd.results.exists():
        loaded = _load(rd.results)
        results = loaded if isinstance(loaded, dict) else None
    tj = test_json or rd.test_json
    test = _load(tj) if tj.exists() else {}
    test = test if isinstance(test, dict) else {}
    scan = scan_history(history or rd.history, example_op_indices(results), TIMELINE_MAX_OPS)
    judged = judged_of(results, test, scan)
    metrics = (results or {}).get("metrics")
    plots = all_plots(scan, metrics if isinstance(metrics, dict) else {}, rd.plots, judged)
    from .loadplots import load_plots  # only runs with --load have a load.jsonl

    plots.update(
        load_plots(rd.path, history or rd.history, test, results, scan.faults, scan.end_s, rd.plots)
    )
    render_timeline(rd.path, scan, judged, test.get("name") or rd.path.parent.name)
    text = build_html(rd.path, results, test, scan, plots, judged)
    tmp = rd.path / ".report.html.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(rd.report)
    return rd.report
