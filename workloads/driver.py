"""The client-driver interface: one logical process's Kafka clients, one op at a time.

A workload owns the op stream and the recording; a driver owns the clients and
turns one invoke (a list of micro-ops in the history's JSON shape) into Kafka
calls, returning the completion. Keeping the two apart is what makes drivers
swappable: the default is confluent-kafka (:mod:`.confluent`), and a Java
kafka-clients worker speaking the same contract would emit the same history.

The contract a driver must honour:

* one outstanding op at a time (the workload guarantees it never calls twice
  concurrently);
* the completion carries whatever partial results were obtained before an error
  (sends with their acknowledged offsets, polled records in client order);
* ``type`` follows :mod:`.errors`; ``retire=True`` asks the workload to close this
  driver and continue under a new process number with fresh clients;
* after a ``fail`` or ``info`` op the consumer is back where the op began reading.

The op flow and its rules are client-independent (:mod:`.ops`, :mod:`.rewind`,
:mod:`.errors`); a client library supplies only its calls and its error rules. A
driver in another language runs as a worker process speaking this contract as JSON
lines: one invoke per line on its stdin (:func:`invoke_json`), one completion per
line on its stdout (:meth:`Completion.to_json` / :meth:`Completion.from_json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class KeyMap:
    """Key (a small int, written as such in the history) -> one partition of one topic."""

    keys: dict[int, TopicPartition]

    def tp(self, key: int) -> TopicPartition:
        return self.keys[key]

    def key_of(self, topic: str, partition: int) -> int:
        return self._reverse[(topic, partition)]

    @property
    def _reverse(self) -> dict[tuple[str, int], int]:
        rev = self.__dict__.get("_rev")
        if rev is None:
            rev = {(tp.topic, tp.partition): k for k, tp in self.keys.items()}
            object.__setattr__(self, "_rev", rev)
        return rev

    def topics(self, keys: Sequence[int] | None = None) -> list[str]:
        ks = self.keys if keys is None else keys
        return sorted({self.keys[k].topic for k in ks})

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {
            str(k): {"topic": tp.topic, "partition": tp.partition} for k, tp in self.keys.items()
        }


@dataclass(slots=True)
class Completion:
    """What a driver returns for one invoke."""

    type: str  # ok | fail | info
    value: Any
    error: Any = None
    retire: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # poll_ms, rebalance_log, ...

    def to_json(self) -> dict[str, Any]:
        """The completion as one JSON object (a worker process's stdout line)."""
        out: dict[str, Any] = {"type": self.type, "value": self.value}
        if self.error is not None:
            out["error"] = self.error
        if self.retire:
            out["retire"] = True
        if self.extra:
            out["extra"] = self.extra
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Completion:
        """A completion from a worker's JSON object; a malformed one raises ValueError."""
        if not isinstance(obj, dict) or obj.get("type") not in ("ok", "fail", "info"):
            raise ValueError(
                f"driver completion: expected {{'type': ok|fail|info, ...}}, got {obj!r}"
            )
        if "value" not in obj or not isinstance(obj.get("extra", {}), dict):
            raise ValueError(f"driver completion: needs a value and an object extra, got {obj!r}")
        return cls(
            obj["type"],
            obj["value"],
            obj.get("error"),
            bool(obj.get("retire")),
            dict(obj.get("extra", {})),
        )


def invoke_json(f: str, value: list[Any], abort: bool = False) -> dict[str, Any]:
    """One invoke as the JSON object a worker process reads from its stdin."""
    out: dict[str, Any] = {"f": f, "value": value}
    if abort:
        out["abort"] = True
    return out


class Driver(Protocol):
    """One logical process's clients (producer + consumer)."""

    def execute(self, f: str, value: list[Any], abort: bool = False) -> Completion:
        """Perform a send / poll / txn op (`abort`: deliberately abort a txn)."""

    def assign(self, keys: Sequence[int]) -> Completion:
        """assign (or subscribe, per the driver's sub_via) to these keys."""

    def close(self, abrupt: bool = False) -> None:
        """Release the clients; `abrupt` simulates a crash (no flush, no graceful leave)."""


class DriverFactory(Protocol):
    def __call__(self, process: int, slot: int) -> Driver:
        """Open the clients of `process` running in worker `slot` (may raise)."""
