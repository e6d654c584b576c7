"""Read brokers' log segments with Kafka's own DumpLogSegments, to trace an anomaly to disk.

A lost or hidden write is a claim about the log: which records sit around an offset,
which producer (id, epoch) wrote them, whether they belong to a transaction, and which
COMMIT or ABORT marker closed it. ``ktrial run --keep-data`` copies every node's data
directory into the run; this module dumps a partition's segments there and parses the
output (``parse_segment_dump``), and decodes the transaction coordinator's own log
(``__transaction_state``) into the state transitions of each transactional id
(``parse_txn_log_dump``). The parsers are pure; ``dump`` is the one side effect.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

# TransactionState ids as the coordinator writes them to __transaction_state
TXN_STATUS = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}

_BATCH = re.compile(
    r"^baseOffset: (?P<base>-?\d+) lastOffset: (?P<last>-?\d+) .*?"
    r"producerId: (?P<pid>-?\d+) producerEpoch: (?P<epoch>-?\d+) "
    r"partitionLeaderEpoch: (?P<lepoch>-?\d+) isTransactional: (?P<txn>true|false) "
    r"isControl: (?P<ctl>true|false)"
)
_RECORD = re.compile(r"^\| offset: (?P<off>-?\d+) CreateTime: (?P<ts>-?\d+)")
_PAYLOAD = re.compile(r" payload: (?P<payload>.*)$")
_MARKER = re.compile(r" endTxnMarker: (?P<m>[A-Z]+) coordinatorEpoch: (?P<ce>-?\d+)")
_TXN_KEY = re.compile(r" key: (?P<key>\{.*?\}) payload: (?P<payload>.*)$")


_DUMPING = "Dumping "


class DumpError(RuntimeError):
    """DumpLogSegments could not run or the data is missing (the message says what to do)."""


@dataclass(frozen=True)
class LogRecord:
    """One record of a partition's log as the broker stored it."""

    offset: int
    producer_id: int
    producer_epoch: int
    leader_epoch: int
    transactional: bool
    control: bool
    create_ms: int
    value: str | None  # the payload of a data record
    marker: str | None  # COMMIT / ABORT for a control record
    coordinator_epoch: int | None

    def describe(self) -> str:
        who = f"pid {self.producer_id} epoch {self.producer_epoch}"
        if self.marker:
            what = f"{self.marker} marker (coordinator epoch {self.coordinator_epoch})"
        elif self.control:
            what = "control record"
        else:
            what = f"value {self.value}" + (" (transactional)" if self.transactional else "")
        return f"offset {self.offset}: {what}, {who}, leader epoch {self.leader_epoch}"


@dataclass(frozen=True)
class TxnTransition:
    """One record of __transaction_state: a transactional id's state after a change."""

    partition: str
    offset: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    status: str
    partitions: tuple[str, ...]
    update_ms: int

    def describe(self) -> str:
        parts = ", ".join(self.partitions) if self.partitions else "-"
        return (
            f"{self.transactional_id} pid {self.producer_id} epoch {self.producer_epoch}: "
            f"{self.status} [{parts}] at {self.update_ms} ms ({self.partition}@{self.offset})"
        )


def parse_segment_dump(text: str) -> list[LogRecord]:
    """Records of ``DumpLogSegments --deep-iteration --print-data-log`` output (pure)."""
    out: list[LogRecord] = []
    batch: re.Match[str] | None = None
    for line in text.splitlines():
        if line.startswith("baseOffset:"):
            batch = _BATCH.match(line)
            continue
        m = _RECORD.match(line)
        if m is None or batch is None:
            continue
        marker = _MARKER.search(line)
        payload = _PAYLOAD.search(line)
        out.append(
            LogRecord(
                offset=int(m["off"]),
                producer_id=int(batch["pid"]),
                producer_epoch=int(batch["epoch"]),
                leader_epoch=int(batch["lepoch"]),
                transactional=batch["txn"] == "true",
                control=batch["ctl"] == "true",
                create_ms=int(m["ts"]),
                value=payload["payload"] if payload and not marker else None,
                marker=marker["m"] if marker else None,
                coordinator_epoch=int(marker["ce"]) if marker else None,
            )
        )
    return out


def parse_segment_dumps(text: str) -> dict[str, list[LogRecord]]:
    """Records per dumped file of a multi-file dump ("Dumping <file>" headers; pure)."""
    chunks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(_DUMPING):
            current = chunks.setdefault(line[len(_DUMPING) :].strip(), [])
        elif current is not None:
            current.append(line)
    return {f: parse_segment_dump("\n".join(lines)) for f, lines in chunks.items()}


def parse_txn_log_dump(text: str) -> list[TxnTransition]:
    """Transitions of ``DumpLogSegments --transaction-log-decoder`` output (pure).

    Each record is attributed to the partition directory of the file being dumped.
    """
    out: list[TxnTransition] = []
    partition = ""
    for line in text.splitlines():
        if line.startswith(_DUMPING):
            partition = Path(line[len(_DUMPING) :].strip()).parent.name
            continue
        m = _RECORD.match(line)
        k = _TXN_KEY.search(line)
        if m is None or k is None:
            continue
        try:
            key: Any = orjson.loads(k["key"])
            value: Any = orjson.loads(k["payload"])
        except orjson.JSONDecodeError:
            continue  # a tombstone ("<DELETE>") or a record of another type
        data = value.get("data") if isinstance(value, dict) else None
        kdata = key.get("data") if isinstance(key, dict) else None
        if not isinstance(data, dict) or not isinstance(kdata, dict):
            continue
        parts: list[str] = []
        for tp in data.get("transactionPartitions") or []:
            parts += [f"{tp.get('topic')}-{p}" for p in tp.get("partitionIds") or []]
        out.append(
            TxnTransition(
                partition=partition,
                offset=int(m["off"]),
                transactional_id=str(kdata.get("transactionalId")),
                producer_id=int(data.get("producerId", -1)),
                producer_epoch=int(data.get("producerEpoch", -1)),
                status=TXN_STATUS.get(int(data.get("transactionStatus", -1)), "?"),
                partitions=tuple(parts),
                update_ms=int(data.get("transactionLastUpdateTimestampMs", -1)),
            )
        )
    return out


def segment_files(partition_dir: Path) -> list[Path]:
    return sorted(partition_dir.glob("*.log"))


def dump(
    files: list[Path], java: str, classpath: str, txn_decoder: bool = False, timeout: float = 120
) -> str:
    """Run Kafka's DumpLogSegments on `files` and return its output."""
    if not files:
        return ""
    cmd = [java, "-cp", classpath, "kafka.tools.DumpLogSegments"]
    cmd += (
        ["--transaction-log-decoder"] if txn_decoder else ["--deep-iteration", "--print-data-log"]
    )
    cmd += ["--files", ",".join(str(f) for f in files)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DumpError(f"DumpLogSegments failed on {files[0].parent}: {e}") from None
    if proc.returncode != 0:
        raise DumpError(
            f"DumpLogSegments failed on {files[0].parent} (exit {proc.returncode}): "
            f"{proc.stderr.strip()[-500:]}"
        )
    return proc.stdout


def window(records: list[LogRecord], offset: int, radius: int) -> list[LogRecord]:
    """The records within `radius` offsets of `offset` (pure)."""
    return [r for r in records if abs(r.offset - offset) <= radius]
