"""The confluent-kafka (librdkafka) driver: default client of every workload.

Each instance is one logical process: a producer (transactional when the run is
transactional) and a read_committed consumer with auto-commit off. librdkafka
does its I/O in C threads and releases the GIL in blocking calls, so many
drivers in worker threads run concurrently.

What an op does and how it completes is the shared op flow (:class:`..ops.OpDriver`);
this class supplies its client calls through librdkafka, opens and closes the
clients, assigns keys (assign or subscribe) and bounds the producer calls that may
ignore their own timeout.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import confluent_kafka as ck
from confluent_kafka import KafkaException

from ..bounded import CallTimeout, Deadline, call_bounded, in_background
from ..drain import drain_settings
from ..driver import Completion, KeyMap
from ..ops import Fetched, Last, OpDriver
from ..rewind import Plan, ReadPositions
from ..slot import transactional_id
from .config import DriverConfig
from .errors import RULES, classify

# librdkafka's own log lines (connection resets during faults, ...) go to ktrial's log
# file, not the terminal: faults make thousands of them.
CLIENT_LOG = logging.getLogger("ktrial.librdkafka")


def library_version() -> str:
    """confluent-kafka's and librdkafka's versions, for test.json."""
    return f"confluent-kafka {ck.version()[0]}, librdkafka {ck.libversion()[0]}"


class ConfluentDriver(OpDriver):
    """A producer and a consumer for one process; see :class:`..driver.Driver`."""

    driver_name = "confluent driver"
    rules = RULES

    def __init__(
        self,
        cfg: DriverConfig,
        process: int,
        slot: int,
        consume: bool = True,
        produce: bool = True,
        stop: threading.Event | None = None,
    ) -> None:
        self.cfg: DriverConfig = cfg
        self.process = process
        self.stop = stop
        # Set once a call was abandoned while blocked inside the producer: the
        # producer must not be used (or destroyed) by this thread any more.
        self._producer_stuck = False
        pconf = cfg.producer_config()
        if cfg.txn and produce:
            # One transactional.id per worker slot: a successor process fences its
            # predecessor at init_transactions, which also settles a transaction the
            # predecessor left with an unknown outcome, so read_committed readers are
            # not blocked until transaction.timeout.ms.
            pconf["transactional.id"] = transactional_id(cfg.txn_id_prefix, slot)
        pconf["client.id"] = f"ktrial-p{process}"
        pconf["logger"] = CLIENT_LOG
        self.producer: ck.Producer | None = ck.Producer(pconf) if produce else None
        self.consumer: ck.Consumer | None = None
        self.reads = ReadPositions()
        try:
            if cfg.txn and self.producer is not None:
                self._producer_call(
                    "init_transactions", lambda q, t: q.init_transactions(t), cfg.init_timeout_s
                )
            if consume:
                cconf = cfg.consumer_config()
                cconf["client.id"] = f"ktrial-p{process}"
                cconf["logger"] = CLIENT_LOG
                self.consumer = ck.Consumer(cconf)
        except BaseException:
            self.close(abrupt=True)
            raise

    # -------------------------------------------------------------------- public API
    def positions(self, keys: Sequence[int]) -> dict[int, int]:
        """The consumer's next offset per key (negative when unknown): see ReadPositions.known."""
        c = self._require_consumer()
        tps = c.position([self._ck_tp(k) for k in keys])
        return self.reads.known(
            keys, {self.cfg.keys.key_of(tp.topic, tp.partition): tp.offset for tp in tps}
        )

    def assign(self, keys: Sequence[int], from_beginning: bool = False) -> Completion:
        c = self._require_consumer()
        keys = sorted(set(keys))
        try:
            if from_beginning:
                c.assign([self._ck_tp(k, 0) for k in keys])
                self.reads.assigned_to(keys, {})
            elif self.cfg.sub_via == "subscribe":
                self.reads.rebalance_log = []
                c.subscribe(
                    self.cfg.keys.topics(keys),
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_revoke,
                )
            else:
                plan, pos = self.reads.assign_plan(keys)
                self._assign_at(plan)
                self.reads.assigned_to(keys, pos)
        except (KafkaException, RuntimeError) as e:
            v = classify(e, "poll")
            return Completion(v.type, keys, v.error, retire=True)
        return Completion("ok", keys)

    def close(self, abrupt: bool = False) -> None:
        """Release the clients off-thread: destroying a client can wait on the network.

        Either way the caller waits at most ``close_wait_s``; a graceful close flushes
        and leaves the group, an abrupt one (a crash, a retired process) purges.
        """
        p, self.producer = self.producer, None
        c, self.consumer = self.consumer, None
        if p is None and c is None:
            return
        if self._producer_stuck:
            # An abandoned call still holds the producer; it is released when that
            # call returns (see _producer_call). Only the consumer is ours to close.
            p = None
        # Wait (bounded) even for an abrupt close: a successor with the same
        # transactional.id must not race this producer's last requests.
        wait = self.cfg.close_wait_s

        def release() -> None:
            nonlocal p, c
            if p is not None:
                if abrupt:
                    # A crash: drop whatever is queued, never wait for acks.
                    with contextlib.suppress(KafkaException, RuntimeError):
                        p.purge(True, True, False)
                else:
                    with contextlib.suppress(KafkaException, RuntimeError, SystemError):
                        p.flush(wait)
                p = None  # destroyed here, in this thread
            if c is not None:
                if not abrupt:
                    with contextlib.suppress(KafkaException, RuntimeError):
                        c.close()
                c = None

        in_background(release, f"close-p{self.process}", wait)

    # ------------------------------------------------------------ client calls (OpDriver)
    def _produce(self, mops: list[Any], idx: list[int], results: list[Any]) -> None:
        producer = self._require_producer()
        for i in idx:
            _, key, val = mops[i]
            tp = self.cfg.keys.tp(key)

            def cb(err: ck.KafkaError | None, msg: ck.Message, i: int = i) -> None:
                results[i] = err if err is not None else msg.offset()

            producer.produce(
                tp.topic, value=self._payload(val), partition=tp.partition, on_delivery=cb
            )

    def _payload(self, value: Any) -> bytes:
        """The record bytes of a history value (a measuring driver may pad them)."""
        return str(value).encode()

    def _flush(self, dl: Deadline) -> int:
        p = self._require_producer()
        try:
            remaining = p.flush(dl.slice())
            while remaining > 0 and not dl.expired():
                remaining = p.flush(dl.slice())
        except SystemError as e:
            # A fatal error (e.g. fenced) raised by librdkafka's error callback during
            # flush surfaces wrapped in a SystemError from the log callback.
            if isinstance(e.__cause__, KafkaException):
                raise e.__cause__ from None
            raise
        return int(remaining)

    def _fetch(self) -> tuple[list[Fetched], list[Any]]:
        c = self._require_consumer()
        msgs: list[ck.Message] = []
        m = c.poll(self.cfg.poll_ms / 1000.0)
        if m is not None:
            msgs.append(m)
            msgs.extend(c.consume(self.cfg.max_poll_records, 0))
        records: list[Fetched] = []
        events: list[Any] = []
        for m in msgs:
            err = m.error()
            if err is not None:
                events.append(err)
                continue
            topic, part, off = m.topic(), m.partition(), m.offset()
            if topic is None or part is None or off is None:
                continue
            records.append((topic, part, off, m.value()))
        return records, events

    def _commit_progress(self, last: Last) -> None:
        with contextlib.suppress(KafkaException, RuntimeError):
            self._require_consumer().commit(
                offsets=[ck.TopicPartition(t, p, o + 1) for (t, p), o in last.items()],
                asynchronous=True,
            )

    def _begin(self) -> None:
        self._require_producer().begin_transaction()

    def _send_offsets(self, last: Last, budget_s: float) -> None:
        offsets = [ck.TopicPartition(t, pt, o + 1) for (t, pt), o in last.items()]
        meta = self._require_consumer().consumer_group_metadata()
        self._producer_call(
            "send_offsets", lambda q, t: q.send_offsets_to_transaction(offsets, meta, t), budget_s
        )

    def _commit(self, budget_s: float) -> None:
        self._producer_call("commit", lambda q, t: q.commit_transaction(t), budget_s)

    def _abort(self, budget_s: float) -> None:
        self._producer_call("abort", lambda q, t: q.abort_transaction(t), budget_s)

    def _has_consumer(self) -> bool:
        return self.consumer is not None

    def _assign_at(self, plan: Plan) -> None:
        self._require_consumer().assign([self._ck_tp(k, off) for k, off in plan])

    def _seek(self, key: int, offset: int) -> None:
        self._require_consumer().seek(self._ck_tp(key, offset))

    def _current_keys(self) -> list[int]:
        return self._keys_of(list(self._require_consumer().assignment()))

    # ------------------------------------------------------------------------ helpers
    def _producer_call(
        self, name: str, fn: Callable[[ck.Producer, float], Any], budget_s: float
    ) -> None:
        """Call ``fn(producer, budget_s)``, returning within about `budget_s` whatever happens.

        librdkafka honours the timeout of init/commit/abort_transaction but not always
        that of send_offsets_to_transaction (it waits forever while the group
        coordinator is unreachable: librdkafka issues #5456, #5511). So the call runs
        off-thread, watched until `budget_s` + 1 s (its own timeout fires first) or
        ``stop_grace_s`` after `stop`. An abandoned call raises :class:`CallTimeout`
        and leaves the producer *stuck*: its thread owns it and destroys it if the
        call ever returns; this driver must retire.
        """
        holder: list[ck.Producer | None] = [self._require_producer()]

        def call() -> None:
            q = holder[0]
            assert q is not None
            fn(q, budget_s)

        def release() -> None:
            q = holder[0]
            holder[0] = None
            if q is not None:
                with contextlib.suppress(KafkaException, RuntimeError):
                    q.purge(True, True, False)
            del q  # the last reference: the producer is destroyed in this thread

        try:
            call_bounded(call, self._deadline(budget_s + 1.0), f"{name}-p{self.process}", release)
        except CallTimeout:
            self._producer_stuck = True
            self.producer = None  # the abandoned call's thread owns it now
            raise
        finally:
            if not self._producer_stuck:
                holder[0] = None

    def _require_consumer(self) -> ck.Consumer:
        if self.consumer is None:
            raise RuntimeError(f"process {self.process}: this driver was opened without a consumer")
        return self.consumer

    def _require_producer(self) -> ck.Producer:
        if self.producer is None:
            raise RuntimeError(f"process {self.process}: this driver was opened without a producer")
        return self.producer

    def _ck_tp(self, key: int, offset: int | None = None) -> ck.TopicPartition:
        tp = self.cfg.keys.tp(key)
        if offset is None:
            return ck.TopicPartition(tp.topic, tp.partition)
        return ck.TopicPartition(tp.topic, tp.partition, offset)

    def _keys_of(self, tps: list[ck.TopicPartition]) -> list[int]:
        out = []
        for tp in tps:
            try:
                out.append(self.cfg.keys.key_of(tp.topic, tp.partition))
            except KeyError:
                continue
        return sorted(out)

    def _on_assign(self, consumer: ck.Consumer, tps: list[ck.TopicPartition]) -> None:
        # a new assignment starts at the group's committed offset
        self.reads.rebalanced("assigned", self._keys_of(tps))

    def _on_revoke(self, consumer: ck.Consumer, tps: list[ck.TopicPartition]) -> None:
        self.reads.rebalanced("revoked", self._keys_of(tps))


def drain_clients(
    bootstrap: str, keys: KeyMap, run_id: str, consumer_config: dict[str, Any]
) -> Callable[[int], ConfluentDriver]:
    """Fresh read-only clients for the drain: assign mode, long polls, big batches."""
    cfg = DriverConfig(bootstrap=bootstrap, keys=keys, **drain_settings(run_id, consumer_config))
    return lambda process: ConfluentDriver(cfg, process, -1, produce=False)
