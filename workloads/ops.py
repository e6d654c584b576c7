"""One op -> client calls -> one completion: the driver logic every client shares.

:class:`OpDriver` implements the contract of :mod:`.driver` (sends, polls,
transactions, the copy workload's consume-transform-produce step, the rewind after a
failed op) in terms of a handful of *client calls* a concrete driver provides: enqueue
a send, flush, fetch buffered records, begin / send offsets / commit / abort a
transaction, and position the consumer. What an op's completion says (its type, its
value with partial results, whether the process retires) is decided here, once, with
the client's :class:`.errors.ErrorRules` and the rewind rules of :mod:`.rewind`.

The confluent-kafka driver is :class:`.confluent.ConfluentDriver`. A driver written in
another language (a worker process speaking JSON lines, see :mod:`.driver`) follows the
same flow and rules; the functions at the end of this module (`send_result`,
`txn_value`, `decode_value`) define the completion values it must produce.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from . import errors
from .bounded import CallTimeout, Deadline
from .driver import Completion, KeyMap
from .errors import ErrorRules
from .rewind import Plan, ReadPositions

Records = dict[str, list[list[Any]]]  # key (a JSON object key: a string) -> [[offset, value]]
Last = dict[tuple[str, int], int]  # (topic, partition) -> highest offset an op read
Fetched = tuple[str, int, int, Any]  # (topic, partition, offset, raw value) of one record


class OpSettings(Protocol):
    """The run-wide settings the op flow reads (confluent: DriverConfig)."""

    @property
    def keys(self) -> KeyMap: ...
    @property
    def txn(self) -> bool: ...
    @property
    def sub_via(self) -> str: ...
    @property
    def poll_ms(self) -> int: ...
    @property
    def op_timeout_s(self) -> float: ...
    @property
    def commit_min_s(self) -> float: ...
    @property
    def abort_timeout_s(self) -> float: ...
    @property
    def stop_grace_s(self) -> float: ...
    @property
    def retire_after_unsure_abort(self) -> bool: ...
    @property
    def abort_unknown_offset(self) -> bool: ...


class OpDriver(ABC):
    """The op flow of one logical process; a subclass supplies the client calls."""

    cfg: OpSettings
    rules: ErrorRules
    reads: ReadPositions
    process: int
    stop: threading.Event | None

    # ------------------------------------------------------------ client calls

    @abstractmethod
    def _produce(self, mops: list[Any], idx: list[int], results: list[Any]) -> None:
        """Enqueue the sends `mops[i]` for i in idx; each delivery report fills `results[i]`
        with the record's offset or the client's error value. Raises a refusal."""

    @abstractmethod
    def _flush(self, dl: Deadline) -> int:
        """Wait until every enqueued send is reported or `dl` passes; returns unreported."""

    @abstractmethod
    def _fetch(self) -> tuple[list[Fetched], list[Any]]:
        """One poll: wait up to poll_ms for a first record, then take what is buffered.
        Returns the records in client order and the error events seen."""

    @abstractmethod
    def _commit_progress(self, last: Last) -> None:
        """Subscribe mode: tell the group (best effort, asynchronously) how far we read."""

    @abstractmethod
    def _begin(self) -> None: ...

    @abstractmethod
    def _send_offsets(self, last: Last, budget_s: float) -> None:
        """Add the consumed offsets (next to read) to the open transaction."""

    @abstractmethod
    def _commit(self, budget_s: float) -> None: ...

    @abstractmethod
    def _abort(self, budget_s: float) -> None: ...

    @abstractmethod
    def _has_consumer(self) -> bool: ...

    @abstractmethod
    def _assign_at(self, plan: Plan) -> None:
        """Assign exactly the plan's keys, each at its offset."""

    @abstractmethod
    def _seek(self, key: int, offset: int) -> None: ...

    @abstractmethod
    def _current_keys(self) -> list[int]:
        """The keys the group assigned to this consumer now (subscribe mode)."""

    # ------------------------------------------------------------ the contract

    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion:
        if f == "send":
            return self._sends(value)
        if f == "poll":
            return self._poll_op()
        if f == "txn":
            return self._txn(value, abort)
        raise ValueError(f"{self.driver_name}: unknown op f={f!r} (expected send, poll or txn)")

    driver_name = "driver"

    # ------------------------------------------------------------ helpers

    def _deadline(self, budget_s: float) -> Deadline:
        return Deadline(budget_s, self.stop, self.cfg.stop_grace_s)

    def _call_errors(self) -> tuple[type[BaseException], ...]:
        """What a failed consumer call raises: the client's errors, or our own RuntimeError."""
        return (*self.rules.call_errors, RuntimeError)

    def _snapshot(self) -> dict[int, int]:
        """Where this process stands (known positions), to rewind to after a fail/info op."""
        return self.reads.snapshot()

    def _rewind(self, snap: dict[int, int]) -> bool:
        """Seek back to where the op began reading (Kafka does not rewind on abort).

        Returns False when the client refused: the process must then retire.
        """
        if not self._has_consumer():
            return True
        targets = self.reads.rewind_targets(snap)
        if not targets:
            return True
        try:
            if self.cfg.sub_via == "assign":
                plan, keep = self.reads.rewind_assign_plan(targets)
                self._assign_at(plan)
                self.reads.pos = keep
            else:
                for k, off in self.reads.rewind_seek_plan(targets, self._current_keys()):
                    self._seek(k, off)
                    self.reads.sought(k, off)
            return True
        except self._call_errors():
            return False

    def _poll_records(self, into: Records, last: Last) -> tuple[int, Any]:
        """One poll into `into` (key -> [[offset, value], ...], client order) and `last`
        (highest offset per partition); returns (records, the first bad error event)."""
        records, events = self._fetch()
        bad = next((e for e in events if not self.rules.consumer_event_is_benign(e)), None)
        keys = self.cfg.keys
        n = 0
        for topic, part, off, raw in records:
            try:
                key = keys.key_of(topic, part)
            except KeyError:
                continue
            into.setdefault(str(key), []).append([off, decode_value(raw)])
            self.reads.read(key, off)
            last[(topic, part)] = off
            n += 1
        return n, bad

    def _done(
        self, type_: str, value: Any, error: Any, retire: bool, t0: float | None = None
    ) -> Completion:
        extra: dict[str, Any] = {}
        if t0 is not None:
            extra["poll_ms"] = self.cfg.poll_ms
        if self.reads.rebalance_log:
            extra["rebalance_log"] = list(self.reads.rebalance_log)
        return Completion(type_, value, error, retire, extra)

    def _flush_timeout(self, unacked: int) -> dict[str, Any]:
        return {
            "name": "FlushTimeout",
            "message": f"{unacked} sends unacknowledged when the op's time ran out"
            f" ({self.cfg.op_timeout_s}s, or {self.cfg.stop_grace_s}s after stop)",
        }

    # ------------------------------------------------------------ poll

    def _poll_op(self) -> Completion:
        snap = self._snapshot()
        self.reads.rebalance_log = []
        recs: Records = {}
        last: Last = {}
        t0 = time.monotonic()
        rules = self.rules
        try:
            _, bad = self._poll_records(recs, last)
        except self._call_errors() as e:
            v = errors.classify(rules, e, "poll")
            ok = self._rewind(snap)
            return self._done(v.type, [["poll", recs]], v.error, v.retire or not ok, t0)
        if bad is not None:
            ok = self._rewind(snap)
            retire = (not ok) or rules.must_retire(bad)
            return self._done("info", [["poll", recs]], rules.describe(bad), retire, t0)
        if last and not self.cfg.txn and self.cfg.sub_via == "subscribe":
            # Progress for the group, so the next member the key moves to starts here.
            # (With assign, new keys start at the beginning: see .rewind. Each commit
            # is a replicated write to __consumer_offsets, so none is made.)
            self._commit_progress(last)
        return self._done("ok", [["poll", recs]], None, False, t0)

    # ------------------------------------------------------------ sends

    def _sends(self, mops: list[Any]) -> Completion:
        rules = self.rules
        results: list[Any] = [None] * len(mops)
        refused: BaseException | None = None
        sent = 0
        for i in range(len(mops)):
            try:
                self._produce(mops, [i], results)
                sent += 1
            except rules.call_errors as e:
                refused = e
                break
        try:
            remaining = self._flush(self._deadline(self.cfg.op_timeout_s)) if sent else 0
        except rules.call_errors as e:
            # Fatal producer error while waiting: the sends' fate is unknown.
            v = errors.classify(rules, e, "flush")
            value = [send_result(m, results[i]) for i, m in enumerate(mops)]
            return Completion("info", value, v.error, True)
        value = [send_result(m, results[i]) for i, m in enumerate(mops)]
        verdicts = [errors.classify(rules, r, "send") for r in results[:sent] if rules.is_error(r)]
        retire = any(v.retire for v in verdicts)
        if refused is not None:
            verdicts.append(errors.classify(rules, refused, "send"))
        if remaining > 0:
            return Completion("info", value, self._flush_timeout(remaining), retire)
        blind = [i for i in range(sent) if not rules.is_error(results[i])]
        blind = [i for i in blind if not known_offset(results[i])]
        if blind:  # reported delivered without an offset: it may not be in the log
            return Completion("info", value, offsetless_failure(mops, blind), retire)
        if not verdicts:
            return Completion("ok", value)
        if sent == 0 and all(v.type == "fail" for v in verdicts):
            return Completion("fail", value, verdicts[0].error, retire)
        worst = next((v for v in verdicts if v.type == "info"), verdicts[0])
        # Some sends may have succeeded while another failed: the op as a whole is unknown.
        return Completion("info", value, worst.error, retire)

    # ------------------------------------------------------------ transactions

    def copy_txn(self, route: dict[int, int], value_offset: int, abort: bool = False) -> Completion:
        """The copy workload's consume-transform-produce step.

        Poll the input (outside any transaction); if records came back, write each
        value + `value_offset` to key `route[input key]` in one transaction that also
        commits the consumed offsets with the consumer's group metadata. The
        completion is ``[["poll", {...}], ["send", out_key, [offset, value]], ...]``.
        """
        rules = self.rules
        snap = self._snapshot()
        self.reads.rebalance_log = []
        recs: Records = {}
        last: Last = {}
        try:
            _, bad = self._poll_records(recs, last)
        except self._call_errors() as e:
            bad = rules.as_error(e)
        if bad is not None:
            # Nothing was written: the op had no effect. Re-read from where it began.
            ok = self._rewind(snap)
            retire = (not ok) or rules.must_retire(bad)
            return self._done("fail", [["poll", recs]], rules.describe(bad), retire)
        if not recs:
            return self._done("ok", [["poll", {}]], None, False)
        sends = [["send", route[int(k)], v + value_offset] for k, rs in recs.items() for _, v in rs]
        return self._txn(sends, abort, pre=(recs, last, snap))

    def _txn(
        self,
        mops: list[Any],
        abort: bool,
        pre: tuple[Records, Last, dict[int, int]] | None = None,
    ) -> Completion:
        """One transaction: begin, micro-ops, flush, send offsets, commit (or abort).

        Completion types:

        * ``ok``: the commit returned success;
        * ``info``: the commit was called and did not return success (its outcome is
          unknown; never abort then: the successor's init_transactions on the same
          transactional.id settles it);
        * ``fail``: commit was never attempted, so the transaction cannot have
          committed: Kafka commits a transaction only on the producer's EndTxn(commit).
          This holds whether the abort that follows succeeded or not (when it did
          not, or the producer is fenced/fatal/stuck, the process is retired and
          the successor's init_transactions, or the coordinator's transaction
          timeout, aborts it).
        """
        rules = self.rules
        if pre is None:
            snap = self._snapshot()
            self.reads.rebalance_log = []
            last: Last = {}
            head: list[Any] = []
        else:
            recs0, last, snap = pre
            head = [["poll", recs0]]
        results: list[Any] = [None] * len(mops)
        recs_by_mop: dict[int, Records] = {}
        dl = self._deadline(self.cfg.op_timeout_s)
        try:
            self._begin()
        except rules.call_errors as e:
            v = errors.classify(rules, e, "begin")
            self._rewind(snap)
            value0 = head + txn_value(mops, results, recs_by_mop)
            return self._done(v.type, value0, v.error, v.retire)

        failure: Any = None
        retire = False
        produced: list[int] = []  # sends handed to the producer
        try:
            for step in send_runs(mops):
                if mops[step[0]][0] == "send":
                    # A run of sends is one call (a worker's channel costs a round trip
                    # per call). When it is refused, which of several records were
                    # handed over is unknown: all count as produced, so their missing
                    # delivery makes the producer retire after the abort.
                    try:
                        self._produce(mops, step, results)
                    except BaseException:
                        if len(step) > 1:
                            produced.extend(step)
                        raise
                    produced.extend(step)
                else:
                    i = step[0]
                    recs: Records = {}
                    recs_by_mop[i] = recs
                    _, bad = self._poll_records(recs, last)
                    if bad is not None:
                        failure = rules.describe(bad)
                        retire = rules.must_retire(bad)
                        break
            if failure is None:
                unacked = self._flush(dl)
                if unacked > 0:
                    failure = self._flush_timeout(unacked)
            if failure is None:
                for r in results:
                    if rules.is_error(r):
                        failure = rules.describe(r)
                        retire = retire or rules.must_retire(r)
                        break
            if failure is None and self.cfg.abort_unknown_offset:
                blind = [i for i in produced if not known_offset(results[i])]
                if blind:
                    failure = offsetless_failure(mops, blind)
            if failure is None and not abort and last:
                self._send_offsets(last, max(0.1, dl.left()))
        except CallTimeout as e:
            failure = {"name": "CallTimeout", "message": str(e)}
            retire = True
        except rules.call_errors as e:
            failure = rules.describe(e)
            retire = retire or rules.must_retire(e)

        value = head + txn_value(mops, results, recs_by_mop)
        if failure is None and not abort:
            try:
                # However long the steps before took, the commit gets a fair chance.
                self._commit(max(dl.left(), self.cfg.commit_min_s))
            except CallTimeout as e:
                return self._done("info", value, {"name": "CommitTimeout", "message": str(e)}, True)
            except rules.call_errors as e:
                # Never abort after a failed commit: the outcome is unknown. The
                # successor's init_transactions (same transactional.id) settles it.
                v = errors.classify(rules, e, "commit")
                return self._done("info", value, v.error, True)
            return self._done("ok", value, None, False)

        if retire:
            # A fatal/fenced/stuck producer cannot abort; its transaction never
            # committed and is aborted by the successor's init_transactions.
            self._rewind(snap)
            return self._done("fail", value, failure, True)
        # Sends whose fate is unknown (no successful delivery report) make the producer
        # unsafe to reuse after the abort: see DriverConfig.retire_after_unsure_abort.
        unsure = any(not known_offset(results[i]) for i in produced)
        return self._abort_then(
            snap, value, failure, retire=unsure and self.cfg.retire_after_unsure_abort
        )

    def _abort_then(
        self, snap: dict[int, int], value: Any, failure: Any, retire: bool
    ) -> Completion:
        """Abort the open transaction; the op failed (it never committed) whatever happens."""
        try:
            self._abort(self.cfg.abort_timeout_s)
        except CallTimeout as e:
            self._rewind(snap)
            err = {"abort": {"name": "CallTimeout", "message": str(e)}, "cause": failure}
            return self._done("fail", value, err, True)
        except self.rules.call_errors as e:
            v = errors.classify(self.rules, e, "abort")
            self._rewind(snap)
            return self._done("fail", value, {"abort": v.error, "cause": failure}, True)
        ok = self._rewind(snap)
        err = failure if failure is not None else {"name": "DeliberateAbort"}
        return self._done("fail", value, err, retire or not ok)


# ---------------------------------------------------------------- completion values


def send_runs(mops: Sequence[Any]) -> list[list[int]]:
    """The indexes of `mops` in order, consecutive sends grouped: [[0, 1], [2], [3, 4]]
    for send, send, poll, send, send (each poll alone)."""
    runs: list[list[int]] = []
    for i, m in enumerate(mops):
        if m[0] == "send" and runs and mops[runs[-1][-1]][0] == "send":
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def acked(r: Any) -> bool:
    """Whether a send's result is a successful delivery report (an offset)."""
    return isinstance(r, int) and not isinstance(r, bool)


def known_offset(r: Any) -> bool:
    """Whether a send's result is a delivery report that names the record's offset."""
    return acked(r) and r >= 0


def offsetless_failure(mops: list[Any], blind: list[int]) -> dict[str, Any]:
    """Why a transaction whose sends were reported delivered without an offset is aborted.

    librdkafka reports a record delivered with no offset when it infers the delivery
    from a later batch's success ("implicitly acked by subsequent batch success"): it
    assumes the broker stores a producer's batches in sequence order. The broker does
    not check that for a producer it has no state for, so when the first batch of a
    producer on a partition fails and the next one succeeds, the first is never stored
    and yet reported delivered; committing would lose it (seen in CI, traced with
    DumpLogSegments: the partition's first batch from that producer has sequence 1).
    """
    shown = ", ".join(f"value {mops[i][2]} to key {mops[i][1]}" for i in blind[:3])
    return {
        "name": "DeliveredWithoutOffset",
        "message": f"{len(blind)} send(s) reported delivered without an offset ({shown});"
        " the client may have inferred the delivery (implicit ack), so the transaction is"
        " aborted, not committed (workload option abort_unknown_offset=false commits it)",
    }


def decode_value(raw: bytes | None) -> Any:
    """A record's value as the history writes it: an int when it reads as one."""
    if raw is None:
        return None
    s = raw.decode()
    try:
        return int(s)
    except ValueError:
        return s


def send_result(mop: Sequence[Any], r: Any) -> list[Any]:
    """["send", k, [offset, v]] when acknowledged, else ["send", k, v] (offset unknown)."""
    _, k, v = mop
    if acked(r):
        return ["send", k, [r if r >= 0 else None, v]]
    return ["send", k, v]


def txn_value(mops: list[Any], results: list[Any], recs: Mapping[int, Records]) -> list[Any]:
    """A transaction's completion value: sends with offsets when acknowledged, polls with
    their records; a poll the transaction never reached stays in its invoke form."""
    out: list[Any] = []
    for i, m in enumerate(mops):
        if m[0] == "send":
            out.append(send_result(m, results[i]))
        else:
            r = recs.get(i)
            out.append(["poll", r] if r is not None else ["poll"])
    return out
