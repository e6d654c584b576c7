"""The queue workload's op generator: a pure, seeded stream of send / poll / txn ops.

One generator serves the whole run (the workload calls it under a lock), so the
*sequence* of ops is a function of the seed alone, as in Jepsen; which worker
thread draws which op is up to the scheduler.

Keys rotate: a window of ``active_keys`` consecutive keys out of a pool of
``n_keys`` takes the writes; every ``writes_per_key`` sends the oldest key retires
and the next joins (the pool wraps around). Each key therefore gets about
``writes_per_key`` sends while it is active and then goes quiet, which is what
lets the drain and the checker reason about a key's whole log. Values are
integers unique across the run.

No I/O, no clocks: unit-testable and reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GenOptions:
    txn: bool = False
    n_keys: int = 32
    active_keys: int = 4
    writes_per_key: int = 512
    max_txn_len: int = 4
    max_send_len: int = 1
    abort_p: float = 0.0
    # One `crash` op every this many ops (0: never).
    crash_every: int = 0
    # Probability that an op is a re-assignment (assign/subscribe) instead of data.
    reassign_p: float = 0.02
    # Share of sends among send/poll (non-txn ops and txn micro-ops).
    send_share: float = 0.5
    sub_via: str = "assign"
    # After this many ops no more polls (0: never): the consumers stop, a degraded run
    # that a soak's liveness gate must fail (docs/soak.md).
    stop_polls_after: int = 0

    def __post_init__(self) -> None:
        if self.n_keys < 1 or not 1 <= self.active_keys <= self.n_keys:
            raise ValueError(
                f"need 1 <= active_keys ({self.active_keys}) <= n_keys ({self.n_keys})"
            )
        if self.writes_per_key < 1:
            raise ValueError(f"writes_per_key must be >= 1, got {self.writes_per_key}")
        if not 0.0 <= self.abort_p <= 1.0:
            raise ValueError(f"abort_p must be within [0, 1], got {self.abort_p}")
        if self.stop_polls_after < 0:
            raise ValueError(f"stop_polls_after must be >= 0, got {self.stop_polls_after}")
        if not self.max_txn_len >= 1:
            raise ValueError(f"max_txn_len must be >= 1, got {self.max_txn_len}")
        if self.sub_via not in ("assign", "subscribe"):
            raise ValueError(f"sub_via must be 'assign' or 'subscribe', got {self.sub_via!r}")


@dataclass(frozen=True, slots=True)
class GenOp:
    """One op to perform: `f` and its invoke value; `abort` marks a deliberate abort."""

    f: str  # send | poll | txn | assign | subscribe | crash
    value: Any
    abort: bool = False


class Generator:
    """Deterministic op stream for the queue workload (not thread-safe: call under a lock)."""

    def __init__(self, opts: GenOptions, seed: int) -> None:
        self.opts = opts
        self.rng = random.Random(seed)
        self.next_value = 0
        self.sends = 0
        self.ops = 0
        self.base = 0  # index of the oldest active key

    # -- keys -----------------------------------------------------------------------
    def active(self) -> list[int]:
        """The keys currently taking writes, oldest first."""
        o = self.opts
        return [(self.base + i) % o.n_keys for i in range(o.active_keys)]

    def _send_mop(self) -> list[Any]:
        k = self.rng.choice(self.active())
        v = self.next_value
        self.next_value += 1
        self.sends += 1
        if self.sends % self.opts.writes_per_key == 0:
            self.base = (self.base + 1) % self.opts.n_keys
        return ["send", k, v]

    @property
    def polls_stopped(self) -> bool:
        return 0 < self.opts.stop_polls_after < self.ops

    def _mop(self) -> list[Any]:
        if self.rng.random() < self.opts.send_share or self.polls_stopped:
            return self._send_mop()
        return ["poll"]

    def assignment(self) -> GenOp:
        """An assign/subscribe op over a random non-empty subset of the active keys."""
        act = self.active()
        n = self.rng.randint(1, len(act))
        keys = sorted(self.rng.sample(act, n))
        return GenOp(self.opts.sub_via, keys)

    # -- the stream -------------------------------------------------------------------
    def next(self) -> GenOp:
        o = self.opts
        self.ops += 1
        if o.crash_every and self.ops % o.crash_every == 0:
            return GenOp("crash", None)
        if self.rng.random() < o.reassign_p:
            return self.assignment()
        if o.txn:
            n = self.rng.randint(1, o.max_txn_len)
            mops = [self._mop() for _ in range(n)]
            return GenOp("txn", mops, abort=self.rng.random() < o.abort_p)
        if self.rng.random() < o.send_share or self.polls_stopped:
            n = self.rng.randint(1, o.max_send_len)
            return GenOp("send", [self._send_mop() for _ in range(n)])
        return GenOp("poll", [["poll"]])
