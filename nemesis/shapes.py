"""Partition shapes as grudges (pure functions).

A *grudge* maps each node name to the set of peers whose packets it drops, as in
Jepsen. Shapes:

- ``isolate``  — the targets (default: one node) are cut off from every other node;
  with several targets each side keeps talking among itself (a clean split).
- ``split``    — a clean majority/minority split: a random minority vs the rest
  (or the given targets vs the rest).
- ``ring``     — majorities ring: every node sees a majority, but no two nodes see the
  same one (needs at least 4 nodes; with 3 every majority contains everyone).
- ``bridge``   — two halves that cannot see each other, plus one node that sees both.
- ``one-way``  — asymmetric: the targets drop packets *from* every other node, while
  their own packets still arrive (``direction="out"`` inverts it: the others drop
  packets from the targets).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

Grudge = dict[str, frozenset[str]]

SHAPES = ("isolate", "split", "ring", "bridge", "one-way")


def complete_split(components: Sequence[Sequence[str]]) -> Grudge:
    """Every node drops packets from every node outside its own component."""
    everyone = [n for comp in components for n in comp]
    grudge: Grudge = {}
    for comp in components:
        inside = set(comp)
        for n in comp:
            grudge[n] = frozenset(m for m in everyone if m not in inside)
    return grudge


def isolate(nodes: Sequence[str], targets: Sequence[str]) -> Grudge:
    if not targets:
        raise ValueError("isolate needs at least one target node")
    rest = [n for n in nodes if n not in targets]
    return complete_split([list(targets), rest])


def split(nodes: Sequence[str], rng: random.Random, targets: Sequence[str] = ()) -> Grudge:
    """A clean split; without targets a random minority (n-1)//2 (at least 1) vs the rest."""
    if not targets:
        shuffled = list(nodes)
        rng.shuffle(shuffled)
        targets = shuffled[: max(1, (len(nodes) - 1) // 2)]
    return isolate(nodes, targets)


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Each node sees itself and its nearest ring neighbours, a majority in all."""
    n = len(nodes)
    if n < 4:
        raise ValueError(
            f"a majorities ring needs at least 4 nodes (have {n}): with fewer, "
            "every majority includes every node"
        )
    ring = list(nodes)
    rng.shuffle(ring)
    majority = n // 2 + 1
    radius = majority // 2  # = ceil((majority - 1) / 2): a symmetric window of >= majority
    grudge: Grudge = {}
    for i, node in enumerate(ring):
        sees = {ring[(i + d) % n] for d in range(-radius, radius + 1)}
        grudge[node] = frozenset(m for m in ring if m not in sees)
    return grudge


def bridge(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Two halves that cannot see each other, joined by one node that sees both."""
    if len(nodes) < 3:
        raise ValueError(f"a bridge needs at least 3 nodes (have {len(nodes)})")
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    middle, rest = shuffled[0], shuffled[1:]
    half = len(rest) // 2
    grudge = complete_split([rest[:half], rest[half:]])
    grudge[middle] = frozenset()
    return grudge


def one_way(nodes: Sequence[str], targets: Sequence[str], direction: str = "in") -> Grudge:
    if not targets:
        raise ValueError("one-way needs at least one target node")
    rest = [n for n in nodes if n not in targets]
    if direction == "in":  # targets hear nobody else, but are heard
        grudge: Grudge = {t: frozenset(rest) for t in targets}
        grudge.update({r: frozenset() for r in rest})
    elif direction == "out":  # nobody else hears the targets
        grudge = {r: frozenset(targets) for r in rest}
        grudge.update({t: frozenset() for t in targets})
    else:
        raise ValueError(f"one-way direction must be 'in' or 'out', not {direction!r}")
    return grudge


def make_grudge(
    shape: str,
    nodes: Sequence[str],
    targets: Sequence[str],
    rng: random.Random,
    direction: str = "in",
) -> Grudge:
    """The grudge of a named shape; `targets` matter for isolate, split and one-way."""
    if shape == "isolate":
        return isolate(nodes, targets or [rng.choice(list(nodes))])
    if shape == "split":
        return split(nodes, rng, targets)
    if shape == "ring":
        return majorities_ring(nodes, rng)
    if shape == "bridge":
        return bridge(nodes, rng)
    if shape == "one-way":
        return one_way(nodes, targets or [rng.choice(list(nodes))], direction)
    raise ValueError(f"unknown partition shape {shape!r}; choose one of {', '.join(SHAPES)}")


def applicable_shapes(n: int) -> list[str]:
    """Shapes that make sense for a cluster of n nodes."""
    shapes = ["isolate", "split", "one-way"]
    if n >= 3:
        shapes.append("bridge")
    if n >= 4:
        shapes.append("ring")
    return shapes


def components_seen(grudge: Grudge) -> dict[str, list[str]]:
    """For the history: which peers each node still reaches (both directions open)."""
    nodes = sorted(grudge)
    return {
        a: [b for b in nodes if b != a and b not in grudge[a] and a not in grudge.get(b, ())]
        for a in nodes
    }
