"""Does a candidate schedule reproduce the failure? A screened k-of-n test (pure).

The system is not deterministic: the same faults at the same times on the same seed
lose a write in one replay and not in the next. So a candidate is kept only when it
reproduces in ``k`` of ``n`` replays, run one at a time and stopped as soon as the
answer is known:

- the first replay screens: if it does not reproduce, the candidate is rejected at
  once (one trial spent; most candidates of a shrink are of this kind);
- otherwise replays go on until ``k`` reproduced (kept) or too few are left for ``k``
  (rejected).

With the default k=2, n=3 a kept candidate costs 2 or 3 replays and a rejected one
1 to 3; a candidate whose true rate is p is kept with probability p·(1-(1-p)²):
0.89 at p=0.9, 0.38 at p=0.5, 0.15 at p=0.3 — the test prefers schedules that
reproduce reliably, which is what a reproducer is for (docs/hunt.md).

The recorded schedule of the failing trial is judged with that trial counted as its
first reproduction (``prior``): it has already failed once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    k: int = 2
    n: int = 3

    def __post_init__(self) -> None:
        if not 1 <= self.k <= self.n:
            raise ValueError(f"reproduction rule {self.k}/{self.n}: need 1 <= k <= n")

    @classmethod
    def parse(cls, text: str) -> Rule:
        """ "2/3" -> Rule(2, 3)."""
        k, sep, n = text.partition("/")
        try:
            if not sep:
                raise ValueError
            return cls(int(k), int(n))
        except ValueError as e:
            msg = str(e) if "rule" in str(e) else f"{text!r}: expected K/N, e.g. 2/3"
            raise ValueError(msg) from None

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


@dataclass(frozen=True)
class Outcome:
    kept: bool
    reproduced: int
    tries: int

    def __str__(self) -> str:
        return f"{self.reproduced}/{self.tries}"


def screened(replay: Callable[[], bool], rule: Rule, prior: int = 0) -> Outcome:
    """Run `replay` (True: the failure reproduced) until the rule decides.

    `prior`: runs of the candidate already known to have reproduced, counted in both
    the hits and the tries; they take the place of the screen. The failing trial is
    such a run of its own recorded schedule, so with 2/3 the recorded schedule needs
    one more reproduction in at most two replays."""
    hits = tries = prior
    while tries < rule.n and hits < rule.k:
        ok = replay()
        tries += 1
        hits += bool(ok)
        if tries == 1 and not ok:
            break  # the screen
        if hits + (rule.n - tries) < rule.k:
            break
    return Outcome(hits >= rule.k, hits, tries)
