"""The random schedules plan their faults as a shuffled round-robin of the families.

`--nemesis partition,kill,pause,memory,toxic` for 60 s used to inject three pauses
(a seeded random choice per fault). Now every family asked for runs once before any
runs twice, the default interval is fitted so that all of them fit in the time limit,
and the plan is a function of the seed alone: what `--dry-run` previews is what the
schedule starts.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections import Counter
from typing import Any

import pytest
from ktrial.nemesis import NemesisOptions
from ktrial.nemesis.core import FAULT_NAMES
from ktrial.nemesis.options import fitted_interval
from ktrial.nemesis.schedule import (
    FamilyCycle,
    FaultPlanner,
    IntervalSchedule,
    StablePeriodSchedule,
    schedule_rng,
)

FIVE = ("partition", "kill", "pause", "memory", "toxic")
NODES = ["n1", "n2", "n3"]


@pytest.mark.parametrize("seed", range(200))
def test_the_first_k_faults_of_k_families_are_a_permutation_of_them(seed: int) -> None:
    rng = random.Random(seed)
    k = rng.randint(1, len(FAULT_NAMES))
    families = rng.sample(FAULT_NAMES, k)
    cycle = FamilyCycle(families, schedule_rng(seed))
    drawn = [cycle.next() for _ in range(3 * k)]
    for r in range(3):  # every round, not only the first
        assert sorted(drawn[r * k : (r + 1) * k]) == sorted(families)
    if k > 1:  # no family twice in a row across a round's boundary
        assert all(a != b for a, b in itertools.pairwise(drawn))


def test_the_order_is_shuffled_and_seeded() -> None:
    orders = {tuple(FamilyCycle(FIVE, schedule_rng(s)).distinct(5)) for s in range(40)}
    assert len(orders) > 10  # not a fixed rotation
    a = [FamilyCycle(FIVE, schedule_rng(7)).next() for _ in range(1)]
    assert a == [FamilyCycle(FIVE, schedule_rng(7)).next()]


@pytest.mark.parametrize("seed", range(50))
def test_mixes_are_distinct_and_still_cover_every_family(seed: int) -> None:
    cycle = FamilyCycle(FIVE, schedule_rng(seed))
    seen: list[str] = []
    for _ in range(10):
        mix = cycle.distinct(2)
        assert len(set(mix)) == 2
        seen += mix
    counts = Counter(seen)
    assert set(counts) == set(FIVE) and max(counts.values()) - min(counts.values()) <= 1


def test_the_default_interval_fits_every_family_in_the_time_limit() -> None:
    assert fitted_interval(5, 60) == pytest.approx(60 / 11, abs=1e-3)
    assert fitted_interval(1, 60) == 10.0  # the old default when it fits
    assert fitted_interval(8, 60) == 5.0  # never below 5 s
    for seed in range(20):
        opts = NemesisOptions(faults=FIVE)
        plan = opts.preview(60, seed, NODES)
        assert [e.fault for e in plan[:5]] != [] and sorted(e.fault for e in plan) == sorted(FIVE)
        assert all(e.at + (e.duration or 0) <= 60 + 1e-9 for e in plan)
    # an interval given on purpose is kept, and the plan shows what it leaves out
    short = NemesisOptions(faults=FIVE, interval=10).preview(60, 1, NODES)
    assert len(short) == 3


def test_the_planner_resolves_targets_it_can_and_leaves_the_others_to_fault_time() -> None:
    planner = FaultPlanner(
        ["kill", "partition", "toxic"],
        schedule_rng(3),
        NODES,
        {"kill": {"targets": "controller"}, "partition": {"targets": "minority"}},
    )
    faults = {p.fault: p for p in (planner.next() for _ in range(3))}
    assert faults["kill"].targets == "controller"  # only the cluster knows it
    part = faults["partition"]
    assert isinstance(part.targets, list) and len(part.targets) == 1 and part.targets[0] in NODES
    assert part.params["shape"] in ("isolate", "split", "one-way", "bridge")
    assert faults["toxic"].params["kind"] in (
        "latency",
        "timeout",
        "reset_peer",
        "bandwidth",
        "slicer",
    )
    fixed = FaultPlanner(["toxic"], schedule_rng(3), NODES, {"toxic": {"kind": "latency"}})
    assert fixed.next().params == {}  # the run's own parameter is applied by the nemesis
    unknown = FaultPlanner(["kill"], schedule_rng(3), None, {"kill": {"targets": "one"}})
    assert unknown.next().targets == "one"  # external cluster: drawn when it fires


class PlanRecorder:
    """What IntervalSchedule.run asks of a nemesis, recorded; stops after `n` starts."""

    def __init__(self, n: int, stop: threading.Event) -> None:
        self.rng = random.Random(99)  # the nemesis' own rng: must not change the plan
        self.params: dict[str, dict[str, Any]] = {}
        self.partitions: list[str] | None = ["t"]
        self.started: list[tuple[str, Any, dict[str, Any]]] = []
        self.n, self.stop_event = n, stop
        self.ctx = self
        self.lock = threading.RLock()

    def record(self, f: str, value: Any) -> None:
        pass

    def node_names(self) -> list[str]:
        return NODES

    def start_planned(self, name: str, targets: Any, **params: Any) -> str:
        self.started.append((name, targets, params))
        if len(self.started) >= self.n:
            self.stop_event.set()
        return name

    def stop(self, fault: Any) -> None:
        pass

    def heal_all(self) -> None:
        pass


@pytest.mark.parametrize("kind", ["interval", "stable"])
def test_the_run_starts_exactly_the_previewed_faults(kind: str) -> None:
    stop = threading.Event()
    nem = PlanRecorder(12, stop)
    sched: Any
    if kind == "interval":
        sched = IntervalSchedule(list(FIVE), 0.001, seed=42)
    else:
        sched = StablePeriodSchedule(list(FIVE), 0.001, quiet_p=0.3, seed=42)
    sched.run(nem, stop)  # type: ignore[arg-type]
    preview = sched.preview(0.1, NODES, {}, seed=42)  # ~50 faults at 1 ms
    assert [(e.fault, e.targets, e.params) for e in preview[:12]] == nem.started
    assert sorted(f for f, _, _ in nem.started[:5]) == sorted(FIVE) or kind == "stable"
