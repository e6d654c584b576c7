"""iptables DROP rules inside node namespaces: construction (pure) and application.

Every rule carries the comment ``ktrial-nemesis:<owner-pid>:<fault-id>`` so that a
heal removes exactly the rules its fault added, and ``ktrial cluster clean`` can find
rules left behind by a ktrial that was killed (the owner pid is no longer alive).

Rules match on the *source address of a peer node* in the INPUT chain of the
receiving node. Clients run on the host (the bridge address), so they keep reaching
every node: a partition here is between nodes only.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from ..clusters.base import Node

log = logging.getLogger("ktrial.nemesis")
T = TypeVar("T")
R = TypeVar("R")

COMMENT_PREFIX = "ktrial-nemesis:"


def comment_for(fault_id: str, owner_pid: int | None = None) -> str:
    """The comment tagging every rule of one fault activation."""
    pid = os.getpid() if owner_pid is None else owner_pid
    return f"{COMMENT_PREFIX}{pid}:{fault_id}"


def owner_of(comment: str) -> int | None:
    """The pid of the ktrial process that added a rule with this comment (None if not ours)."""
    if not comment.startswith(COMMENT_PREFIX):
        return None
    head = comment[len(COMMENT_PREFIX) :].split(":", 1)[0]
    return int(head) if head.isdigit() else None


@dataclass(frozen=True, slots=True)
class DropRule:
    """Drop (a fraction of) packets arriving at `node` from `source` (an IP address)."""

    node: str
    source: str
    comment: str
    probability: float | None = None  # None: drop everything; else random loss
    dport: int | None = None  # only TCP packets to this port of `node` (one listener)

    def spec(self) -> list[str]:
        """The rule specification after ``-A``/``-D``/``-C`` (iptables arguments)."""
        args = ["INPUT", "-s", self.source]
        if self.dport is not None:
            args += ["-p", "tcp", "--dport", str(self.dport)]
        if self.probability is not None:
            if not 0.0 < self.probability <= 1.0:
                raise ValueError(f"loss probability must be in (0, 1], not {self.probability}")
            args += [
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                f"{self.probability:.6f}",
            ]
        args += ["-m", "comment", "--comment", self.comment, "-j", "DROP"]
        return args


def rules_for_grudge(
    grudge: Mapping[str, Iterable[str]],
    addresses: Mapping[str, str],
    comment: str,
    probability: float | None = None,
) -> list[DropRule]:
    """One rule per (node, peer it ignores); `grudge[n]` = peers whose packets n drops."""
    rules = []
    for node in sorted(grudge):
        for peer in sorted(set(grudge[node])):
            if peer == node:
                continue
            rules.append(DropRule(node, addresses[peer], comment, probability))
    return rules


def iptables(node: Node, action: str, rule: DropRule, check: bool = True) -> str:
    """Run ``iptables -w <action> <rule>`` inside the node's namespace."""
    return node.exec(["iptables", "-w", action, *rule.spec()], check=check, timeout=15.0)


def apply_rules(nodes: Mapping[str, Node], rules: Sequence[DropRule]) -> list[DropRule]:
    """Append each rule; return the rules actually added (the caller heals those on error).
    A node that runs several commands in one round trip (``exec_many``: a remote host)
    gets all its rules at once, and such hosts are served in parallel."""
    added: list[DropRule] = []
    remote: list[tuple[str, list[DropRule]]] = []
    for name, group in _by_node(rules):
        if _exec_many(nodes[name]) is not None:
            remote.append((name, group))
            continue
        for r in group:
            iptables(nodes[name], "-A", r)
            added.append(r)

    def add(item: tuple[str, list[DropRule]]) -> list[DropRule]:
        name, group = item
        many = _exec_many(nodes[name])
        assert many is not None
        results = many([["iptables", "-w", "-A", *r.spec()] for r in group], timeout=15.0)
        for r, (rc, out, err) in zip(group, results, strict=True):
            if rc != 0:
                raise subprocess.CalledProcessError(rc, ["iptables", "-A", *r.spec()], out, err)
        return group

    for group in _each(add, remote):
        added += group
    return added


def _by_node(rules: Sequence[DropRule]) -> list[tuple[str, list[DropRule]]]:
    """The rules grouped by node, in the order the nodes first appear (pure)."""
    groups: dict[str, list[DropRule]] = {}
    for r in rules:
        groups.setdefault(r.node, []).append(r)
    return list(groups.items())


def _exec_many(node: Node) -> Callable[..., list[tuple[int, str, str]]] | None:
    many = getattr(node, "exec_many", None)
    return many if callable(many) else None


def _each(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """fn over items, in parallel threads when there are several (remote hosts); the
    first failure is raised once every call ended."""
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=len(items)) as ex:
        return list(ex.map(fn, items))


def tagged_rules(node: Node, prefix: str = COMMENT_PREFIX, exact: bool = False) -> list[list[str]]:
    """Rules in the node's namespace whose comment starts with `prefix`, as ``-A ...`` argv."""
    out = node.exec(["iptables-save", "-t", "filter"], check=False, timeout=15.0)
    return parse_tagged(out, prefix, exact)


def parse_tagged(
    iptables_save: str, prefix: str = COMMENT_PREFIX, exact: bool = False
) -> list[list[str]]:
    """The ``-A`` lines of iptables-save output whose comment starts with (or, if `exact`,
    equals) `prefix` (pure)."""
    found = []
    for line in iptables_save.splitlines():
        if not line.startswith("-A "):
            continue
        argv = shlex.split(line)
        try:
            comment = argv[argv.index("--comment") + 1]
        except (ValueError, IndexError):
            continue
        if comment == prefix or (not exact and comment.startswith(prefix)):
            found.append(argv)
    return found


def remove_tagged(node: Node, prefix: str, exact: bool = False) -> int:
    """Delete every rule in the node's namespace whose comment starts with (or equals) `prefix`."""
    n = 0
    for argv in tagged_rules(node, prefix, exact):
        node.exec(["iptables", "-w", "-D", *argv[1:]], check=False, timeout=15.0)
        n += 1
    return n


def remove_rules(nodes: Mapping[str, Node], rules: Sequence[DropRule]) -> list[str]:
    """Delete the given rules, then sweep anything else carrying their comments.

    Returns error messages instead of raising: a heal must try every node even when
    one of them fails (e.g. its namespace is gone). A node with ``exec_many`` (a remote
    host) deletes its rules and lists what is left in one round trip.
    """
    errors: list[str] = []
    comments: dict[str, set[str]] = {}
    for r in rules:
        comments.setdefault(r.node, set()).add(r.comment)
    remote: list[tuple[str, list[DropRule]]] = []
    for name, group in _by_node(rules):
        if _exec_many(nodes[name]) is not None:
            remote.append((name, group))
            continue
        for r in group:
            try:
                iptables(nodes[name], "-D", r, check=False)
            except Exception as e:  # the namespace may be gone; keep healing the others
                errors.append(f"{r.node}: deleting {' '.join(r.spec())}: {e}")

    def delete(item: tuple[str, list[DropRule]]) -> list[str]:
        name, group = item
        many = _exec_many(nodes[name])
        assert many is not None
        cmds = [["iptables", "-w", "-D", *r.spec()] for r in group]
        tags = sorted({r.comment for r in group})
        try:
            save = many([*cmds, ["iptables-save", "-t", "filter"]], timeout=15.0)[-1]
            for c in tags:
                for left in parse_tagged(save[1], c, exact=True):  # left over: delete
                    cmd = ["iptables", "-w", "-D", *left[1:]]
                    nodes[name].exec(cmd, check=False, timeout=15.0)
        except Exception as e:
            return [f"{name}: deleting the rules tagged {', '.join(tags)}: {e}"]
        return []

    for errs in _each(delete, remote):
        errors += errs
    for name, _ in remote:
        comments.pop(name, None)
    for name, cs in comments.items():
        for c in cs:
            try:
                remove_tagged(nodes[name], c, exact=True)
            except Exception as e:
                errors.append(f"{name}: sweeping rules tagged {c}: {e}")
    return errors
