"""Choosing the nodes a fault hits.

Specs: ``one``, ``minority``, ``majority``, ``all``, ``random`` (a random non-empty
subset), explicit node names ``n1,n3``, or a *role* the cluster names when the fault
fires (:mod:`.roles`): ``controller`` (the active KRaft controller), ``leaders`` (the
leaders of the workload's partitions), ``leader`` (the leader of one of them),
``isr`` / ``followers`` (the in-sync replicas / the non-leader replicas of one of
them), ``txn-coordinator`` and ``group-coordinator`` (the coordinators of the run's
transactional ids and consumer groups). Selection is a pure function of the spec, the
node names, a seeded rng and — for roles — what the cluster said at that moment.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from .roles import ROLES

SPECS = ("one", "minority", "majority", "all", "random", *ROLES)
# Specs the cluster answers only when the fault fires (the plan cannot name the nodes).
AT_FAULT_TIME = ROLES
NODE_NAME = re.compile(r"n[1-9][0-9]*")


class TargetError(ValueError):
    """A target spec that cannot be satisfied (the message says which and why)."""


def check_spec(spec: Any, nodes: Sequence[str] | None = None, where: str = "targets") -> None:
    """Refuse a target spec before the run (pure): a spec name, node names ``n1,n3`` (a
    string or a list), and, when the cluster's node names are known, only those."""
    if isinstance(spec, str) and spec in SPECS:
        return
    if isinstance(spec, str):
        names = [s.strip() for s in spec.split(",") if s.strip()]
    elif isinstance(spec, (list, tuple)) and all(isinstance(s, str) for s in spec):
        names = [s.strip() for s in spec]
    else:
        names = []
    allowed = f"one of {', '.join(SPECS)}, or node names such as n1,n3"
    if not names:
        raise TargetError(f"{where}={spec!r}: choose {allowed}")
    bad = [n for n in names if not NODE_NAME.fullmatch(n)]
    if bad:
        raise TargetError(f"{where}={spec!r}: {bad} are not node names; choose {allowed}")
    if nodes is not None:
        unknown = [n for n in names if n not in nodes]
        if unknown:
            raise TargetError(
                f"{where}={spec!r}: the cluster has no node(s) {unknown}; its nodes are "
                f"{', '.join(nodes)}"
            )


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
    elif spec in AT_FAULT_TIME and spec != "leaders":
        raise TargetError(f"target {spec!r} is a role: the cluster resolves it (roles.RoleSource)")
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
