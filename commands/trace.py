"""`ktrial trace RUN_DIR`: follow an anomaly from the history down to the brokers' logs.

For a key and an offset (by default: each lost write and each torn transaction in
results.json) it prints two things.

- When the run kept its data (`ktrial run --keep-data`): for every node, the records
  around that offset as the broker stored them — value, producer id and epoch,
  transactional or not, COMMIT/ABORT markers — each value tied to the history op that
  sent it; then the transaction coordinator's record (`__transaction_state`) of the
  producers involved, and the faults active around that time.
- Always, when the run has the brokers' logs (`logs/*-server.log`, every run keeps
  them): what those logs say about the op's transactional id and partitions, as one
  time line across nodes (:mod:`.trace_story`).

Exit code 0, or 254 when there is nothing to trace (neither kept data nor logs,
unknown key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..clusters import dumplog
from ..histories.store import RunDir, load_json
from ..histories.testmeta import TestMeta
from . import trace_story

# The anomalies followed by default (their examples name the op and the offset).
TRACEABLE = frozenset({"lost-write", "torn-transaction"})


@dataclass(frozen=True)
class Target:
    key: str
    offset: int
    why: str
    value: str | None = None  # the lost value, when tracing a lost write
    writer: int | None = None  # the op that sent it (its completion's index), when known
    keys: tuple[str, ...] = ()  # every key the writer's transaction touched (a torn one)


@dataclass(frozen=True)
class Sent:
    op: int
    process: Any
    type: str
    time_s: float


def _targets(rd: RunDir, key: str | None, offset: int | None) -> list[Target]:
    if key is not None and offset is not None:
        return [Target(key, offset, "asked", writer=_writer_at(rd, key, offset))]
    if key is not None or offset is not None:
        raise click.UsageError(
            "give both --key and --offset, or neither (lost writes and torn transactions)"
        )
    try:
        results = load_json(rd.results)
    except OSError:
        raise click.UsageError(f"{rd.results} is missing: give --key and --offset") from None
    anomalies = results.get("anomalies") or {}
    out = []
    # torn transactions first: their time line follows every partition of the
    # transaction, so a lost write of the same op needs no second one
    for ex in anomalies.get("torn-transaction", {}).get("examples", []):
        ops, lost = ex.get("ops") or [], ex.get("lost_at") or []
        first = next((x for x in lost if x.get("offset") is not None), None)
        if not ops or not isinstance(ops[0], int) or first is None:
            continue
        keys = tuple(str(k) for k in [*ex.get("keys_visible", []), *ex.get("keys_lost", [])])
        why = f"torn transaction of op {ops[0]}: value {first.get('value')} never visible"
        value = str(first.get("value"))
        out.append(Target(str(first["key"]), int(first["offset"]), why, value, ops[0], keys))
    for ex in anomalies.get("lost-write", {}).get("examples", []):
        if ex.get("offset") is not None:
            why = f"lost write of value {ex.get('value')} (op {ex.get('writer')})"
            writer = ex.get("writer") if isinstance(ex.get("writer"), int) else None
            out.append(Target(str(ex["key"]), int(ex["offset"]), why, str(ex.get("value")), writer))
    if not out:
        raise click.UsageError(
            "results.json lists no lost write or torn transaction with an offset: "
            "give --key/--offset"
        )
    return out


def _writer_at(rd: RunDir, key: str, offset: int) -> int | None:
    """The op whose send to `key` was acknowledged at `offset` (None: no such op)."""
    from ..histories import iter_history
    from ..histories.model import Send

    for op in iter_history(rd.history, ignore_unknown_f=True):
        if op.type == "invoke" or not op.is_data or not isinstance(op.value, list):
            continue
        for m in op.value:
            if isinstance(m, Send) and str(m.key) == key and m.offset == offset:
                return op.index
    return None


def _senders(rd: RunDir, key: str) -> dict[str, Sent]:
    """Value (as the broker stores it: text) -> the op that sent it to `key`."""
    from ..histories import iter_history
    from ..histories.model import Send

    out: dict[str, Sent] = {}
    for op in iter_history(rd.history):
        if op.type == "invoke" or not op.is_data or not isinstance(op.value, list):
            continue
        for m in op.value:
            if isinstance(m, Send) and str(m.key) == key:
                out[str(m.value)] = Sent(op.index, op.process, op.type, op.time / 1e9)
    return out


def _faults(rd: RunDir, lo_s: float, hi_s: float) -> list[str]:
    from ..histories import iter_history

    out = []
    for op in iter_history(rd.history):
        if op.is_client or op.f == "node-stats":
            continue
        t = op.time / 1e9
        if lo_s <= t <= hi_s:
            out.append(f"  {t:8.3f} s  {op.f} {op.value}")
    return out


def _txn_log(data: Path, java: str, classpath: str) -> list[dumplog.TxnTransition]:
    files = [
        f
        for part in sorted(data.glob("*/__transaction_state-*"))
        for f in dumplog.segment_files(part)
    ]
    seen: dict[tuple[str, int], dumplog.TxnTransition] = {}
    for t in dumplog.parse_txn_log_dump(dumplog.dump(files, java, classpath, txn_decoder=True)):
        seen.setdefault((t.partition, t.offset), t)  # every replica holds the same records
    return sorted(seen.values(), key=lambda t: (t.update_ms, t.partition, t.offset))


@click.command("trace")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--key", "key", help="History key to trace (with --offset).")
@click.option("--offset", type=int, help="Offset of that key's partition.")
@click.option(
    "--radius",
    type=click.IntRange(0),
    default=6,
    show_default=True,
    help="Records shown on each side of the offset.",
)
def trace(run_dir: Path, key: str | None, offset: int | None, radius: int) -> None:
    """Follow an anomaly (default: each lost write and torn transaction) into the brokers.

    Shows what the brokers' own logs (logs/*-server.log, kept by every run) say about
    the op's transactional id and partitions, as one time line; and, for a run made
    with `ktrial run --keep-data`, the records every replica holds around the offset.
    Examples:

      ktrial trace store/queue/latest

      ktrial trace store/queue/latest --key 3 --offset 302
    """
    try:
        _trace(run_dir, key, offset, radius)
    except dumplog.DumpError as e:
        raise click.ClickException(f"{e} (is {run_dir / 'data'} a copy ktrial made?)") from None


def _trace(run_dir: Path, key: str | None, offset: int | None, radius: int) -> None:
    rd = RunDir(run_dir)
    data = rd.path / "data"
    logs = sorted(rd.logs.glob("*-server.log")) if rd.logs.is_dir() else []
    if not data.is_dir() and not logs:
        raise click.UsageError(
            f"{rd.path} has neither broker data (data/: run again with `ktrial run "
            "--keep-data`) nor the brokers' logs (logs/*-server.log)"
        )
    try:
        test = TestMeta.read(rd.test_json)
    except ValueError as e:
        raise click.UsageError(f"{rd.test_json}: unreadable test.json ({e})") from None
    keys = test.keys
    wall0 = test.history_wall_start or 0.0
    records = _Records(rd, test, radius) if data.is_dir() else None
    lines = trace_story.read_logs(logs) if logs else []
    if records is None:
        click.echo(
            f"(no broker data in {rd.path}: the records themselves are not shown; "
            "`ktrial run --keep-data` keeps them)"
        )
    followed: set[tuple[int, tuple[str, ...]]] = set()  # (op, partitions) whose logs were shown
    targets = _targets(rd, key, offset)
    writers = (
        trace_story.writer_ops(rd.history, [t.writer for t in targets if t.writer is not None])
        if lines
        else {}
    )
    for tg in targets:
        tp = keys.get(tg.key)
        if not isinstance(tp, dict):
            raise click.UsageError(
                f"key {tg.key} is not in {rd.test_json} (keys: {sorted(keys)[:10]}...)"
            )
        pdir = f"{tp['topic']}-{tp['partition']}"
        click.echo(f"== key {tg.key} = {pdir}, offset {tg.offset}: {tg.why}")
        if records is not None:
            records.show(tg, pdir)
        if not lines:
            continue
        op = writers.get(tg.writer) if tg.writer is not None else None
        if op is None or not wall0:
            why = "test.json has no history_wall_start" if op else "no op sent it"
            click.echo(f"-- the brokers' logs: not followed ({why})")
            continue
        partitions = [pdir]
        for k in tg.keys:
            other = keys.get(k)
            name = f"{other['topic']}-{other['partition']}" if isinstance(other, dict) else None
            if name and name not in partitions:
                partitions.append(name)
        if any(i == op.index and set(partitions) <= set(ps) for i, ps in followed):
            click.echo(f"-- the brokers' logs: as above (op {op.index})")
            continue
        followed.add((op.index, tuple(partitions)))
        for text in trace_story.story_text(lines, op, partitions, wall0):
            click.echo(text)


class _Records:
    """The records a kept run's replicas hold around an offset (needs Java and the jars
    of the run's Kafka version to decode the segments)."""

    def __init__(self, rd: RunDir, test: TestMeta, radius: int) -> None:
        from ..clusters.install import require_java, resolve

        self.rd, self.radius = rd, radius
        self.data = rd.path / "data"
        versions = test.broker_versions or [None]
        self.classpath = resolve(versions[0]).classpath
        self.java = require_java()
        self.wall0 = test.history_wall_start or 0.0
        self.transitions: list[dumplog.TxnTransition] | None = None
        self.nodes = sorted(p for p in self.data.iterdir() if p.is_dir())
        # several lost writes often share a key: read its history and dump its log once
        self.senders_of: dict[str, dict[str, Sent]] = {}
        self.dumps: dict[str, dict[str, list[dumplog.LogRecord]]] = {}

    def show(self, tg: Target, pdir: str) -> None:
        rd, wall0 = self.rd, self.wall0
        if tg.key not in self.senders_of:
            self.senders_of[tg.key] = _senders(rd, tg.key)
        senders = self.senders_of[tg.key]
        if pdir not in self.dumps:
            files = [f for node in self.nodes for f in dumplog.segment_files(node / pdir)]
            self.dumps[pdir] = dumplog.parse_segment_dumps(
                dumplog.dump(files, self.java, self.classpath)
            )
        by_file = self.dumps[pdir]
        pids: set[int] = set()
        times: list[int] = []
        at_offset: list[dumplog.LogRecord] = []
        for node in self.nodes:
            recs = [
                r
                for f, rs in by_file.items()
                if Path(f).parent.parent.name == node.name
                for r in rs
            ]
            if not (node / pdir).is_dir():
                click.echo(f"-- {node.name}: no replica of {pdir}")
                continue
            click.echo(f"-- {node.name}:")
            for r in dumplog.window(recs, tg.offset, self.radius):
                note = ""
                s = senders.get(r.value or "") if not r.control else None
                if s is not None:
                    note = f"  <- op {s.op} (process {s.process}, {s.type}, {s.time_s:.3f} s)"
                mark = ">>" if r.offset == tg.offset else "  "
                if r.offset == tg.offset:
                    at_offset.append(r)
                click.echo(f"{mark} {r.describe()}{note}")
                pids.add(r.producer_id)
                times.append(r.create_ms)
        if not times:
            return
        if tg.value is not None and at_offset:
            click.echo(_verdict(tg, at_offset))
        lo, hi = min(times) - 15_000, max(times) + 15_000
        if self.transitions is None:
            self.transitions = _txn_log(self.data, self.java, self.classpath)
        rel = [t for t in self.transitions if t.producer_id in pids and lo <= t.update_ms <= hi]
        click.echo("-- transaction coordinator log (__transaction_state) of these producers:")
        for t in rel:
            click.echo(f"   {(t.update_ms / 1000 - wall0):8.3f} s  {t.describe()}")
        if not rel:
            click.echo("   (none: non-transactional producers, or outside the window)")
        if wall0:
            click.echo("-- faults around then:")
            for line in _faults(rd, lo / 1000 - wall0, hi / 1000 - wall0) or ["  (none)"]:
                click.echo(line)


def _verdict(tg: Target, at_offset: list[dumplog.LogRecord]) -> str:
    """One sentence on what the replicas hold where the lost value was acknowledged."""
    held = {(r.value, r.producer_id, r.producer_epoch, r.marker) for r in at_offset}
    if len(held) > 1:
        return "-- the replicas disagree about this offset (see above)."
    value, pid, epoch, marker = next(iter(held))
    if marker:
        return f"-- offset {tg.offset} holds a {marker} marker, not value {tg.value}."
    if value != tg.value:
        return (
            f"-- offset {tg.offset} holds value {value} (pid {pid} epoch {epoch}), not the lost "
            f"value {tg.value}: the broker acknowledged {tg.value} at another record's offset. "
            "When that record comes from the same producer id and epoch, the new batch was taken "
            "for a retry of it (same sequence number) and dropped."
        )
    return (
        f"-- offset {tg.offset} holds value {value} on every replica: look for the ABORT marker "
        "of its producer after it (or a missing COMMIT), and at the readers."
    )
