"""The checker against histories from an independent model of a correct Kafka cluster.

Nothing here uses ktrial's own generator (testing/gen.py) or mutator
(testing/mutate.py): the point is that histories written by other tools
(Jepsen's kafka workload, Redpanda's or Queen's harnesses, hand-written files)
are judged correctly. The model below is a small simulation of partitions with
read_committed consumers, written from DESIGN.md sections 2 and 3 alone:

* every partition is a list of records; an offset holds a committed, pending or
  aborted data record or a transaction marker (markers and aborted records leave
  holes that no read_committed consumer ever sees);
* read_committed consumers stop at the last stable offset (the first pending
  record) and skip aborted records and markers;
* clients are producers and consumers at once; consumers use assign (optionally
  seeking to the beginning) or subscribe (eager rebalances inside polls, logged in
  ``rebalance_log``, re-reading from the group's committed offsets);
* transactions mix sends and polls; they commit (ok), abort (fail: their records
  occupy offsets and are aborted), or end indeterminate (info) and are resolved
  either way, possibly later, while their pending records hold the LSO back;
* plain sends may end info with their records appended or not, clients crash
  mid-op (an invoke with no completion) and are replaced by new process numbers,
  nemesis ops are interleaved, and the run ends with a drain that reads every key
  from the beginning (as Jepsen's final polls do).

The histories are then written in many spellings (int, string or mixed keys, int
or string values, missing indices, jittered or missing times, completions without
invokes, Queen's -1 offsets, Jepsen EDN) and checked from the file, as ``ktrial
check`` would. Part 2 injects each anomaly of DESIGN.md section 3 and checks the
checker names it.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ktrial.checker import CheckOptions, check, check_file
from ktrial.histories.edn import iter_edn_history

# ================================================================ the log model

COMMITTED, PENDING, ABORTED, MARKER = "committed", "pending", "aborted", "marker"


@dataclass
class Rec:
    value: int | None  # None for a transaction marker
    state: str
    txn: int = -1


@dataclass
class Partition:
    recs: list[Rec] = field(default_factory=list)

    def append(self, value: int | None, state: str, txn: int = -1) -> int:
        self.recs.append(Rec(value, state, txn))
        return len(self.recs) - 1

    def lso(self) -> int:
        """Last stable offset: read_committed consumers never read at or past it."""
        for i, r in enumerate(self.recs):
            if r.state == PENDING:
                return i
        return len(self.recs)

    def fetch(self, pos: int, limit: int) -> tuple[list[tuple[int, int]], int]:
        """Committed records from `pos`, at most `limit`; and the new position."""
        out: list[tuple[int, int]] = []
        end = self.lso()
        i = pos
        while i < end and len(out) < limit:
            r = self.recs[i]
            if r.state == COMMITTED:
                assert r.value is not None
                out.append((i, r.value))
            i += 1
        return out, i

    def committed_values(self) -> list[tuple[int, int]]:
        return [(i, r.value) for i, r in enumerate(self.recs) if r.state == COMMITTED and r.value]


@dataclass
class Txn:
    id: int
    keys: set[int] = field(default_factory=set)
    resolved: bool = False


@dataclass
class Client:
    proc: int
    transactional: bool
    rewinds: bool  # the driver rewinds the consumer after a failed/indeterminate op
    mode: str | None = None  # assign | subscribe
    assigned: set[int] = field(default_factory=set)
    pos: dict[int, int] = field(default_factory=dict)
    subs: set[int] = field(default_factory=set)
    target: set[int] | None = None  # pending eager rebalance (subscribe)
    alive: bool = True
    gen: Iterator[dict[str, Any] | None] | None = None
    sent_ok: bool = False


@dataclass
class Style:
    """How a history is spelt on disk."""

    keys: str = "int"  # int | str | mixed
    values: str = "int"  # int | str
    index: bool = True
    time: str = "mono"  # mono | jitter | none
    queen: bool = False  # transactional sends acknowledged with offset -1
    empty_keys: bool = False  # polls list assigned keys with no records as []
    drop_adjacent_invokes: bool = False
    edn: bool = False


@dataclass
class Params:
    n_keys: int = 3
    n_clients: int = 3
    ticks: int = 200
    txn_p: float = 0.5  # share of transactional clients
    subscribe_p: float = 0.3
    abort_p: float = 0.15
    info_p: float = 0.1
    crash_p: float = 0.01
    nemesis_p: float = 0.03
    seek_p: float = 0.3
    rewind_p: float = 0.5


class World:
    """A correct cluster plus clients; `events` is the history in recording order."""

    def __init__(self, rng: random.Random, params: Params) -> None:
        self.rng = rng
        self.params = params
        self.parts = {k: Partition() for k in range(params.n_keys)}
        self.txns: dict[int, Txn] = {}
        self.group: dict[int, int] = {}  # the consumer group's committed offsets
        self.members: dict[int, Client] = {}
        self.clients: list[Client] = []
        self.events: list[dict[str, Any]] = []
        self.next_proc = 0
        self.next_value = 1
        self.next_txn = 0
        self.late: list[tuple[int, Txn, bool]] = []  # (tick, txn, commit?) resolved later
        self.tick = 0
        self.outcome: dict[int, str] = {}  # value -> type of the op that sent it

    # ------------------------------------------------------------ helpers
    def value(self) -> int:
        v = self.next_value
        self.next_value += 1
        return v

    def new_client(self) -> Client:
        c = Client(
            self.next_proc,
            transactional=self.rng.random() < self.params.txn_p,
            rewinds=self.rng.random() < self.params.rewind_p,
        )
        self.next_proc += 1
        self.clients.append(c)
        return c

    def resolve(self, t: Txn, commit: bool) -> None:
        if t.resolved:
            return
        t.resolved = True
        for k in sorted(t.keys):
            part = self.parts[k]
            for r in part.recs:
                if r.txn == t.id and r.state == PENDING:
                    r.state = COMMITTED if commit else ABORTED
            part.append(None, MARKER, t.id)

    def rebalance(self) -> None:
        """Eager rebalance: each subscribed key goes to one member subscribing to it."""
        targets: dict[int, set[int]] = {p: set() for p in self.members}
        for k in range(self.params.n_keys):
            cands = [p for p, c in self.members.items() if k in c.subs]
            if cands:
                targets[self.rng.choice(cands)].add(k)
        for p, c in self.members.items():
            c.target = targets[p]

    def kill(self, c: Client) -> None:
        if self.rng.random() < 0.3:  # some harnesses record the teardown
            self.record({"process": c.proc, "type": "info", "f": "crash", "value": None})
        c.alive = False
        c.gen = None
        if c.proc in self.members:
            del self.members[c.proc]
            self.rebalance()

    # ------------------------------------------------------------ consumer
    def do_poll(self, c: Client, rb_log: list[dict[str, Any]]) -> dict[int, list[Any]]:
        rng = self.rng
        if c.mode == "subscribe" and c.target is not None:
            if c.assigned and rng.random() < 0.5:  # commit on revocation
                for k in c.assigned:
                    self.group[k] = c.pos[k]
            rb_log.append({"type": "revoked", "keys": sorted(c.assigned)})
            c.assigned = set(c.target)
            c.pos = {k: self.group.get(k, 0) for k in c.assigned}
            rb_log.append({"type": "assigned", "keys": sorted(c.assigned)})
            c.target = None
        out: dict[int, list[Any]] = {}
        for k in sorted(c.assigned):
            recs, c.pos[k] = self.parts[k].fetch(c.pos[k], rng.randint(0, 4))
            out[k] = recs
        return out

    def commit_positions(self, c: Client) -> None:
        for k in c.assigned:
            self.group[k] = c.pos[k]

    # ------------------------------------------------------------ ops
    def op_assign(self, c: Client) -> Iterator[dict[str, Any] | None]:
        rng = self.rng
        keys = sorted(rng.sample(range(self.params.n_keys), rng.randint(1, self.params.n_keys)))
        seek = rng.random() < self.params.seek_p
        extra = {"seek_to_beginning": True} if seek else {}
        yield {"process": c.proc, "type": "invoke", "f": "assign", "value": keys, **extra}
        yield None
        if c.mode == "subscribe":
            self.members.pop(c.proc, None)
            self.rebalance()
        c.mode = "assign"
        new = set(keys)
        # kept keys keep their position; new ones start at the group's committed offset
        c.pos = {
            k: 0 if seek else c.pos[k] if k in c.assigned else self.group.get(k, 0) for k in new
        }
        c.assigned = new
        yield {"process": c.proc, "type": "ok", "f": "assign", "value": keys, **extra}

    def op_subscribe(self, c: Client) -> Iterator[dict[str, Any] | None]:
        rng = self.rng
        keys = sorted(rng.sample(range(self.params.n_keys), rng.randint(1, self.params.n_keys)))
        yield {"process": c.proc, "type": "invoke", "f": "subscribe", "value": keys}
        yield None
        if c.mode != "subscribe":
            c.assigned = set()
            c.pos = {}
        c.mode = "subscribe"
        c.subs = set(keys)
        self.members[c.proc] = c
        self.rebalance()
        yield {"process": c.proc, "type": "ok", "f": "subscribe", "value": keys}

    def _end_nonok(self, c: Client, snap: dict[int, int]) -> None:
        if c.rewinds:
            for k in c.assigned:
                if k in snap:
                    c.pos[k] = snap[k]

    def op_poll(self, c: Client) -> Iterator[dict[str, Any] | None]:
        rng = self.rng
        n = rng.choice([1, 1, 1, 2, 3])
        inv = [["poll"] for _ in range(n)]
        yield {"process": c.proc, "type": "invoke", "f": "poll", "value": inv}
        snap = dict(c.pos)
        rb: list[dict[str, Any]] = []
        done: list[Any] = []
        typ = "ok"
        for _ in range(n):
            yield None
            if rng.random() < self.params.crash_p:
                self.kill(c)
                return
            done.append(["poll", self.do_poll(c, rb)])
            if rng.random() < self.params.info_p / 3:
                typ = rng.choice(["info", "fail"])
                break
        yield None
        extra: dict[str, Any] = {"rebalance_log": rb} if rb else {}
        if typ != "ok":
            self._end_nonok(c, snap)
            yield {
                "process": c.proc,
                "type": typ,
                "f": "poll",
                "value": done,
                "error": "timeout",
                **extra,
            }
            return
        if c.mode == "subscribe" and rng.random() < 0.5:
            self.commit_positions(c)
        yield {"process": c.proc, "type": "ok", "f": "poll", "value": done, **extra}

    def op_send(self, c: Client) -> Iterator[dict[str, Any] | None]:
        rng = self.rng
        sends = [
            (rng.randrange(self.params.n_keys), self.value()) for _ in range(rng.randint(1, 3))
        ]
        yield {
            "process": c.proc,
            "type": "invoke",
            "f": "send",
            "value": [["send", k, v] for k, v in sends],
        }
        r = rng.random()
        if r < self.params.abort_p / 3:  # refused before anything was written
            yield None
            yield {
                "process": c.proc,
                "type": "fail",
                "f": "send",
                "value": [["send", k, v] for k, v in sends],
                "error": "not-leader",
            }
            return
        info_at = -1
        if r < self.params.abort_p / 3 + self.params.info_p:
            info_at = rng.randrange(len(sends) + 1)
        done: list[Any] = []
        for i, (k, v) in enumerate(sends):
            yield None
            if rng.random() < self.params.crash_p:
                self.kill(c)
                return
            if i == info_at:
                # timed out: maybe written (unacknowledged), nothing after it is
                if rng.random() < 0.5:
                    self.parts[k].append(v, COMMITTED)
                done.extend(["send", kk, vv] for kk, vv in sends[i:])
                yield None
                yield {
                    "process": c.proc,
                    "type": "info",
                    "f": "send",
                    "value": done,
                    "error": {"type": "timeout"},
                }
                if rng.random() < 0.5:
                    self.kill(c)
                return
            off = self.parts[k].append(v, COMMITTED)
            done.append(["send", k, [off, v]])
        yield None
        c.sent_ok = True
        yield {"process": c.proc, "type": "ok", "f": "send", "value": done}

    def op_txn(self, c: Client) -> Iterator[dict[str, Any] | None]:
        rng = self.rng
        plan: list[Any] = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.6:
                plan.append(("send", rng.randrange(self.params.n_keys), self.value()))
            else:
                plan.append(("poll",))
        inv = [["send", m[1], m[2]] if m[0] == "send" else ["poll"] for m in plan]
        yield {"process": c.proc, "type": "invoke", "f": "txn", "value": inv}
        t = Txn(self.next_txn)
        self.next_txn += 1
        self.txns[t.id] = t
        snap = dict(c.pos)
        rb: list[dict[str, Any]] = []
        done: list[Any] = []
        for m in plan:
            yield None
            if rng.random() < self.params.crash_p:
                self.kill(c)  # the open transaction is aborted when it times out
                self.late.append((self.tick + rng.randint(1, 30), t, False))
                return
            if m[0] == "send":
                off = self.parts[m[1]].append(m[2], PENDING, t.id)
                t.keys.add(m[1])
                done.append(["send", m[1], [off, m[2]]])
            else:
                done.append(["poll", self.do_poll(c, rb)])
        yield None
        extra: dict[str, Any] = {"rebalance_log": rb} if rb else {}
        r = rng.random()
        if r < self.params.abort_p:
            self.resolve(t, False)
            self._end_nonok(c, snap)
            self.outcome.update((m[2], "fail") for m in plan if m[0] == "send")
            yield {
                "process": c.proc,
                "type": "fail",
                "f": "txn",
                # a driver that does not rewind must report what the op read
                "value": done if not c.rewinds or rng.random() < 0.5 else inv,
                "error": "aborted",
                **extra,
            }
            return
        if r < self.params.abort_p + self.params.info_p:
            commit = rng.random() < 0.5
            if rng.random() < 0.5:
                self.resolve(t, commit)
            else:
                self.late.append((self.tick + rng.randint(1, 30), t, commit))
            self._end_nonok(c, snap)
            yield {
                "process": c.proc,
                "type": "info",
                "f": "txn",
                "value": done,
                "error": "commit timed out",
                **extra,
            }
            self.kill(c)  # the driver replaces an indeterminate transactional client
            return
        if c.mode == "subscribe" or rng.random() < 0.3:
            self.commit_positions(c)  # sendOffsetsToTransaction
        self.resolve(t, True)
        yield None
        c.sent_ok = True
        yield {"process": c.proc, "type": "ok", "f": "txn", "value": done, **extra}

    def next_op(self, c: Client) -> Iterator[dict[str, Any] | None]:
        rng = self.rng
        r = rng.random()
        if c.mode is None or r < 0.08:
            if rng.random() < self.params.subscribe_p:
                return self.op_subscribe(c)
            return self.op_assign(c)
        if r < 0.45:
            return self.op_poll(c)
        return self.op_txn(c) if c.transactional else self.op_send(c)

    # ------------------------------------------------------------ run
    def record(self, ev: dict[str, Any]) -> None:
        ev["tick"] = self.tick
        self.events.append(ev)

    def nemesis(self) -> None:
        f, v = self.rng.choice(
            [
                ("start-partition", {"isolate": ["n1"]}),
                ("stop-partition", None),
                ("kill", ["n2"]),
                ("start", ["n2"]),
                ("pause", "primaries"),
                ("resume", "primaries"),
                ("memory-squeeze", {"n3": 256}),
                ("memory-release", {"n3": None}),
            ]
        )
        self.record({"process": "nemesis", "type": "info", "f": f, "value": v})

    def step(self, c: Client) -> None:
        if c.gen is None:
            c.gen = self.next_op(c)
        try:
            ev = next(c.gen)
        except StopIteration:
            c.gen = None
            return
        if ev is not None:
            self.record(ev)
        if not c.alive:
            return

    def run(self) -> None:
        rng = self.rng
        for _ in range(self.params.n_clients):
            self.new_client()
        for tick in range(self.params.ticks):
            self.tick = tick
            for due in [x for x in self.late if x[0] <= self.tick]:
                self.late.remove(due)
                self.resolve(due[1], due[2])
            if rng.random() < self.params.nemesis_p:
                self.nemesis()
            if self.members and rng.random() < 0.02:
                self.rebalance()  # a member timed out and rejoined, say
            alive = [c for c in self.clients if c.alive]
            while len(alive) < self.params.n_clients:
                alive.append(self.new_client())
            self.step(rng.choice(alive))
            for c in self.clients:
                if not c.alive and c.gen is not None:
                    c.gen = None
        # finish in-flight ops without new faults, then resolve every transaction
        saved = self.params.crash_p
        self.params.crash_p = 0.0
        for c in self.clients:
            while c.alive and c.gen is not None:
                self.tick += 1
                self.step(c)
        self.params.crash_p = saved
        for _, t, commit in self.late:
            self.resolve(t, commit)
        self.late = []
        for t in self.txns.values():
            if not t.resolved:
                self.resolve(t, False)
        self.record({"process": "nemesis", "type": "info", "f": "stop-partition", "value": None})
        self.drain()

    def drain(self) -> None:
        """A fresh client assigns every key from the beginning and reads it all."""
        c = self.new_client()
        keys = list(range(self.params.n_keys))
        self.tick += 1
        self.record(
            {
                "process": c.proc,
                "type": "invoke",
                "f": "assign",
                "value": keys,
                "seek_to_beginning": True,
            }
        )
        self.record(
            {
                "process": c.proc,
                "type": "ok",
                "f": "assign",
                "value": keys,
                "seek_to_beginning": True,
            }
        )
        c.mode, c.assigned, c.pos = "assign", set(keys), dict.fromkeys(keys, 0)
        while any(c.pos[k] < len(self.parts[k].recs) for k in keys):
            self.tick += 1
            self.record({"process": c.proc, "type": "invoke", "f": "poll", "value": [["poll"]]})
            out = {}
            for k in keys:
                recs, c.pos[k] = self.parts[k].fetch(c.pos[k], self.rng.randint(1, 8))
                out[k] = recs
            self.tick += 1
            self.record({"process": c.proc, "type": "ok", "f": "poll", "value": [["poll", out]]})


def simulate(seed: int, params: Params) -> World:
    w = World(random.Random(seed), params)
    w.run()
    return w


# ================================================================ writing histories


def _key(k: int, style: Style, rng: random.Random) -> Any:
    if style.keys == "str":
        return f"k{k}"
    if style.keys == "mixed" and rng.random() < 0.5:
        return str(k)
    return k


def _val(v: int, style: Style) -> Any:
    return f"v{v}" if style.values == "str" else v


def _mop(m: list[Any], ev: dict[str, Any], style: Style, rng: random.Random) -> list[Any]:
    if m[0] == "send":
        k, x = m[1], m[2]
        if isinstance(x, list):
            off = x[0]
            if style.queen and ev["f"] == "txn" and ev["type"] != "invoke":
                off = -1
            return ["send", _key(k, style, rng), [off, _val(x[1], style)]]
        return ["send", _key(k, style, rng), _val(x, style)]
    if len(m) == 1:
        return ["poll"]
    recs = {}
    for k, lst in m[1].items():
        if lst or style.empty_keys:
            recs[str(_key(k, style, rng))] = [[o, _val(v, style)] for o, v in lst]
    return ["poll", recs]


def render(events: list[dict[str, Any]], style: Style, seed: int = 0) -> list[dict[str, Any]]:
    """The events as history ops (JSON shapes) in the given spelling."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for n, ev in enumerate(events):
        d: dict[str, Any] = {}
        if style.index:
            d["index"] = len(out)
        t = ev.get("tick", n) * 1_000_000 + n
        if style.time == "jitter":
            t += rng.randint(-5_000_000, 5_000_000)
        if style.time != "none":
            d["time"] = max(t, 0)
        d["process"] = ev["process"]
        d["type"] = ev["type"]
        d["f"] = ev["f"]
        v: Any = ev.get("value")
        if ev["f"] in ("send", "poll", "txn") and ev["process"] != "nemesis":
            v = [_mop(m, ev, style, rng) for m in v]
        elif ev["f"] in ("assign", "subscribe"):
            v = [_key(k, style, rng) for k in v]
        d["value"] = v
        for x in ("error", "seek_to_beginning"):
            if x in ev:
                d[x] = ev[x]
        if "rebalance_log" in ev:
            d["rebalance_log"] = [
                {**e, "keys": [_key(k, style, rng) for k in e["keys"]]} for e in ev["rebalance_log"]
            ]
        out.append(d)
    if style.drop_adjacent_invokes:
        kept = []
        for i, d in enumerate(out):
            nxt = out[i + 1] if i + 1 < len(out) else None
            if (
                d["type"] == "invoke"
                and nxt is not None
                and nxt["process"] == d["process"]
                and nxt["f"] == d["f"]
                and rng.random() < 0.7
            ):
                continue
            kept.append(d)
        out = kept
        if style.index:
            for i, d in enumerate(out):
                d["index"] = i
    return out


_EDN_KW_FIELDS = {"type", "f"}


def _edn(v: Any, kw: bool = False) -> str:
    """A tiny independent EDN printer (Jepsen's prn spelling)."""
    if v is None:
        return "nil"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return ":" + v if kw else json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_edn_key(k)} {_edn(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        if v and v[0] in ("send", "poll") and len(v) <= 3:
            return "[" + " ".join([":" + v[0], *(_edn(x) for x in v[1:])]) + "]"
        return "[" + " ".join(_edn(x) for x in v) + "]"
    raise TypeError(v)


def _edn_key(k: Any) -> str:
    if isinstance(k, str) and k.isdigit():
        return k  # poll maps: Jepsen's keys are ints
    if isinstance(k, str) and k.isidentifier():
        return ":" + k.replace("_", "-")
    return _edn(k)


def edn_line(d: dict[str, Any]) -> str:
    parts = []
    for k, v in d.items():
        name = {"seek_to_beginning": "seek-to-beginning?"}.get(k, k.replace("_", "-"))
        if k in _EDN_KW_FIELDS or (k == "process" and v == "nemesis"):
            parts.append(f":{name} {_edn(v, kw=True)}")
        elif k == "error" and isinstance(v, str):
            parts.append(f":{name} [:{v} nil]")
        else:
            parts.append(f":{name} {_edn(v)}")
    return "{" + ", ".join(parts) + "}"


def check_ops(
    ops: list[dict[str, Any]], opts: CheckOptions | None = None, edn: bool = False
) -> dict[str, Any]:
    """Write the history to a file and check it from there, as `ktrial check` does."""
    opts = opts or CheckOptions()
    with tempfile.TemporaryDirectory() as d:
        if edn:
            p = Path(d) / "history.edn"
            p.write_text("".join(edn_line(o) + "\n" for o in ops))
            return check(iter_edn_history(p), opts)
        p = Path(d) / "history.jsonl"
        p.write_text("".join(json.dumps(o) + "\n" for o in ops))
        return check_file(p, opts)


def describe(res: dict[str, Any]) -> str:
    return json.dumps(
        {t: res["anomalies"][t]["examples"][:2] for t in res["bad_error_types"]}, default=str
    )[:3000]


# ================================================================ part 1: correct histories

styles = st.builds(
    Style,
    keys=st.sampled_from(["int", "str", "mixed"]),
    values=st.sampled_from(["int", "str"]),
    index=st.booleans(),
    time=st.sampled_from(["mono", "jitter", "none"]),
    queen=st.booleans(),
    empty_keys=st.booleans(),
    drop_adjacent_invokes=st.booleans(),
    edn=st.booleans(),
)
params = st.builds(
    Params,
    n_keys=st.integers(1, 6),
    n_clients=st.integers(1, 5),
    ticks=st.integers(20, 400),
    txn_p=st.sampled_from([0.0, 0.5, 1.0]),
    subscribe_p=st.sampled_from([0.0, 0.0, 0.3, 1.0]),
    abort_p=st.sampled_from([0.0, 0.15, 0.4]),
    info_p=st.sampled_from([0.0, 0.1, 0.3]),
    crash_p=st.sampled_from([0.0, 0.01, 0.05]),
    nemesis_p=st.sampled_from([0.0, 0.05]),
    seek_p=st.sampled_from([0.0, 0.3]),
    rewind_p=st.sampled_from([0.0, 0.5, 1.0]),
)


def rewinds(w: World) -> bool:
    """Whether every client of the run rewinds after a failed or indeterminate op: only
    then does Jepsen's consumer-position rule (consumer_rewinds, the default) apply."""
    return all(c.rewinds for c in w.clients)


def assert_valid(res: dict[str, Any]) -> None:
    assert res["bad_error_types"] == [], describe(res)
    if res["stats"]["reads"]:
        assert res["valid"] is True, res["valid"]


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(seed=st.integers(0, 2**32 - 1), p=params, style=styles)
def test_correct_histories_are_valid(seed: int, p: Params, style: Style) -> None:
    w = simulate(seed, p)
    ops = render(w.events, style, seed)
    assert_valid(check_ops(ops, CheckOptions(consumer_rewinds=rewinds(w)), edn=style.edn))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), style=styles)
def test_correct_assign_only_histories_are_valid_with_sub_via_assign(
    seed: int, style: Style
) -> None:
    """Pure assign mode: poll-skip and nonmonotonic-poll are bad here, so consumer
    order is judged strictly (DESIGN.md 3)."""
    p = Params(n_keys=3, n_clients=3, ticks=300, subscribe_p=0.0, crash_p=0.02, info_p=0.15)
    w = simulate(seed, p)
    ops = render(w.events, style, seed)
    opts = CheckOptions(sub_via="assign", consumer_rewinds=rewinds(w))
    assert_valid(check_ops(ops, opts, edn=style.edn))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), p=params)
def test_correct_histories_are_valid_without_ww_inference(seed: int, p: Params) -> None:
    """Without ww edges any G1c is bad (DESIGN.md 3): a correct Kafka never shows a
    cycle of wr (+ realtime) edges alone."""
    w = simulate(seed, p)
    opts = CheckOptions(ww_deps=False, consumer_rewinds=rewinds(w))
    assert_valid(check_ops(render(w.events, Style(), seed), opts))


# ================================================================ part 2: injected anomalies

Loc = tuple[int, int, int]  # (event index, micro-op index, key)


def ok_poll_chunks(events: list[dict[str, Any]], ok_only: bool = True) -> Iterator[Loc]:
    for i, ev in enumerate(events):
        if ev["f"] not in ("poll", "txn") or ev["type"] == "invoke" or ev["process"] == "nemesis":
            continue
        if ok_only and ev["type"] != "ok":
            continue
        for j, m in enumerate(ev["value"]):
            if m[0] == "poll" and len(m) == 2:
                for k, recs in m[1].items():
                    if recs:
                        yield i, j, k


def recs_at(events: list[dict[str, Any]], loc: Loc) -> list[Any]:
    i, j, k = loc
    return events[i]["value"][j][1][k]  # type: ignore[no-any-return]


def set_recs(events: list[dict[str, Any]], loc: Loc, recs: list[Any]) -> None:
    i, j, k = loc
    events[i]["value"][j][1][k] = recs


def ok_sends(events: list[dict[str, Any]]) -> Iterator[tuple[int, int, int, int, int]]:
    """(event index, micro-op index, key, offset, value) of acknowledged sends of ok ops."""
    for i, ev in enumerate(events):
        if ev["type"] == "ok" and ev["f"] in ("send", "txn"):
            for j, m in enumerate(ev["value"]):
                if m[0] == "send" and isinstance(m[2], list):
                    yield i, j, m[1], m[2][0], m[2][1]


def drop_value(events: list[dict[str, Any]], k: int, v: int) -> None:
    """Make value v of key k unread by anyone (a lost record)."""
    for loc in list(ok_poll_chunks(events, ok_only=False)):
        if loc[2] == k:
            set_recs(events, loc, [r for r in recs_at(events, loc) if r[1] != v])


def read_after(events: list[dict[str, Any]], k: int, off: int) -> bool:
    return any(
        o > off for loc in ok_poll_chunks(events) if loc[2] == k for o, _ in recs_at(events, loc)
    )


def world_for(seed: int, **kw: Any) -> World:
    base: dict[str, Any] = {"n_keys": 2, "n_clients": 3, "ticks": 250, "crash_p": 0.0}
    base.update(kw)
    return simulate(seed, Params(**base))


def bad_types(events: list[dict[str, Any]], opts: CheckOptions | None = None) -> set[str]:
    res = check_ops(render(events, Style()), opts)
    if res["bad_error_types"]:
        assert res["valid"] is False
    return set(res["bad_error_types"])


inject = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
seeds = st.integers(0, 2**32 - 1)


def pick(rng: random.Random, xs: list[Any]) -> Any:
    assume(xs)
    return rng.choice(xs)


@inject
@given(seed=seeds)
def test_lost_write(seed: int) -> None:
    w = world_for(seed)
    ev = w.events
    cands = [(k, o, v) for _i, _j, k, o, v in ok_sends(ev) if read_after(ev, k, o)]
    k, _o, v = pick(random.Random(seed), cands)
    drop_value(ev, k, v)
    assert "lost-write" in bad_types(ev)


@inject
@given(seed=seeds)
def test_unseen_last_write(seed: int) -> None:
    w = world_for(seed)
    ev = w.events
    last = {
        k: max(((o, v) for _i, _j, kk, o, v in ok_sends(ev) if kk == k), default=None)
        for k in w.parts
    }
    cands = [(k, ov) for k, ov in last.items() if ov is not None]
    k, (o, v) = pick(random.Random(seed), cands)
    assume(all(r.state != COMMITTED for r in w.parts[k].recs[o + 1 :]))
    drop_value(ev, k, v)
    found = bad_types(ev)
    assert "unseen" in found
    assert "lost-write" not in found


def drain_chunks(w: World) -> list[Loc]:
    drain = w.clients[-1].proc
    return [loc for loc in ok_poll_chunks(w.events) if w.events[loc[0]]["process"] == drain]


@inject
@given(seed=seeds)
def test_duplicate(seed: int) -> None:
    w = world_for(seed)
    rng = random.Random(seed)
    loc = pick(rng, drain_chunks(w))
    recs = recs_at(w.events, loc)
    _o, v = recs[0]
    # the same value again, past the end of the log
    set_recs(w.events, loc, [*recs, (len(w.parts[loc[2]].recs) + 3, v)])
    assert "duplicate" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_inconsistent_offsets(seed: int) -> None:
    w = world_for(seed)
    rng = random.Random(seed)
    loc = pick(rng, [x for x in ok_poll_chunks(w.events) if x not in drain_chunks(w)])
    recs = list(recs_at(w.events, loc))
    n = rng.randrange(len(recs))
    recs[n] = (recs[n][0], 10**9)  # another value at the same offset
    set_recs(w.events, loc, recs)
    assert "inconsistent-offsets" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_g1a_aborted_read(seed: int) -> None:
    w = world_for(seed, txn_p=1.0, abort_p=0.4, info_p=0.0)
    rng = random.Random(seed)
    dk = {loc[2]: loc for loc in drain_chunks(w)}  # the last drain chunk of each key
    aborted = [
        (k, o, r.value)
        for k, part in w.parts.items()
        for o, r in enumerate(part.recs)
        if r.state == ABORTED and w.outcome.get(r.value or 0) == "fail" and k in dk
    ]
    k, o, v = pick(rng, aborted)
    set_recs(w.events, dk[k], sorted([*recs_at(w.events, dk[k]), (o, v)]))
    assert "G1a" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_precommitted_read(seed: int) -> None:
    w = world_for(seed, txn_p=1.0, abort_p=0.0, info_p=0.0)
    cands = []
    for i, ev in enumerate(w.events):
        if ev["type"] == "ok" and ev["f"] == "txn":
            sends = [m for m in ev["value"] if m[0] == "send"]
            polls = [j for j, m in enumerate(ev["value"]) if m[0] == "poll"]
            if sends and polls and ev["value"].index(sends[0]) < polls[-1]:
                cands.append((i, polls[-1], sends[0]))
    i, j, (_s, k, (o, v)) = pick(random.Random(seed), cands)
    recs = w.events[i]["value"][j][1]
    recs[k] = [*recs.get(k, []), (o, v)]  # the txn's own poll saw its own send
    assert "precommitted-read" in bad_types(w.events)


def multi(w: World, n: int) -> list[Loc]:
    out = []
    for loc in ok_poll_chunks(w.events):
        ev = w.events[loc[0]]
        rb = {k for e in ev.get("rebalance_log", []) for k in e["keys"]}
        if len(recs_at(w.events, loc)) >= n and loc[2] not in rb:
            out.append(loc)
    return out


@inject
@given(seed=seeds)
def test_int_poll_skip(seed: int) -> None:
    w = world_for(seed)
    loc = pick(random.Random(seed), [x for x in multi(w, 3) if x not in drain_chunks(w)])
    recs = recs_at(w.events, loc)
    set_recs(w.events, loc, [recs[0], *recs[2:]])  # the drain still reads recs[1]
    assert "int-poll-skip" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_int_nonmonotonic_poll(seed: int) -> None:
    w = world_for(seed)
    loc = pick(random.Random(seed), multi(w, 2))
    recs = recs_at(w.events, loc)
    set_recs(w.events, loc, [recs[1], recs[0], *recs[2:]])
    assert "int-nonmonotonic-poll" in bad_types(w.events)


def successive_drain(w: World) -> list[tuple[Loc, Loc]]:
    """Pairs of successive ok drain reads of one key (one consumer, assign mode)."""
    last: dict[int, Loc] = {}
    out = []
    for loc in drain_chunks(w):
        if loc[2] in last and len(recs_at(w.events, loc)) >= 2:
            out.append((last[loc[2]], loc))
        last[loc[2]] = loc
    return out


@inject
@given(seed=seeds)
def test_poll_skip_in_assign_mode(seed: int) -> None:
    w = world_for(seed, subscribe_p=0.0)
    # The skipped record must stay in the log without this read: its value was
    # acknowledged by an ok op. (Dropping the only read of an info send's value
    # makes that send uncommitted -- a correct log without the record.)
    acked = {(k, o) for _i, _j, k, o, _v in ok_sends(w.events)}
    drains = [(a, b) for a, b in successive_drain(w) if (b[2], recs_at(w.events, b)[0][0]) in acked]
    _a, b = pick(random.Random(seed), drains)
    recs = recs_at(w.events, b)
    set_recs(w.events, b, recs[1:])
    assert "poll-skip" in bad_types(w.events)
    # expected with subscribe: reported, but not bad
    res = check_ops(render(w.events, Style()), CheckOptions(sub_via="subscribe"))
    assert "poll-skip" in res["error_types"] and "poll-skip" not in res["bad_error_types"]


@inject
@given(seed=seeds)
def test_nonmonotonic_poll_in_assign_mode(seed: int) -> None:
    w = world_for(seed, subscribe_p=0.0)
    a, b = pick(random.Random(seed), successive_drain(w))
    set_recs(w.events, b, [recs_at(w.events, a)[-1], *recs_at(w.events, b)])
    assert "nonmonotonic-poll" in bad_types(w.events)


def swap_values(events: list[dict[str, Any]], k: int, v1: int, v2: int) -> None:
    """Swap where v1 and v2 sit in key k's log, everywhere (sends and polls agree)."""
    sw = {v1: v2, v2: v1}
    where: dict[int, int] = {}
    for ev in events:
        if ev["f"] in ("send", "txn") and ev["type"] != "invoke":
            for m in ev["value"]:
                if m[0] == "send" and m[1] == k and isinstance(m[2], list):
                    where[m[2][1]] = m[2][0]
    for ev in events:
        if ev["f"] in ("send", "txn") and ev["type"] != "invoke":
            for m in ev["value"]:
                if m[0] == "send" and m[1] == k and isinstance(m[2], list) and m[2][1] in sw:
                    m[2] = [where[sw[m[2][1]]], m[2][1]]
    for loc in list(ok_poll_chunks(events, ok_only=False)):
        if loc[2] == k:
            set_recs(events, loc, [(o, sw.get(v, v)) for o, v in recs_at(events, loc)])


@inject
@given(seed=seeds)
def test_nonmonotonic_send(seed: int) -> None:
    w = world_for(seed, txn_p=0.0, info_p=0.0, abort_p=0.0)
    last: dict[tuple[Any, int], tuple[int, int]] = {}
    cands = []
    for i, _j, k, _o, v in ok_sends(w.events):
        p = w.events[i]["process"]
        if (p, k) in last and last[(p, k)][0] != i:
            cands.append((k, last[(p, k)][1], v))
        last[(p, k)] = (i, v)
    k, v1, v2 = pick(random.Random(seed), cands)
    swap_values(w.events, k, v1, v2)
    assert "nonmonotonic-send" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_int_nonmonotonic_send(seed: int) -> None:
    w = world_for(seed, n_keys=1, txn_p=0.5, info_p=0.0, abort_p=0.0)
    cands = []
    for i, ev in enumerate(w.events):
        if ev["type"] == "ok" and ev["f"] in ("send", "txn"):
            vs = [m[2][1] for m in ev["value"] if m[0] == "send"]
            if len(vs) >= 2:
                cands.append((i, vs[0], vs[1]))
    _i, v1, v2 = pick(random.Random(seed), cands)
    swap_values(w.events, 0, v1, v2)
    assert "int-nonmonotonic-send" in bad_types(w.events)


@inject
@given(seed=seeds)
def test_torn_transaction(seed: int) -> None:
    w = world_for(seed, n_keys=3, txn_p=1.0, abort_p=0.0, info_p=0.0)
    ev = w.events
    cands = []
    for i, e in enumerate(ev):
        if e["type"] == "ok" and e["f"] == "txn":
            sends = [m for m in e["value"] if m[0] == "send"]
            for m in sends:
                if len({s[1] for s in sends}) >= 2 and read_after(ev, m[1], m[2][0]):
                    cands.append((i, m[1], m[2][1]))
    _i, k, v = pick(random.Random(seed), cands)
    drop_value(ev, k, v)
    found = bad_types(ev)
    assert {"torn-transaction", "lost-write"} <= found


# ------------------------------------------------------------------ hand-written histories


def J(*ops: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"index": i, "time": i * 1_000_000, **o} for i, o in enumerate(ops)]


def inv(p: int, f: str, value: Any) -> dict[str, Any]:
    return {"process": p, "type": "invoke", "f": f, "value": value}


def done(p: int, f: str, value: Any, typ: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"process": p, "type": typ, "f": f, "value": value, **extra}


def test_g1c_circular_visibility_is_bad_even_with_ww() -> None:
    ops = J(
        inv(0, "txn", [["send", 0, 1], ["poll"]]),
        inv(1, "txn", [["send", 1, 2], ["poll"]]),
        done(0, "txn", [["send", 0, [0, 1]], ["poll", {"1": [[0, 2]]}]]),
        done(1, "txn", [["send", 1, [0, 2]], ["poll", {"0": [[0, 1]]}]]),
    )
    res = check_ops(ops)
    assert "G1c" in res["bad_error_types"]


def test_g1c_realtime_read_from_the_future() -> None:
    ops = J(
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1]]}]]),
        inv(1, "send", [["send", 0, 1]]),
        done(1, "send", [["send", 0, [0, 1]]]),
    )
    res = check_ops(ops)
    assert "G1c-realtime" in res["bad_error_types"]


def test_g0_interleaved_transactions_are_normal() -> None:
    ops = J(
        inv(0, "txn", [["send", 0, 1], ["send", 1, 2]]),
        inv(1, "txn", [["send", 0, 3], ["send", 1, 4]]),
        done(0, "txn", [["send", 0, [0, 1]], ["send", 1, [1, 2]]]),
        done(1, "txn", [["send", 0, [1, 3]], ["send", 1, [0, 4]]]),
        inv(2, "poll", [["poll"]]),
        done(2, "poll", [["poll", {"0": [[0, 1], [1, 3]], "1": [[0, 4], [1, 2]]}]]),
    )
    res = check_ops(ops)
    assert "G0" in res["error_types"]
    assert res["valid"] is True


def test_lost_write_with_unknown_offsets_by_real_time() -> None:
    """Queen's -1 offsets: an acknowledged txn value before a later writer's read value."""
    ops = J(
        inv(0, "txn", [["send", 0, 1]]),
        done(0, "txn", [["send", 0, [-1, 1]]]),
        inv(0, "txn", [["send", 0, 2]]),
        done(0, "txn", [["send", 0, [-1, 2]]]),
        inv(1, "poll", [["poll"]]),
        done(1, "poll", [["poll", {"0": [[1, 2]]}]]),
    )
    assert "lost-write" in check_ops(ops)["bad_error_types"]


def test_markers_and_aborted_records_are_not_skips() -> None:
    """Offsets 1 (aborted record) and 2 (its abort marker) are holes, not skips."""
    ops = J(
        inv(0, "assign", [0]),
        done(0, "assign", [0]),
        inv(1, "txn", [["send", 0, 1]]),
        done(1, "txn", [["send", 0, [0, 1]]]),
        inv(1, "txn", [["send", 0, 2]]),
        done(1, "txn", [["send", 0, [2, 2]]], "fail"),
        inv(1, "txn", [["send", 0, 3]]),
        done(1, "txn", [["send", 0, [4, 3]]]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1]]}]]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[4, 3]]}]]),
    )
    assert_valid(check_ops(ops, CheckOptions(sub_via="assign")))


def test_jepsen_crash_and_final_polls() -> None:
    """Jepsen's own shapes: :crash ops, :debug-topic-partitions, :poll-ms, info sends with
    nil offsets, a rebalance log {:keys [...]} on a subscribe poll."""
    ops = J(
        inv(0, "subscribe", [0, 1]),
        done(0, "subscribe", [0, 1]),
        inv(1, "send", [["send", 0, 1], ["send", 1, 2]]),
        done(1, "send", [["send", 0, [0, 1]], ["send", 1, [None, 2]]], "info", error="timeout"),
        inv(2, "send", [["send", 0, 3]]),
        done(2, "send", [["send", 0, [1, 3]]]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1]]}]], rebalance_log=[{"keys": [0, 1]}]),
        inv(0, "crash", None),
        done(0, "crash", None, "info"),
        {"process": "nemesis", "type": "info", "f": "kill", "value": ["n1"]},
        inv(5, "debug-topic-partitions", [0, 1]),
        done(5, "debug-topic-partitions", {"0": {"leader": 1}}),
        inv(5, "assign", [0, 1]) | {"seek_to_beginning": True},
        done(5, "assign", [0, 1], seek_to_beginning=True),
        inv(5, "poll", [["poll"]]) | {"poll_ms": 1000},
        done(5, "poll", [["poll", {"0": [[0, 1], [1, 3]], "1": [[0, 2]]}]], poll_ms=1000),
    )
    for edn in (False, True):
        assert_valid(check_ops(ops, edn=edn))


# ------------------------------------------------------------------ checker bugs found


def test_a_completion_without_invoke_starts_at_its_own_line() -> None:
    """The documented convention (docs/history-format.md, issue 2): a completion with
    no invoke counts as invoked at its own line, so realtime order applies from there.
    A read that completes before the line of its writer's invoke-less ack is a read
    from the future under that convention; with the send's invoke before the poll's
    completion (what a tool that knows it writes) the same reads are fine."""
    read = done(0, "poll", [["poll", {"0": [[0, 1]]}]])
    sent = done(1, "send", [["send", 0, [0, 1]]])
    res = check_ops(J(read, sent), CheckOptions(sub_via="assign"))
    assert res["bad_error_types"] == ["G1c-realtime"], describe(res)
    assert_valid(
        check_ops(J(inv(1, "send", [["send", 0, 1]]), read, sent), CheckOptions(sub_via="assign"))
    )


def test_seek_to_beginning_on_the_invoke() -> None:
    ops = J(
        done(1, "send", [["send", 0, [0, 1]], ["send", 0, [1, 2]]]),
        inv(0, "assign", [0]),
        done(0, "assign", [0]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1], [1, 2]]}]]),
        inv(0, "assign", [0]) | {"seek_to_beginning": True},
        done(0, "assign", [0]),
        inv(0, "poll", [["poll"]]),
        done(0, "poll", [["poll", {"0": [[0, 1], [1, 2]]}]]),
    )
    assert_valid(check_ops(ops, CheckOptions(sub_via="assign")))


def test_time_before_the_first_op() -> None:
    ops = [
        {"process": "nemesis", "type": "info", "f": "start-partition", "time": 5_000_000},
        {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]]},  # no time
        {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[0, 1]]}]]},
    ]
    assert_valid(check_ops(ops))


# ------------------------------------------------------------------ cycle search vs brute force


def reference_bad_cycle(ops: list[dict[str, Any]]) -> bool:
    """Is there a cycle of wr and realtime edges (DESIGN.md 3), by brute force?

    Vertices: data ops that committed (ok; info -- or never completed -- with a value
    an ok op read). wr: the writer of a value -> each committed op that read it.
    rt: an ok op -> every op invoked after it completed (positions = line order).
    """
    import networkx as nx

    pending: dict[Any, tuple[int, dict[str, Any]]] = {}
    recs: list[dict[str, Any]] = []
    for pos, o in enumerate(ops):
        if o["process"] == "nemesis":
            continue
        if o["type"] == "invoke":
            if o["process"] in pending:
                ip, io = pending.pop(o["process"])
                recs.append({"inv": ip, "comp": None, "type": "info", "op": io})
            pending[o["process"]] = (pos, o)
            continue
        ip, io = pending.pop(o["process"], (pos, o))
        if io["f"] != o["f"]:  # not this completion's invoke: that one never completed
            recs.append({"inv": ip, "comp": None, "type": "info", "op": io})
            ip, io = pos, o
        recs.append({"inv": ip, "comp": pos, "type": o["type"], "op": o, "invop": io})
    for ip, io in pending.values():
        recs.append({"inv": ip, "comp": None, "type": "info", "op": io})

    def sends(r: dict[str, Any]) -> list[tuple[str, Any]]:
        out = []
        for src in (r["op"], r.get("invop") or r["op"]):
            if src["f"] in ("send", "txn"):
                for m in src["value"] or []:
                    if m[0] == "send":
                        v = m[2][1] if isinstance(m[2], list) else m[2]
                        out.append((str(m[1]), v))
        return out

    def reads(r: dict[str, Any]) -> list[tuple[str, Any]]:
        if r["comp"] is None or r["op"]["f"] not in ("poll", "txn"):
            return []
        return [
            (str(k), v)
            for m in r["op"]["value"] or []
            if m[0] == "poll" and len(m) == 2
            for k, lst in m[1].items()
            for _o, v in lst
        ]

    ok_read = {kv for r in recs if r["type"] == "ok" for kv in reads(r)}
    committed = [
        r["op"]["f"] in ("send", "poll", "txn")
        and (r["type"] == "ok" or (r["type"] == "info" and any(s in ok_read for s in sends(r))))
        for r in recs
    ]
    writer: dict[tuple[str, Any], int] = {}
    for i in sorted(range(len(recs)), key=lambda i: recs[i]["comp"] is None):
        for s in sends(recs[i]):
            writer.setdefault(s, i)
    g: Any = nx.DiGraph()
    for i, r in enumerate(recs):
        if not committed[i]:
            continue
        for kv in reads(r):
            w = writer.get(kv)
            if w is not None and w != i and committed[w]:
                g.add_edge(w, i)
        if r["type"] == "ok" and r["comp"] is not None:
            for j, r2 in enumerate(recs):
                if committed[j] and r2["inv"] > r["comp"]:
                    g.add_edge(i, j)
    return any(len(c) > 1 for c in nx.strongly_connected_components(g))


def perturb(events: list[dict[str, Any]], rng: random.Random, n: int, first_proc: int) -> None:
    """Move n client data ops (invoke and completion) elsewhere, under new process numbers."""
    for t in range(n):
        starts = [
            i
            for i, e in enumerate(events)
            if e["type"] == "invoke" and e["f"] in ("send", "poll", "txn")
        ]
        if not starts:
            return
        i = rng.choice(starts)
        p = events[i]["process"]
        j = next((j for j in range(i + 1, len(events)) if events[j]["process"] == p), None)
        if j is None or events[j]["type"] == "invoke":
            continue
        comp = events.pop(j)
        invk = events.pop(i)
        a, b = sorted(rng.sample(range(len(events) + 1), 2))
        invk["process"] = comp["process"] = first_proc + t
        events.insert(b, comp)
        events.insert(a, invk)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=seeds, n=st.integers(1, 4), txn_p=st.sampled_from([0.5, 1.0]))
def test_cycle_search_matches_a_brute_force_reference(seed: int, n: int, txn_p: float) -> None:
    w = world_for(seed, n_keys=3, ticks=120, txn_p=txn_p, crash_p=0.02)
    rng = random.Random(seed)
    perturb(w.events, rng, n, 10_000)
    for t, e in enumerate(w.events):
        e["tick"] = t  # keep times in line order (see test_time_before_the_first_op)
    ops = render(w.events, Style())
    res = check_ops(ops, CheckOptions(ww_deps=True))
    want = reference_bad_cycle(ops)
    got = bool({"G1c", "G1c-realtime"} & set(res["bad_error_types"]))
    assert got == want, (want, res["bad_error_types"], describe(res))


# ------------------------------------------------------------------ lost writes vs brute force


def reference_lost(ops: list[dict[str, Any]]) -> set[tuple[str, Any]]:
    """(key, value) of lost writes by DESIGN.md 3, for histories with known offsets."""
    ok_read: set[tuple[str, Any]] = set()
    log: dict[str, dict[int, Any]] = {}
    comps = [o for o in ops if o["type"] != "invoke" and o["process"] != "nemesis"]
    for o in comps:
        if o["f"] in ("poll", "txn"):
            for m in o["value"]:
                if m[0] == "poll" and len(m) == 2:
                    for k, lst in m[1].items():
                        for off, v in lst:
                            log.setdefault(str(k), {})[off] = v
                            if o["type"] == "ok":
                                ok_read.add((str(k), v))
    committed_sends = []
    for o in comps:
        if o["f"] in ("send", "txn"):
            raw = [(str(m[1]), m[2]) for m in o["value"] if m[0] == "send"]
            ss = [(k, x[0], x[1]) for k, x in raw if isinstance(x, list)]
            # an info op committed if an ok op read any value it sent (acknowledged or not)
            vals = [(k, x[1] if isinstance(x, list) else x) for k, x in raw]
            if o["type"] == "ok" or (o["type"] == "info" and any(kv in ok_read for kv in vals)):
                committed_sends.extend(ss)
                for k, off, v in ss:
                    log.setdefault(k, {}).setdefault(off, v)
    lost = set()
    for k, off, v in committed_sends:
        if (k, v) in ok_read:
            continue
        if any(o2 > off and (k, v2) in ok_read for o2, v2 in log.get(k, {}).items()):
            lost.add((k, v))
    return lost


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=seeds, drops=st.integers(1, 6))
def test_lost_writes_match_a_brute_force_reference(seed: int, drops: int) -> None:
    w = world_for(seed, n_keys=3, ticks=150, crash_p=0.02)
    rng = random.Random(seed)
    chunks = list(ok_poll_chunks(w.events, ok_only=False))
    for loc in rng.sample(chunks, min(drops, len(chunks))):
        recs = recs_at(w.events, loc)
        set_recs(w.events, loc, [r for r in recs if rng.random() < 0.7])
    ops = render(w.events, Style())
    res = check_ops(ops)
    got = {
        (e["key"], e["value"]) for e in res["anomalies"].get("lost-write", {}).get("examples", [])
    }
    want = reference_lost(ops)
    assert len(want) == res["anomalies"].get("lost-write", {}).get("count", 0), (want, got)
    assert got <= want
