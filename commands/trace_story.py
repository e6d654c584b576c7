"""`ktrial trace`'s second half: what the brokers' own logs (``logs/*-server.log``, kept
by every run) say about one anomaly — the transaction's coordinator, the leadership,
truncation and high watermark of its partitions, the controller fencing brokers —
as one time line across nodes, in the history's seconds.

It needs no kept data, so it works on every run, a CI run's included. The
transaction is found by the ``txn_id`` ktrial's workloads write on each ``txn``
invoke (docs/history-format.md); without it (another tool's history) only the
partitions are followed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..clusters import serverlog
from ..histories import iter_history
from ..nemesis.roles import coordinator_partition

BEFORE_S = 5.0  # the time line starts this long before the op was invoked
AFTER_S = 30.0  # and ends this long after it completed (a coordinator's recovery)
_TXN_STATE = re.compile(r"__transaction_state-(\d+)(?![\w-])")


@dataclass(frozen=True)
class WriterOp:
    """The op that sent what is being traced: when it ran and under which txn id."""

    index: int
    process: object
    type: str
    invoked_s: float
    completed_s: float
    txn_id: str | None


def writer_ops(history: Path, indexes: Iterable[int]) -> dict[int, WriterOp]:
    """The ops whose completions have these indexes, each with its invoke's time and
    ``txn_id`` (one pass over the history, however many anomalies are traced)."""
    wanted = set(indexes)
    invokes: dict[object, tuple[float, str | None]] = {}
    out: dict[int, WriterOp] = {}
    if not wanted:
        return out
    for op in iter_history(history, ignore_unknown_f=True):
        if op.type == "invoke":
            tid = op.extra.get("txn_id") if isinstance(op.extra, dict) else None
            invokes[op.process] = (op.time / 1e9, tid if isinstance(tid, str) else None)
            continue
        if op.index in wanted:
            t0, tid = invokes.get(op.process, (op.time / 1e9, None))
            out[op.index] = WriterOp(op.index, op.process, op.type, t0, op.time / 1e9, tid)
            if len(out) == len(wanted):
                break
    return out


def read_logs(logs: Sequence[Path]) -> list[serverlog.LogLine]:
    """Every timestamped line of these ``<node>-server.log`` files."""
    out: list[serverlog.LogLine] = []
    for path in logs:
        node = path.name.removesuffix("-server.log")
        with path.open(encoding="utf-8", errors="replace") as f:
            out.extend(serverlog.parse(node, f))
    return out


def txn_state_partitions(lines: Iterable[serverlog.LogLine]) -> int | None:
    """How many ``__transaction_state`` partitions the brokers' logs name (None: none)."""
    top = -1
    for line in lines:
        for m in _TXN_STATE.finditer(line.text):
            top = max(top, int(m.group(1)))
    return top + 1 if top >= 0 else None


def story_text(
    lines: list[serverlog.LogLine],
    op: WriterOp,
    partitions: Sequence[str],
    wall0: float,
) -> list[str]:
    """The time line for `op` on `partitions`, as lines to print."""
    followed = list(partitions)
    head = f"-- the brokers' logs (logs/*-server.log) about partitions {', '.join(partitions)}"
    if op.txn_id:
        n = txn_state_partitions(lines)
        head += f" and transactional id {op.txn_id}"
        if n:
            coord = f"__transaction_state-{coordinator_partition(op.txn_id, n)}"
            followed.append(coord)
            head += f" (coordinator partition {coord})"
    else:
        head += " (the history names no txn_id for this op: its coordinator is not followed)"
    lo, hi = op.invoked_s - BEFORE_S, op.completed_s + AFTER_S
    head += f", {lo:.1f}-{hi:.1f} s:"
    ids = [op.txn_id] if op.txn_id else []
    found = serverlog.story(lines, ids, followed, wall0 + lo, wall0 + hi)
    out = [head]
    for line in found:
        again = ""
        if line.repeats > 1 and line.last_at is not None:
            again = f"  (x{line.repeats}, until {line.last_at - wall0:.3f} s)"
        out.append(f"  {line.at - wall0:8.3f} s  {line.node:<4} {line.level:<5} {line.text}{again}")
    if not found:
        out.append("  (nothing: no such lines in that window)")
    for d in serverlog.stale_decisions(found, ids):
        out.append(
            f"-- {d.node} led {d.partition} from offset {d.from_offset}, above its high "
            f"watermark {d.high_watermark} ({d.led_at - wall0:.3f} s), sent {d.result} markers "
            f"for {d.txn_id} ({d.decided_at - wall0:.3f} s), then truncated {d.partition} to "
            f"{d.truncated_to} ({d.truncated_at - wall0:.3f} s): the decision may rest on "
            "records no other replica had — the path of Kafka's transaction coordinator in "
            "bench/findings/2026-12-02-ssh-torn-txn (it loads its partition up to the log end)."
        )
    return out
