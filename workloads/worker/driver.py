"""`WorkerDriver`: the shared op flow over a client that runs as a worker process.

Each instance is one logical process and owns one worker process (one Kafka client
that produces and consumes). The op flow, the recording, the time budgets, the
retirement and the rewind rules are :class:`..ops.OpDriver`'s, as for confluent; each
client call of that flow is one request to the worker (docs/drivers.md). A call that
does not answer within its budget kills the worker (:class:`..bounded.CallTimeout`),
and an abrupt close *is* a crash: the worker gets SIGKILL.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..bounded import CallTimeout, Deadline
from ..drain import drain_settings
from ..driver import Completion, DriverFactory, KeyMap
from ..errors import classify
from ..ops import Fetched, Last, OpDriver
from ..rewind import Plan, ReadPositions
from ..slot import transactional_id
from .config import WorkerConfig, worker_program
from .errors import RULES, WorkerError
from .hosted import HostedProcess, HostPool
from .process import Spares, WorkerProcess

# A pool a logical process takes its worker from: started ahead (Spares) or hosted.
Pool = Spares | HostPool

# Extra time the Python side waits beyond a call's own timeout before it gives up on
# the worker (the worker honours the timeout it is given; this covers scheduling).
SLACK_S = 1.0
# Workers started ahead of need per driver (see Spares): a JVM's start is slow.
SPARES = {"java": 4}


class ClientFacts:
    """What one driver's workers said of themselves over a run (the transaction protocol
    kafka-clients chose, the library version) and how long each call took, for
    test.json's ``workload_results.clients``: where a driver's time goes."""

    FACTS = ("txn_protocol", "client_version")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.facts: dict[str, str] = {}
        self.calls: dict[str, list[float]] = {}  # call -> [count, total s, max s]
        self.hosts: dict[str, int] = {}  # host mode: processes per host, hosts started

    def note(self, reply: dict[str, Any]) -> None:
        for fact in self.FACTS:
            if isinstance(reply.get(fact), str):
                with self._lock:
                    self.facts[fact] = reply[fact]

    def timed(self, call: str, seconds: float) -> None:
        with self._lock:
            c = self.calls.setdefault(call, [0, 0.0, 0.0])
            c[0] += 1
            c[1] += seconds
            c[2] = max(c[2], seconds)

    def hosted(self, per_host: int, started: int) -> None:
        with self._lock:
            self.hosts = {"processes_per_host": per_host, "hosts_started": started}

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = dict(self.facts)
            if self.hosts:
                out["hosts"] = dict(self.hosts)
            if self.calls:
                out["call_ms"] = {
                    call: {
                        "n": int(n),
                        "mean": round(total / n * 1000, 2),
                        "max": round(mx * 1000, 1),
                    }
                    for call, (n, total, mx) in sorted(self.calls.items())
                }
            return out


class WorkerDriver(OpDriver):
    """A worker process's client for one process; see :class:`..driver.Driver`."""

    rules = RULES

    def __init__(
        self,
        cfg: WorkerConfig,
        process: int,
        slot: int,
        consume: bool = True,
        produce: bool = True,
        stop: threading.Event | None = None,
        program: list[str] | None = None,
        observed: ClientFacts | None = None,
        spares: Pool | None = None,
    ) -> None:
        self.cfg: WorkerConfig = cfg
        # what the client says of itself (txn_protocol ...) and how long its calls take
        self.observed = observed if observed is not None else ClientFacts()
        self.driver_name = f"{cfg.worker} driver"
        self.process = process
        self.stop = stop
        self.reads = ReadPositions()
        self._consume = consume
        self._produce_ok = produce
        self._op = 0  # tag of the current op's sends (a late report of an older op is ignored)
        self._results: list[Any] | None = None
        # subscribe mode: the consumer joins the run's group, and the keys the group gave
        # it are what the worker's rebalance events said (see _rebalanced)
        self._subscribe = consume and cfg.sub_via == "subscribe"
        self._group_keys: set[int] = set()
        # events a `subscribe` reply carried: reported by the next op that reads (the
        # subscribe op's completion has no rebalance_log, and an op starts a fresh one)
        self._carried: list[dict[str, Any]] = []
        name = f"{cfg.worker}-p{process}"
        self.worker: WorkerProcess | HostedProcess
        if spares is not None and program is None:
            self.worker = spares.take(name)
        else:
            self.worker = WorkerProcess(program or [str(worker_program(cfg.worker))], name)
        txn_id = transactional_id(cfg.txn_id_prefix, slot) if cfg.txn and produce else ""
        try:
            self._call(
                "open",
                {
                    "bootstrap": cfg.bootstrap,
                    "client_id": f"ktrial-p{process}",
                    "txn_id": txn_id,
                    "producer": produce,
                    "consumer": consume,
                    "group": cfg.group_id if self._subscribe else "",
                    "settings": cfg.settings(produce, consume),
                },
                cfg.init_timeout_s,
            )
        except BaseException:
            self.worker.kill()
            raise

    # -------------------------------------------------------------------- the channel
    def _call(self, call: str, args: dict[str, Any], budget_s: float) -> dict[str, Any]:
        """One request with a `budget_s` timeout; raises WorkerError for an error reply."""
        dl = self._deadline(budget_s + SLACK_S)
        t0 = time.monotonic()
        try:
            reply = self.worker.request(call, {**args, "timeout_ms": int(budget_s * 1000)}, dl)
        finally:
            self.observed.timed(call, time.monotonic() - t0)
        events = reply.get("rebalance")
        if events:
            self._rebalanced(events)
        if not reply.get("ok"):
            raise WorkerError(reply.get("error") or {"name": "WorkerError", "message": "no error"})
        self.observed.note(reply)
        return reply

    def _rebalanced(self, events: Any) -> None:
        """The group's assignment changed (a reply's `rebalance` events, in order): note
        it for the op's completion (rebalance_log) and forget the moved keys' positions."""
        for ev in events if isinstance(events, list) else []:
            kind = ev.get("type") if isinstance(ev, dict) else None
            if kind not in ("assigned", "revoked", "lost"):
                continue
            keys = []
            for p in ev.get("partitions") or []:
                try:
                    keys.append(self.cfg.keys.key_of(p["topic"], int(p["partition"])))
                except (KeyError, TypeError, ValueError):
                    continue  # not one of the run's keys
            keys.sort()
            if kind == "assigned":
                self._group_keys.update(keys)
                self.reads.rebalanced("assigned", keys)
            else:  # lost is a revocation the member learnt of late (as confluent's on_lost)
                self._group_keys.difference_update(keys)
                self.reads.rebalanced("revoked", keys)

    # -------------------------------------------------------------------- public API
    def assign(self, keys: Sequence[int], from_beginning: bool = False) -> Completion:
        keys = sorted(set(keys))
        try:
            if from_beginning:
                self._assign_at([(k, 0) for k in keys])
                self.reads.assigned_to(keys, {})
            elif self._subscribe:
                # the group assigns partitions of these topics; which ones arrives later,
                # as rebalance events in the replies (mostly a fetch's)
                self.reads.rebalance_log = []
                try:
                    self._call(
                        "subscribe", {"topics": self.cfg.keys.topics(keys)}, self.cfg.op_timeout_s
                    )
                finally:
                    self._carried += self.reads.rebalance_log
                    self.reads.rebalance_log = []
            else:
                plan, pos = self.reads.assign_plan(keys)
                self._assign_at(plan)
                self.reads.assigned_to(keys, pos)
        except (WorkerError, CallTimeout) as e:
            v = classify(self.rules, e, "poll")
            return Completion(v.type, keys, v.error, retire=True)
        return Completion("ok", keys)

    def positions(self, keys: Sequence[int]) -> dict[int, int]:
        """The consumer's next offset per key (negative when unknown): see ReadPositions.known."""
        reply = self._call("position", {"offsets": self._tps([(k, -1) for k in keys])}, 5.0)
        client = {
            self.cfg.keys.key_of(p["topic"], p["partition"]): int(p["offset"])
            for p in reply.get("positions", [])
        }
        return self.reads.known(keys, client)

    def close(self, abrupt: bool = False) -> None:
        """Graceful: the worker flushes (bounded) and exits. Abrupt: SIGKILL, a crash."""
        w = self.worker
        if w.dead:
            return
        if abrupt:
            w.kill()
            return
        wait = self.cfg.close_wait_s
        try:
            self._call("close", {"abrupt": False}, wait)
            w.wait(wait)
        except (WorkerError, CallTimeout):
            pass
        w.kill()

    # ------------------------------------------------------------ client calls (OpDriver)
    def _produce(self, mops: list[Any], idx: list[int], results: list[Any]) -> None:
        if results is not self._results:  # a new op
            self._results = results
            self._op += 1
        records = []
        for i in idx:
            _, key, val = mops[i]
            tp = self.cfg.keys.tp(key)
            records.append(
                {
                    "op": self._op,
                    "i": i,
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "value": str(val),
                }
            )
        self._call("produce", {"records": records}, self.cfg.op_timeout_s)

    def _flush(self, dl: Deadline) -> int:
        results = self._results
        while True:
            reply = self._call("flush", {}, dl.slice())
            for d in reply.get("results", []):
                if results is None or d.get("op") != self._op:
                    continue
                i = int(d["i"])
                if 0 <= i < len(results):
                    err = d.get("error")
                    results[i] = WorkerError(err) if err is not None else int(d["offset"])
            unreported = int(reply.get("unreported", 0))
            if unreported == 0 or dl.expired():
                return unreported

    def _fetch(self) -> tuple[list[Fetched], list[Any]]:
        if self._carried:
            self.reads.rebalance_log[:0] = self._carried
            self._carried = []
        reply = self._call("fetch", {"max": self.cfg.max_poll_records}, self.cfg.poll_ms / 1000.0)
        records: list[Fetched] = [
            (t, int(p), int(o), None if v is None else str(v).encode())
            for t, p, o, v in reply.get("records", [])
        ]
        events = [WorkerError(e) for e in reply.get("errors", [])]
        return records, events

    def _commit_progress(self, last: Last) -> None:
        """Subscribe mode without transactions: tell the group how far this consumer read,
        asynchronously and best effort (the next member a key moves to starts there)."""
        offsets = [{"topic": t, "partition": p, "offset": o + 1} for (t, p), o in last.items()]
        # (a worker killed for not answering shows at the next call, which retires it)
        with contextlib.suppress(WorkerError, CallTimeout):
            self._call("commit_offsets", {"offsets": offsets}, self.cfg.op_timeout_s)

    def _begin(self) -> None:
        self._call("begin", {}, self.cfg.op_timeout_s)

    def _send_offsets(self, last: Last, budget_s: float) -> None:
        moved = revoked_in_op(self.reads.rebalance_log, self.cfg.keys, last)
        if moved:
            # The group took keys this transaction read away from this member during the
            # op: committing their offsets would move another member's position.
            raise WorkerError(revoked_failure(moved))
        offsets = [{"topic": t, "partition": p, "offset": o + 1} for (t, p), o in last.items()]
        self._call("send_offsets", {"group": self.cfg.group_id, "offsets": offsets}, budget_s)

    def _commit(self, budget_s: float) -> None:
        self._call("commit", {}, budget_s)

    def _abort(self, budget_s: float) -> None:
        self._call("abort", {}, budget_s)

    def _has_consumer(self) -> bool:
        return self._consume and not self.worker.dead

    def _assign_at(self, plan: Plan) -> None:
        self._call("assign", {"offsets": self._tps(plan)}, self.cfg.op_timeout_s)

    def _seek(self, key: int, offset: int) -> None:
        self._call("seek", {"offsets": self._tps([(key, offset)])}, self.cfg.op_timeout_s)

    def _current_keys(self) -> list[int]:
        if self._subscribe:
            return sorted(self._group_keys)
        return list(self.reads.assigned)

    def _call_errors(self) -> tuple[type[BaseException], ...]:
        return (WorkerError, CallTimeout, RuntimeError)

    # ------------------------------------------------------------------------ helpers
    def _tps(self, plan: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
        out = []
        for k, off in plan:
            tp = self.cfg.keys.tp(k)
            out.append({"topic": tp.topic, "partition": tp.partition, "offset": off})
        return out


def revoked_in_op(log: Sequence[dict[str, Any]], keys: KeyMap, last: Last) -> list[int]:
    """The keys an op read (`last`) that a rebalance event of the op (`log`) revoked."""
    revoked = {k for ev in log if ev.get("type") == "revoked" for k in ev.get("keys", [])}
    read = set()
    for t, p in last:
        try:
            read.add(keys.key_of(t, p))
        except KeyError:
            continue
    return sorted(revoked & read)


def revoked_failure(moved: list[int]) -> dict[str, Any]:
    """Why a transaction is aborted instead of committing its offsets (see _send_offsets)."""
    return {
        "name": "RevokedInTransaction",
        "message": f"keys {moved} were revoked from this consumer while the transaction read"
        " them; their offsets are not committed and the transaction is aborted",
        "txn_requires_abort": True,
    }


def spares_for(cfg: WorkerConfig, observed: ClientFacts | None = None) -> Pool | None:
    """Where `cfg`'s processes take their workers: hosts of `processes_per_host` processes
    each when the settings ask for more than one (java's `processes_per_jvm`), else a pool
    of pre-started workers when the worker starts slowly, else None (started on demand)."""
    program = [str(worker_program(cfg.worker))]
    per_host = cfg.processes_per_host()
    if per_host > 1:
        return HostPool(program, per_host, observed=observed)
    n = SPARES.get(cfg.worker, 0)
    return Spares(program, n) if n > 0 else None


def worker_factory(
    cfg: WorkerConfig,
    stop: threading.Event | None = None,
    observed: ClientFacts | None = None,
    spares: Pool | None = None,
) -> DriverFactory:
    """Opens a WorkerDriver per process (the queue workload's driver factory); what the
    clients say of themselves (the transaction protocol they use) goes into `observed`;
    a process takes its worker from `spares` when given (the caller closes it)."""

    def open_driver(process: int, slot: int) -> WorkerDriver:
        return WorkerDriver(cfg, process, slot, stop=stop, observed=observed, spares=spares)

    return open_driver


def drain_clients(
    worker: str, bootstrap: str, keys: KeyMap, run_id: str, consumer_config: dict[str, Any]
) -> Callable[[int], WorkerDriver]:
    """Fresh read-only worker clients for the drain: assign mode, long polls, big batches."""
    cfg = WorkerConfig(
        bootstrap=bootstrap, keys=keys, worker=worker, **drain_settings(run_id, consumer_config)
    )
    return lambda process: WorkerDriver(cfg, process, -1, produce=False)
