"""Error classification: which completion type an error earns, and whether the client survives.

A history is only as honest as its completion types. ``ok`` claims the op took
effect, ``fail`` claims it certainly did not, ``info`` admits we do not know. The
rules (docs/design.md, the driver interface):

* timeouts, transport errors, NOT_LEADER_OR_FOLLOWER, unknown server errors and
  *anything* around a transaction commit -> ``info`` (the write may have landed);
* definite refusals (the request was never sent, or the broker refused it before
  appending) and successful aborts -> ``fail``; so is a transaction whose commit was
  never attempted even if its abort failed or timed out (Kafka commits only on the
  producer's EndTxn(commit); the successor's init_transactions or the coordinator's
  transaction timeout aborts it) — decided in the op flow (:mod:`.ops`), not here;
* fatal producer errors, fencing, out-of-order sequence numbers and unknown
  producer ids -> the client is retired and replaced by a new process with fresh
  clients (``retire=True``); the op itself is ``info`` unless it was certainly not
  applied.

This module is the client-independent half: the policy (:func:`classify`) and the
interface a client library's rules implement (:class:`ErrorRules`: which of *its*
errors are fatal, definite refusals or harmless consumer events, and how to write
them into the history). librdkafka's rules are :mod:`.confluent.errors`; a driver for
another client supplies its own. Pure: no Kafka calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

Phase = Literal["send", "poll", "begin", "commit", "abort", "send_offsets", "init", "flush"]
Completion = Literal["fail", "info"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """How an op that hit `error` completes, and whether its process must be replaced."""

    type: Completion
    retire: bool
    error: dict[str, Any]


class ErrorRules(Protocol):
    """One client library's knowledge of its own errors (see the module docstring)."""

    # Exceptions the client raises for a refused or failed call (caught by the op flow).
    call_errors: tuple[type[BaseException], ...]

    def is_error(self, result: object) -> bool:
        """Whether a delivery result (or poll event) is one of the client's error values."""

    def as_error(self, exc: BaseException) -> Any:
        """The client's error value for an exception (foreign ones become a generic failure)."""

    def describe(self, exc: Any) -> dict[str, Any]:
        """A JSON-friendly error object for the history: name, code, flags, message."""

    def must_retire(self, exc: Any) -> bool:
        """True when the client that raised `exc` cannot be used again."""

    def is_definite_refusal(self, exc: Any) -> bool:
        """True when `exc` proves the write was never appended."""

    def consumer_event_is_benign(self, err: Any) -> bool:
        """A poll error event that does not invalidate the records the same poll returned."""


def classify(rules: ErrorRules, exc: Any, phase: Phase) -> Verdict:
    """Classify an error raised during `phase` of a non-transactional op or a txn step.

    * ``commit``: always ``info``; and the producer is retired, because after a
      commit whose outcome is unknown the only safe move is a fresh producer (whose
      init_transactions fences the old one) — never an abort.
    * ``abort``: an abort that itself failed leaves the transaction's fate unknown:
      ``info`` and retire.
    * ``begin``: ``fail`` (nothing was sent), and the producer is retired.
    * otherwise: fatal/fenced/sequence errors retire (``info``, or ``fail`` when the
      error is also a definite refusal); definite refusals are ``fail``; the rest
      (timeouts, transport, NOT_LEADER, unknown server errors...) are ``info``.
    """
    d = rules.describe(exc)
    if phase in ("commit", "abort"):
        return Verdict("info", True, d)
    retire = rules.must_retire(exc)
    if phase == "begin" and not retire:
        # Nothing was sent yet in this transaction: the op certainly had no effect. A
        # producer that refuses to begin is replaced all the same: kafka-clients refused
        # every begin for 45 s after an epoch bump that never finished, and a process
        # that kept it failed 221,726 ops in a row (bench/RESULTS.md, DUPPROOF).
        return Verdict("fail", True, d)
    if phase == "init" and not retire:
        return Verdict("fail", False, d)
    if rules.is_definite_refusal(exc):
        return Verdict("fail", retire, d)
    return Verdict("info", retire, d)
