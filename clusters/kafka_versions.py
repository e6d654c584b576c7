"""The Apache Kafka versions ktrial runs, and what each one can be asked for.

One row per release line (`3.9`, `4.1`, ...): the exact version tested here, and the
differences that change how a node is formatted or what a run can choose: whether
`kafka-storage format` takes `--feature` (3.9 on), which levels of the
`transaction.version` feature it accepts (0..2 from 4.0; 2 is KIP-890's transactions
v2, 0 and 1 the classic protocol), whether the Eligible Leader Replicas feature exists,
whether ZooKeeper mode still exists and how far the KIP-848 consumer group protocol
had got. docs/systems.md ("Apache Kafka") is this table in prose; a test keeps them
in step. Pure data and pure functions: nothing here touches the network or disk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ktrial's `--transaction-version` values: 1 = the classic protocol, 2 = KIP-890 part 2.
TRANSACTION_VERSIONS = (1, 2)
TRANSACTION_FEATURE = "transaction.version"
ELR_FEATURE = "eligible.leader.replicas.version"


@dataclass(frozen=True)
class KafkaLine:
    """What one release line of Apache Kafka offers ktrial."""

    line: str  # "major.minor"
    tested: str  # the exact version the integration tests run
    format_features: bool  # `kafka-storage format --feature NAME=LEVEL` exists
    transaction_levels: tuple[int, ...]  # transaction.version levels format accepts
    default_transaction_level: int | None  # the level a fresh cluster gets (None: no feature)
    elr_feature: bool  # eligible.leader.replicas.version can be set at format time
    kraft_only: bool  # ZooKeeper mode removed
    consumer_protocol: str  # the KIP-848 group protocol: "early access", "preview", "GA"

    @property
    def choosable_transaction_versions(self) -> tuple[int, ...]:
        """The `--transaction-version` values this line takes."""
        return tuple(v for v in TRANSACTION_VERSIONS if v in self.transaction_levels)


LINES: tuple[KafkaLine, ...] = (
    KafkaLine("3.7", "3.7.2", False, (), None, False, False, "early access"),
    KafkaLine("3.9", "3.9.2", True, (0,), 0, False, False, "preview"),
    KafkaLine("4.0", "4.0.2", True, (0, 1, 2), 2, True, True, "GA"),
    KafkaLine("4.1", "4.1.1", True, (0, 1, 2), 2, True, True, "GA"),
)
_BY_LINE = {ln.line: ln for ln in LINES}
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-[A-Za-z0-9.]+)?$")


class UnsupportedVersion(ValueError):
    """A Kafka version or transaction version ktrial does not run; the message says what does."""


def supported_text() -> str:
    """ "3.7 (tested 3.7.2), 3.9 (tested 3.9.2), ..." for error messages and --help."""
    return ", ".join(f"{ln.line}.x (tested {ln.tested})" for ln in LINES)


def _parts(version: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(version)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def line_of(version: str) -> KafkaLine | None:
    """The table's row for `version` (any patch release of a listed line), else None."""
    p = _parts(version)
    return _BY_LINE.get(f"{p[0]}.{p[1]}") if p else None


def check_supported(version: str) -> KafkaLine:
    """The row of a version ktrial may fetch and run, or UnsupportedVersion naming the
    supported lines."""
    if _parts(version) is None:
        raise UnsupportedVersion(
            f"not a Kafka version: {version!r} (expected MAJOR.MINOR.PATCH, e.g. "
            f"{LINES[-1].tested}); supported: {supported_text()}"
        )
    row = line_of(version)
    if row is None:
        raise UnsupportedVersion(
            f"Kafka {version} is not a supported version; supported: {supported_text()} "
            "(or point KAFKA_HOME at an unpacked distribution to run it untested)"
        )
    return row


def capabilities(version: str) -> KafkaLine:
    """The row to use for an installed `version`: its own line, else the nearest listed
    line below it (a KAFKA_HOME distribution of an unlisted release), else the oldest."""
    row = line_of(version)
    if row is not None:
        return row
    p = _parts(version)
    if p is None:
        return LINES[0]
    below = [ln for ln in LINES if tuple(map(int, ln.line.split("."))) <= p[:2]]
    return below[-1] if below else LINES[0]


def check_transaction_version(row: KafkaLine, version: str, wanted: int | None) -> None:
    """Refuse a `--transaction-version` the line cannot format (UnsupportedVersion)."""
    if wanted is None:
        return
    if wanted not in TRANSACTION_VERSIONS:
        raise UnsupportedVersion(
            f"--transaction-version must be one of {', '.join(map(str, TRANSACTION_VERSIONS))}"
            f", not {wanted}"
        )
    if wanted not in row.choosable_transaction_versions:
        with_feature = [ln.line for ln in LINES if ln.choosable_transaction_versions]
        raise UnsupportedVersion(
            f"Kafka {version} has no transaction.version feature to choose: it always runs "
            f"the classic transaction protocol (v1); --transaction-version needs Kafka "
            f"{' or '.join(with_feature)} (e.g. --kafka-version {LINES[-1].tested})"
        )


def transaction_protocol(level: int | None) -> str:
    """The broker's transaction protocol for a finalized transaction.version level
    (None: the version has no such feature, so the classic one)."""
    return "v2" if level is not None and level >= 2 else "v1"
