"""The confluent-kafka (librdkafka) driver: default client of every workload.

Each instance is one logical process: a producer (transactional when the run is
transactional) and a read_committed consumer with auto-commit off. librdkafka
does its I/O in C threads and releases the GIL in blocking calls, so many
drivers in worker threads run concurrently.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka as ck
from confluent_kafka import KafkaError, KafkaException

from . import errors
from .bounded import CallTimeout, Deadline, call_bounded, in_background
from .driver import Completion, KeyMap

# librdkafka's own log lines (connection resets during faults, ...) go to ktrial's log
# file, not the terminal: faults make thousands of them.
CLIENT_LOG = logging.getLogger("ktrial.librdkafka")

# Settings a careful tester chooses: durable acks, idempotence, read_committed,
# no auto-commit, and short timeouts so that faults surface as `info` ops within
# seconds instead of hanging workers. Every one is overridable and written to test.json.
DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 0,
    "max.in.flight.requests.per.connection": 5,
    "request.timeout.ms": 5000,
    "message.timeout.ms": 10000,
    "socket.timeout.ms": 5000,
    "socket.connection.setup.timeout.ms": 5000,
    "socket.nagle.disable": True,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "retry.backoff.ms": 20,
    # librdkafka backs retries off exponentially up to this; a txn producer retries
    # AddPartitionsToTxn (CONCURRENT_TRANSACTIONS) right after each commit.
    "retry.backoff.max.ms": 100,
    "metadata.max.age.ms": 10000,
    "topic.metadata.refresh.interval.ms": 5000,
}
DEFAULT_TXN_PRODUCER_CONFIG: dict[str, Any] = {
    # librdkafka requires message.timeout.ms <= transaction.timeout.ms.
    "transaction.timeout.ms": 10000,
}
DEFAULT_CONSUMER_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "enable.partition.eof": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "max.poll.interval.ms": 60000,
    # The broker answers a fetch as soon as data arrives; a long wait only spares
    # idle consumers (keys rotated out) from hammering the brokers with empty fetches.
    "fetch.wait.max.ms": 500,
    "socket.timeout.ms": 5000,
    "socket.connection.setup.timeout.ms": 5000,
    "socket.nagle.disable": True,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "metadata.max.age.ms": 10000,
    "topic.metadata.refresh.interval.ms": 5000,
}


@dataclass(frozen=True)
class DriverConfig:
    """Everything a confluent driver needs; shared by every process of a run."""

    bootstrap: str
    keys: KeyMap
    group_id: str
    txn: bool = False
    idempotence: bool = True
    sub_via: str = "assign"
    txn_id_prefix: str = "ktrial"
    poll_ms: int = 100
    max_poll_records: int = 500
    producer_overrides: dict[str, Any] = field(default_factory=dict)
    consumer_overrides: dict[str, Any] = field(default_factory=dict)
    # Time budget of one op's main path (flush, send_offsets, commit, together) and of
    # opening clients (init_transactions). A slower op completes info/fail, never hangs.
    op_timeout_s: float = 10.0
    # Budget of init_transactions when opening a process. Generous: right after a
    # cluster starts or a coordinator moves, it waits for __transaction_state to load,
    # and retrying with a fresh producer restarts that wait and fences the old one.
    init_timeout_s: float = 30.0
    # The least time commit_transaction gets, even when the steps before it used the
    # whole op budget (a commit cut short is an `info` op: unknown outcome).
    commit_min_s: float = 3.0
    # Budget of the abort that follows a failed txn step (on top of op_timeout_s).
    abort_timeout_s: float = 5.0
    # Once the run's `stop` is set, outstanding calls get this long, then give up.
    stop_grace_s: float = 2.0
    # How long a graceful close may take before it is left to finish in the background.
    close_wait_s: float = 3.0
    # Replace a transactional producer after aborting a transaction whose sends were not
    # all acknowledged. librdkafka (no KIP-890 epoch bump) keeps the producer epoch across
    # the abort and may reuse such a send's sequence number for the next record to that
    # partition; if the unacknowledged record did reach the log, the broker takes the new
    # record for a duplicate of it, acknowledges it at the old record's offset and drops
    # it: an acknowledged, committed write lost (seen in CI, traced with `ktrial trace`).
    # The successor's init_transactions bumps the epoch, which makes sequences safe again.
    # False reproduces the client bug.
    retire_after_unsure_abort: bool = True

    def producer_config(self) -> dict[str, Any]:
        c = dict(DEFAULT_PRODUCER_CONFIG)
        c["enable.idempotence"] = self.idempotence
        if not self.idempotence:
            c.pop("max.in.flight.requests.per.connection", None)
        if self.txn:
            c.update(DEFAULT_TXN_PRODUCER_CONFIG)
        c.update(self.producer_overrides)
        c["bootstrap.servers"] = self.bootstrap
        return c

    def consumer_config(self) -> dict[str, Any]:
        c = dict(DEFAULT_CONSUMER_CONFIG)
        c.update(self.consumer_overrides)
        c["bootstrap.servers"] = self.bootstrap
        c["group.id"] = self.group_id
        return c


Records = dict[str, list[list[Any]]]  # JSON object keys are strings


class ConfluentDriver:
    """A producer and a consumer for one process; see :class:`.driver.Driver`."""

    def __init__(
        self,
        cfg: DriverConfig,
        process: int,
        slot: int,
        consume: bool = True,
        produce: bool = True,
        stop: threading.Event | None = None,
    ) -> None:
        self.cfg = cfg
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
            pconf["transactional.id"] = f"{cfg.txn_id_prefix}-w{slot}"
        pconf["client.id"] = f"ktrial-p{process}"
        pconf["logger"] = CLIENT_LOG
        self.producer: ck.Producer | None = ck.Producer(pconf) if produce else None
        self.consumer: ck.Consumer | None = None
        self.assigned: list[int] = []
        # Next offset to read per key, as far as *this* process knows it (from what it
        # read or where it seeked). librdkafka's position() is unknown (-1001) until a
        # fetch returns, and falling back to the group's committed offset would jump
        # to where *other* processes of the shared group got.
        self.pos: dict[int, int] = {}
        # The first offset the current op read per key: where to rewind to when the
        # op began at an unknown position.
        self._op_first: dict[int, int] = {}
        self.rebalance_log: list[dict[str, Any]] = []
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
    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion:
        if f == "send":
            return self._sends(value)
        if f == "poll":
            return self._poll_op()
        if f == "txn":
            return self._txn(value, abort)
        raise ValueError(f"confluent driver: unknown op f={f!r} (expected send, poll or txn)")

    def positions(self, keys: Sequence[int]) -> dict[int, int]:
        """The consumer's next offset per key (negative when unknown).

        The larger of what this process read and librdkafka's position, which also
        moves past aborted records and transaction markers a read_committed fetch skipped.
        """
        c = self._require_consumer()
        tps = c.position([self._ck_tp(k) for k in keys])
        out = {self.cfg.keys.key_of(tp.topic, tp.partition): tp.offset for tp in tps}
        return {k: max(out.get(k, -1), self.pos.get(k, -1)) for k in keys}

    def assign(self, keys: Sequence[int], from_beginning: bool = False) -> Completion:
        c = self._require_consumer()
        keys = sorted(set(keys))
        try:
            if from_beginning:
                c.assign([self._ck_tp(k, 0) for k in keys])
                self.assigned = list(keys)
                self.pos = {}
            elif self.cfg.sub_via == "subscribe":
                self.rebalance_log = []
                c.subscribe(
                    self.cfg.keys.topics(keys),
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_revoke,
                )
            else:
                # Keep the position of keys we keep; new keys start at the group's
                # committed offset (earliest when none), resolved here (see _start_offsets).
                pos = {k: self.pos[k] for k in keys if k in self.assigned and k in self.pos}
                start = self._start_offsets([k for k in keys if k not in pos])
                c.assign([self._ck_tp(k, pos.get(k, start.get(k))) for k in keys])
                self.assigned = list(keys)
                self.pos = pos
        except (KafkaException, RuntimeError) as e:
            v = errors.classify(e, "poll")
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
            # call returns (see _send_offsets). Only the consumer is ours to close.
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

    # ------------------------------------------------------------------------ helpers
    def _deadline(self, budget_s: float) -> Deadline:
        return Deadline(budget_s, self.stop, self.cfg.stop_grace_s)

    def _flush(self, dl: Deadline) -> int:
        """Flush in slices until everything is acknowledged or `dl` passes; returns unacked."""
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

    def _ck_tp(self, key: int, offset: int | None = None) -> ck.TopicPartition:
        tp = self.cfg.keys.tp(key)
        if offset is None:
            return ck.TopicPartition(tp.topic, tp.partition)
        return ck.TopicPartition(tp.topic, tp.partition, offset)

    def _start_offsets(self, keys: Sequence[int]) -> dict[int, int]:
        """Where newly assigned keys start: offset 0, a concrete offset.

        Never a logical offset. librdkafka resolves OFFSET_STORED and OFFSET_BEGINNING
        asynchronously (a ListOffsets/OffsetFetch request), and a resolution still in
        flight when the key is re-assigned with an explicit position is applied
        afterwards: a consumer read key 7 up to offset 91, was re-assigned at 92, and
        its next poll began again at 0 (CI, kill nemesis, safe profile). A synchronous
        committed() timed out (10 s) under load. A new key's first read may start
        anywhere, so 0 is always legal; if a topic's log starts later (retention), the
        fetch is out of range and auto.offset.reset=earliest moves it forward.
        """
        return dict.fromkeys(keys, 0)

    def _keys_of(self, tps: list[ck.TopicPartition]) -> list[int]:
        out = []
        for tp in tps:
            try:
                out.append(self.cfg.keys.key_of(tp.topic, tp.partition))
            except KeyError:
                continue
        return sorted(out)

    def _on_assign(self, consumer: ck.Consumer, tps: list[ck.TopicPartition]) -> None:
        keys = self._keys_of(tps)
        self.rebalance_log.append({"type": "assigned", "keys": keys})
        for k in keys:  # a new assignment starts at the group's committed offset
            self.pos.pop(k, None)
            self._op_first.pop(k, None)

    def _on_revoke(self, consumer: ck.Consumer, tps: list[ck.TopicPartition]) -> None:
        keys = self._keys_of(tps)
        self.rebalance_log.append({"type": "revoked", "keys": keys})
        for k in keys:
            self.pos.pop(k, None)
            self._op_first.pop(k, None)

    def _snapshot(self) -> dict[int, int]:
        """Where this process stands (known positions), to rewind to after a fail/info op.

        Also starts a new op's record of first offsets read.
        """
        self._op_first = {}
        return dict(self.pos)

    def _rewind(self, snap: dict[int, int]) -> bool:
        """Seek back to where the op began reading. Kafka does not rewind on abort.

        A key's target is its position before the op, else the first offset the op
        read of it; keys the op did not read need nothing.
        """
        c = self.consumer
        if c is None:
            return True
        targets = {k: snap.get(k, off) for k, off in self._op_first.items()}
        if not targets:
            return True
        try:
            if self.cfg.sub_via == "assign":
                keep = {k: o for k, o in self.pos.items() if k in self.assigned}
                keep.update({k: o for k, o in targets.items() if k in self.assigned})
                start = self._start_offsets([k for k in self.assigned if k not in keep])
                c.assign([self._ck_tp(k, keep.get(k, start.get(k))) for k in self.assigned])
                self.pos = keep
            else:
                current = set(self._keys_of(list(c.assignment())))
                for k, off in targets.items():
                    if k in current:
                        c.seek(self._ck_tp(k, off))
                        self.pos[k] = off
            return True
        except (KafkaException, RuntimeError):
            return False

    def _poll_records(
        self, into: Records, last: dict[tuple[str, int], int]
    ) -> tuple[int, KafkaError | None]:
        """One poll: wait up to poll_ms for a first record, then take what is buffered.

        Adds records to `into` (key -> [[offset, value], ...], client order) and
        the highest offset per partition to `last`; returns (records, bad error).
        """
        c = self._require_consumer()
        msgs: list[ck.Message] = []
        m = c.poll(self.cfg.poll_ms / 1000.0)
        if m is not None:
            msgs.append(m)
            msgs.extend(c.consume(self.cfg.max_poll_records, 0))
        n = 0
        bad: KafkaError | None = None
        for m in msgs:
            err = m.error()
            if err is not None:
                if not errors.consumer_event_is_benign(err) and bad is None:
                    bad = err
                continue
            topic, part, off = m.topic(), m.partition(), m.offset()
            if topic is None or part is None or off is None:
                continue
            try:
                key = self.cfg.keys.key_of(topic, part)
            except KeyError:
                continue
            raw = m.value()
            into.setdefault(str(key), []).append([off, _decode(raw)])
            self._op_first.setdefault(key, off)
            self.pos[key] = off + 1
            last[(topic, part)] = off
            n += 1
        return n, bad

    def _poll_op(self) -> Completion:
        snap = self._snapshot()
        self.rebalance_log = []
        recs: Records = {}
        last: dict[tuple[str, int], int] = {}
        t0 = time.monotonic()
        try:
            _, bad = self._poll_records(recs, last)
        except (KafkaException, RuntimeError) as e:
            v = errors.classify(e, "poll")
            ok = self._rewind(snap)
            return self._done(v.type, [["poll", recs]], v.error, v.retire or not ok, t0)
        if bad is not None:
            ok = self._rewind(snap)
            return self._done(
                "info",
                [["poll", recs]],
                errors.describe(bad),
                (not ok) or errors.must_retire(bad),
                t0,
            )
        if last and not self.cfg.txn and self.cfg.sub_via == "subscribe":
            # Progress for the group, so the next member the key moves to starts here.
            # (With assign, new keys start at the beginning: see _start_offsets. Each
            # commit is a replicated write to __consumer_offsets, so none is made.)
            with contextlib.suppress(KafkaException, RuntimeError):
                self._require_consumer().commit(
                    offsets=[ck.TopicPartition(t, p, o + 1) for (t, p), o in last.items()],
                    asynchronous=True,
                )
        return self._done("ok", [["poll", recs]], None, False, t0)

    def _done(
        self, type_: str, value: Any, error: Any, retire: bool, t0: float | None = None
    ) -> Completion:
        extra: dict[str, Any] = {}
        if t0 is not None:
            extra["poll_ms"] = self.cfg.poll_ms
        if self.rebalance_log:
            extra["rebalance_log"] = list(self.rebalance_log)
        return Completion(type_, value, error, retire, extra)

    def _require_producer(self) -> ck.Producer:
        if self.producer is None:
            raise RuntimeError(f"process {self.process}: this driver was opened without a producer")
        return self.producer

    def _produce(self, mops: list[Any], idx: list[int], results: list[Any]) -> None:
        """Enqueue the sends `mops[i]` for i in idx; delivery reports fill `results[i]`."""
        producer = self._require_producer()
        for i in idx:
            _, key, val = mops[i]
            tp = self.cfg.keys.tp(key)

            def cb(err: KafkaError | None, msg: ck.Message, i: int = i) -> None:
                results[i] = err if err is not None else msg.offset()

            producer.produce(
                tp.topic, value=self._payload(val), partition=tp.partition, on_delivery=cb
            )

    def _payload(self, value: Any) -> bytes:
        """The record bytes of a history value (a measuring driver may pad them)."""
        return str(value).encode()

    def _sends(self, mops: list[Any]) -> Completion:
        results: list[Any] = [None] * len(mops)
        refused: BaseException | None = None
        sent = 0
        for i in range(len(mops)):
            try:
                self._produce(mops, [i], results)
                sent += 1
            except (BufferError, KafkaException) as e:
                refused = e
                break
        try:
            remaining = self._flush(self._deadline(self.cfg.op_timeout_s)) if sent else 0
        except KafkaException as e:
            # Fatal producer error while waiting: the sends' fate is unknown.
            v = errors.classify(e, "flush")
            value = [_send_result(m, results[i]) for i, m in enumerate(mops)]
            return Completion("info", value, v.error, True)
        value = [_send_result(m, results[i]) for i, m in enumerate(mops)]
        verdicts = [errors.classify(r, "send") for r in results[:sent] if isinstance(r, KafkaError)]
        retire = any(v.retire for v in verdicts)
        if refused is not None:
            verdicts.append(errors.classify(refused, "send"))
        if remaining > 0 or any(r is None for r in results[:sent]):
            err: Any = {
                "name": "FlushTimeout",
                "message": f"{remaining} sends unacknowledged when the op's time ran out"
                f" ({self.cfg.op_timeout_s}s, or {self.cfg.stop_grace_s}s after stop)",
            }
            return Completion("info", value, err, retire)
        if not verdicts:
            return Completion("ok", value)
        if sent == 0 and all(v.type == "fail" for v in verdicts):
            return Completion("fail", value, verdicts[0].error, retire)
        worst = next((v for v in verdicts if v.type == "info"), verdicts[0])
        # Some sends may have succeeded while another failed: the op as a whole is unknown.
        return Completion("info", value, worst.error, retire)

    def copy_txn(self, route: dict[int, int], value_offset: int, abort: bool = False) -> Completion:
        """The copy workload's consume-transform-produce step.

        Poll the input (outside any transaction); if records came back, write each
        value + `value_offset` to key `route[input key]` in one transaction that also
        commits the consumed offsets with the consumer's group metadata. The
        completion is ``[["poll", {...}], ["send", out_key, [offset, value]], ...]``.
        """
        snap = self._snapshot()
        self.rebalance_log = []
        recs: Records = {}
        last: dict[tuple[str, int], int] = {}
        try:
            _, bad = self._poll_records(recs, last)
        except (KafkaException, RuntimeError) as e:
            bad = errors.as_kafka_error(e) or KafkaError(KafkaError._FAIL, str(e))
        if bad is not None:
            # Nothing was written: the op had no effect. Re-read from where it began.
            ok = self._rewind(snap)
            return self._done(
                "fail", [["poll", recs]], errors.describe(bad), (not ok) or errors.must_retire(bad)
            )
        if not recs:
            return self._done("ok", [["poll", {}]], None, False)
        sends = [["send", route[int(k)], v + value_offset] for k, rs in recs.items() for _, v in rs]
        return self._txn(sends, abort, pre=(recs, last, snap))

    def _txn(
        self,
        mops: list[Any],
        abort: bool,
        pre: tuple[Records, dict[tuple[str, int], int], dict[int, int]] | None = None,
    ) -> Completion:
        """One transaction: begin, micro-ops, flush, send offsets, commit (or abort).

        Completion types:

        * ``ok``: commit_transaction returned success;
        * ``info``: commit_transaction was called and did not return success (its
          outcome is unknown; never abort then: the successor's init_transactions
          on the same transactional.id settles it);
        * ``fail``: commit was never attempted, so the transaction cannot have
          committed: Kafka commits a transaction only on the producer's EndTxn(commit).
          This holds whether the abort that follows succeeded or not (when it did
          not, or the producer is fenced/fatal/stuck, the process is retired and
          the successor's init_transactions, or the coordinator's transaction
          timeout, aborts it).
        """
        p = self._require_producer()
        if pre is None:
            snap = self._snapshot()
            self.rebalance_log = []
            last: dict[tuple[str, int], int] = {}
            head: list[Any] = []
        else:
            recs0, last, snap = pre
            head = [["poll", recs0]]
        results: list[Any] = [None] * len(mops)
        recs_by_mop: dict[int, Records] = {}
        dl = self._deadline(self.cfg.op_timeout_s)
        try:
            p.begin_transaction()
        except KafkaException as e:
            v = errors.classify(e, "begin")
            self._rewind(snap)
            value0 = head + _txn_value(mops, results, recs_by_mop)
            return self._done(v.type, value0, v.error, v.retire)

        failure: Any = None
        retire = False
        produced: list[int] = []  # sends handed to the producer
        try:
            for i, m in enumerate(mops):
                if m[0] == "send":
                    self._produce(mops, [i], results)
                    produced.append(i)
                else:
                    recs: Records = {}
                    recs_by_mop[i] = recs
                    _, bad = self._poll_records(recs, last)
                    if bad is not None:
                        failure = errors.describe(bad)
                        retire = errors.must_retire(bad)
                        break
            if failure is None:
                unacked = self._flush(dl)
                if unacked > 0:
                    failure = {
                        "name": "FlushTimeout",
                        "message": f"{unacked} sends unacknowledged when the op's time ran out"
                        f" ({self.cfg.op_timeout_s}s, or {self.cfg.stop_grace_s}s after stop)",
                    }
            if failure is None:
                for r in results:
                    if isinstance(r, KafkaError):
                        failure = errors.describe(r)
                        retire = retire or errors.must_retire(r)
                        break
            if failure is None and not abort and last:
                offsets = [ck.TopicPartition(t, pt, o + 1) for (t, pt), o in last.items()]
                meta = self._require_consumer().consumer_group_metadata()
                self._producer_call(
                    "send_offsets",
                    lambda q, t: q.send_offsets_to_transaction(offsets, meta, t),
                    max(0.1, dl.left()),
                )
        except CallTimeout as e:
            failure = {"name": "CallTimeout", "message": str(e)}
            retire = True
        except (KafkaException, BufferError) as e:
            failure = errors.describe(e)
            retire = retire or errors.must_retire(e)

        value = head + _txn_value(mops, results, recs_by_mop)
        if failure is None and not abort:
            try:
                # However long the steps before took, the commit gets a fair chance.
                self._producer_call(
                    "commit",
                    lambda q, t: q.commit_transaction(t),
                    max(dl.left(), self.cfg.commit_min_s),
                )
            except CallTimeout as e:
                return self._done("info", value, {"name": "CommitTimeout", "message": str(e)}, True)
            except KafkaException as e:
                # Never abort after a failed commit: the outcome is unknown. The
                # successor's init_transactions (same transactional.id) settles it.
                v = errors.classify(e, "commit")
                return self._done("info", value, v.error, True)
            return self._done("ok", value, None, False)

        if retire:
            # A fatal/fenced/stuck producer cannot abort; its transaction never
            # committed and is aborted by the successor's init_transactions.
            self._rewind(snap)
            return self._done("fail", value, failure, True)
        # Sends whose fate is unknown (no successful delivery report) make the producer
        # unsafe to reuse after the abort: see DriverConfig.retire_after_unsure_abort.
        unsure = any(not _acked(results[i]) for i in produced)
        return self._abort_then(
            snap, value, failure, retire=unsure and self.cfg.retire_after_unsure_abort
        )

    def _abort_then(
        self, snap: dict[int, int], value: Any, failure: Any, retire: bool
    ) -> Completion:
        """Abort the open transaction; the op failed (it never committed) whatever happens."""
        try:
            self._producer_call(
                "abort", lambda q, t: q.abort_transaction(t), self.cfg.abort_timeout_s
            )
        except CallTimeout as e:
            self._rewind(snap)
            err = {"abort": {"name": "CallTimeout", "message": str(e)}, "cause": failure}
            return self._done("fail", value, err, True)
        except KafkaException as e:
            v = errors.classify(e, "abort")
            self._rewind(snap)
            return self._done("fail", value, {"abort": v.error, "cause": failure}, True)
        ok = self._rewind(snap)
        err = failure if failure is not None else {"name": "DeliberateAbort"}
        return self._done("fail", value, err, retire or not ok)


def _acked(r: Any) -> bool:
    """Whether a send's result is a successful delivery report (an offset)."""
    return isinstance(r, int) and not isinstance(r, bool)


def _decode(raw: bytes | None) -> Any:
    if raw is None:
        return None
    s = raw.decode()
    try:
        return int(s)
    except ValueError:
        return s


def _send_result(mop: list[Any], r: Any) -> list[Any]:
    """["send", k, [offset, v]] when acknowledged, else ["send", k, v] (offset unknown)."""
    _, k, v = mop
    if isinstance(r, int) and not isinstance(r, bool):
        return ["send", k, [r if r >= 0 else None, v]]
    return ["send", k, v]


def _txn_value(mops: list[Any], results: list[Any], recs: dict[int, Records]) -> list[Any]:
    out: list[Any] = []
    for i, m in enumerate(mops):
        if m[0] == "send":
            out.append(_send_result(m, results[i]))
        else:
            r = recs.get(i)
            # A poll the txn never reached stays in its invoke form (result unknown).
            out.append(["poll", r] if r is not None else ["poll"])
    return out


def drain_clients(
    bootstrap: str, keys: KeyMap, run_id: str, consumer_config: dict[str, Any]
) -> Callable[[int], ConfluentDriver]:
    """Fresh read-only clients for the drain: assign mode, long polls, big batches."""
    cfg = DriverConfig(
        bootstrap=bootstrap,
        keys=keys,
        group_id=f"ktrial-{run_id}-drain",
        txn=False,
        sub_via="assign",
        poll_ms=500,
        max_poll_records=5000,
        consumer_overrides=dict(consumer_config),
    )
    return lambda process: ConfluentDriver(cfg, process, -1, produce=False)
