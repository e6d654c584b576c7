"""Builders of history lines (JSON op objects) shared by the hand-written tests.

`ok(1, "send", [snd("x", 0, 10)])` is process 1's ok send of value 10 to key x, landed
at offset 0; `pl({"x": [[0, 10]]})` a poll micro-op that read it; `inv(1, "send",
[isnd("x", 10)])` its invoke. An op given `t` (ns) carries that time; `write` gives
every line without one a time of its line number in ms. `Timeline` builds a history
on a clock (seconds), for the liveness and metrics tests. `edn_op` writes one line of
a Jepsen history.edn instead (a jepsen.history.Op record).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ktrial.checker import CheckOptions, check, check_file
from ktrial.histories.jsonl import op_from_json
from ktrial.histories.model import Op

Line = dict[str, Any]
MS = 1_000_000  # ns
S = 1_000_000_000  # ns

POLL = [["poll"]]  # the value of a poll's invoke


def op(
    process: Any, typ: str, f: str, value: Any = None, t: float | None = None, **extra: Any
) -> Line:
    """One history line; `t`, when given, is its time in ns."""
    line = {"process": process, "type": typ, "f": f, "value": value, **extra}
    if t is not None:
        line["time"] = int(t)
    return line


def ok(process: Any, f: str, value: Any = None, t: float | None = None, **extra: Any) -> Line:
    return op(process, "ok", f, value, t, **extra)


def fail(process: Any, f: str, value: Any = None, t: float | None = None, **extra: Any) -> Line:
    return op(process, "fail", f, value, t, **extra)


def info(process: Any, f: str, value: Any = None, t: float | None = None, **extra: Any) -> Line:
    return op(process, "info", f, value, t, **extra)


def inv(process: Any, f: str, value: Any = None, t: float | None = None, **extra: Any) -> Line:
    return op(process, "invoke", f, value, t, **extra)


def done(p: Any, f: str, value: Any, typ: str = "ok", **extra: Any) -> Line:
    """A completion of type `typ` (ok by default)."""
    return op(p, typ, f, value, **extra)


def nem(f: str, value: Any = None, t: float | None = None) -> Line:
    """A nemesis op (always info)."""
    return op("nemesis", "info", f, value, t)


def snd(k: Any, o: int | None, v: Any) -> list[Any]:
    """A completed send micro-op: value v landed at offset o of key k."""
    return ["send", k, [o, v]]


def isnd(k: Any, v: Any) -> list[Any]:
    """An invoked send micro-op."""
    return ["send", k, v]


def pl(recs: dict[str, list[list[Any]]]) -> list[Any]:
    return ["poll", recs]


def send_op(p: int, k: Any, v: int, o: int | None, typ: str = "ok", f: str = "send") -> Line:
    """A whole send completion of one value."""
    return {"process": p, "type": typ, "f": f, "value": [["send", k, [o, v]]]}


def poll_op(p: int, recs: dict[Any, list[list[Any]]], typ: str = "ok", **extra: Any) -> Line:
    """A whole poll completion."""
    return {"process": p, "type": typ, "f": "poll", "value": [["poll", recs]], **extra}


def txn_op(p: int, mops: list[Any], typ: str = "ok") -> Line:
    return {"process": p, "type": typ, "f": "txn", "value": mops}


def timed_send(p: int, t_inv: float, t_ok: float, k: Any, o: int | None, v: int) -> list[Line]:
    """An invoke and an ok completion of a send, at the given times (ns)."""
    return [inv(p, "send", [["send", k, v]], t_inv), ok(p, "send", [snd(k, o, v)], t_ok)]


def timed_poll(p: int, t_inv: float, t_ok: float, recs: dict[str, list[list[Any]]]) -> list[Line]:
    """An invoke and an ok completion of a poll, at the given times (ns)."""
    return [inv(p, "poll", [["poll"]], t_inv), ok(p, "poll", [pl(recs)], t_ok)]


def edn_op(index: int, process: int | str, type_: str, f: str, value: str, **extra: str) -> str:
    """One line of a Jepsen history.edn, as `prn` prints a jepsen.history.Op record."""
    proc = f":{process}" if isinstance(process, str) else str(process)
    fields = [
        f":index {index}",
        f":time {index * 1_000_000}",
        f":type :{type_}",
        f":process {proc}",
        f":f :{f}",
        f":value {value}",
    ]
    # seek_to_beginning_ -> :seek-to-beginning?, poll_ms -> :poll-ms
    fields += [f":{re.sub('_$', '?', k).replace('_', '-')} {v}" for k, v in extra.items()]
    return "#jepsen.history.Op{" + ", ".join(fields) + "}"


def numbered(*ops: Line) -> list[Line]:
    """The lines with an index and a time (1 ms apart) unless they have them."""
    return [{"index": i, "time": i * 1_000_000, **o} for i, o in enumerate(ops)]


def parsed(*ops: Line) -> list[Op]:
    """Ops parsed from lines: index = position, time = position in ms unless given."""
    out = []
    for i, o in enumerate(ops):
        d = dict(o)
        d.setdefault("index", i)
        d.setdefault("time", i * 1_000_000)
        out.append(op_from_json(d, i))
    return out


def write(path: Path, lines: list[Line]) -> Path:
    """A history.jsonl of `lines`: index = line number, time = line number in ms."""
    path.write_text(
        "".join(
            json.dumps({"index": i, "time": i * 1_000_000, **o}) + "\n" for i, o in enumerate(lines)
        )
    )
    return path


def run(tmp_path: Path, lines: list[Line], **opts: Any) -> dict[str, Any]:
    """Check from a file, as `ktrial check` does."""
    return check_file(write(tmp_path / "history.jsonl", lines), CheckOptions(**opts))


def types(res: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(error types, bad error types) of a result."""
    return set(res["error_types"]), set(res["bad_error_types"])


def examples(res: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return res["anomalies"][name]["examples"]  # type: ignore[no-any-return]


class Timeline:
    """A history under construction on a clock: `at` times are seconds after `t0`."""

    def __init__(self, t0: float = 0.0) -> None:
        self.ops: list[Line] = []
        self.t0 = t0

    def add(self, at: float, **op: Any) -> None:
        self.ops.append({"index": len(self.ops), "time": round((self.t0 + at) * S), **op})

    def pair(
        self, p: int, ti: float, tc: float, f: str, inv: Any, comp: Any, typ: str = "ok", **x: Any
    ) -> None:
        self.add(ti, process=p, type="invoke", f=f, value=inv)
        self.add(tc, process=p, type=typ, f=f, value=comp, **x)

    def send(
        self, p: int, ti: float, tc: float, k: Any, v: int, o: int | None, typ: str = "ok"
    ) -> None:
        done = [o, v] if typ == "ok" else v
        self.pair(p, ti, tc, "send", [["send", k, v]], [["send", k, done]], typ)

    def txn(self, p: int, ti: float, tc: float, sends: list[tuple[Any, int, int]]) -> None:
        """An ok transaction of (key, value, offset) sends."""
        self.pair(
            p, ti, tc, "txn", [["send", k, v] for k, v, _ in sends],
            [["send", k, [o, v]] for k, v, o in sends],
        )  # fmt: skip

    def poll(
        self, p: int, ti: float, tc: float, recs: dict[Any, list[list[int]]], typ: str = "ok"
    ) -> None:
        self.pair(p, ti, tc, "poll", [["poll"]], [["poll", recs]], typ)

    def copy(
        self,
        p: int,
        ti: float,
        tc: float,
        recs: dict[str, list[list[int]]],
        outs: list[tuple[int, int | None, int]],
        typ: str = "ok",
        **x: Any,
    ) -> None:
        """One copier step (workloads/confluent copy_txn): outs are (key, offset, value)."""
        comp = [["poll", recs]] + [["send", k, [o, v]] for k, o, v in outs]
        self.pair(p, ti, tc, "txn", [["poll"]], comp, typ, **x)

    def subscribe(self, p: int, at: float, keys: list[int]) -> None:
        self.pair(p, at, at + 0.01, "subscribe", keys, keys)

    def crash(self, p: int, at: float) -> None:
        self.add(at, process=p, type="info", f="crash", value=None)

    def drain(self, p: int, at: float, recs: dict[str, list[list[int]]]) -> None:
        keys = [int(k) for k in recs]
        self.pair(p, at, at + 0.1, "assign", keys, keys, seek_to_beginning=True)
        self.poll(p, at + 0.1, at + 0.5, recs)

    def nem(self, at: float, f: str, value: Any = None) -> None:
        self.add(at, process="nemesis", type="info", f=f, value=value)

    def lines(self) -> list[Line]:
        """history.jsonl order: by completion time, insertion order on ties."""
        ordered = sorted(self.ops, key=lambda d: d["time"])
        for i, d in enumerate(ordered):
            d["index"] = i
        return ordered

    def check(self, meta: dict[str, Any] | None = None, **opts: Any) -> dict[str, Any]:
        ops = [op_from_json(d, i) for i, d in enumerate(self.lines())]
        return check(ops, CheckOptions(**opts), meta)

    def write(self, d: Path, meta: dict[str, Any] | None = None) -> Path:
        """A run directory: history.jsonl and, given meta, test.json."""
        d.mkdir(parents=True, exist_ok=True)
        (d / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in self.lines()))
        if meta is not None:
            (d / "test.json").write_text(json.dumps(meta))
        return d


def warming_up_consumer() -> Timeline:
    """40 s of one producer sending a value a second to key 0 and a consumer that starts
    reading only at 12 s (a warm-up), then trails by one value (0.3 s stale): the start
    of the histories that test the judged liveness window (warm-up and drain left out)."""
    tl = Timeline()
    tl.pair(1, 0.0, 0.01, "assign", [0], [0])
    for i in range(40):
        tl.send(0, i + 0.1, i + 0.2, "0", i, i)
    tl.poll(1, 12.0, 12.05, {"0": [[o, o] for o in range(11)]})
    for i in range(12, 41):
        tl.poll(1, i + 0.5, i + 0.55, {"0": [[i - 1, i - 1]]})
    return tl
