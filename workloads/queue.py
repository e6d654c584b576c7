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
from ..clusters.security import client_settings
from ..histories.recorder import Recorder
from . import drain as drain_mod
from .confluent import ConfluentDriver, DriverConfig
from .confluent import library_version as confluent_version
from .drainers import drain_clients_for
from .driver import Completion, Driver, DriverFactory, KeyMap, TopicPartition
from .generator import Generator, GenOp, GenOptions
from .options import CommonOptions, topic_stem
from .slot import Slot, transactional_id
from .tracker import OffsetTracker, RateLimiter
from .worker import WORKERS, WorkerConfig, worker_factory, worker_program
from .worker import library_version as worker_version
from .worker.driver import ClientFacts, Pool, spares_for

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
    # several clients in one run: worker slot s runs driver_mix[s % len] ("mix" in
    # test.json's driver; docs/drivers.md "Mixing clients")
    driver_mix: tuple[str, ...] = ()
    n_keys: int = 32
    active_keys: int = 4
    writes_per_key: int = 256
    partitions_per_topic: int = 0  # 0: 4 with assign, 1 with subscribe
    max_txn_len: int = 4
    reassign_p: float = 0.02
    poll_ms: int = 100
    # The wait of a poll inside a transaction, i.e. of every poll of a txn run (its ops
    # are all transactions). The transaction stays open while its poll waits on
    # partitions with nothing new: at 100 ms (poll_ms) the polls took a third of a
    # transaction's time; at 20 ms confluent ran a third more transactions and read
    # more records per second (bench/RESULTS.md, TXNPERF).
    txn_poll_ms: int = 20
    chase_keys: int = 2
    replication_factor: int = 3
    # see DriverConfig.retire_after_unsure_abort (False reproduces a librdkafka lost write)
    retire_after_unsure_abort: bool = True
    # see DriverConfig.abort_unknown_offset (False reproduces a librdkafka lost write)
    abort_unknown_offset: bool = True
    stop_polls_after: int = 0  # after this many ops, no more polls: a degraded run (docs/soak.md)
    run_id: str = ""
    topic_prefix: str = ""  # topics <prefix>-q-<i> instead of ktrial-<run id>-q-<i>
    producer_config: dict[str, Any] = field(default_factory=dict)
    consumer_config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, opts: dict[str, Any]) -> QueueOptions:
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(opts) - known)
        if unknown:
            raise ValueError(f"queue workload: unknown options {unknown}; known: {sorted(known)}")
        if "driver_mix" in opts:
            opts = {**opts, "driver_mix": tuple(opts["driver_mix"] or ())}
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
        self.prefix = f"{topic_stem(opts.topic_prefix, self.run_id)}-q"
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
        # the mix's configuration per driver, and which driver each process ran
        self.cfgs: dict[str, DriverConfig] = {}
        self.process_drivers: dict[int, str] = {}
        # per worker driver, what its clients said of themselves (transaction protocol)
        self.observed: dict[str, ClientFacts] = {}
        self._spares: list[Pool] = []  # pre-started or hosted workers, ended with the run
        self._pd_lock = threading.Lock()
        self.slots: list[Slot] = []

    # ------------------------------------------------------------------------ setup
    def setup(self, cluster: Cluster) -> dict[str, Any]:
        topics = {t: self.opts.ppt for t in self.keys.topics()}
        cluster.create_topics(topics, replication_factor=self.opts.replication_factor)
        for name in mix_of(self.opts):
            self.cfgs[name] = self._config_class(name)(**self._config_args(cluster))
        self.cfg = self.cfgs[mix_of(self.opts)[0]]
        return self.describe()

    def _config_args(self, cluster: Cluster) -> dict[str, Any]:
        return dict(
            bootstrap=cluster.bootstrap_servers,
            keys=self.keys,
            group_id=f"ktrial-{self.run_id}-g",
            txn=self.opts.txn,
            idempotence=self.opts.idempotence,
            sub_via=self.opts.sub_via,
            txn_id_prefix=f"ktrial-{self.run_id}",
            poll_ms=self.opts.txn_poll_ms if self.opts.txn else self.opts.poll_ms,
            retire_after_unsure_abort=self.opts.retire_after_unsure_abort,
            abort_unknown_offset=self.opts.abort_unknown_offset,
            # the cluster's TLS / SASL settings first (clusters/security.py), then the run's
            producer_overrides=client_settings(cluster, self.opts.producer_config),
            consumer_overrides=client_settings(cluster, self.opts.consumer_config),
        )

    def _config_class(self, driver: str) -> Callable[..., DriverConfig]:
        if driver == "confluent":
            return DriverConfig
        return partial(WorkerConfig, worker=driver)

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
            "driver": "mix" if self.opts.driver_mix else self.opts.driver,
            "driver_version": "; ".join(
                v for v in (_library_version(d) for d in mix_of(self.opts)) if v
            )
            or None,
            **self._mix_meta(),
            # Kafka infers no ww order from the history alone; the checker may derive it
            # from offsets, which is what Jepsen's queue does.
            "ww_deps": True,
        }

    def _mix_meta(self) -> dict[str, Any]:
        """A mixed run's drivers: the mix, each slot's driver, each driver's settings."""
        if not self.opts.driver_mix:
            return {}
        mix = list(self.opts.driver_mix)
        return {
            "driver_mix": mix,
            "slot_drivers": {str(s): mix[s % len(mix)] for s in range(self.opts.concurrency)},
            "driver_configs": {
                name: {
                    "version": _library_version(name),
                    "producer_config": cfg.producer_config(),
                    "consumer_config": cfg.consumer_config(),
                }
                for name, cfg in self.cfgs.items()
            },
        }

    def results(self) -> dict[str, Any] | None:
        """test.json's workload_results: what the worker clients said of themselves (the
        transaction protocol kafka-clients chose) and, in a mix, which driver each
        logical process ran."""
        out: dict[str, Any] = {}
        clients = {name: f.to_json() for name, f in self.observed.items()}
        clients = {name: c for name, c in clients.items() if c}
        if clients:
            out["clients"] = clients
        if self.opts.driver_mix:
            with self._pd_lock:
                out["process_drivers"] = {
                    str(p): d for p, d in sorted(self.process_drivers.items())
                }
        return out or None

    def coordinator_keys(self) -> dict[str, list[str]]:
        """The transactional ids and consumer groups this run's clients use (the nemesis
        aims at their coordinators: nemesis/roles.py)."""
        assert self.cfg is not None, "setup() first"
        ids = [transactional_id(self.cfg.txn_id_prefix, i) for i in range(self.opts.concurrency)]
        return {
            "transactional_ids": ids if self.opts.txn else [],
            "groups": [self.cfg.group_id],
        }

    # ------------------------------------------------------------------------ main phase
    def run(self, recorder: Recorder, stop: threading.Event) -> None:
        assert self.cfg is not None, "setup() first"
        if self._make_factory is not _confluent_factory:
            factory = self._make_factory(self.cfg)
        else:
            factory = self._mixed_factory(stop)
        limiter = RateLimiter(self.opts.rate)
        prefix = self.cfg.txn_id_prefix if self.opts.txn else None
        self.slots = [
            Slot(recorder, factory, i, stop, txn_id=prefix and transactional_id(prefix, i))
            for i in range(self.opts.concurrency)
        ]
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
        for sp in self._spares:
            sp.close()
        if errors:
            raise RuntimeError(
                f"queue workload: {len(errors)} worker(s) died: {errors[0]!r}"
            ) from errors[0]

    def _mixed_factory(self, stop: threading.Event) -> DriverFactory:
        """Opens each process with its slot's driver (the one driver unless mixed),
        noting which driver each process ran."""
        mix = mix_of(self.opts)
        factories = {
            name: _factory_for(
                cfg, stop, self.observed.setdefault(name, ClientFacts()), self._spares
            )
            for name, cfg in self.cfgs.items()
        }

        def open_driver(process: int, slot: int) -> Driver:
            name = mix[slot % len(mix)]
            with self._pd_lock:
                self.process_drivers[process] = name
            return factories[name](process, slot)

        return open_driver

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
        name = mix_of(self.opts)[0]  # a mix drains with its first driver
        clients = drain_clients_for(self.cfg, self.keys, self.run_id)

        def open_drain(process: int) -> Any:
            with self._pd_lock:
                self.process_drivers[process] = name
            return clients(process)

        return drain_mod.drain(recorder, open_drain, targets, timeout_s)


def mix_of(opts: QueueOptions) -> tuple[str, ...]:
    """The drivers a run uses, in slot order: the mix, or the one driver."""
    return opts.driver_mix or (opts.driver,)


def check_driver(opts: QueueOptions) -> None:
    """Refuse a driver this workload cannot run (ValueError, shown as a usage error)."""
    for driver in mix_of(opts):
        if driver not in DRIVERS:
            raise ValueError(f"unknown driver {driver!r}; choose one of {', '.join(DRIVERS)}")
        if driver != "confluent":
            worker_program(driver)  # built?
    if opts.sub_via == "subscribe" and len(set(mix_of(opts))) > 1:
        # One consumer group of several clients is not supported: franz-go's only
        # default assignor (cooperative-sticky) is one librdkafka lacks, so such a group
        # cannot agree on a protocol; confluent with java is untested.
        raise ValueError(
            "--driver-mix with --sub-via subscribe is not supported: one consumer group of"
            " different clients (franz-go assigns cooperative-sticky only, librdkafka"
            " range/roundrobin); mix clients with --sub-via assign"
        )


def _library_version(driver: str) -> str | None:
    return confluent_version() if driver == "confluent" else worker_version(driver)


def _factory_for(
    cfg: DriverConfig, stop: threading.Event, observed: ClientFacts, pools: list[Pool]
) -> DriverFactory:
    if isinstance(cfg, WorkerConfig):
        spares = spares_for(cfg, observed)
        if spares is not None:
            pools.append(spares)
        return worker_factory(cfg, stop, observed, spares)
    return _confluent_factory(cfg, stop)


def _assign(d: Driver, keys: list[int]) -> Completion:
    return d.assign(keys)


def _execute(d: Driver, op: GenOp) -> Completion:
    return d.execute(op.f, op.value, op.abort)


def _confluent_factory(cfg: DriverConfig, stop: threading.Event | None = None) -> DriverFactory:
    def open_driver(process: int, slot: int) -> ConfluentDriver:
        return ConfluentDriver(cfg, process, slot, stop=stop)

    return open_driver
