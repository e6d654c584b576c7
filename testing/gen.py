"""A model of a correct partitioned log, used to generate valid histories.

The checker is proven against histories that this model produces (property
tests) and measured on one of them (bench/bench_check.py). Everything a correct
Kafka-protocol broker may legally do, and that a naive checker might mistake
for an anomaly, is modelled on purpose:

* transactional records occupy offsets when appended but become visible to
  read_committed consumers only at commit; aborted records stay in the log as
  holes; every commit or abort writes one control marker per key it touched,
  so offsets have gaps;
* a read_committed consumer stops at the last stable offset (the first record
  of a still-open transaction), so it never skips a record that commits later
  and never reads its own transaction's sends;
* a commit completes in the log before the client hears of it, so readers may
  see values of a transaction whose op is still in flight or ends ``info``;
* ``fail`` ops never take effect, ``info`` ops may or may not (both are
  modelled); a client crash ends the op ``info`` and the successor gets a new
  process number; after ``fail``/``info`` the consumer rewinds to where the op
  began reading, as the ktrial driver does;
* assign mode (fixed key sets, occasional re-assign) and subscribe mode
  (a consumer group with rebalances noted in ``rebalance_log``; positions jump);
* null or ``-1`` offsets (Queen reports -1 for transactional sends);
* a final drain by fresh processes reading every key from the beginning, so
  no committed value stays unseen;
* optional omitted invokes (hand-written histories) and in-flight invokes
  that never complete (a history cut short).

The module is pure Python with a seeded :class:`random.Random`; it imports
nothing but :mod:`orjson` and the history model. Ops are produced as JSON
objects (dicts) exactly as they appear in ``history.jsonl``; :func:`iter_ops`
streams them (the benchmark writes a million without holding them),
:func:`generate` collects them together with the model's ground truth.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from ..histories.jsonl import op_from_json
from ..histories.model import Op

# Record states in a key's log.
COMMITTED = 0  # a visible data record
OPEN = 1  # appended by a transaction that has not resolved yet
ABORTED = 2  # appended by a transaction that aborted: a hole forever
MARKER = 3  # a transaction control record: a hole forever


@dataclass(frozen=True)
class GenParams:
    """Shape of a generated history. Every combination yields a valid history."""

    seed: int = 0
    keys: int = 3
    processes: int = 3
    ops: int = 40  # main-phase data ops to invoke (assign ops come on top)
    txn: bool = True  # generate txn ops besides plain sends and polls
    poll_weight: float = 1.0
    send_weight: float = 1.0
    txn_weight: float = 1.0
    max_sends: int = 3  # sends per plain send op (1..max_sends)
    max_mops: int = 4  # micro-ops per txn op (1..max_mops)
    txn_poll_p: float = 0.35  # chance that a txn micro-op is a poll
    abort_p: float = 0.15  # a txn aborts on purpose -> fail
    fail_p: float = 0.05  # a plain send is refused / a poll errors -> fail
    info_p: float = 0.05  # the client cannot tell -> info (commit or not, 50/50)
    crash_p: float = 0.02  # the client crashes mid-op -> info, new process number
    sub_via: str = "assign"  # "assign" or "subscribe"
    reassign_p: float = 0.05  # assign mode: a process re-assigns before an op
    reseek: bool = False  # assign mode: re-assigns seek to the beginning
    rebalance_p: float = 0.05  # subscribe mode: the group rebalances before an op
    null_offset_p: float = 0.0  # a txn send's offset is reported as null or -1
    omit_invokes: bool = False  # drop invoke lines (forces atomic ops)
    atomic: bool = False  # ops do not overlap in time
    truncate: bool = False  # cut the main phase short: in-flight ops never complete
    tail_invokes: int = 0  # invokes left in flight after the drain
    max_batch: int = 4  # records per key per main-phase poll
    drain_batch: int = 50  # records per key per drain poll
    drain_consumers: int = 1
    int_keys: bool = True  # keys written as ints (else "k0", "k1", ...)
    value_base: int = 1000  # first value; values are unique overall
    max_step_ns: int = 2_000_000  # clock advance per event: 1..max_step_ns
    from_start_p: float = 0.5  # a consumer's newly assigned key starts at 0 (else at the end)
    nemesis_p: float = 0.0  # chance per event of a nemesis op (the checker must skip them)


@dataclass
class Truth:
    """What the model knows that a checker must infer: used by tests and mutators."""

    # key (string form) -> [(offset, value)] of committed records, offset order
    log: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    # value -> (key, offset) of records that never became visible
    # (aborted txns, and info txns that the model aborted)
    aborted: dict[int, tuple[str, int]] = field(default_factory=dict)
    # values sent by info ops that never reached the log at all
    never_appended: set[int] = field(default_factory=set)
    markers: int = 0  # control records written
    rewinds: int = 0  # consumer rewinds after fail/info ops that had read something
    crashes: int = 0
    rebalances: int = 0
    in_flight: int = 0  # invokes that never complete


@dataclass
class Generated:
    """A generated history: JSON op objects in file order, plus the model's truth."""

    params: GenParams
    ops: list[dict[str, Any]]
    truth: Truth

    def to_ops(self) -> list[Op]:
        return to_ops(self.ops)


def to_ops(dicts: list[dict[str, Any]]) -> list[Op]:
    """Validate JSON op objects through the same path as the JSONL reader."""
    return [op_from_json(d, i) for i, d in enumerate(dicts)]


def to_jsonl(dicts: Any, path: str | os.PathLike[str]) -> int:
    """Write op objects as history.jsonl lines (orjson, buffered); return the count."""
    n = 0
    with open(path, "wb", buffering=1 << 20) as fh:
        for d in dicts:
            fh.write(orjson.dumps(d))
            fh.write(b"\n")
            n += 1
    return n


def generate(params: GenParams) -> Generated:
    """Run the model and collect the history with its ground truth."""
    sim = _Sim(params, collect_truth=True)
    ops = list(sim.run())
    return Generated(params, ops, sim.truth)


def iter_ops(params: GenParams) -> Iterator[dict[str, Any]]:
    """Stream the history's op objects (no truth kept besides the logs themselves)."""
    return _Sim(params, collect_truth=False).run()


# ----------------------------------------------------------------------------- the model


class _KeyLog:
    """One partition: parallel arrays of values and record states, offset = index."""

    __slots__ = ("states", "values")

    def __init__(self) -> None:
        self.values: list[int] = []
        self.states = bytearray()

    def append(self, value: int, state: int) -> int:
        self.values.append(value)
        self.states.append(state)
        return len(self.values) - 1

    def read(self, pos: int, limit: int) -> tuple[list[tuple[int, int]], int]:
        """read_committed fetch: committed records from pos, stopping at the LSO."""
        out: list[tuple[int, int]] = []
        states = self.states
        n = len(states)
        while pos < n and len(out) < limit:
            s = states[pos]
            if s == OPEN:
                break  # last stable offset: nothing beyond it is visible yet
            if s == COMMITTED:
                out.append((pos, self.values[pos]))
            pos += 1
        # Holes at the end of what we read are skipped for free by the next fetch.
        return out, pos

    def end(self) -> int:
        return len(self.values)


@dataclass
class _Run:
    """An op in flight."""

    f: str
    plan: list[tuple[Any, ...]]  # ("send", key, value) | ("poll",)
    outcome: str  # ok | fail | info
    commits: bool  # does it take effect (ok: yes, fail: no, info: coin)
    crash: bool
    invoke_time: int
    results: list[list[Any]] = field(default_factory=list)
    step: int = 0
    start_pos: dict[str, int] = field(default_factory=dict)
    appended: list[tuple[str, int]] = field(default_factory=list)  # (key, offset)
    read_any: bool = False
    rebalance_log: list[dict[str, Any]] = field(default_factory=list)
    resolved: bool = False


@dataclass
class _Proc:
    pid: int
    assigned: list[str]
    pos: dict[str, int]
    gen: int = 0  # subscribe mode: group generation this member has applied
    run: _Run | None = None
    done: bool = False


class _Sim:
    def __init__(self, p: GenParams, collect_truth: bool) -> None:
        if p.omit_invokes and not p.atomic:
            # Without invokes the checker must take an op to happen at its completion;
            # only non-overlapping ops make that reading true.
            p = replace(p, atomic=True)
        if p.sub_via not in ("assign", "subscribe"):
            raise ValueError(f"sub_via must be 'assign' or 'subscribe', not {p.sub_via!r}")
        self.p = p
        self.rng = random.Random(p.seed)
        self.collect = collect_truth
        self.truth = Truth()
        self.keys = [str(i) if p.int_keys else f"k{i}" for i in range(max(1, p.keys))]
        self.logs = {k: _KeyLog() for k in self.keys}
        self.clock = 0
        self.index = 0
        self.next_value = p.value_base
        self.next_pid = 0
        self.nemesis_on = False
        self.procs: list[_Proc] = []
        # subscribe mode: the group
        self.group_gen = 0
        self.owner: dict[str, int] = {}  # key -> pid
        self.committed_pos: dict[str, int] = dict.fromkeys(self.keys, 0)

    # --------------------------------------------------------------- emission helpers

    def _tick(self) -> int:
        self.clock += self.rng.randint(1, self.p.max_step_ns)
        return self.clock

    def _ext_key(self, k: str) -> Any:
        return int(k) if self.p.int_keys else k

    def _emit(self, d: dict[str, Any]) -> dict[str, Any]:
        d["index"] = self.index
        self.index += 1
        return d

    def _op(self, pid: int | str, typ: str, f: str, value: Any, **extra: Any) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": 0,
            "time": self._tick(),
            "process": pid,
            "type": typ,
            "f": f,
            "value": value,
        }
        d.update(extra)
        return self._emit(d)

    # --------------------------------------------------------------- processes

    def _new_proc(self, assigned: list[str] | None = None) -> _Proc:
        pid = self.next_pid
        self.next_pid += 1
        return _Proc(pid, list(assigned or []), {})

    def _pick_keys(self) -> list[str]:
        n = self.rng.randint(1, len(self.keys))
        return sorted(self.rng.sample(self.keys, n), key=self.keys.index)

    def _assign(self, pr: _Proc, keys: list[str], seek: bool) -> Iterator[dict[str, Any]]:
        """An assign op (invoke + ok). Retained keys keep their position."""
        value = [self._ext_key(k) for k in keys]
        extra = {"seek_to_beginning": True} if seek else {}
        if not self.p.omit_invokes:
            yield self._op(pr.pid, "invoke", "assign", value, **extra)
        yield self._op(pr.pid, "ok", "assign", value, **extra)
        for k in keys:
            if seek:
                pr.pos[k] = 0
            elif k not in pr.pos:
                # A key this consumer never read: start at the beginning or at the end.
                start = self.rng.random() < self.p.from_start_p
                pr.pos[k] = 0 if start else self.logs[k].end()
        pr.assigned = list(keys)

    def _subscribe(self, pr: _Proc) -> Iterator[dict[str, Any]]:
        value = [self._ext_key(k) for k in self.keys]
        if not self.p.omit_invokes:
            yield self._op(pr.pid, "invoke", "subscribe", value)
        yield self._op(pr.pid, "ok", "subscribe", value)

    def _rebalance(self) -> None:
        """Hand every key to a random live member; members apply it at their next poll."""
        members = [pr.pid for pr in self.procs if not pr.done]
        if not members:
            return
        self.group_gen += 1
        self.truth.rebalances += 1
        for k in self.keys:
            self.owner[k] = self.rng.choice(members)

    def _apply_rebalance(self, pr: _Proc, run: _Run | None) -> None:
        new = [k for k in self.keys if self.owner.get(k) == pr.pid]
        old = pr.assigned
        revoked = [k for k in old if k not in new]
        added = [k for k in new if k not in old]
        for k in added:
            # A newly owned key resumes from the group's committed position: it may be
            # behind or ahead of where this member once was (legal with subscribe).
            pr.pos[k] = self.committed_pos[k]
            if run is not None:
                run.start_pos[k] = pr.pos[k]
        for k in revoked:
            pr.pos.pop(k, None)
        pr.assigned = new
        pr.gen = self.group_gen
        if run is not None and (revoked or added):
            if revoked:
                run.rebalance_log.append(
                    {"type": "revoked", "keys": [self._ext_key(k) for k in revoked]}
                )
            if added:
                run.rebalance_log.append(
                    {"type": "assigned", "keys": [self._ext_key(k) for k in added]}
                )

    # --------------------------------------------------------------- ops

    def _plan(self) -> tuple[str, list[tuple[Any, ...]]]:
        p, rng = self.p, self.rng
        kinds = ["poll", "send"] + (["txn"] if p.txn else [])
        weights = [p.poll_weight, p.send_weight] + ([p.txn_weight] if p.txn else [])
        f = rng.choices(kinds, weights)[0]
        if f == "poll":
            return f, [("poll",)]
        if f == "send":
            return f, [
                ("send", rng.choice(self.keys), self._value())
                for _ in range(rng.randint(1, p.max_sends))
            ]
        plan: list[tuple[Any, ...]] = []
        for _ in range(rng.randint(1, p.max_mops)):
            if rng.random() < p.txn_poll_p:
                plan.append(("poll",))
            else:
                plan.append(("send", rng.choice(self.keys), self._value()))
        return f, plan

    def _invoke_mop(self, m: tuple[Any, ...]) -> list[Any]:
        return ["poll"] if m[0] == "poll" else ["send", self._ext_key(m[1]), m[2]]

    def _value(self) -> int:
        v = self.next_value
        self.next_value += 1
        return v

    def _start(self, pr: _Proc) -> Iterator[dict[str, Any]]:
        p, rng = self.p, self.rng
        f, plan = self._plan()
        r = rng.random()
        crash = False
        if r < (p.abort_p if f == "txn" else p.fail_p):
            outcome = "fail"
        elif rng.random() < p.crash_p:
            outcome, crash = "info", True
        elif rng.random() < p.info_p:
            outcome = "info"
        else:
            outcome = "ok"
        commits = outcome == "ok" or (outcome == "info" and rng.random() < 0.5)
        run = _Run(f, plan, outcome, commits, crash, self.clock)
        run.start_pos = dict(pr.pos)
        pr.run = run
        inv = [self._invoke_mop(m) for m in plan]
        if not p.omit_invokes:
            yield self._op(pr.pid, "invoke", f, inv)
        run.invoke_time = self.clock

    def _step(self, pr: _Proc) -> Iterator[dict[str, Any]]:
        """Advance pr's op by one event: a micro-op, the resolution, or the completion."""
        run = pr.run
        assert run is not None
        if run.step < len(run.plan):
            m = run.plan[run.step]
            run.step += 1
            self._tick()
            if m[0] == "send":
                self._do_send(pr, run, m[1], m[2])
            else:
                self._do_poll(pr, run)
            return
        if not run.resolved:
            self._tick()
            self._resolve(run)
            return
        yield from self._complete(pr, run)

    def _do_send(self, pr: _Proc, run: _Run, k: str, v: int) -> None:
        log = self.logs[k]
        if run.f == "txn":
            # Transactional records take an offset now, visible only after commit.
            off = log.append(v, OPEN)
            run.appended.append((k, off))
            run.results.append(["send", k, off, v])
        elif run.commits:
            off = log.append(v, COMMITTED)
            run.appended.append((k, off))
            run.results.append(["send", k, off, v])
            if self.collect:
                self.truth.log.setdefault(k, []).append((off, v))
        else:
            # Refused (fail) or lost in flight before reaching the broker (info).
            run.results.append(["send", k, None, v])
            if self.collect:
                self.truth.never_appended.add(v)

    def _do_poll(self, pr: _Proc, run: _Run) -> None:
        if self.p.sub_via == "subscribe" and pr.gen != self.group_gen:
            self._apply_rebalance(pr, run)
        batch = self.p.max_batch
        recs: dict[str, list[list[int]]] = {}
        for k in pr.assigned:
            got, pos = self.logs[k].read(pr.pos.get(k, 0), self.rng.randint(0, batch))
            pr.pos[k] = pos
            if got:
                recs[k] = [[o, v] for o, v in got]
                run.read_any = True
        run.results.append(["poll", recs])

    def _resolve(self, run: _Run) -> None:
        if run.resolved:
            return
        run.resolved = True
        if run.f != "txn" or not run.appended:
            return
        state = COMMITTED if run.commits else ABORTED
        touched: list[str] = []
        for k, off in run.appended:
            log = self.logs[k]
            log.states[off] = state
            if k not in touched:
                touched.append(k)
            if self.collect:
                v = log.values[off]
                if state == COMMITTED:
                    self.truth.log.setdefault(k, []).append((off, v))
                else:
                    self.truth.aborted[v] = (k, off)
        for k in touched:
            self.logs[k].append(0, MARKER)
            self.truth.markers += 1
        if self.collect and state == COMMITTED:
            for k in touched:
                self.truth.log[k].sort()

    def _encode_results(self, pr: _Proc, run: _Run) -> list[list[Any]]:
        p, rng = self.p, self.rng
        out: list[list[Any]] = []
        # A failed or indeterminate op reports what it obtained before the error.
        cut = len(run.plan)
        if run.outcome != "ok" and rng.random() < 0.5:
            cut = rng.randint(0, len(run.plan))
        for i, m in enumerate(run.plan):
            if i >= cut or i >= len(run.results):
                out.append(self._invoke_mop(m))
                continue
            res = run.results[i]
            if res[0] == "send":
                _, k, off, v = res
                if off is not None and run.f == "txn" and rng.random() < p.null_offset_p:
                    off = rng.choice([None, -1])
                if off is None:
                    out.append(["send", self._ext_key(k), v])
                else:
                    out.append(["send", self._ext_key(k), [off, v]])
            else:
                out.append(["poll", res[1]])
        return out

    def _complete(self, pr: _Proc, run: _Run) -> Iterator[dict[str, Any]]:
        value = self._encode_results(pr, run)
        extra: dict[str, Any] = {}
        if run.rebalance_log:
            extra["rebalance_log"] = run.rebalance_log
        if run.outcome == "fail":
            extra["error"] = "aborted" if run.f == "txn" else "refused"
        elif run.outcome == "info":
            extra["error"] = "client crashed" if run.crash else "timed out"
        yield self._op(pr.pid, run.outcome, run.f, value, **extra)
        pr.run = None
        if run.outcome == "ok":
            for k in pr.assigned:
                self.committed_pos[k] = pr.pos.get(k, self.committed_pos[k])
        else:
            if run.read_any:
                self.truth.rewinds += 1
            # The driver seeks back to where the op began reading (Kafka would not).
            for k in list(pr.pos):
                if k in run.start_pos:
                    pr.pos[k] = run.start_pos[k]
        if run.crash:
            self.truth.crashes += 1
            pr.done = True

    # --------------------------------------------------------------- main loop

    def run(self) -> Iterator[dict[str, Any]]:
        p, rng = self.p, self.rng
        for _ in range(max(1, p.processes)):
            pr = self._new_proc()
            self.procs.append(pr)
        for pr in self.procs:
            if p.sub_via == "assign":
                yield from self._assign(pr, self._pick_keys(), seek=False)
            else:
                yield from self._subscribe(pr)
        if p.sub_via == "subscribe":
            self._rebalance()

        remaining = p.ops
        cut_at = rng.randint(1, max(1, p.ops)) if p.truncate else None
        started = 0
        while True:
            live = [pr for pr in self.procs if not pr.done]
            busy = [pr for pr in live if pr.run is not None]
            if remaining <= 0 and not busy:
                break
            if cut_at is not None and started >= cut_at:
                break
            if p.nemesis_p and rng.random() < p.nemesis_p:
                yield self._nemesis()
                continue
            pr = busy[0] if p.atomic and busy else rng.choice(live)
            if pr.run is None:
                if remaining <= 0:
                    continue
                if p.sub_via == "assign" and rng.random() < p.reassign_p:
                    yield from self._assign(pr, self._pick_keys(), seek=p.reseek)
                    continue
                if p.sub_via == "subscribe" and rng.random() < p.rebalance_p:
                    self._rebalance()
                remaining -= 1
                started += 1
                yield from self._start(pr)
                continue
            yield from self._step(pr)
            if pr.done:
                # The crashed client's successor: a new process number, a fresh consumer.
                succ = self._new_proc()
                self.procs.append(succ)
                if p.sub_via == "assign":
                    yield from self._assign(succ, self._pick_keys(), seek=False)
                else:
                    yield from self._subscribe(succ)
                    self._rebalance()

        # Cut short: ops still in flight never complete. Their effects are settled
        # on the broker side all the same (a txn commits or aborts; an idempotent
        # send that started appending finishes), so the drain sees a consistent log.
        for pr in self.procs:
            run = pr.run
            if run is None or pr.done:
                continue
            self.truth.in_flight += 1
            if p.omit_invokes:
                # An op that never completes shows only through its invoke; ops are
                # atomic here, so nothing happened since it started.
                yield self._op(pr.pid, "invoke", run.f, [self._invoke_mop(m) for m in run.plan])
            if run.f != "txn":
                # All or nothing, as for info sends: finish what started appending.
                finish = run.commits and bool(run.appended)
                for m in run.plan[run.step :]:
                    if m[0] != "send":
                        continue
                    if finish:
                        self._do_send(pr, run, m[1], m[2])
                    elif self.collect:
                        self.truth.never_appended.add(m[2])
            self._resolve(run)
            pr.done = True
            pr.run = None

        yield from self._drain()

        for _ in range(p.tail_invokes):
            pr = self._new_proc()
            self.truth.in_flight += 1
            f, plan = self._plan()
            if self.collect:
                self.truth.never_appended.update(m[2] for m in plan if m[0] == "send")
            yield self._op(pr.pid, "invoke", f, [self._invoke_mop(m) for m in plan])

    def _nemesis(self) -> dict[str, Any]:
        """A fault starting or ending: recorded in the history, no effect on the model."""
        self.nemesis_on = not self.nemesis_on
        f = self.rng.choice(["partition", "kill", "pause", "memory-squeeze"])
        if f == "partition":
            f = "start-partition" if self.nemesis_on else "stop-partition"
            value: Any = {"shape": "isolate-one", "nodes": ["n1"]}
        elif f == "kill":
            f, value = ("kill" if self.nemesis_on else "start"), ["n2"]
        elif f == "pause":
            f, value = ("pause" if self.nemesis_on else "resume"), ["n3"]
        else:
            f = "memory-squeeze" if self.nemesis_on else "memory-release"
            value = {"n1": "256M"}
        return self._op("nemesis", "info", f, value)

    def _drain(self) -> Iterator[dict[str, Any]]:
        """Fresh consumers assign every key from the beginning and read to the end."""
        p, rng = self.p, self.rng
        drainers = [self._new_proc() for _ in range(max(1, p.drain_consumers))]
        for pr in drainers:
            yield from self._assign(pr, list(self.keys), seek=True)
        active = list(drainers)
        while active:
            pr = rng.choice(active)
            if all(pr.pos[k] >= self.logs[k].end() for k in self.keys):
                active.remove(pr)
                continue
            run = _Run("poll", [("poll",)], "ok", True, False, self.clock)
            if not p.omit_invokes:
                yield self._op(pr.pid, "invoke", "poll", [["poll"]])
            self._tick()
            recs: dict[str, list[list[int]]] = {}
            for k in self.keys:
                got, pos = self.logs[k].read(pr.pos[k], rng.randint(1, p.drain_batch))
                pr.pos[k] = pos
                if got:
                    recs[k] = [[o, v] for o, v in got]
            run.results.append(["poll", recs])
            yield self._op(pr.pid, "ok", "poll", [["poll", recs]])
