"""The `txn-cost` workload: what Kafka transactions cost, by transaction size and producer count.

A measurement, not a fault hunt (though its history is checked like any other).
It walks a matrix of cells, one after another: for each producer count (outer
loop, default 4/16/64) it opens that many transactional producers, each a
logical process with its own ``transactional.id``; for each transaction size
(inner loop, default 5/20/80/320 records) every producer loops ``begin, produce
size records, commit`` for ``seconds_per_cell``. The producers of one count are
kept across its sizes (opening 64 transactional producers costs seconds of
``init_transactions``), and each producer first runs ``warmup_txns`` unmeasured
transactions per cell so that metadata lookups and the first AddPartitionsToTxn
do not count.

Each transaction is one ``txn`` op recorded through the :class:`.slot.Slot`
exactly as the queue workload records its transactions (invoke before, completion
after, types by :mod:`.errors`, retirement of fenced or fatal producers); its
micro-ops are ``["send", key, [offset, value]]``. Values are unique integers; the
record payload is the value in decimal padded with spaces to ``message_bytes``
(the drain's decoder, ``int()``, ignores the padding, so polls read the integer
back). Keys are the partitions of one topic: key k is partition k, and value v
goes to key ``v % partitions``, so every transaction spreads over
``min(size, partitions)`` partitions.

Measured per cell: committed transactions/s, records/s, payload MB/s (10^6 bytes
of ``message_bytes`` payload per committed record), and latency quantiles of the
``commit_transaction`` call alone and of the whole transaction op, from the ok
ops invoked inside the cell's window. The window is closed-loop: it starts once
every producer has warmed up, producers stop starting transactions when it ends,
and the elapsed time runs until the last one in flight completed.

``driver`` picks the producers' client: confluent (librdkafka in process,
:class:`PaddedTxnDriver`) or a worker (franz, java: docs/drivers.md,
:class:`PaddedWorkerDriver`), which pads the records itself (``open``'s
``value_bytes``) and whose per-call times show, per cell, where a transaction's time
goes (``call_ms``). The drain reads with the same client library.

The table is what ``results()`` returns: the run orchestration (trial.py) writes it
to test.json as ``workload_results``; ``drain()`` also returns it under ``"txn_cost"``
and prints it to stderr.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

import confluent_kafka as ck

from ..clusters.base import Cluster
from ..clusters.security import Security, security_of
from ..histories.recorder import Recorder
from . import drain as drain_mod
from .bounded import CallTimeout
from .confluent import ConfluentDriver, DriverConfig
from .confluent import library_version as confluent_version
from .drainers import drain_clients_for
from .driver import Completion, Driver, DriverFactory, KeyMap, TopicPartition
from .options import CommonOptions, topic_stem
from .slot import Slot
from .tracker import OffsetTracker
from .worker import WORKERS, WorkerConfig, WorkerDriver, WorkerError, worker_program
from .worker import library_version as worker_version
from .worker.config import processes_per_host
from .worker.driver import ClientFacts, Pool, spares_for

# The payload holds the value's decimal digits; a 64-bit value has at most 20.
MIN_MESSAGE_BYTES = 20
# librdkafka's and the broker's default largest message (message.max.bytes).
MAX_MESSAGE_BYTES = 1_000_000
# Each producer is a thread with its own librdkafka instance (a handful of threads each).
MAX_PRODUCERS = 512
QUANTILES = (0.5, 0.9, 0.99)
DRIVERS = ("confluent", *WORKERS)
# The producer counts when none are given. A java producer is a JVM of its own (up to a
# 256 MB heap, about a second of CPU to start): 64 of them on a small machine measure the
# machine, so java's default matrix stops at 16 (docs/txn-cost.md, "Drivers").
DEFAULT_PRODUCERS: dict[str, tuple[int, ...]] = {"java": (4, 16)}
STANDARD_PRODUCERS = (4, 16, 64)
# At most this many java JVMs at once (producers / processes_per_jvm): more would not fit
# this kind of machine's memory beside the brokers.
MAX_JAVA_PRODUCERS = 64


# ---------------------------------------------------------------------------- options
def parse_int_list(name: str, value: Any) -> tuple[int, ...]:
    """An option holding positive ints: 20, "5,20,80" (how --workload-opt passes it), [5, 20]."""
    if isinstance(value, bool):
        raise ValueError(f"txn-cost workload: {name} must be integers, got {value!r}")
    if isinstance(value, int):
        items: list[Any] = [value]
    elif isinstance(value, str):
        items = [s for s in value.strip().strip("[]").replace(" ", "").split(",") if s]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ValueError(
            f"txn-cost workload: {name} must be a comma list of integers, got {value!r}"
        )
    out: list[int] = []
    for it in items:
        if isinstance(it, bool) or not isinstance(it, (int, str)):
            raise ValueError(f"txn-cost workload: {name} must be integers, got {it!r}")
        try:
            n = int(it)
        except ValueError:
            raise ValueError(f"txn-cost workload: {name} must be integers, got {it!r}") from None
        if n < 1:
            raise ValueError(f"txn-cost workload: {name} must be >= 1, got {n}")
        out.append(n)
    if not out:
        raise ValueError(f"txn-cost workload: {name} must not be empty")
    if len(set(out)) != len(out):
        raise ValueError(f"txn-cost workload: {name} has duplicates: {out}")
    return tuple(out)


@dataclass(frozen=True)
class TxnCostOptions:
    sizes: tuple[int, ...] = (5, 20, 80, 320)  # records per transaction
    # transactional producers at once; () = the driver's default (DEFAULT_PRODUCERS)
    producers: tuple[int, ...] = ()
    message_bytes: int = 4096
    seconds_per_cell: float = 10.0
    warmup_txns: int = 1  # unmeasured transactions per producer before each cell
    partitions: int = 8
    replication_factor: int = 3
    run_id: str = ""
    topic_prefix: str = ""  # topic <prefix>-txncost instead of ktrial-<run id>-txncost
    producer_config: dict[str, Any] = field(default_factory=dict)
    consumer_config: dict[str, Any] = field(default_factory=dict)  # the drain's readers
    driver: str = "confluent"  # the producers' client: confluent, or a worker (docs/drivers.md)

    def __post_init__(self) -> None:
        if self.driver not in DRIVERS:
            raise ValueError(
                f"txn-cost workload: unknown driver {self.driver!r}; choose one of"
                f" {', '.join(DRIVERS)}"
            )
        object.__setattr__(self, "sizes", parse_int_list("sizes", self.sizes))
        producers = self.producers
        if isinstance(producers, (tuple, list)) and not producers:
            producers = DEFAULT_PRODUCERS.get(self.driver, STANDARD_PRODUCERS)
        object.__setattr__(self, "producers", parse_int_list("producers", producers))
        if max(self.producers) > MAX_PRODUCERS:
            raise ValueError(
                f"txn-cost workload: producers must be <= {MAX_PRODUCERS}, got {self.producers}"
            )
        per_jvm = processes_per_host(self.driver, self.producer_config)
        if self.driver == "java" and math.ceil(max(self.producers) / per_jvm) > MAX_JAVA_PRODUCERS:
            raise ValueError(
                f"txn-cost workload: --driver java runs each producer in a JVM of its own;"
                f" producers must be <= {MAX_JAVA_PRODUCERS}, got {self.producers} (its"
                f" default is {','.join(map(str, DEFAULT_PRODUCERS['java']))}; franz and"
                " confluent take more; --producer-config processes_per_jvm=N puts N"
                " producers in one JVM)"
            )
        _int_in("message_bytes", self.message_bytes, MIN_MESSAGE_BYTES, MAX_MESSAGE_BYTES)
        _int_in("warmup_txns", self.warmup_txns, 0, 1000)
        _int_in("partitions", self.partitions, 1, 10_000)
        _int_in("replication_factor", self.replication_factor, 1, 100)
        s = self.seconds_per_cell
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not s > 0:
            raise ValueError(f"txn-cost workload: seconds_per_cell must be > 0, got {s!r}")
        for name in ("producer_config", "consumer_config"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"txn-cost workload: {name} must be a mapping of settings")
        if "transactional.id" in self.producer_config:
            raise ValueError(
                "txn-cost workload: producer_config may not set transactional.id "
                "(every producer process gets its own)"
            )

    @classmethod
    def from_dict(cls, opts: dict[str, Any]) -> TxnCostOptions:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(opts) - known)
        if unknown:
            hint = ""
            if "copiers" in unknown:  # what `ktrial run --concurrency` becomes off `queue`
                hint = " (--concurrency does not apply: use --workload-opt producers=4,16)"
            raise ValueError(
                f"txn-cost workload: unknown options {unknown}{hint}; known: {sorted(known)}"
            )
        return cls(**opts)

    @classmethod
    def from_common(cls, common: CommonOptions) -> dict[str, Any]:
        """txn-cost is always transactional and sets its own producer counts, so of the
        common settings it takes only the driver; the others are passed on (`concurrency`
        as `copiers`, as for copy) for from_dict to refuse by name, with a hint for
        `copiers`."""
        common.refuse_queue_only(takes_driver=True)
        opts: dict[str, Any] = {}
        if common.concurrency is not None:
            opts["copiers"] = common.concurrency
        opts.update(common.given("abort_p", "crash_clients", "rate", "driver"))
        return opts


def _int_in(name: str, v: Any, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"txn-cost workload: {name} must be an integer in [{lo}, {hi}], got {v!r}")


# ---------------------------------------------------------------------------- plan (pure)
@dataclass(frozen=True)
class Cell:
    producers: int
    size: int


def cell_schedule(producers: Sequence[int], sizes: Sequence[int]) -> list[Cell]:
    """The cells in run order: producer counts outer (their producers are reused), sizes inner."""
    return [Cell(p, s) for p in producers for s in sizes]


def planned_seconds(opts: TxnCostOptions) -> float:
    """Measured seconds of the whole matrix (warm-ups and opening producers come on top)."""
    return len(opts.producers) * len(opts.sizes) * float(opts.seconds_per_cell)


def txn_sends(first_value: int, size: int, partitions: int) -> list[list[Any]]:
    """The invoke of one transaction: values first..first+size-1, value v to key v % partitions."""
    return [["send", v % partitions, v] for v in range(first_value, first_value + size)]


def payload(value: int, message_bytes: int) -> bytes:
    """The record value: the integer in decimal, space-padded to `message_bytes`."""
    return str(value).encode().ljust(message_bytes, b" ")


# ---------------------------------------------------------------------------- stats (pure)
@dataclass(frozen=True)
class TxnSample:
    """One measured transaction: completion type, records, and its timings in seconds."""

    type: str  # ok | fail | info
    records: int
    txn_s: float | None  # the whole op (begin .. commit returned)
    commit_s: float | None  # commit_transaction alone (None: never reached)


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of an ascending sequence (the value at rank ceil(q * n))."""
    if not sorted_xs:
        raise ValueError("quantile of no values")
    i = max(0, min(len(sorted_xs) - 1, math.ceil(q * len(sorted_xs)) - 1))
    return sorted_xs[i]


def latency_ms(xs: Sequence[float | None]) -> dict[str, float | int | None]:
    """{n, p50, p90, p99, max} in ms of the known durations (seconds) in `xs`."""
    vals = sorted(x * 1000.0 for x in xs if x is not None)
    out: dict[str, float | int | None] = {"n": len(vals)}
    for q in QUANTILES:
        out[f"p{round(q * 100)}"] = round(quantile(vals, q), 2) if vals else None
    out["max"] = round(vals[-1], 2) if vals else None
    return out


def summarize_cell(
    cell: Cell,
    message_bytes: int,
    samples: Sequence[TxnSample],
    elapsed_s: float,
    status: str = "done",
) -> dict[str, Any]:
    """One row of the table: counts, rates over `elapsed_s`, latency quantiles of ok txns."""
    ok = [s for s in samples if s.type == "ok"]
    records = sum(s.records for s in ok)
    secs = max(elapsed_s, 1e-9)
    return {
        "producers": cell.producers,
        "size": cell.size,
        "status": status,
        "seconds": round(elapsed_s, 3),
        "txns_ok": len(ok),
        "txns_fail": sum(1 for s in samples if s.type == "fail"),
        "txns_info": sum(1 for s in samples if s.type == "info"),
        "records_ok": records,
        "txns_per_s": round(len(ok) / secs, 2),
        "records_per_s": round(records / secs, 1),
        "mb_per_s": round(records * message_bytes / secs / 1e6, 3),
        "commit_ms": latency_ms([s.commit_s for s in ok]),
        "txn_ms": latency_ms([s.txn_s for s in ok]),
    }


def not_run(cell: Cell) -> dict[str, Any]:
    """The row of a cell the run ended before (time limit or Ctrl-C)."""
    empty = latency_ms([])
    return {
        "producers": cell.producers,
        "size": cell.size,
        "status": "not run",
        "seconds": 0.0,
        "txns_ok": 0,
        "txns_fail": 0,
        "txns_info": 0,
        "records_ok": 0,
        "txns_per_s": 0.0,
        "records_per_s": 0.0,
        "mb_per_s": 0.0,
        "commit_ms": dict(empty),
        "txn_ms": dict(empty),
    }


COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], Any]], ...] = (
    ("prod", lambda r: r["producers"]),
    ("size", lambda r: r["size"]),
    ("txn ok", lambda r: r["txns_ok"]),
    ("fail", lambda r: r["txns_fail"]),
    ("info", lambda r: r["txns_info"]),
    ("txn/s", lambda r: r["txns_per_s"]),
    ("rec/s", lambda r: r["records_per_s"]),
    ("MB/s", lambda r: r["mb_per_s"]),
    ("commit p50", lambda r: r["commit_ms"]["p50"]),
    ("p90", lambda r: r["commit_ms"]["p90"]),
    ("p99", lambda r: r["commit_ms"]["p99"]),
    ("txn p50", lambda r: r["txn_ms"]["p50"]),
    ("p90", lambda r: r["txn_ms"]["p90"]),
    ("p99", lambda r: r["txn_ms"]["p99"]),
    ("status", lambda r: r["status"]),
)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as an aligned text table (latencies in ms; '-' where nothing was measured)."""
    cells = [[h for h, _ in COLUMNS]]
    for r in rows:
        cells.append(["-" if (v := get(r)) is None else str(v) for _, get in COLUMNS])
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


# The worker calls of a transaction, in the order it makes them (format_calls).
CALL_ORDER = ("begin", "produce", "flush", "commit", "abort", "open", "close")


def format_calls(rows: Sequence[dict[str, Any]]) -> str:
    """A worker driver's cells as a table of the ms each call took per transaction in
    the window (``call_ms``: where a transaction's time goes); "" when no row has one
    (the confluent driver)."""
    timed = [r for r in rows if r.get("call_ms")]
    if not timed:
        return ""
    names = {c for r in timed for c in r["call_ms"]}
    order = [c for c in CALL_ORDER if c in names] + sorted(names - set(CALL_ORDER))
    cells = [["prod", "size", *order]]
    for r in timed:
        means = r["call_ms"]
        cells.append(
            [str(r["producers"]), str(r["size"])]
            + [str(means[c]["per_txn"]) if c in means else "-" for c in order]
        )
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


# ---------------------------------------------------------------------------- driver
class PaddedTxnDriver(ConfluentDriver):
    """The confluent driver, producing padded payloads and timing commit_transaction.

    Reuses the driver's transaction path (and so its completion rules) unchanged;
    only the payload encoding and a stopwatch around the commit call differ.
    """

    def __init__(
        self,
        cfg: DriverConfig,
        process: int,
        slot: int,
        message_bytes: int,
        stop: threading.Event | None = None,
    ) -> None:
        self.message_bytes = message_bytes
        self.last_commit_s: float | None = None
        super().__init__(cfg, process, slot, consume=False, stop=stop)

    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion:
        self.last_commit_s = None
        return super().execute(f, value, abort)

    def _payload(self, value: Any) -> bytes:
        return payload(value, self.message_bytes)

    def _producer_call(
        self, name: str, fn: Callable[[ck.Producer, float], Any], budget_s: float
    ) -> None:
        if name != "commit":
            super()._producer_call(name, fn, budget_s)
            return
        t0 = time.perf_counter()
        try:
            super()._producer_call(name, fn, budget_s)
        finally:
            self.last_commit_s = time.perf_counter() - t0


class PaddingUnsupported(RuntimeError):
    """The worker program did not confirm open's value_bytes: it would send unpadded records."""


class PaddedWorkerDriver(WorkerDriver):
    """A worker driver whose worker pads every record to `message_bytes` (``open``'s
    ``value_bytes``, docs/drivers.md) and whose commit call is timed.

    The worker's transaction path (and so its completion rules) is WorkerDriver's
    unchanged. The worker must echo ``value_bytes`` in its reply to ``open``: one that
    does not (built before the field existed) is refused, since its records would be a
    few bytes where the table counts `message_bytes`.
    """

    def __init__(
        self,
        cfg: WorkerConfig,
        process: int,
        slot: int,
        message_bytes: int,
        stop: threading.Event | None = None,
        observed: ClientFacts | None = None,
        spares: Pool | None = None,
        program: list[str] | None = None,
    ) -> None:
        self.message_bytes = message_bytes
        self.last_commit_s: float | None = None
        super().__init__(
            cfg,
            process,
            slot,
            consume=False,
            stop=stop,
            program=program,
            observed=observed,
            spares=spares,
        )

    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion:
        self.last_commit_s = None
        return super().execute(f, value, abort)

    def _call(self, call: str, args: dict[str, Any], budget_s: float) -> dict[str, Any]:
        if call != "open":
            return super()._call(call, args, budget_s)
        reply = super()._call(call, {**args, "value_bytes": self.message_bytes}, budget_s)
        if reply.get("value_bytes") != self.message_bytes:
            self.worker.kill()
            raise PaddingUnsupported(
                f"the {self.cfg.worker} worker program did not confirm"
                f" value_bytes={self.message_bytes} in its reply to open (it answered"
                f" {reply.get('value_bytes')!r}): it would send unpadded records."
                " Rebuild it: bash scripts/setup.sh"
            )
        return reply

    def _commit(self, budget_s: float) -> None:
        t0 = time.perf_counter()
        try:
            super()._commit(budget_s)
        finally:
            self.last_commit_s = time.perf_counter() - t0


class CallClock(ClientFacts):
    """ClientFacts whose per-call totals can be read at a moment, so that a cell's share
    (the calls made between two readings) gives its mean time per call."""

    def snapshot(self) -> dict[str, tuple[int, float]]:
        """call -> (count, total seconds) so far."""
        with self._lock:
            return {call: (int(c[0]), float(c[1])) for call, c in self.calls.items()}


def call_means(
    before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]], txns: int
) -> dict[str, dict[str, float | int]]:
    """{call: {n, mean, per_txn}} of the calls made between two snapshots: their count,
    mean ms per call, and ms per transaction (their total over `txns` transactions: a
    transaction makes one produce call per record and may flush more than once)."""
    out: dict[str, dict[str, float | int]] = {}
    for call, (n1, t1) in sorted(after.items()):
        n0, t0 = before.get(call, (0, 0.0))
        if n1 > n0:
            out[call] = {
                "n": n1 - n0,
                "mean": round((t1 - t0) / (n1 - n0) * 1000, 2),
                "per_txn": round((t1 - t0) / max(txns, 1) * 1000, 2),
            }
    return out


# ---------------------------------------------------------------------------- workload
class _Gate:
    """Starts a cell's window once every producer has warmed up (or the run stops)."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self._ready = 0
        self._cond = threading.Condition()
        self._go = threading.Event()
        self.end = 0.0

    def ready(self) -> None:
        with self._cond:
            self._ready += 1
            self._cond.notify_all()

    def wait_ready(self, stop: threading.Event) -> None:
        with self._cond:
            while self._ready < self.parties and not stop.is_set():
                self._cond.wait(0.5)

    def open(self, end: float) -> None:
        self.end = end
        self._go.set()

    def wait_open(self, stop: threading.Event) -> bool:
        while not self._go.wait(0.5):
            if stop.is_set():
                return False
        return not stop.is_set()


class TxnCostWorkload:
    name = "txn-cost"

    def __init__(
        self,
        opts: TxnCostOptions,
        seed: int,
        driver_factory: Callable[[DriverConfig, threading.Event], DriverFactory] | None = None,
    ) -> None:
        if opts.driver != "confluent" and driver_factory is None:
            worker_program(opts.driver)  # built? (refused before any broker starts)
        self.opts = opts
        self.seed = seed
        self.run_id = opts.run_id or os.urandom(4).hex()
        self.topic = f"{topic_stem(opts.topic_prefix, self.run_id)}-txncost"
        self.keys = KeyMap({k: TopicPartition(self.topic, k) for k in range(opts.partitions)})
        self.cells = cell_schedule(opts.producers, opts.sizes)
        self.tracker = OffsetTracker()
        self._value_lock = threading.Lock()
        self._next_value = 0
        self.rows: dict[Cell, dict[str, Any]] = {}
        self.bootstrap = ""
        self.security = Security()
        self.say: Callable[[str], None] = _to_stderr
        self._make_factory = driver_factory or self._factory
        # a worker driver's: what its clients said of themselves and their call times
        # (all cells: results()["clients"]; per cell: the rows' call_ms), pre-started workers
        self.calls = CallClock()
        self._spares: Pool | None = None

    # ------------------------------------------------------------------------ setup
    def setup(self, cluster: Cluster) -> dict[str, Any]:
        cluster.create_topics(
            {self.topic: self.opts.partitions}, replication_factor=self.opts.replication_factor
        )
        self.bootstrap = cluster.bootstrap_servers
        self.security = security_of(cluster)  # TLS / SASL (clusters/security.py)
        return self.describe()

    def driver_config(self, producers: int) -> DriverConfig:
        """The producers of one producer count: transactional.id ``<run>-tc<count>-w<i>``;
        a WorkerConfig (the worker's own settings) for a worker driver."""
        config: Any = DriverConfig
        if self.opts.driver != "confluent":
            config = partial(WorkerConfig, worker=self.opts.driver)
        cfg: DriverConfig = config(
            bootstrap=self.bootstrap,
            keys=self.keys,
            group_id=f"ktrial-{self.run_id}-g",
            txn=True,
            idempotence=True,
            txn_id_prefix=f"ktrial-{self.run_id}-tc{producers}",
            producer_overrides={**self.security.librdkafka(), **self.opts.producer_config},
            consumer_overrides={**self.security.librdkafka(), **self.opts.consumer_config},
        )
        return cfg

    def describe(self) -> dict[str, Any]:
        cfg = self.driver_config(self.opts.producers[0])
        return {
            "workload": self.name,
            "workload_options": {**asdict(self.opts), "run_id": self.run_id, "seed": self.seed},
            "keys": self.keys.to_json(),
            "topics": {self.topic: self.opts.partitions},
            "replication_factor": self.opts.replication_factor,
            "producer_config": cfg.producer_config(),
            "consumer_config": cfg.consumer_config(),
            "txn": True,
            "idempotence": True,
            "sub_via": "assign",
            "driver": self.opts.driver,
            "driver_version": _library_version(self.opts.driver),
            "ww_deps": True,
            "txn_cost_plan": {
                "cells": [[c.producers, c.size] for c in self.cells],
                "measured_seconds": planned_seconds(self.opts),
            },
        }

    # ------------------------------------------------------------------------ main phase
    def run(self, recorder: Recorder, stop: threading.Event) -> None:
        """Every cell in turn; returns early once the matrix is done (or when `stop` is set)."""
        assert self.bootstrap, "setup() first"
        if self.opts.driver != "confluent" and self._make_factory == self._factory:
            cfg = self.driver_config(self.opts.producers[0])
            assert isinstance(cfg, WorkerConfig)
            self._spares = spares_for(cfg, self.calls)
        try:
            self._run_matrix(recorder, stop)
        finally:
            if self._spares is not None:
                self._spares.close()
                self._spares = None

    def _run_matrix(self, recorder: Recorder, stop: threading.Event) -> None:
        if self.opts.driver != "confluent" and self._make_factory == self._factory:
            self._check_padding(stop)
        errs: list[BaseException] = []
        for producers in self.opts.producers:
            if stop.is_set():
                break
            cfg = self.driver_config(producers)
            slots = [
                Slot(recorder, self._make_factory(cfg, stop), i, stop) for i in range(producers)
            ]
            try:
                _all(slots, Slot.open, f"txncost-open{producers}")
                for size in self.opts.sizes:
                    if stop.is_set():
                        break
                    cell = Cell(producers, size)
                    self.rows[cell] = self._run_cell(cell, slots, stop, errs)
                    if errs:
                        break
            finally:
                _all(slots, Slot.close, f"txncost-close{producers}")
            if errs:
                break
        if errs:
            raise RuntimeError(
                f"txn-cost workload: {len(errs)} worker(s) died: {errs[0]!r}"
            ) from errs[0]

    def _factory(self, cfg: DriverConfig, stop: threading.Event) -> DriverFactory:
        def open_driver(process: int, slot: int) -> Driver:
            if isinstance(cfg, WorkerConfig):
                return PaddedWorkerDriver(
                    cfg,
                    process,
                    slot,
                    self.opts.message_bytes,
                    stop=stop,
                    observed=self.calls,
                    spares=self._spares,
                )
            return PaddedTxnDriver(cfg, process, slot, self.opts.message_bytes, stop=stop)

        return open_driver

    def _check_padding(self, stop: threading.Event) -> None:
        """Before any producer: one worker, opened as a plain (not transactional) producer,
        must confirm the padding; one that cannot fails the run at once with advice
        (a producer's open would otherwise be retried for as long as the run goes on)."""
        cfg = replace(self.driver_config(self.opts.producers[0]), txn=False)
        assert isinstance(cfg, WorkerConfig)
        try:
            d = PaddedWorkerDriver(
                cfg, -1, -1, self.opts.message_bytes, stop=stop, spares=self._spares
            )
        except PaddingUnsupported as e:
            raise RuntimeError(f"txn-cost workload: {e}") from None
        except (WorkerError, CallTimeout, RuntimeError):
            return  # not the padding: the producers' own opens will meet it, and retry
        d.close(abrupt=True)

    def _run_cell(
        self, cell: Cell, slots: list[Slot], stop: threading.Event, errs: list[BaseException]
    ) -> dict[str, Any]:
        gate = _Gate(len(slots))
        samples: list[list[TxnSample]] = [[] for _ in slots]
        done_at = [0.0] * len(slots)
        threads = [
            threading.Thread(
                target=self._cell_worker,
                args=(s, cell.size, gate, samples[i], done_at, i, stop, errs),
                name=f"txncost-p{cell.producers}-s{cell.size}-w{i}",
                daemon=True,
            )
            for i, s in enumerate(slots)
        ]
        for t in threads:
            t.start()
        gate.wait_ready(stop)
        before = self.calls.snapshot()
        t0 = time.monotonic()
        gate.open(t0 + float(self.opts.seconds_per_cell))
        for t in threads:
            t.join()
        end = max([t0, *done_at])
        status = "cut short" if stop.is_set() and end < gate.end else "done"
        if stop.is_set() and end <= t0:
            return not_run(cell)
        done = [x for xs in samples for x in xs]
        row = summarize_cell(cell, self.opts.message_bytes, done, end - t0, status)
        if self.opts.driver != "confluent":
            # where the window's time went: each worker call's count, mean, ms per txn
            row["call_ms"] = call_means(before, self.calls.snapshot(), len(done))
        return row

    def _cell_worker(
        self,
        slot: Slot,
        size: int,
        gate: _Gate,
        out: list[TxnSample],
        done_at: list[float],
        i: int,
        stop: threading.Event,
        errs: list[BaseException],
    ) -> None:
        try:
            try:
                for _ in range(self.opts.warmup_txns):
                    if stop.is_set() or slot.driver is None:
                        break
                    self._txn(slot, size)
            finally:
                gate.ready()
            if not gate.wait_open(stop):
                return
            while not stop.is_set() and slot.driver is not None and time.monotonic() < gate.end:
                out.append(self._txn(slot, size))
                done_at[i] = time.monotonic()
        except BaseException as e:
            errs.append(e)

    def _txn(self, slot: Slot, size: int) -> TxnSample:
        with self._value_lock:
            first = self._next_value
            self._next_value += size
        mops = txn_sends(first, size, self.opts.partitions)
        timing: dict[str, float | None] = {}

        def call(d: Driver) -> Completion:
            t = time.perf_counter()
            c = d.execute("txn", mops)
            timing["txn"] = time.perf_counter() - t
            timing["commit"] = getattr(d, "last_commit_s", None)
            return c

        c = slot.record("txn", mops, call)
        self.tracker.observe(c.value)
        return TxnSample(c.type, size, timing.get("txn"), timing.get("commit"))

    # ------------------------------------------------------------------------ results
    def results(self) -> dict[str, Any]:
        """The table: one row per planned cell, in run order ("not run" when never reached)."""
        out: dict[str, Any] = {
            "driver": self.opts.driver,
            "message_bytes": self.opts.message_bytes,
            "seconds_per_cell": self.opts.seconds_per_cell,
            "warmup_txns": self.opts.warmup_txns,
            "partitions": self.opts.partitions,
            "cells": [self.rows.get(c) or not_run(c) for c in self.cells],
        }
        facts = self.calls.to_json()
        if facts:  # a worker driver's: as the other workloads' workload_results.clients
            out["clients"] = {self.opts.driver: facts}
        return out

    # ------------------------------------------------------------------------ drain
    def drain(self, recorder: Recorder, timeout_s: float) -> dict[str, Any]:
        """Read every key back with fresh read_committed clients; attach and print the table."""
        assert self.bootstrap, "setup() first"
        table = self.results()
        try:
            targets = self.tracker.targets(self.keys.keys)
            # the run's client library reads (its consumer settings: security + the run's)
            cfg = self.driver_config(self.opts.producers[0])
            clients = drain_clients_for(cfg, self.keys, self.run_id)
            res = drain_mod.drain(recorder, clients, targets, timeout_s)
        finally:
            calls = format_calls(table["cells"])
            self.say(
                f"txn-cost ({self.opts.driver}): {self.opts.message_bytes}-byte records,"
                " latencies in ms\n"
                + format_table(table["cells"])
                + (f"\nworker calls, ms per transaction in each window:\n{calls}" if calls else "")
            )
        res["txn_cost"] = table
        return res


def _library_version(driver: str) -> str | None:
    return confluent_version() if driver == "confluent" else worker_version(driver)


def _all(slots: list[Slot], fn: Callable[[Slot], Any], name: str) -> None:
    """Run `fn` on every slot at once: opening or closing dozens of producers one by one is slow."""
    threads = [
        threading.Thread(target=fn, args=(s,), name=f"{name}-{s.slot}", daemon=True) for s in slots
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _to_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
