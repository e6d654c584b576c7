"""The `copy` workload: exactly-once consume-transform-produce.

Op shapes (what checker/copy.py reads):

* producers (idempotent, non-transactional) fill the input topic with
  ``send`` ops ``[["send", in_key, v]]``; values are unique integers;
* copiers are processes of one consumer group subscribed to the input topic,
  each with a transactional producer (transactional.id per worker slot). One copier
  step is a ``txn`` op: invoke ``[["poll"]]``; completion ``[["poll", {in_key:
  [[offset, v], ...]}], ["send", out_key, [offset, out_value]], ...]`` —
  every polled record written to the output partition with the same index as
  ``(step + 1) * value_modulus + v`` (step: a run-wide copier step counter), in one
  transaction that also commits the consumed offsets (send_offsets_to_transaction
  with the consumer's group metadata, so a zombie copier of an older generation is
  fenced). A step that read nothing completes ``ok`` with ``[["poll", {}]]``;
* copiers crash (``crash`` ops) every ``crash_clients`` copier steps and their
  successors rejoin the group, which rebalances;
* the drain first lets fresh copiers finish (until the group's committed offsets
  reach every acknowledged input offset), then reads every input and output key
  from the beginning, so the output log is fully in the history.

test.json carries ``copy: {input_keys, output_keys, route, value_modulus}``.

``driver`` picks the client of every producer, copier and drain reader: confluent
(librdkafka, in process) or a worker (franz, java: docs/drivers.md), whose copiers are
group consumers (the worker contract's subscribe mode). The drain's progress check (the
group's committed offsets) reads with librdkafka whatever the driver: it is no op of
the history.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, cast

import confluent_kafka as ck

from ..clusters.base import Cluster
from ..clusters.security import client_settings
from ..histories.recorder import Recorder
from . import drain as drain_mod
from .bounded import in_background
from .confluent import ConfluentDriver, DriverConfig
from .confluent import library_version as confluent_version
from .drainers import drain_clients_for
from .driver import Completion, Driver, KeyMap, TopicPartition
from .ops import OpDriver
from .options import CommonOptions, topic_stem
from .slot import Slot, transactional_id
from .tracker import OffsetTracker, RateLimiter
from .worker import WORKERS, WorkerConfig, WorkerDriver, worker_program
from .worker import library_version as worker_version
from .worker.driver import ClientFacts, Pool, spares_for

DRIVERS = ("confluent", *WORKERS)

# A copier step writes input value v as (step + 1) * VALUE_MODULUS + v: unique per
# write attempt (an aborted copy and its retry write different values, so a read of
# an aborted copy is a real G1a), and v = output % VALUE_MODULUS.
VALUE_MODULUS = 1 << 32


@dataclass(frozen=True)
class CopyOptions:
    partitions: int = 4
    producers: int = 2
    copiers: int = 3
    rate: float = 300.0  # input sends/s over all producers (0: unlimited)
    crash_clients: int = 0  # a copier crash every N copier steps (0: never)
    abort_p: float = 0.0  # deliberate aborts of copier transactions
    poll_ms: int = 100
    max_poll_records: int = 100
    replication_factor: int = 3
    run_id: str = ""
    # accepted for CLI symmetry with `queue`; the copy workload is always txn + subscribe
    txn: bool = True
    idempotence: bool = True
    sub_via: str = "subscribe"
    concurrency: int = 0
    driver: str = "confluent"  # the client library: confluent, or a worker (docs/drivers.md)
    topic_prefix: str = ""  # topics <prefix>-in/-out instead of ktrial-<run id>-in/-out
    producer_config: dict[str, Any] = field(default_factory=dict)
    consumer_config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, opts: dict[str, Any]) -> CopyOptions:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(opts) - known)
        if unknown:
            raise ValueError(f"copy workload: unknown options {unknown}; known: {sorted(known)}")
        return cls(**opts)

    @classmethod
    def from_common(cls, common: CommonOptions) -> dict[str, Any]:
        """Copy is always transactional, idempotent and subscribed (refused otherwise);
        `concurrency` is its number of copiers."""
        common.refuse_queue_only(takes_driver=True)
        opts: dict[str, Any] = {}
        if common.concurrency is not None:
            opts["copiers"] = common.concurrency
        opts.update(common.given("abort_p", "crash_clients", "rate", "driver"))
        return opts


def check_driver(driver: str) -> None:
    """Refuse a driver copy cannot run, before any broker starts (ValueError)."""
    if driver not in DRIVERS:
        raise ValueError(f"unknown driver {driver!r}; choose one of {', '.join(DRIVERS)}")
    if driver != "confluent":
        worker_program(driver)  # built?


class CopyWorkload:
    name = "copy"

    def __init__(self, opts: CopyOptions, seed: int) -> None:
        check_driver(opts.driver)
        self.opts = opts
        self.seed = seed
        self.run_id = opts.run_id or os.urandom(4).hex()
        n = opts.partitions
        stem = topic_stem(opts.topic_prefix, self.run_id)
        tin, tout = f"{stem}-in", f"{stem}-out"
        self.input_keys = list(range(n))
        self.output_keys = list(range(n, 2 * n))
        self.route = {i: n + i for i in range(n)}
        keys = {i: TopicPartition(tin, i) for i in self.input_keys}
        keys.update({n + i: TopicPartition(tout, i) for i in range(n)})
        self.keys = KeyMap(keys)
        self.topics = {tin: n, tout: n}
        self.tracker = OffsetTracker()
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._next_value = 0
        self.copier_steps = 0
        self.cfg: DriverConfig | None = None
        self.prod_cfg: DriverConfig | None = None
        # the group's committed offsets are read with librdkafka (copied_up_to)
        self.progress_cfg: DriverConfig | None = None
        # a worker driver's: what its clients said of themselves, pre-started workers
        self.observed = ClientFacts()
        self._spares: Pool | None = None

    # ------------------------------------------------------------------------ setup
    def setup(self, cluster: Cluster) -> dict[str, Any]:
        cluster.create_topics(self.topics, replication_factor=self.opts.replication_factor)
        common: dict[str, Any] = dict(
            bootstrap=cluster.bootstrap_servers,
            keys=self.keys,
            group_id=f"ktrial-{self.run_id}-copy",
            poll_ms=self.opts.poll_ms,
            max_poll_records=self.opts.max_poll_records,
            # the cluster's TLS / SASL settings first (clusters/security.py), then the run's
            producer_overrides=client_settings(cluster, self.opts.producer_config),
            consumer_overrides=client_settings(cluster, self.opts.consumer_config),
        )
        config: Any = DriverConfig
        if self.opts.driver != "confluent":
            config = partial(WorkerConfig, worker=self.opts.driver)
        self.cfg = config(
            txn=True, sub_via="subscribe", txn_id_prefix=f"ktrial-{self.run_id}-copier", **common
        )
        self.prod_cfg = config(txn=False, idempotence=True, **common)
        self.progress_cfg = self.cfg
        if isinstance(self.cfg, WorkerConfig):
            # librdkafka with the cluster's security settings: the run's own consumer
            # settings are in the worker's names
            self.progress_cfg = DriverConfig(
                **{**common, "consumer_overrides": client_settings(cluster, {})}
            )
        return self.describe()

    def coordinator_keys(self) -> dict[str, list[str]]:
        """The copiers' transactional ids and consumer group (the nemesis aims at their
        coordinators: nemesis/roles.py)."""
        assert self.cfg is not None, "setup() first"
        prefix = self.cfg.txn_id_prefix
        return {
            "transactional_ids": [transactional_id(prefix, i) for i in range(self.opts.copiers)],
            "groups": [self.cfg.group_id],
        }

    def describe(self) -> dict[str, Any]:
        assert self.cfg is not None and self.prod_cfg is not None
        return {
            "workload": self.name,
            "workload_options": {**asdict(self.opts), "run_id": self.run_id, "seed": self.seed},
            "keys": self.keys.to_json(),
            "topics": self.topics,
            "replication_factor": self.opts.replication_factor,
            "producer_config": {
                "input": self.prod_cfg.producer_config(),
                "copier": self.cfg.producer_config(),
            },
            "consumer_config": self.cfg.consumer_config(),
            "txn": True,
            "idempotence": True,
            "sub_via": "subscribe",
            "driver": self.opts.driver,
            "driver_version": _library_version(self.opts.driver),
            "ww_deps": True,
            "copy": {
                "input_keys": self.input_keys,
                "output_keys": self.output_keys,
                "route": {str(k): v for k, v in self.route.items()},
                "value_modulus": VALUE_MODULUS,
            },
        }

    # ------------------------------------------------------------------------ main phase
    def run(self, recorder: Recorder, stop: threading.Event) -> None:
        assert self.cfg is not None and self.prod_cfg is not None, "setup() first"
        limiter = RateLimiter(self.opts.rate)
        errs: list[BaseException] = []
        threads = []
        for i in range(self.opts.producers):
            s = Slot(recorder, partial(self._open_producer, stop=stop), 1000 + i, stop)
            threads.append(
                threading.Thread(
                    target=self._producer,
                    args=(s, limiter, stop, errs),
                    name=f"copy-prod{i}",
                    daemon=True,
                )
            )
        for i in range(self.opts.copiers):
            s = Slot(
                recorder,
                partial(self._open_copier, stop=stop),
                i,
                stop,
                txn_id=transactional_id(self.cfg.txn_id_prefix, i),
            )
            threads.append(
                threading.Thread(
                    target=self._copier, args=(s, stop, errs, True), name=f"copier{i}", daemon=True
                )
            )
        if isinstance(self.cfg, WorkerConfig):
            self._spares = spares_for(self.cfg, self.observed)
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            if self._spares is not None:
                self._spares.close()
                self._spares = None
        if errs:
            raise RuntimeError(f"copy workload: {len(errs)} worker(s) died: {errs[0]!r}") from errs[
                0
            ]

    def results(self) -> dict[str, Any] | None:
        """test.json's workload_results: what a worker driver's clients said of themselves
        (the transaction protocol, the time per call)."""
        facts = self.observed.to_json()
        return {"clients": {self.opts.driver: facts}} if facts else None

    def _open(self, cfg: DriverConfig, process: int, slot: int, consume: bool, stop: Any) -> Any:
        if isinstance(cfg, WorkerConfig):
            return WorkerDriver(
                cfg,
                process,
                slot,
                consume=consume,
                stop=stop,
                observed=self.observed,
                spares=self._spares,
            )
        return ConfluentDriver(cfg, process, slot, consume=consume, stop=stop)

    def _open_producer(self, process: int, slot: int, stop: threading.Event | None = None) -> Any:
        assert self.prod_cfg is not None
        return self._open(self.prod_cfg, process, slot, False, stop)

    def _open_copier(self, process: int, slot: int, stop: threading.Event | None = None) -> Any:
        assert self.cfg is not None
        return self._open(self.cfg, process, slot, True, stop)

    def _producer(
        self, slot: Slot, limiter: RateLimiter, stop: threading.Event, errs: list[BaseException]
    ) -> None:
        try:
            if not slot.open():
                return
            while not stop.is_set():
                limiter.wait(stop)
                if stop.is_set():
                    break
                with self._rng_lock:
                    k = self._rng.choice(self.input_keys)
                    v = self._next_value
                    self._next_value += 1
                mops = [["send", k, v]]
                c = slot.record("send", mops, partial(_send, mops=mops))
                self.tracker.observe(c.value)
        except BaseException as e:
            errs.append(e)
        finally:
            slot.close()

    def _copier(
        self, slot: Slot, stop: threading.Event, errs: list[BaseException], crashes: bool
    ) -> None:
        try:
            if not slot.open():
                return
            process = -1
            # A drawn abort waits for a step that copies something: most steps of an
            # idle copier poll nothing and commit nothing, and an abort of nothing is no
            # abort (a 25 s test once saw none at abort_p 0.05).
            abort_pending = False
            while not stop.is_set():
                if slot.process != process:
                    process = slot.process
                    c = slot.record(
                        "subscribe", self.input_keys, partial(_subscribe, keys=self.input_keys)
                    )
                    if c.type != "ok":
                        continue
                with self._rng_lock:
                    self.copier_steps += 1
                    crash = (
                        crashes
                        and self.opts.crash_clients > 0
                        and self.copier_steps % self.opts.crash_clients == 0
                    )
                    abort_pending = abort_pending or self._rng.random() < self.opts.abort_p
                    shift = self.copier_steps * VALUE_MODULUS
                if crash:
                    slot.crash()
                    continue
                c = slot.record(
                    "txn",
                    [["poll"]],
                    partial(_copy_step, route=self.route, shift=shift, abort=abort_pending),
                )
                self.tracker.observe(c.value)
                if c.type != "ok" or any(m[0] == "send" for m in c.value or []):
                    abort_pending = False
        except BaseException as e:
            errs.append(e)
        finally:
            slot.close()

    # ------------------------------------------------------------------------ drain
    def copied_up_to(self, targets: dict[int, int]) -> dict[int, int]:
        """Input keys whose group-committed offset is still below `targets`: key -> committed."""
        assert self.progress_cfg is not None
        c = ck.Consumer(
            {
                **self.progress_cfg.consumer_config(),
                "client.id": "ktrial-copy-progress",
                "logger": logging.getLogger("ktrial.librdkafka"),
            }
        )
        try:
            tps = [
                ck.TopicPartition(self.keys.tp(k).topic, self.keys.tp(k).partition)
                for k in self.input_keys
            ]
            got = c.committed(tps, timeout=10)
            done = {self.keys.key_of(tp.topic, tp.partition): tp.offset for tp in got}
        finally:
            # close() has no timeout of its own and may wait on an unreachable coordinator.
            in_background(c.close, "close-copy-progress", 3.0)
        return {k: done.get(k, -1) for k, t in targets.items() if done.get(k, -1) < t}

    def drain(self, recorder: Recorder, timeout_s: float) -> dict[str, Any]:
        """Finish copying with fresh copiers, then read every key from the beginning."""
        assert self.cfg is not None
        started_ns = recorder.now()  # fresh copiers are part of the drain
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        in_targets = {k: t for k, t in self.tracker.targets(self.input_keys).items()}
        stop = threading.Event()
        errs: list[BaseException] = []
        slots = [
            Slot(
                recorder,
                partial(self._open_copier, stop=stop),
                i,
                stop,
                txn_id=transactional_id(self.cfg.txn_id_prefix, i),
            )
            for i in range(self.opts.copiers)
        ]
        threads = [
            threading.Thread(
                target=self._copier,
                args=(s, stop, errs, False),
                name=f"copier-drain{s.slot}",
                daemon=True,
            )
            for s in slots
        ]
        for t in threads:
            t.start()
        behind: dict[int, int] = dict.fromkeys(self.input_keys, -1)
        try:
            while time.monotonic() < deadline - timeout_s / 3:
                try:
                    behind = self.copied_up_to(in_targets)
                except ck.KafkaException:
                    behind = dict.fromkeys(self.input_keys, -1)
                if not behind:
                    break
                time.sleep(1.0)
        finally:
            stop.set()
            for t in threads:
                t.join()
        targets = self.tracker.targets(self.keys.keys)
        readers = drain_clients_for(self.cfg, self.keys, self.run_id)
        res = drain_mod.drain(recorder, readers, targets, max(5.0, deadline - time.monotonic()))
        res["started_s"] = round(started_ns / 1e9, 3)
        res["copy_caught_up"] = not behind
        res["copy_behind"] = {
            str(k): {"committed": v, "target": in_targets[k]} for k, v in behind.items()
        }
        res["caught_up"] = bool(res["caught_up"]) and not behind
        return res


def _send(d: Driver, mops: list[Any]) -> Completion:
    return d.execute("send", mops)


def _copy_step(d: Driver, route: dict[int, int], shift: int, abort: bool) -> Completion:
    return cast(OpDriver, d).copy_txn(route, shift, abort)


def _library_version(driver: str) -> str | None:
    return confluent_version() if driver == "confluent" else worker_version(driver)


def _subscribe(d: Driver, keys: list[int]) -> Completion:
    return d.assign(keys)
