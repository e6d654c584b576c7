"""The report's sentences about liveness checks, shared by report.html and junit.xml.

Light (no plotting import): junit.xml uses them to say why a check was not measured.
"""

from __future__ import annotations

from typing import Any


def num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def ms(x: Any) -> str:
    v = num(x)
    return "–" if v is None else f"{v:,.0f} ms" if v >= 100 else f"{v:,.1f} ms"


def liveness_detail(name: str, live: dict[str, Any]) -> str | None:
    """The report's own sentence for a check that passed or was not measured (the
    checker's text may say "None" where nothing was measured); None: use the checker's."""
    if name == "e2e-latency":
        e = live.get("e2e_latency_ms") or {}
        if not e.get("n"):
            return "not measured: no acknowledged value was read by an ok op"
        return (
            f"over {e['n']:,} values: p50 {ms(e.get('p50'))}, p99 {ms(e.get('p99'))}, "
            f"max {ms(e.get('max'))}; {e.get('unread', 0):,} acknowledged values never read"
        )
    if name == "commit-latency":
        c = live.get("commit_latency_ms") or {}
        if not c.get("n"):
            return "not measured: no ok transaction or send"
        return (
            f"ok {c.get('f', 'txn')} ops ({c['n']:,}): p50 {ms(c.get('p50'))}, "
            f"p99 {ms(c.get('p99'))}, max {ms(c.get('max'))}"
        )
    if name == "starvation":
        st = live.get("starvation") or {}
        n, low = st.get("windows_judged"), num(st.get("min_ratio_not_excused", st.get("min_ratio")))
        if not n or low is None:
            return (
                "not measured: no window was judged (a window needs at least "
                f"{(live.get('thresholds') or {}).get('starvation_min_offered', 20)} values "
                "acknowledged and must end before the last acknowledgement)"
            )
        return (
            f"{n} window{'' if n == 1 else 's'} of {st.get('window_s', 10):g} s judged; "
            "lowest share read in time "
            f"{100 * low:.1f}% (lag allowance {st.get('lag_allowance_s', 0):g} s)"
            + (
                f"; {st['excused_windows']} starved excused by faults"
                if st.get("excused_windows")
                else ""
            )
        )
    if name == "stuck-partition":
        sp = live.get("stuck_partitions") or {}
        v = num(sp.get("max_not_excused_s", sp.get("max_unread_s")))
        if v is None:
            return "not measured: no acknowledged value"
        if "max_not_excused_s" in sp:  # faults excused some waits (checker/excuse.py)
            return (
                f"longest an acknowledged value waited for its first read, no fault excusing "
                f"it: {v:,.1f} s (of all: {num(sp.get('max_unread_s')) or 0:,.1f} s; "
                f"{sp.get('excused_keys', 0)} keys excused by faults)"
            )
        return f"longest an acknowledged value waited for its first read: {v:,.1f} s"
    if name == "slow-recovery":
        r = live.get("recovery") or {}
        heals = r.get("heals") or 0
        send, read = num(r.get("max_send_s")), num(r.get("max_read_s"))
        if not heals:
            return "not measured: no fault was healed"
        if send is None and read is None:
            return f"{heals} heals; not measured: nothing was attempted long enough after them"
        parts = [f"sends {send:,.1f} s" if send is not None else "sends not measured"]
        parts.append(f"reads {read:,.1f} s" if read is not None else "reads not measured")
        return f"{heals} heals; slowest recovery: " + ", ".join(parts)
    if name == "memory-growth":
        mem = live.get("memory") or {}
        if not mem.get("samples"):
            return "not measured: no node-stats samples in the history"
        return None
    return None


def measured(item: dict[str, Any]) -> bool:
    """Whether a liveness check (results' metrics.liveness.checks item) measured a value:
    the report shows "not measured" otherwise, and junit.xml skips the case."""
    return num(item.get("value")) is not None
