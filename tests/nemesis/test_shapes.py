"""Partition shapes, target selection and iptables rule construction (pure)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.nemesis import iptables, shapes, targets

NODES5 = ["n1", "n2", "n3", "n4", "n5"]


def reach(grudge: shapes.Grudge, a: str, b: str) -> bool:
    return b not in grudge[a] and a not in grudge[b]


def test_isolate_cuts_the_target_off_both_ways() -> None:
    g = shapes.isolate(["n1", "n2", "n3"], ["n2"])
    assert g == {"n2": {"n1", "n3"}, "n1": {"n2"}, "n3": {"n2"}}


def test_split_defaults_to_a_random_minority() -> None:
    g = shapes.split(NODES5, random.Random(1))
    minority = [n for n in NODES5 if len(g[n]) == 3]
    assert len(minority) == 2
    assert all(reach(g, a, b) for a in minority for b in minority if a != b)


@given(st.integers(4, 9), st.integers(0, 1000))
def test_majorities_ring_gives_every_node_a_distinct_majority(n: int, seed: int) -> None:
    nodes = [f"n{i}" for i in range(1, n + 1)]
    g = shapes.majorities_ring(nodes, random.Random(seed))
    seen = {a: frozenset([a, *(b for b in nodes if b != a and reach(g, a, b))]) for a in nodes}
    assert all(len(s) > n // 2 for s in seen.values())
    assert len(set(seen.values())) == n, "no two nodes may see the same majority"
    assert all((b in g[a]) == (a in g[b]) for a in nodes for b in nodes)  # symmetric


def test_ring_refuses_three_nodes() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        shapes.majorities_ring(["n1", "n2", "n3"], random.Random(0))


def test_bridge_has_one_node_seeing_both_halves() -> None:
    g = shapes.bridge(NODES5, random.Random(3))
    (middle,) = [n for n in NODES5 if not g[n]]
    others = [n for n in NODES5 if n != middle]
    assert all(reach(g, middle, o) for o in others)
    assert any(not reach(g, a, b) for a in others for b in others if a != b)


def test_one_way_rules_live_only_on_the_deaf_side() -> None:
    g = shapes.one_way(["n1", "n2", "n3"], ["n1"], "in")
    assert g["n1"] == {"n2", "n3"} and not g["n2"] and not g["n3"]
    out = shapes.one_way(["n1", "n2", "n3"], ["n1"], "out")
    assert out["n2"] == {"n1"} and not out["n1"]


def test_applicable_shapes_depend_on_size() -> None:
    assert "ring" not in shapes.applicable_shapes(3)
    assert "ring" in shapes.applicable_shapes(5)


@pytest.mark.parametrize(
    ("spec", "size"), [("one", 1), ("minority", 2), ("majority", 3), ("all", 5)]
)
def test_target_specs_pick_the_right_number(spec: str, size: int) -> None:
    assert len(targets.select(spec, NODES5, random.Random(0))) == size


def test_targets_controller_leaders_and_names() -> None:
    rng = random.Random(0)
    assert targets.select("controller", NODES5, rng, controller="n4") == ["n4"]
    assert targets.select("leaders", NODES5, rng, leaders=["n5", "n2"]) == ["n2", "n5"]
    assert targets.select("n3,n1", NODES5, rng) == ["n1", "n3"]
    with pytest.raises(targets.TargetError, match="controller"):
        targets.select("controller", NODES5, rng)
    with pytest.raises(targets.TargetError, match="unknown target"):
        targets.select("n9", NODES5, rng)


def test_targets_are_seeded() -> None:
    a = [targets.select("random", NODES5, random.Random(42)) for _ in range(3)]
    b = [targets.select("random", NODES5, random.Random(42)) for _ in range(3)]
    assert a == b


def test_drop_rules_for_a_grudge_are_tagged_and_parse_back() -> None:
    comment = iptables.comment_for("abc-1-partition", owner_pid=4242)
    addrs = {"n1": "10.0.0.11", "n2": "10.0.0.12", "n3": "10.0.0.13"}
    rules = iptables.rules_for_grudge(shapes.isolate(list(addrs), ["n1"]), addrs, comment)
    assert [(r.node, r.source) for r in rules] == [
        ("n1", "10.0.0.12"),
        ("n1", "10.0.0.13"),
        ("n2", "10.0.0.11"),
        ("n3", "10.0.0.11"),
    ]
    assert rules[0].spec() == [
        "INPUT",
        "-s",
        "10.0.0.12",
        "-m",
        "comment",
        "--comment",
        comment,
        "-j",
        "DROP",
    ]
    loss = iptables.DropRule("n1", "10.0.0.12", comment, 0.25).spec()
    assert loss[3:9] == ["-m", "statistic", "--mode", "random", "--probability", "0.250000"]
    assert iptables.owner_of(comment) == 4242
    assert iptables.owner_of("ktrial:abc123") is None

    save = "\n".join(
        [
            "*filter",
            f'-A INPUT -s 10.0.0.12/32 -m comment --comment "{comment}" -j DROP',
            f"-A INPUT -s 10.0.0.13/32 -m comment --comment {comment}0 -j DROP",
            "-A INPUT -s 10.0.0.14/32 -m comment --comment ktrial:other -j ACCEPT",
            "COMMIT",
        ]
    )
    assert len(iptables.parse_tagged(save)) == 2
    exact = iptables.parse_tagged(save, comment, exact=True)
    assert [a[a.index("-s") + 1] for a in exact] == ["10.0.0.12/32"]
