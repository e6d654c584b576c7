"""Combine analyses into results.json: anomalies, which are bad, the verdict.

Bad-ness follows DESIGN.md section 3: poll-skip and nonmonotonic-poll are
expected with subscribe; int-send-skip and G0 are normal for Kafka; G1c is bad
without ww inference, and a G1c cycle of wr edges only (circular visibility) is
always bad, as is a realtime cycle without ww edges.
"""

from __future__ import annotations

from typing import Any

ALWAYS_BAD = frozenset(
    {
        "inconsistent-offsets",
        "duplicate",
        "lost-write",
        "unseen",
        "G1a",
        "precommitted-read",
        "int-poll-skip",
        "int-nonmonotonic-poll",
        "nonmonotonic-send",
        "int-nonmonotonic-send",
        "torn-transaction",
        "eos-duplicate",
        "eos-loss",
    }
)
NEVER_BAD = frozenset({"int-send-skip", "G0", "G0-realtime", "cycle-search-timeout"})


def is_bad(name: str, examples: list[dict[str, Any]], sub_via: str, ww_deps: bool) -> bool:
    if name in ALWAYS_BAD:
        return True
    if name in NEVER_BAD:
        return False
    if name in ("poll-skip", "nonmonotonic-poll"):
        return sub_via != "subscribe"
    if name in ("G1c", "G1c-realtime"):
        return (not ww_deps) or any(ex.get("wr_only") for ex in examples)
    return True  # an unknown type is bad until someone decides otherwise


def rank(name: str, examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Most telling first: shortest cycles, biggest jumps, most conflicting values."""
    if name.startswith(("G0", "G1c")):
        return sorted(examples, key=lambda e: (not e.get("wr_only"), len(e.get("cycle", ()))))
    if name in ("poll-skip", "int-poll-skip", "int-send-skip"):
        return sorted(examples, key=lambda e: -e.get("delta", 0))
    if name in (
        "nonmonotonic-poll",
        "int-nonmonotonic-poll",
        "nonmonotonic-send",
        "int-nonmonotonic-send",
    ):
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
