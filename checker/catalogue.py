"""The anomaly catalogue: every type ktrial reports, in one table.

Adding a type means adding a row here (and its definition to docs/anomalies.md; a
test checks that the doc names every row). The analysis wiring (check.py refuses a
type without a row), the verdict (results.py: when a type is bad, how its examples
are ranked) and the report (report/meanings.py: order and one-sentence meaning) all
read this table.

Rows are in the order the report lists them: data loss and corruption first, then
ordering, then isolation (cycles), then the checks beyond Jepsen, then liveness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# When a type makes the run invalid:
#   always      - always;
#   never       - never (normal for Kafka, or a limit of the check);
#   assign      - unless consumers subscribe (a group rebalance moves positions);
#   cycle       - G1c: without ww inference, or when a cycle uses wr edges only;
#   liveness    - only when the run is checked with liveness_bad (soak jobs).
Bad = Literal["always", "never", "assign", "cycle", "liveness"]
# How examples are ranked, most telling first:
#   cycle       - circular visibility (wr edges only) first, then the shortest cycle;
#   jump        - the biggest forward jump first;
#   back        - the furthest step backwards first;
#   found       - in the order the analysis found them.
Rank = Literal["cycle", "jump", "back", "found"]
Family = Literal[
    "log truth",
    "visibility",
    "consumer order",
    "producer order",
    "cycles",
    "search",
    "exactly-once",
    "liveness",
]


@dataclass(frozen=True)
class AnomalyType:
    name: str
    family: Family
    bad: Bad
    rank: Rank
    meaning: str  # one sentence for a reader who does not know Jepsen


CATALOGUE: tuple[AnomalyType, ...] = (
    AnomalyType(
        "lost-write",
        "visibility",
        "always",
        "found",
        "A write that must have committed was never read, although consumers read later "
        "records of the same key: acknowledged data disappeared.",
    ),
    AnomalyType(
        "unseen",
        "visibility",
        "always",
        "found",
        "At the end of the run, values acknowledged to producers had never been read by any "
        "consumer: lost, or still invisible after the drain.",
    ),
    AnomalyType(
        "duplicate",
        "log truth",
        "always",
        "found",
        "One value sits at two or more offsets of a key: a record was written twice.",
    ),
    AnomalyType(
        "inconsistent-offsets",
        "log truth",
        "always",
        "found",
        "One offset of a key holds two or more different values: consumers disagree about "
        "the log's contents.",
    ),
    AnomalyType(
        "G1a",
        "visibility",
        "always",
        "found",
        "A consumer read a value that only aborted (failed) operations wrote: an aborted "
        "write became visible.",
    ),
    AnomalyType(
        "precommitted-read",
        "visibility",
        "always",
        "found",
        "An operation's poll returned a value that the same operation was still sending: "
        "uncommitted data was visible to a read_committed consumer.",
    ),
    AnomalyType(
        "torn-transaction",
        "visibility",
        "always",
        "found",
        "A committed transaction is visible on some keys and lost on others: it was not atomic.",
    ),
    AnomalyType(
        "poll-skip",
        "consumer order",
        "assign",
        "jump",
        "A consumer's next read of a key jumped past records it never read.",
    ),
    AnomalyType(
        "nonmonotonic-poll",
        "consumer order",
        "assign",
        "back",
        "A consumer's next read of a key went backwards or repeated an offset.",
    ),
    AnomalyType(
        "int-poll-skip",
        "consumer order",
        "always",
        "jump",
        "Within one operation, a consumer's reads of a key skipped over records.",
    ),
    AnomalyType(
        "int-nonmonotonic-poll",
        "consumer order",
        "always",
        "back",
        "Within one operation, a consumer's reads of a key went backwards or repeated.",
    ),
    AnomalyType(
        "nonmonotonic-send",
        "producer order",
        "always",
        "back",
        "A producer's next send to a key landed at an earlier offset than its previous one.",
    ),
    AnomalyType(
        "int-nonmonotonic-send",
        "producer order",
        "always",
        "back",
        "Within one operation, a later send to a key landed at an earlier offset.",
    ),
    AnomalyType(
        "int-send-skip",
        "producer order",
        "never",
        "jump",
        "Within one operation, another producer's record landed between two sends to a key "
        "(normal for Kafka: sends are not isolated).",
    ),
    AnomalyType(
        "G0",
        "cycles",
        "never",
        "cycle",
        "A cycle of write-write dependencies between operations (normal for Kafka, which "
        "does not order writes across keys).",
    ),
    AnomalyType(
        "G1c",
        "cycles",
        "cycle",
        "cycle",
        "A cycle of dependencies including write-read edges: operations observed each "
        "other's writes circularly.",
    ),
    AnomalyType(
        "G0-realtime",
        "cycles",
        "never",
        "cycle",
        "A write-write cycle that also uses real-time order: an operation's writes were "
        "ordered before those of an operation that finished before it started.",
    ),
    AnomalyType(
        "G1c-realtime",
        "cycles",
        "cycle",
        "cycle",
        "A dependency cycle that also uses real-time order: an operation saw the effects of "
        "one that had not yet started.",
    ),
    AnomalyType(
        "cycle-search-timeout",
        "search",
        "never",
        "found",
        "The search for dependency cycles ran out of time, so isolation could not be fully "
        "checked.",
    ),
    AnomalyType(
        "eos-duplicate",
        "exactly-once",
        "always",
        "found",
        "Exactly-once copy: an input record appears more than once in the output topic.",
    ),
    AnomalyType(
        "eos-loss",
        "exactly-once",
        "always",
        "found",
        "Exactly-once copy: an input record that was consumed and committed never appeared "
        "in the output topic.",
    ),
    # Liveness: reported as metrics; anomaly types only with liveness_bad.
    AnomalyType(
        "starvation",
        "liveness",
        "liveness",
        "found",
        "Consumers fell behind: in some window they read under the threshold share of the "
        "values acknowledged there, even allowing for normal end-to-end lag.",
    ),
    AnomalyType(
        "stuck-partition",
        "liveness",
        "liveness",
        "found",
        "A key held an acknowledged value that no consumer read for longer than the threshold.",
    ),
    AnomalyType(
        "slow-recovery",
        "liveness",
        "liveness",
        "found",
        "After a fault healed, sends or reads took longer than the threshold to succeed again.",
    ),
    AnomalyType(
        "memory-growth",
        "liveness",
        "liveness",
        "found",
        "A broker's memory (outside the JVM heap when sampled) kept growing over the later "
        "half of its life by more than the threshold (bytes and share of its settled size).",
    ),
    AnomalyType(
        "throughput-collapse",
        "liveness",
        "liveness",
        "found",
        "The cluster stopped accepting work: in some windows the values acknowledged fell "
        "under the threshold share of the run's own median window, beyond what faults allow.",
    ),
    AnomalyType(
        "behind",
        "liveness",
        "liveness",
        "found",
        "The background load (--load) fell behind: in some window its consumers read under "
        "97% of the messages offered, or its end-to-end p99 was over 5 s.",
    ),
)

BY_NAME: dict[str, AnomalyType] = {t.name: t for t in CATALOGUE}
SAFETY: tuple[AnomalyType, ...] = tuple(t for t in CATALOGUE if t.family != "liveness")
LIVENESS: tuple[AnomalyType, ...] = tuple(t for t in CATALOGUE if t.family == "liveness")
ALWAYS_BAD: frozenset[str] = frozenset(t.name for t in CATALOGUE if t.bad == "always")
NEVER_BAD: frozenset[str] = frozenset(t.name for t in CATALOGUE if t.bad == "never")


def is_bad(name: str, wr_only_cycle: bool, sub_via: str, ww_deps: bool) -> bool:
    """Whether anomaly `name` makes the run invalid under these options.

    wr_only_cycle: some example of a cycle type is a cycle of wr edges only.
    A liveness type is bad whenever it is reported: it is reported as an anomaly
    type only when the run is checked with liveness_bad. A type with no row is bad
    until someone decides otherwise.
    """
    t = BY_NAME.get(name)
    if t is None:
        return True
    if t.bad == "assign":
        return sub_via != "subscribe"
    if t.bad == "cycle":
        return (not ww_deps) or wr_only_cycle
    return t.bad != "never"
