"""Which anomalies a hunt is after, and whether a trial showed one (pure).

A trial counts when its results name, among the anomaly types that made it invalid
(``bad_error_types``), one of the hunt's target types. The default targets are the
safety types of the catalogue (every family but liveness); ``--anomalies`` narrows or
widens them.

A replay of a found failure reproduces it under one of two rules:

- ``same`` (the default): the replay shows the found trial's *primary* type, the first
  of its target types in the catalogue's order (lost-write before unseen before
  duplicate before inconsistent-offsets ...): the most serious thing it found;
- ``any``: the replay shows any target type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..checker.catalogue import BY_NAME, CATALOGUE, LIVENESS, SAFETY

MATCHES = ("same", "any")
_ORDER = {t.name: i for i, t in enumerate(CATALOGUE)}


def parse_anomalies(text: str | None) -> frozenset[str]:
    """ "safety" (default), "liveness", "all", or type names "lost-write,duplicate"
    (groups and names may be mixed); an unknown name raises ValueError."""
    out: set[str] = set()
    for item in (text or "safety").split(","):
        name = item.strip()
        if not name:
            continue
        if name == "safety":
            out.update(t.name for t in SAFETY)
        elif name == "liveness":
            out.update(t.name for t in LIVENESS)
        elif name == "all":
            out.update(BY_NAME)
        elif name in BY_NAME:
            out.add(name)
        else:
            raise ValueError(
                f"unknown anomaly type {name!r}: give safety, liveness, all or names from "
                "docs/anomalies.md (e.g. lost-write,duplicate)"
            )
    if not out:
        raise ValueError("no anomaly type to hunt for")
    return frozenset(out)


def ordered(types: Iterable[str]) -> tuple[str, ...]:
    """Types in the catalogue's order (unknown ones last, by name)."""
    return tuple(sorted(set(types), key=lambda t: (_ORDER.get(t, len(_ORDER)), t)))


def hits(bad_types: Iterable[str], targets: frozenset[str]) -> tuple[str, ...]:
    """The target types among a trial's bad types, most serious first."""
    return ordered(t for t in bad_types if t in targets)


def primary(found: Iterable[str]) -> str | None:
    """The most serious of a failure's types (the first in the catalogue's order)."""
    types = ordered(found)
    return types[0] if types else None


@dataclass(frozen=True)
class Match:
    """When a replay reproduces the failure (see the module's docstring)."""

    targets: frozenset[str]
    found: tuple[str, ...]  # the found trial's target types, most serious first
    mode: str = "same"

    def __post_init__(self) -> None:
        if self.mode not in MATCHES:
            raise ValueError(f"match {self.mode!r}: choose same or any")

    @property
    def wanted(self) -> frozenset[str]:
        if self.mode == "any":
            return self.targets
        p = primary(self.found)
        return frozenset([p]) if p else self.targets

    def reproduced(self, bad_types: Iterable[str]) -> bool:
        return any(t in self.wanted for t in bad_types)

    def describe(self) -> str:
        if self.mode == "any":
            return "any of the target types"
        return f"{', '.join(sorted(self.wanted))} again"


def bad_types_of(results: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The anomaly types that made a run invalid, from its results.json."""
    if not results or results.get("valid") is not False:
        return ()
    bad = results.get("bad_error_types") or ()
    return ordered(str(t) for t in bad) if isinstance(bad, (list, tuple)) else ()
