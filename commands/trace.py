"""`ktrial trace RUN_DIR`: follow an anomaly from the history down to the brokers' logs.

For a key and an offset (by default: each lost write in results.json) it prints, for
every node whose data the run kept (`ktrial run --keep-data`), the records around that
offset as the broker stored them — value, producer id and epoch, transactional or
not, COMMIT/ABORT markers — each value tied to the history op that sent it; then the
transaction coordinator's record (`__transaction_state`) of the producers involved,
and the faults active around that time. Exit code 0, or 254 when there is nothing to
trace (no kept data, unknown key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..clusters import dumplog
from ..histories.store import RunDir, load_json
from ..histories.testmeta import TestMeta


@dataclass(frozen=True)
class Target:
    key: str
    offset: int
    why: str
    value: str | None = None  # the lost value, when tracing a lost write


@dataclass(frozen=True)
class Sent:
    op: int
    process: Any
    type: str
    time_s: float


def _targets(rd: RunDir, key: str | None, offset: int | None) -> list[Target]:
    if key is not None and offset is not None:
        return [Target(key, offset, "asked")]
    if key is not None or offset is not None:
        raise click.UsageError("give both --key and --offset, or neither (lost writes)")
    try:
        results = load_json(rd.results)
    except OSError:
        raise click.UsageError(f"{rd.results} is missing: give --key and --offset") from None
    out = []
    for ex in (results.get("anomalies") or {}).get("lost-write", {}).get("examples", []):
        if ex.get("offset") is not None:
            why = f"lost write of value {ex.get('value')} (op {ex.get('writer')})"
            out.append(Target(str(ex["key"]), int(ex["offset"]), why, str(ex.get("value"))))
    if not out:
        raise click.UsageError(
            "results.json lists no lost write with an offset: give --key/--offset"
        )
    return out


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
    """Show the brokers' log around an offset (default: each lost write) of a kept run.

    Needs a run made with `ktrial run --keep-data`. Example:

      ktrial trace store/queue/latest --key 3 --offset 302
    """
    try:
        _trace(run_dir, key, offset, radius)
    except dumplog.DumpError as e:
        raise click.ClickException(f"{e} (is {run_dir / 'data'} a copy ktrial made?)") from None


def _trace(run_dir: Path, key: str | None, offset: int | None, radius: int) -> None:
    from ..clusters.install import require_java, resolve

    rd = RunDir(run_dir)
    data = rd.path / "data"
    if not data.is_dir():
        raise click.UsageError(
            f"{rd.path} has no broker data (data/): run again with `ktrial run --keep-data`"
        )
    try:
        test = TestMeta.read(rd.test_json)
    except ValueError as e:
        raise click.UsageError(f"{rd.test_json}: unreadable test.json ({e})") from None
    keys = test.keys
    versions = test.broker_versions or [None]
    install = resolve(versions[0])
    java = require_java()
    wall0 = test.history_wall_start or 0.0
    transitions: list[dumplog.TxnTransition] | None = None
    nodes = sorted(p for p in data.iterdir() if p.is_dir())
    # several lost writes often share a key: read its history and dump its log once
    senders_of: dict[str, dict[str, Sent]] = {}
    dumps: dict[str, dict[str, list[dumplog.LogRecord]]] = {}
    for tg in _targets(rd, key, offset):
        tp = keys.get(tg.key)
        if not isinstance(tp, dict):
            raise click.UsageError(
                f"key {tg.key} is not in {rd.test_json} (keys: {sorted(keys)[:10]}...)"
            )
        pdir = f"{tp['topic']}-{tp['partition']}"
        click.echo(f"== key {tg.key} = {pdir}, offset {tg.offset}: {tg.why}")
        if tg.key not in senders_of:
            senders_of[tg.key] = _senders(rd, tg.key)
        senders = senders_of[tg.key]
        if pdir not in dumps:
            files = [f for node in nodes for f in dumplog.segment_files(node / pdir)]
            dumps[pdir] = dumplog.parse_segment_dumps(dumplog.dump(files, java, install.classpath))
        by_file = dumps[pdir]
        pids: set[int] = set()
        times: list[int] = []
        at_offset: list[dumplog.LogRecord] = []
        for node in nodes:
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
            for r in dumplog.window(recs, tg.offset, radius):
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
            continue
        if tg.value is not None and at_offset:
            click.echo(_verdict(tg, at_offset))
        lo, hi = min(times) - 15_000, max(times) + 15_000
        if transitions is None:
            transitions = _txn_log(data, java, install.classpath)
        rel = [t for t in transitions if t.producer_id in pids and lo <= t.update_ms <= hi]
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
