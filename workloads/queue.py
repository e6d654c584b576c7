"""The Jepsen-compatible `queue` workload: sends, polls and transactions over rotating keys.

Worker threads (``concurrency``) each run a :class:`.slot.Slot`: they draw ops
from the one seeded :class:`.generator.Generator`, perform them through a driver
and record invoke/completion. Re-assignments take the generator's random subset
of the active keys plus up to two keys whose acknowledged sends are furthest ahead
of any read ("chasing" unread data), so that keys that rotated out still get
read during the run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from ..clusters.base import Cluster
from ..histories.recorder import Recorder
from . import drain as drain_mod
from .confluent import ConfluentDriver, DriverConfig, drain_clients
from .confluent import library_version as confluent_version
from .driver import Completion, Driver, DriverFactory, KeyMap, TopicPartition
from .generator import Generator, GenOp, GenOptions
from .options import CommonOptions
from .slot import Slot
from .tracker import OffsetTracker, RateLimiter
from .worker import WORKERS, WorkerConfig, worker_factory, worker_program
from .worker import drain_clients as worker_drain_clients
from .worker import library_version as worker_version

DRIVERS = ("confluent", *WORKERS)


@dataclass(frozen=True)
class QueueOptions:
    txn: bool = False
    idempotence: bool = True
    sub_via: str = "assign"
    abort_p: float = 0.0
    crash_clients: int = 0  # one client crash every N ops (0: never)
    rate: float = 0.0  # ops/s over all workers (0: unlimited)
    concurrency: int = 16
    driver: str = "confluent"  # the client library: confluent, or a worker (docs/drivers.md)
    n_keys: int = 32
    active_keys: int = 4
    writes_per_key: int = 256
    partitions_per_topic: int = 0  # 0: 4 with assign, 1 with subscribe
    max_txn_len: int = 4
    reassign_p: float = 0.02
    poll_ms: int = 100
    chase_keys: int = 2
    replication_factor: int = 3
    # see DriverConfig.retire_after_unsure_abort (False reproduces a librdkafka lost write)
    retire_after_unsure_abort: bool = True
    stop_polls_after: int = 0  # after this many ops, no more polls: a degraded run (docs/soak.md)
    run_id: str = ""
    producer_config: dict[str, Any] = field(default_factory=dict)
    consumer_config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, opts: dict[str, Any]) -> QueueOptions:
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(opts) - known)
        if unknown:
            raise ValueError(f"queue workload: unknown options {unknown}; known: {sorted(known)}")
        return cls(**opts)

    @classmethod
    def from_common(cls, common: CommonOptions) -> dict[str, Any]:
        """The common settings the queue takes, all under their own names. Transactions
        are on unless turned off (the dataclass default, off, is for direct callers)."""
        opts: dict[str, Any] = {"txn": True if common.txn is None else common.txn}
        opts.update(
            common.given(
                "idempotence",
                "sub_via",
                "concurrency",
                "abort_p",
                "crash_clients",
                "rate",
                "driver",
            )
        )
        return opts

    @property
    def ppt(self) -> int:
        if self.partitions_per_topic > 0:
            return self.partitions_per_topic
        return 1 if self.sub_via == "subscribe" else 4


def key_layout(prefix: str, n_keys: int, ppt: int) -> KeyMap:
    """Key k -> partition k % ppt of topic `<prefix>-<k // ppt>`."""
    return KeyMap({k: TopicPartition(f"{prefix}-{k // ppt}", k % ppt) for k in range(n_keys)})


class QueueWorkload:
    name = "queue"

    def __init__(
        self,
        opts: QueueOptions,
        seed: int,
        driver_factory: Callable[[DriverConfig], DriverFactory] | None = None,
    ) -> None:
        self.opts = opts
        self.seed = seed
        check_driver(opts)
        self.run_id = opts.run_id or os.urandom(4).hex()
        self.prefix = f"ktrial-{self.run_id}-q"
        self.keys = key_layout(self.prefix, opts.n_keys, opts.ppt)
        self.gen = Generator(
            GenOptions(
                txn=opts.txn,
                n_keys=opts.n_keys,
                active_keys=opts.active_keys,
                writes_per_key=opts.writes_per_key,
                max_txn_len=opts.max_txn_len,
                abort_p=opts.abort_p,
                crash_every=opts.crash_clients,
                reassign_p=opts.reassign_p,
                sub_via=opts.sub_via,
                stop_polls_after=opts.stop_polls_after,
            ),
            seed,
        )
        self._gen_lock = threading.Lock()
        self.tracker = OffsetTracker()
        self._make_factory = driver_factory or _confluent_factory
        self.cfg: DriverConfig | None = None
        self.slots: list[Slot] = []

    # ------------------------------------------------------------------------ setup
    def setup(self, cluster: Cluster) -> dict[str, Any]:
        topics = {t: self.opts.ppt for t in self.keys.topics()}
        cluster.create_topics(topics, replication_factor=self.opts.replication_factor)
        self.cfg = self._config_class()(
            bootstrap=cluster.bootstrap_servers,
            keys=self.keys,
            group_id=f"ktrial-{self.run_id}-g",
            txn=self.opts.txn,
            idempotence=self.opts.idempotence,
            sub_via=self.opts.sub_via,
            txn_id_prefix=f"ktrial-{self.run_id}",
            poll_ms=self.opts.poll_ms,
            retire_after_unsure_abort=self.opts.retire_after_unsure_abort,
            producer_overrides=dict(self.opts.producer_config),
            consumer_overrides=dict(self.opts.consumer_config),
        )
        return self.describe()

    def _config_class(self) -> Callable[..., DriverConfig]:
        if self.opts.driver == "confluent":
            return DriverConfig
        return partial(WorkerConfig, worker=self.opts.driver)

    def describe(self) -> dict[str, Any]:
        assert self.cfg is not None
        return {
            "workload": self.name,
            "workload_options": {**asdict(self.opts), "run_id": self.run_id, "seed": self.seed},
            "keys": self.keys.to_json(),
            "topics": {t: self.opts.ppt for t in self.keys.topics()},
            "replication_factor": self.opts.replication_factor,
            "producer_config": self.cfg.producer_config(),
            "consumer_config": self.cfg.consumer_config(),
            "txn": self.opts.txn,
            "idempotence": self.opts.idempotence,
            "sub_via": self.opts.sub_via,
            "driver": self.opts.driver,
            "driver_version": (
                confluent_version()
                if self.opts.driver == "confluent"
                else worker_version(self.opts.driver)
            ),
            # Kafka infers no ww order from the history alone; the checker may derive it
            # from offsets, which is what Jepsen's queue does.
            "ww_deps": True,
        }

    # ------------------------------------------------------------------------ main phase
    def run(self, recorder: Recorder, stop: threading.Event) -> None:
        assert self.cfg is not None, "setup() first"
        if isinstance(self.cfg, WorkerConfig) and self._make_factory is _confluent_factory:
            factory = worker_factory(self.cfg, stop)
        elif self._make_factory is _confluent_factory:
            factory = _confluent_factory(self.cfg, stop)
        else:
            factory = self._make_factory(self.cfg)
        limiter = RateLimiter(self.opts.rate)
        self.slots = [Slot(recorder, factory, i, stop) for i in range(self.opts.concurrency)]
        errors: list[BaseException] = []
        threads = [
            threading.Thread(
                target=self._worker,
                args=(s, limiter, stop, errors),
                name=f"queue-w{s.slot}",
                daemon=True,
            )
            for s in self.slots
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(
                f"queue workload: {len(errors)} worker(s) died: {errors[0]!r}"
            ) from errors[0]

    def _next(self, needs_assign: bool) -> Any:
        with self._gen_lock:
            return self.gen.assignment() if needs_assign else self.gen.next()

    def _worker(
        self, slot: Slot, limiter: RateLimiter, stop: threading.Event, errors: list[BaseException]
    ) -> None:
        try:
            if not slot.open():
                return
            process = slot.process
            needs_assign = True
            while not stop.is_set():
                limiter.wait(stop)
                if stop.is_set():
                    break
                if slot.process != process:  # replaced: fresh consumer, no assignment
                    process, needs_assign = slot.process, True
                op = self._next(needs_assign)
                if op.f == "crash":
                    slot.crash()
                    continue
                if op.f in ("assign", "subscribe"):
                    keys = sorted(set(op.value) | set(self.tracker.unread(self.opts.chase_keys)))
                    c = slot.record(op.f, keys, partial(_assign, keys=keys))
                    needs_assign = c.type != "ok"
                    continue
                c = slot.record(op.f, op.value, partial(_execute, op=op))
                self.tracker.observe(c.value)
        except BaseException as e:
            errors.append(e)
        finally:
            slot.close()

    # ------------------------------------------------------------------------ drain
    def drain(self, recorder: Recorder, timeout_s: float) -> dict[str, Any]:
        assert self.cfg is not None, "setup() first"
        targets = self.tracker.targets(self.keys.keys)
        if isinstance(self.cfg, WorkerConfig):
            wclients = worker_drain_clients(
                self.cfg.worker,
                self.cfg.bootstrap,
                self.keys,
                self.run_id,
                self.opts.consumer_config,
            )
            return drain_mod.drain(recorder, wclients, targets, timeout_s)
        clients = drain_clients(
            self.cfg.bootstrap, self.keys, self.run_id, self.opts.consumer_config
        )
        return drain_mod.drain(recorder, clients, targets, timeout_s)


def check_driver(opts: QueueOptions) -> None:
    """Refuse a driver this workload cannot run (ValueError, shown as a usage error)."""
    if opts.driver not in DRIVERS:
        raise ValueError(f"unknown driver {opts.driver!r}; choose one of {', '.join(DRIVERS)}")
    if opts.driver == "confluent":
        return
    if opts.sub_via != "assign":
        raise ValueError(
            f"the {opts.driver} driver assigns partitions; --sub-via subscribe needs"
            " --driver confluent"
        )
    worker_program(opts.driver)  # built?


def _assign(d: Driver, keys: list[int]) -> Completion:
    return d.assign(keys)


def _execute(d: Driver, op: GenOp) -> Completion:
    return d.execute(op.f, op.value, op.abort)


def _confluent_factory(cfg: DriverConfig, stop: threading.Event | None = None) -> DriverFactory:
    def open_driver(process: int, slot: int) -> ConfluentDriver:
        return ConfluentDriver(cfg, process, slot, stop=stop)

    return open_driver
