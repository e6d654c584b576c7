"""One sentence per anomaly type: what it means for a reader who does not know Jepsen.

The report, junit.xml and `ktrial runs` all explain anomalies with these
sentences. The sentences live in the anomaly catalogue (checker/catalogue.py), with
each type's family, rank and rule for being bad; this module gives the report's view.
"""

from __future__ import annotations

from ..checker.catalogue import CATALOGUE, LIVENESS, SAFETY

# In the order the report lists them: data loss and corruption first, then
# ordering, then isolation (cycles), then the checks beyond Jepsen.
MEANINGS: dict[str, str] = {t.name: t.meaning for t in SAFETY}

KNOWN_TYPES: tuple[str, ...] = tuple(MEANINGS)

# Liveness checks (checker/liveness.py): reported as metrics, and as anomaly types
# only when the run was checked with liveness_bad. Kept apart from MEANINGS so the
# safety catalogue (one junit testcase per type) does not change with them. The two
# latency metrics have a meaning but are never a violation type.
LIVENESS_MEANINGS: dict[str, str] = {
    "e2e-latency": (
        "Time from a value's acknowledgement to its first read by a consumer (quantiles)."
    ),
    "commit-latency": "Duration of successful transactions including their commit (or of sends).",
    **{t.name: t.meaning for t in LIVENESS},
}
LIVENESS_TYPES: tuple[str, ...] = tuple(t.name for t in LIVENESS)
assert len(CATALOGUE) == len(KNOWN_TYPES) + len(LIVENESS_TYPES)


def meaning(anomaly_type: str) -> str:
    """The one-sentence meaning of `anomaly_type`; unknown types get an honest placeholder."""
    if anomaly_type in MEANINGS:
        return MEANINGS[anomaly_type]
    return LIVENESS_MEANINGS.get(
        anomaly_type,
        f"Anomaly type {anomaly_type!r} is not in ktrial's catalogue (docs/anomalies.md).",
    )


def ordered_types(types: object) -> list[str]:
    """Catalogue order first, then any types ktrial does not know, alphabetically."""
    present = [t for t in types] if isinstance(types, (list, tuple, set, dict)) else []
    known = [t for t in KNOWN_TYPES if t in present]
    live = [t for t in LIVENESS_TYPES if t in present]
    extra = sorted(str(t) for t in present if t not in MEANINGS and t not in LIVENESS_MEANINGS)
    return known + live + extra
