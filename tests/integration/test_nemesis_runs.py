"""The queue workload under every fault family in one run (`safe` profile) through the run
orchestration (`ktrial.trial.Trial`): a script fires each family once, apart and healed,
on its own cluster; the history must check valid, hold each family's nemesis ops in
order, and the run must leave no nemesis process behind.

One run of ~75 s instead of seven of 30 s (each with its own cluster start, drain and
check, ~50 s apiece): the same faults for a third of the CI time. Each family still gets
its own test (over the shared run) so a missing family is named.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from ktrial.histories.jsonl import read_history
from ktrial.nemesis import NemesisOptions
from ktrial.nemesis.clean import marked_processes
from ktrial.nemesis.memory import ENV_MARK as BALLOON_MARK
from ktrial.nemesis.toxiproxy import ENV_MARK as TOXIPROXY_MARK
from ktrial.trial import Trial, TrialOutcome, TrialSpec

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Each family once, apart: the ops it must leave in the history, in the order they must
# come. Kill holds one node 8 s: a restarted broker on this small machine needs several
# seconds to rejoin the ISR. The rolling restart comes last (one node, ~15-25 s here).
FAMILIES: dict[str, tuple[str, ...]] = {
    "partition": ("start-partition", "stop-partition"),
    "loss": ("start-loss", "stop-loss"),
    "kill": ("kill", "start"),
    "pause": ("pause", "resume"),
    "memory": ("memory-squeeze", "memory-release"),
    "toxic": ("toxic-on", "toxic-off"),
    "restart": ("start-rolling-restart", "restarted", "stop-rolling-restart"),
}

SCRIPT = """
[[entry]]
at = 2
fault = "partition"
targets = ["n1"]
shape = "isolate"
duration = 5

[[entry]]
at = 10
fault = "loss"
targets = ["n2"]
probability = 0.3
duration = 5

[[entry]]
at = 18
fault = "kill"
targets = ["n3"]
duration = 8

[[entry]]
at = 32
fault = "pause"
targets = ["n1"]
duration = 5

[[entry]]
at = 40
fault = "memory"
targets = ["n2"]
balloon_bytes = 67108864
duration = 5

[[entry]]
at = 48
fault = "toxic"
kind = "latency"
duration = 5

[[entry]]
at = 56
fault = "restart"
targets = ["n3"]
settle = 2
"""


@pytest.fixture(scope="module")
def every_family_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrialOutcome]:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("nemesis-runs")
    script = tmp / "faults.toml"
    script.write_text(SCRIPT)
    spec = TrialSpec(
        name="nemesis-every-family",
        store=str(tmp / "store"),
        seed=20261129,
        time_limit=75,
        live=False,
        nemesis=NemesisOptions(faults=tuple(FAMILIES), schedule="script", script=str(script)),
    )
    yield Trial(spec, say=lambda *_: None).execute()


def test_queue_workload_stays_valid_under_every_family(every_family_run: TrialOutcome) -> None:
    outcome = every_family_run
    assert outcome.error is None
    assert outcome.results is not None and outcome.results["valid"] is True, outcome.results
    assert outcome.exit_code == 0
    assert set(outcome.results["faults"]["injected"]) >= set(FAMILIES), outcome.results["faults"]
    fs = [op.f for op in read_history(outcome.run_dir.history) if op.process == "nemesis"]
    assert "fault-error" not in fs and "harness-error" not in fs, fs
    me = os.getpid()
    for mark in (BALLOON_MARK, TOXIPROXY_MARK):
        assert [p for p, owner in marked_processes(mark) if owner == me] == []


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_fired_and_healed(every_family_run: TrialOutcome, family: str) -> None:
    """The family's ops are in the history, in order, its start and its heal under one
    fault id of this family (a fault that did not happen would make the valid verdict
    above say nothing about it). Another family's op of the same name is not this one's:
    the memory fault's `start` of a broker the squeeze OOM-killed carries `fault: memory`;
    an untagged op is counted, and fails the tag check below."""
    ops = [
        op
        for op in read_history(every_family_run.run_dir.history)
        if op.process == "nemesis"
        and op.f in FAMILIES[family]
        and op.type != "invoke"
        and op.extra.get("fault") in (family, None)
    ]
    seen = [op.f for op in ops]
    firsts = [seen.index(f) if f in seen else -1 for f in FAMILIES[family]]
    assert -1 not in firsts and firsts == sorted(firsts), seen
    first, last = FAMILIES[family][0], FAMILIES[family][-1]
    started = {op.extra.get("fault_id") for op in ops if op.f == first}
    healed = {op.extra.get("fault_id") for op in ops if op.f == last}
    assert started and started == healed and None not in started, [(o.f, o.extra) for o in ops]
    assert all(op.extra.get("fault") == family for op in ops), [(o.f, o.extra) for o in ops]
