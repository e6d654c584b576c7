"""One sentence per anomaly type: what it means for a reader who does not know Jepsen.

The report, junit.xml and `ktrial runs` all explain anomalies with these
sentences, so the wording lives in one place. Types follow DESIGN.md section 3.
"""

from __future__ import annotations

# In the order the report lists them: data loss and corruption first, then
# ordering, then isolation (cycles), then the checks beyond Jepsen.
MEANINGS: dict[str, str] = {
    "lost-write": (
        "A write that must have committed was never read, although consumers read later "
        "records of the same key: acknowledged data disappeared."
    ),
    "unseen": (
        "At the end of the run, values acknowledged to producers had never been read by any "
        "consumer: lost, or still invisible after the drain."
    ),
    "duplicate": "One value sits at two or more offsets of a key: a record was written twice.",
    "inconsistent-offsets": (
        "One offset of a key holds two or more different values: consumers disagree about "
        "the log's contents."
    ),
    "G1a": (
        "A consumer read a value that only aborted (failed) operations wrote: an aborted "
        "write became visible."
    ),
    "precommitted-read": (
        "An operation's poll returned a value that the same operation was still sending: "
        "uncommitted data was visible to a read_committed consumer."
    ),
    "torn-transaction": (
        "A committed transaction is visible on some keys and lost on others: it was not atomic."
    ),
    "poll-skip": ("A consumer's next read of a key jumped past records it never read."),
    "nonmonotonic-poll": ("A consumer's next read of a key went backwards or repeated an offset."),
    "int-poll-skip": ("Within one operation, a consumer's reads of a key skipped over records."),
    "int-nonmonotonic-poll": (
        "Within one operation, a consumer's reads of a key went backwards or repeated."
    ),
    "nonmonotonic-send": (
        "A producer's next send to a key landed at an earlier offset than its previous one."
    ),
    "int-nonmonotonic-send": (
        "Within one operation, a later send to a key landed at an earlier offset."
    ),
    "int-send-skip": (
        "Within one operation, another producer's record landed between two sends to a key "
        "(normal for Kafka: sends are not isolated)."
    ),
    "G0": (
        "A cycle of write-write dependencies between operations (normal for Kafka, which "
        "does not order writes across keys)."
    ),
    "G1c": (
        "A cycle of dependencies including write-read edges: operations observed each "
        "other's writes circularly."
    ),
    "G0-realtime": (
        "A write-write cycle that also uses real-time order: an operation's writes were "
        "ordered before those of an operation that finished before it started."
    ),
    "G1c-realtime": (
        "A dependency cycle that also uses real-time order: an operation saw the effects of "
        "one that had not yet started."
    ),
    "cycle-search-timeout": (
        "The search for dependency cycles ran out of time, so isolation could not be fully checked."
    ),
    "eos-duplicate": (
        "Exactly-once copy: an input record appears more than once in the output topic."
    ),
    "eos-loss": (
        "Exactly-once copy: an input record that was consumed and committed never appeared "
        "in the output topic."
    ),
}

KNOWN_TYPES: tuple[str, ...] = tuple(MEANINGS)

# Liveness checks (checker/liveness.py): reported as metrics, and as anomaly types
# only when the run was checked with liveness_bad. Kept apart from MEANINGS so the
# safety catalogue (one junit testcase per type) does not change with them.
LIVENESS_MEANINGS: dict[str, str] = {
    "e2e-latency": (
        "Time from a value's acknowledgement to its first read by a consumer (quantiles)."
    ),
    "commit-latency": "Duration of successful transactions including their commit (or of sends).",
    "starvation": (
        "Consumers fell behind: in some window they read under the threshold share of the "
        "values acknowledged there, even allowing for normal end-to-end lag."
    ),
    "stuck-partition": (
        "A key held an acknowledged value that no consumer read for longer than the threshold."
    ),
    "slow-recovery": (
        "After a fault healed, sends or reads took longer than the threshold to succeed again."
    ),
    "memory-growth": (
        "A broker's resident memory grew during the run by more than the threshold "
        "(share of its first sample and absolute bytes)."
    ),
}
LIVENESS_TYPES: tuple[str, ...] = (
    "starvation",
    "stuck-partition",
    "slow-recovery",
    "memory-growth",
)


def meaning(anomaly_type: str) -> str:
    """The one-sentence meaning of `anomaly_type`; unknown types get an honest placeholder."""
    if anomaly_type in MEANINGS:
        return MEANINGS[anomaly_type]
    return LIVENESS_MEANINGS.get(
        anomaly_type, f"Anomaly type {anomaly_type!r} is not in ktrial's catalogue (DESIGN.md 3)."
    )


def ordered_types(types: object) -> list[str]:
    """Catalogue order first, then any types ktrial does not know, alphabetically."""
    present = [t for t in types] if isinstance(types, (list, tuple, set, dict)) else []
    known = [t for t in KNOWN_TYPES if t in present]
    live = [t for t in LIVENESS_TYPES if t in present]
    extra = sorted(str(t) for t in present if t not in MEANINGS and t not in LIVENESS_MEANINGS)
    return known + live + extra
