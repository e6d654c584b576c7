"""Choosing the nodes a fault hits.

Specs: ``one``, ``minority``, ``majority``, ``all``, ``random`` (a random non-empty
subset), ``controller`` (the active KRaft controller), ``leaders`` (the leaders of the
workload's partitions), or explicit node names ``n1,n3``. Selection is a pure function
of the spec, the node names, a seeded rng and — for controller/leaders — what the
discovery functions found at the moment of the fault.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

SPECS = ("one", "minority", "majority", "all", "random", "controller", "leaders")


class TargetError(ValueError):
    """A target spec that cannot be satisfied (the message says which and why)."""


def select(
    spec: str | Sequence[str],
    nodes: Sequence[str],
    rng: random.Random,
    controller: str | None = None,
    leaders: Sequence[str] = (),
) -> list[str]:
    """Node names for `spec`, in cluster order."""
    names = list(nodes)
    if not names:
        raise TargetError("the cluster has no nodes")
    if not isinstance(spec, str):
        chosen = list(spec)
    elif spec == "one":
        chosen = [rng.choice(names)]
    elif spec == "minority":
        chosen = rng.sample(names, max(1, (len(names) - 1) // 2))
    elif spec == "majority":
        chosen = rng.sample(names, len(names) // 2 + 1)
    elif spec == "all":
        chosen = names
    elif spec == "random":
        chosen = rng.sample(names, rng.randint(1, len(names)))
    elif spec == "controller":
        if controller is None:
            raise TargetError(
                "target 'controller': the active KRaft controller is unknown "
                "(no quorum leader found); is the cluster up?"
            )
        chosen = [controller]
    elif spec == "leaders":
        if not leaders:
            raise TargetError(
                "target 'leaders': no partition leaders found; pass the "
                "workload's partitions to the Nemesis and check the topics exist"
            )
        chosen = list(leaders)
    else:
        chosen = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [c for c in chosen if c not in names]
    if unknown:
        raise TargetError(
            f"unknown target node(s) {unknown}; spec {spec!r} must be one of "
            f"{', '.join(SPECS)} or node names among {names}"
        )
    return [n for n in names if n in set(chosen)]
