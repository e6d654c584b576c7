"""An independent model of a correct Kafka cluster and its clients, written without any
checker code: brokers with per-key logs, transactions with markers and aborts,
producers, consumers that assign, subscribe, rewind and crash. `simulate` runs it and
`render` spells the events as a history (JSON or Jepsen's EDN, with or without
invokes, offsets or times), so tests can check that a correct cluster's history is
valid and that a fault injected into it is found.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktrial.checker import CheckOptions, check, check_file
from ktrial.histories.edn import iter_edn_history

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
