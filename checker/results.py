"""Combine analyses into results.json: anomalies, which are bad, the verdict.

When a type is bad and how its examples are ranked come from the anomaly catalogue
(catalogue.py; docs/anomalies.md): poll-skip and nonmonotonic-poll are expected with
subscribe; int-send-skip and G0 are normal for Kafka; G1c is bad without ww
inference, and a G1c cycle of wr edges only (circular visibility) is always bad, as
is a realtime cycle without ww edges.
"""

from __future__ import annotations

from typing import Any

from . import catalogue


def is_bad(name: str, examples: list[dict[str, Any]], sub_via: str, ww_deps: bool) -> bool:
    """Whether anomaly type `name` with these examples makes the run invalid."""
    wr_only = name in ("G1c", "G1c-realtime") and any(ex.get("wr_only") for ex in examples)
    return catalogue.is_bad(name, wr_only, sub_via, ww_deps)


def rank(name: str, examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Most telling first (the catalogue's rank): shortest cycles, biggest jumps,
    furthest steps back."""
    t = catalogue.BY_NAME.get(name)
    how = t.rank if t is not None else "found"
    if how == "cycle":
        return sorted(examples, key=lambda e: (not e.get("wr_only"), len(e.get("cycle", ()))))
    if how == "jump":
        return sorted(examples, key=lambda e: -e.get("delta", 0))
    if how == "back":
        return sorted(examples, key=lambda e: e.get("delta", 0))
    return examples


def combine(
    found: dict[str, list[dict[str, Any]]],
    *,
    sub_via: str,
    ww_deps: bool,
    max_examples: int,
    nothing_checked: bool,
) -> dict[str, Any]:
    anomalies: dict[str, Any] = {}
    bad: list[str] = []
    for name in sorted(found):
        exs = found[name]
        if not exs:
            continue
        # With nothing read at all, every sent value is "unseen": that says the run
        # never consumed, not that the broker lost anything, so the verdict is unknown.
        if is_bad(name, exs, sub_via, ww_deps) and not (nothing_checked and name == "unseen"):
            bad.append(name)
        ranked = [e for e in rank(name, exs) if "explanation" in e] or rank(name, exs)
        count = sum(e.get("count", 1) for e in exs) if name == "unseen" else len(exs)
        anomalies[name] = {"count": count, "examples": ranked[:max_examples]}
    if bad:
        valid: bool | str = False
    elif nothing_checked or "cycle-search-timeout" in anomalies:
        valid = "unknown"
    else:
        valid = True
    return {
        "valid": valid,
        "error_types": sorted(anomalies),
        "bad_error_types": sorted(bad),
        "anomalies": anomalies,
    }
