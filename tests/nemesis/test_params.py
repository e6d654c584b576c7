"""Every fault parameter value, target and hook is checked before anything starts.

`ktrial run --nemesis partition --nemesis-param partition.shape=bogus` used to start a
real cluster, record a `fault-error` op when the fault fired and end VALID with zero
faults. Now each family's pure `validate` refuses a bad value when the options are
parsed (exit 254, the flag, the value and what is allowed), and nothing starts: the
trial is never built, no cluster factory is called, no store directory is made.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from ktrial.cli import main
from ktrial.nemesis import NemesisOptionError, NemesisOptions, parse_params
from ktrial.nemesis.core import FAULT_NAMES, check_params
from ktrial.nemesis.schedule import parse_script
from ktrial.trial import Trial

# (--nemesis-param value, words the message must hold: the name, the value, the allowed)
BAD_PARAMS: list[tuple[str, list[str]]] = [
    ("partition.shape=bogus", ["partition.shape='bogus'", "isolate, split, ring, bridge, one-way"]),
    ("partition.direction=up", ["partition.direction='up'", "in, out"]),
    ("partition.targets=nobody", ["partition.targets='nobody'", "one, minority, majority"]),
    ("loss.probability=0", ["loss.probability=0", "in (0, 1]"]),
    ("loss.probability=1.5", ["loss.probability=1.5", "in (0, 1]"]),
    ("loss.probability=lots", ["loss.probability='lots'", "a number"]),
    ("kill.targets=n1;n2", ["kill.targets='n1;n2'", "not node names"]),
    ("stop.targets=[1,2]", ["stop.targets=[1, 2]", "node names such as n1,n3"]),
    ("pause.targets=everyone", ["pause.targets='everyone'", "controller, leaders"]),
    ("restart.settle=-1", ["restart.settle=-1", ">= 0"]),
    ("restart.wait=0", ["restart.wait=0", "> 0"]),
    ("memory.headroom=-0.5", ["memory.headroom=-0.5", ">= 0"]),
    ("memory.balloon_bytes=12.5", ["memory.balloon_bytes=12.5", "an integer"]),
    ("memory.limit_bytes=-1", ["memory.limit_bytes=-1", "an integer >= 0"]),
    ("memory.squeeze=maybe", ["memory.squeeze='maybe'", "true or false"]),
    ("memory.allow_oom=1", ["memory.allow_oom=1", "true or false"]),
    ("memory.squeeze=false", ["memory.squeeze=false without memory.balloon_bytes"]),
    ("memory.sample_interval=0", ["memory.sample_interval=0", "> 0"]),
    ("toxic.kind=fast", ["toxic.kind='fast'", "latency, timeout, reset_peer, bandwidth, slicer"]),
    ("toxic.stream=sideways", ["toxic.stream='sideways'", "upstream, downstream"]),
    ("toxic.toxicity=2", ["toxic.toxicity=2", "in [0, 1]"]),
    ('toxic.attributes={"latency":1000}', ["toxic.attributes", "needs toxic.kind"]),
    ("toxic.attributes=7", ["toxic.attributes=7", "must be a table"]),
    ("control.action=explode", ["control.action='explode'", "error, leaders, coordinators"]),
    ("control.count=0", ["control.count=0", "-1 until the fault ends"]),
    ("partition-then-kill.partition=t0", ["partition-then-kill.partition='t0'", "topic/partition"]),
    ("partition-then-kill.hold=-1", ["partition-then-kill.hold=-1", ">= 0"]),
    ("partition-then-kill.require_shrink=1", ["require_shrink=1", "true or false"]),
    ("kill-during-commit.action=nuke", ["kill-during-commit.action='nuke'", "kill, pause"]),
    ("kill-during-commit.commit_wait=x", ["kill-during-commit.commit_wait='x'", "a number"]),
    ("rolling-isr-restart.wait=0", ["rolling-isr-restart.wait=0", "> 0"]),
    ("rolling-isr-restart.partition=t/x", ["rolling-isr-restart.partition='t/x'", "t/0"]),
    ("isolate-leader-restart-stale.isolate=0", ["isolate-leader-restart-stale.isolate=0", "> 0"]),
    ("rolling-isr-restart.how=gently", ["rolling-isr-restart.how='gently'", "stop, kill"]),
    ("asymmetric-link.kind=fast", ["asymmetric-link.kind='fast'", "latency, timeout"]),
    ("asymmetric-link.stream=up", ["asymmetric-link.stream='up'", "upstream, downstream"]),
]
# the families each case covers, so a new family cannot go untested
COVERED = {p.split(".")[0] for p, _ in BAD_PARAMS}


def test_every_family_has_bad_values_tested() -> None:
    assert set(FAULT_NAMES) == COVERED


@pytest.mark.parametrize(("pair", "words"), BAD_PARAMS)
def test_parse_params_refuses_a_bad_value(pair: str, words: list[str]) -> None:
    with pytest.raises(NemesisOptionError) as e:
        parse_params([pair])
    for w in words:
        assert w in str(e.value), str(e.value)


@pytest.mark.parametrize(
    ("pair", "value"),
    [
        ("partition.shape=ring", "ring"),
        ("partition.direction=out", "out"),
        ("partition.targets=n1,n3", "n1,n3"),
        ("loss.probability=1", 1),
        ("restart.settle=0", 0),
        ("memory.squeeze=false", False),  # with a balloon below
        ("toxic.kind=latency", "latency"),
        ("kill.targets=controller", "controller"),
    ],
)
def test_good_values_pass(pair: str, value: Any) -> None:
    extra = ["memory.balloon_bytes=1048576"] if pair.startswith("memory") else []
    fault, _, rest = pair.partition(".")
    assert parse_params([pair, *extra])[fault][rest.split("=")[0]] == value
    parse_params(["toxic.kind=slicer", 'toxic.attributes={"average_size": 10, "delay": 5}'])


def test_targets_and_shapes_are_checked_against_the_cluster_when_it_is_known() -> None:
    nodes = ["n1", "n2", "n3"]
    with pytest.raises(ValueError, match=r"no node\(s\) \['n7'\]; its nodes are n1, n2, n3"):
        check_params("kill", {"targets": "n1,n7"}, "", nodes)
    with pytest.raises(ValueError, match="'ring' does not fit 3 node"):
        check_params("partition", {"shape": "ring"}, "", nodes)
    check_params("partition", {"shape": "ring"}, "", ["n1", "n2", "n3", "n4"])
    check_params("kill", {"targets": "n1,n7"})  # names unknown: only the syntax is checked


def test_a_script_entry_with_a_bad_value_is_refused_naming_the_file_and_entry() -> None:
    data = {
        "entry": [
            {"at": 1, "fault": "kill"},
            {"at": 2, "fault": "partition", "shape": "bogus", "duration": 3},
        ]
    }
    with pytest.raises(ValueError, match=r"s\.toml: entry 2: partition\.shape='bogus'"):
        parse_script(data, "s.toml")
    with pytest.raises(ValueError, match=r"entry 1: kill\.targets='all the nodes'"):
        parse_script({"entry": [{"at": 1, "fault": "kill", "targets": "all the nodes"}]}, "s")


def test_schedule_numbers_are_checked() -> None:
    for opts, words in [
        (NemesisOptions(faults=("kill",), interval=0), "--nemesis-interval 0: must be > 0"),
        (NemesisOptions(faults=("kill",), period=-1), "--nemesis-period -1: must be > 0"),
        (NemesisOptions(faults=("kill",), quiet_p=1.5), "--nemesis-quiet 1.5: must be a prob"),
    ]:
        with pytest.raises(NemesisOptionError, match=words):
            opts.validate()


# ----------------------------------------------------------------- the command line


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a run is built: no cluster factory, no trial."""

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("a cluster or a trial was started for a bad option")

    monkeypatch.setattr(Trial, "_make_cluster", refuse)
    monkeypatch.setattr(Trial, "execute", refuse)
    monkeypatch.setattr(Trial, "__init__", refuse)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    with pytest.raises(SystemExit) as e:
        main(["run", *args])
    _, err = capsys.readouterr()
    return int(e.value.code or 0), err, time.monotonic() - t0


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(("pair", "words"), BAD_PARAMS)
def test_a_bad_param_exits_254_before_anything_starts(
    pair: str, words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    family = pair.split(".")[0]
    store = tmp_path / "store"
    code, err, took = _run(
        ["--store", str(store), "--nemesis", family, "--nemesis-param", pair], capsys
    )
    assert code == 254, err
    assert "Invalid value for --nemesis-param:" in err
    for w in words:
        assert w in err
    assert "Traceback" not in err and took < 2.0
    assert not store.exists()


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--nemesis", "partition", "--nemesis-param", "partition.shape=ring"],
            ["--nemesis-param", "'ring' does not fit 3 node(s)", "isolate, split, one-way"],
        ),
        (
            ["--nodes", "5", "--nemesis", "kill", "--nemesis-param", "kill.targets=n6"],
            ["--nemesis-param", "kill.targets='n6'", "n1, n2, n3, n4, n5"],
        ),
        (["--nemesis", "kill", "--nemesis-interval", "0"], ["--nemesis-interval 0: must be > 0"]),
        (["--nemesis", "kill", "--nemesis-quiet", "2"], ["--nemesis-quiet 2: must be a prob"]),
        (["--nemesis", "partition", "--no-netns"], ["--nemesis", "partition:", "drop --no-netns"]),
        (
            ["--cluster", "external", "--bootstrap", "h:9092", "--nemesis", "kill,pause"],
            ["--nemesis", "--hook kill='COMMAND'", "--hook pause='COMMAND'"],
        ),
        (
            ["--cluster", "external", "--bootstrap", "h:9092", "--nemesis", "partition"],
            ["--nemesis", "partition: ktrial cannot reach an external cluster's network"],
        ),
    ],
)
def test_what_only_the_cluster_would_refuse_is_refused_up_front(
    args: list[str], words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    code, err, took = _run(["--store", str(store), *args], capsys)
    assert code == 254, err
    for w in words:
        assert w in err, err
    assert took < 2.0 and not store.exists()


@pytest.mark.usefixtures("nothing_starts")
def test_a_script_naming_a_node_the_cluster_lacks_names_the_script_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "s.toml"
    script.write_text('[[entry]]\nat = 1\nfault = "kill"\ntargets = "n4"\nduration = 2\n')
    code, err, _ = _run(["--store", str(tmp_path / "st"), "--nemesis-script", str(script)], capsys)
    assert code == 254
    assert f"Invalid value for --nemesis-script: {script}: entry 1: kill.targets='n4'" in err
