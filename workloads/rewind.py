"""Where a process's consumer stands, and where it goes back to after a failed op.

The contract (:mod:`.driver`) says: after a ``fail`` or ``info`` op the consumer is
back where the op began reading, because Kafka does not rewind on an abort and a
record an op read but did not complete must be read again. These are the rules,
client-independent: a driver records what it reads here and applies the resulting
plans (offsets per key) with its client's assign or seek.

* A key's next offset is what *this* process read or seeked to (`pos`). A client's
  own position is unknown until a fetch returns, and the group's committed offset
  is where *other* processes of the group got.
* A rewind target is the key's position before the op, else the first offset the
  op read of it (the op began at an unknown position); keys the op did not read
  need nothing.
* With assign, kept keys keep their position, and a newly assigned key starts at
  offset 0: never a logical offset, which a client may resolve asynchronously and
  apply *after* a later explicit position (a key read to 91, re-assigned at 92,
  began again at 0). A new key's first read may start anywhere; 0 is always legal
  (a log starting later is moved forward by auto.offset.reset=earliest).
* With subscribe, a key (re)assigned or revoked by the group forgets its position.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Plan = list[tuple[int, int]]  # (key, offset) to assign or seek, in key order


class ReadPositions:
    """One process's read positions, per key, and the rewind rules over them."""

    def __init__(self) -> None:
        self.assigned: list[int] = []
        self.pos: dict[int, int] = {}
        # The first offset the current op read per key (where to rewind to when the
        # op began at an unknown position).
        self.op_first: dict[int, int] = {}
        self.rebalance_log: list[dict[str, Any]] = []

    @staticmethod
    def start_offsets(keys: Iterable[int]) -> dict[int, int]:
        """Where newly assigned keys start: offset 0 (see the module docstring)."""
        return dict.fromkeys(keys, 0)

    def snapshot(self) -> dict[int, int]:
        """Where this process stands, to rewind to; also starts the op's record of first reads."""
        self.op_first = {}
        return dict(self.pos)

    def read(self, key: int, offset: int) -> None:
        """The op read `offset` of `key`."""
        self.op_first.setdefault(key, offset)
        self.pos[key] = offset + 1

    def forget(self, keys: Iterable[int]) -> None:
        """The group moved these keys (assigned or revoked): their positions are unknown."""
        for k in keys:
            self.pos.pop(k, None)
            self.op_first.pop(k, None)

    def rebalanced(self, kind: str, keys: Sequence[int]) -> None:
        """A group rebalance event (`assigned` / `revoked`), recorded for the op's completion."""
        self.rebalance_log.append({"type": kind, "keys": list(keys)})
        self.forget(keys)

    def known(self, keys: Sequence[int], client: Mapping[int, int]) -> dict[int, int]:
        """Next offset per key: the larger of ours and the client's (which also moves past
        aborted records and transaction markers a read_committed fetch skipped)."""
        return {k: max(client.get(k, -1), self.pos.get(k, -1)) for k in keys}

    def assign_plan(self, keys: Sequence[int]) -> tuple[Plan, dict[int, int]]:
        """Assign `keys`: kept keys keep their position, new keys start at 0.

        Returns the plan and the positions to keep; `assigned_to` records them once
        the client took the plan.
        """
        pos = {k: self.pos[k] for k in keys if k in self.assigned and k in self.pos}
        start = self.start_offsets(k for k in keys if k not in pos)
        return [(k, pos.get(k, start.get(k, 0))) for k in keys], pos

    def assigned_to(self, keys: Sequence[int], pos: Mapping[int, int]) -> None:
        self.assigned, self.pos = list(keys), dict(pos)

    def rewind_targets(self, snap: Mapping[int, int]) -> dict[int, int]:
        """Per key the op read: its position before the op, else the op's first read."""
        return {k: snap.get(k, off) for k, off in self.op_first.items()}

    def rewind_assign_plan(self, targets: Mapping[int, int]) -> tuple[Plan, dict[int, int]]:
        """Assign mode: re-assign every assigned key, the read ones at their targets.

        Returns the plan and the positions that hold once the client took it.
        """
        keep = {k: o for k, o in self.pos.items() if k in self.assigned}
        keep.update({k: o for k, o in targets.items() if k in self.assigned})
        start = self.start_offsets(k for k in self.assigned if k not in keep)
        return [(k, keep.get(k, start.get(k, 0))) for k in self.assigned], keep

    def rewind_seek_plan(self, targets: Mapping[int, int], current: Iterable[int]) -> Plan:
        """Subscribe mode: seek the read keys the group still gives us to their targets
        (record each with `sought` once the client did it)."""
        have = set(current)
        return [(k, off) for k, off in targets.items() if k in have]

    def sought(self, key: int, offset: int) -> None:
        self.pos[key] = offset
