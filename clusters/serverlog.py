"""Kafka brokers' ``server.log``, read back to tell what the brokers did about one
transaction or one partition (pure; `ktrial trace` uses it).

A run keeps every node's ``server.log`` in its ``logs/`` directory. Lines start with
``[yyyy-MM-ddTHH:mm:ss,SSS]`` (log4j's ISO8601 layout, the broker's local time, an
offset such as ``+01:00`` or ``Z`` after it when the layout has one) and a level; the
lines that follow without a timestamp (stack traces, a config dump) belong to the line
before and are dropped.

:func:`story` keeps, within a time window, the lines a person tracing an anomaly reads
by hand:

- every line that names one of the transactional ids (the coordinator loading,
  initialising, appending and sending markers for it);
- lines that name one of the partitions (the data partitions and the transaction
  id's ``__transaction_state`` partition) *and* report a change of its state —
  leadership and epoch, truncation, the high watermark, ISR changes, unclean
  elections, the coordinator loading or unloading (markers of *other* transactions
  on those partitions are left out);
- cluster-wide events that explain those: a broker fenced by the controller, a new
  KRaft leader, a broker's unclean shutdown.

Names match as whole tokens: ``topic-1`` does not match ``topic-10``, ``...-w6`` not
``...-w60``. A line a node repeats word for word (a marker retried every few
milliseconds) is shown once, with how many times and until when.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo

# [2026-12-02T15:29:34,482] INFO text   (also "2026-12-02 15:29:34,482", and an offset)
_HEAD = re.compile(
    r"^\[(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)[,.](\d{3})(Z|[+-]\d\d:?\d\d)?\]\s+"
    r"(TRACE|DEBUG|INFO|WARN|ERROR|FATAL)\s+(.*)$"
)
# A partition's state changed (the line must also name the partition).
_PARTITION_EVENT = re.compile(
    r"starts at leader epoch|Truncat|high watermark|[Ss]hrinking ISR|[Ee]xpanding ISR|"
    r"ISR updated|UNCLEAN|[Uu]nclean|RECOVERING|elected|[Ll]oading transaction metadata|"
    r"[Uu]nloaded transaction metadata|[Ff]inished loading"
)
# Cluster-wide events behind a partition's: fencing, KRaft leadership, unclean shutdowns.
_CLUSTER_EVENT = re.compile(
    r"BrokerRegistrationChangeRecord.*fenced=1|[Ff]encing broker|unclean shutdown|"
    r"In the new epoch \d+, the leader is|Completed transition to Leader"
)
# Lines that name a partition and a state word without being a change of its state.
_NOT_EVENTS = re.compile(
    r"Skipped the become-|Error in response for fetch request|Replayed PartitionRecord for new"
)
MAX_TEXT = 400  # characters of a line kept (the fetcher's lines run to tens of KB)


@dataclass(frozen=True)
class LogLine:
    node: str
    at: float  # seconds since the epoch
    level: str
    text: str
    repeats: int = 1  # the same text from the same node, this many times in the window
    last_at: float | None = None  # when it was last seen (repeats > 1)


def parse(node: str, lines: Iterable[str], local: tzinfo | None = None) -> Iterator[LogLine]:
    """The timestamped lines of one node's server.log. A timestamp without an offset is
    in `local` (the machine's local zone when None)."""
    for raw in lines:
        m = _HEAD.match(raw)
        if m is None:
            continue  # a continuation line (stack trace, config dump) or garbage
        day, clock, millis, zone, level, text = m.groups()
        try:
            when = datetime.fromisoformat(f"{day}T{clock}.{millis}")
        except ValueError:
            continue
        if zone:
            when = when.replace(tzinfo=_zone(zone))
        elif local is not None:
            when = when.replace(tzinfo=local)
        else:
            when = when.astimezone()  # naive: the local zone
        yield LogLine(node, when.timestamp(), level, text.rstrip())


def _zone(text: str) -> tzinfo:
    if text == "Z":
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4])))


def _tokens(names: Iterable[str]) -> re.Pattern[str] | None:
    names = sorted({n for n in names if n}, key=len, reverse=True)
    if not names:
        return None
    alts = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?<![\w.-])(?:{alts})(?![\w-])")


def story(
    lines: Iterable[LogLine],
    txn_ids: Iterable[str],
    partitions: Iterable[str],
    lo: float,
    hi: float,
) -> list[LogLine]:
    """The lines between `lo` and `hi` (epoch seconds) about these transactional ids and
    partitions (``topic-N`` names), and the cluster events around them; by time, then
    node. Each text is cut to MAX_TEXT characters."""
    ids, parts = _tokens(txn_ids), _tokens(partitions)
    out: list[LogLine] = []
    seen: dict[tuple[str, str], int] = {}  # (node, text) -> its index in out
    for line in sorted(lines, key=lambda x: (x.at, x.node)):
        if not lo <= line.at <= hi:
            continue
        text = line.text
        keep = (
            (ids is not None and ids.search(text) is not None)
            or (
                parts is not None
                and parts.search(text) is not None
                and _PARTITION_EVENT.search(text) is not None
                and _NOT_EVENTS.search(text) is None
            )
            or _CLUSTER_EVENT.search(text) is not None
        )
        if not keep:
            continue
        cut = text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
        first = seen.get((line.node, cut))
        if first is None:
            seen[(line.node, cut)] = len(out)
            out.append(LogLine(line.node, line.at, line.level, cut))
        else:
            was = out[first]
            out[first] = LogLine(was.node, was.at, was.level, cut, was.repeats + 1, line.at)
    return out


_LEAD = re.compile(
    r"Leader (\S+) with topic id .*? starts at leader epoch \d+ from offset (\d+) "
    r"with partition epoch \d+, high watermark (\d+)"
)
_MARKERS = re.compile(r"Sending txn markers for \w+\(([^,]+),\d+,(COMMIT|ABORT),")
_TRUNCATE = re.compile(r"partition=([^,\s]+), dir=[^\]]*\] Truncating to offset (\d+)")


@dataclass(frozen=True)
class StaleDecision:
    """A coordinator that led its ``__transaction_state`` partition with records above
    the high watermark, decided a transaction from them, and then lost that tail."""

    node: str
    partition: str
    from_offset: int
    high_watermark: int
    led_at: float
    txn_id: str
    result: str  # COMMIT or ABORT
    decided_at: float
    truncated_to: int
    truncated_at: float


def stale_decisions(lines: Iterable[LogLine], txn_ids: Iterable[str]) -> list[StaleDecision]:
    """Each time a node became leader of a ``__transaction_state`` partition from an
    offset above its high watermark, then sent markers for one of `txn_ids`, then
    truncated that partition below the offset it led from (pure; lines by time).

    The path of bench/findings/2026-12-02-ssh-torn-txn: the transaction coordinator
    loads its partition up to the log end, so a restarted broker still named leader
    acts on records its followers never had; when another replica takes over, the
    decision it carried to some partitions is unmade on the others."""
    ids = set(txn_ids)
    led: dict[tuple[str, str], tuple[int, int, float]] = {}  # (node, partition) -> from, hw, t
    decided: dict[tuple[str, str], list[tuple[str, str, float]]] = {}
    out = []
    for line in sorted(lines, key=lambda x: (x.at, x.node)):
        m = _LEAD.search(line.text)
        if m and m.group(1).startswith("__transaction_state-"):
            key = (line.node, m.group(1))
            start, hw = int(m.group(2)), int(m.group(3))
            if start > hw:
                led[key] = (start, hw, line.at)
                decided[key] = []
            else:
                led.pop(key, None)
            continue
        m = _MARKERS.search(line.text)
        if m and m.group(1) in ids:
            for key in led:
                if key[0] == line.node:
                    decided[key].append((m.group(1), m.group(2), line.at))
            continue
        m = _TRUNCATE.search(line.text)
        if m:
            key = (line.node, m.group(1))
            if key in led and int(m.group(2)) < led[key][0]:
                start, hw, t = led.pop(key)
                for tid, result, at in decided.pop(key, []):
                    out.append(
                        StaleDecision(
                            line.node,
                            m.group(1),
                            start,
                            hw,
                            t,
                            tid,
                            result,
                            at,
                            int(m.group(2)),
                            line.at,
                        )
                    )
    return out
