"""The system layer (clusters/system.py): every system answers the whole seam, systems
are picked by name, and the node backends hold nothing of any one system."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from ktrial.clusters.apache_kafka import ApacheKafka
from ktrial.clusters.kfake import Kfake
from ktrial.clusters.nodespec import load_spec_system
from ktrial.clusters.system import (
    NODE_PORTS,
    BrokerSystem,
    SystemDefaults,
    default_system,
    system_for,
)

ROOT = Path(__file__).resolve().parents[2]
SEAM = [
    name
    for name, value in vars(BrokerSystem).items()
    if not name.startswith("_") and (callable(value) or isinstance(value, property))
] + list(BrokerSystem.__annotations__)


def _systems() -> list[BrokerSystem]:
    return [
        ApacheKafka("4.1.1"),
        Kfake(),
        load_spec_system(ROOT / "systems" / "specs" / "ktrial-kafka-image.toml"),
    ]


@pytest.mark.parametrize("system", _systems(), ids=lambda s: s.name)
def test_every_system_answers_the_whole_seam(system: BrokerSystem) -> None:
    missing = [name for name in SEAM if not hasattr(system, name)]
    assert missing == []
    assert isinstance(system, SystemDefaults)
    assert system.layout.log_files and system.client_profile().name
    assert isinstance(system.fault_limits(), dict)


def test_systems_are_picked_by_name() -> None:
    kafka = system_for("kafka", version="3.9.2", profile="unsafe", transaction_version=None)
    assert isinstance(kafka, ApacheKafka) and kafka.profile == "unsafe"
    assert isinstance(system_for("kfake", broker_config={"a": "b"}), Kfake)
    spec = system_for(spec_file=str(ROOT / "systems" / "specs" / "queen.toml"))
    assert spec.name == "queen-kafka-facade"
    with pytest.raises(ValueError, match="unknown system 'tansu': use one of kafka, kfake"):
        system_for("tansu")
    legacy = default_system(profile="unsafe", kafka_version="4.0.2", heap_mb=256)
    assert isinstance(legacy, ApacheKafka) and legacy.heap_mb == 256


def test_what_differs_between_kafka_and_kfake_is_the_systems_say() -> None:
    kafka, kfake = ApacheKafka(), Kfake()
    assert not kafka.one_process and kfake.one_process
    assert kafka.probe_topic and not kfake.probe_topic  # kfake replicates nothing
    assert kafka.layout.formatted_marker == "meta.properties"
    assert kafka.layout.log_files[0] == "server.log" and kfake.layout.log_files == ("kfake.log",)
    assert kfake.has_control and not kafka.has_control and kafka.control_api() is None
    assert set(kfake.fault_limits()) == {"partition", "loss", "memory", "toxic"}
    assert kafka.fault_limits() == {}
    assert kafka.replication(3, 1) == 3 and kfake.replication(3, 1) == 1
    assert NODE_PORTS.client == 9092


# What only a system may know: names of Apache Kafka's installation, configuration and
# files. The backends and their shared base must reach none of them except through
# the seam (docstrings may mention them; code may not).
KAFKA_NAMES = {
    "ApacheKafka",
    "apache_kafka",
    "kafka_version",
    "kafka_lib",
    "kafka_config",
    "heap_mb",
    "transaction_version",
    "ensure_image",
    "docker_image",
    "install",
    "java",
    "kafka",
    "KafkaInstall",
    "profile",
}
KAFKA_STRINGS = ("meta.properties", "server.properties", "server.log", "gc.log", "java", ".index")


def _code_names(path: Path) -> tuple[set[str], list[str]]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    names: set[str] = set()
    strings: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword):
            names.add(node.arg or "")
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").rpartition(".")[2])
            names.update(a.name for a in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            strings.append(node.value)
    return names, strings


@pytest.mark.parametrize("module", ["local.py", "docker.py", "nodebase.py"])
def test_the_backends_hold_no_kafka_specific_code(module: str) -> None:
    names, strings = _code_names(ROOT / "clusters" / module)
    assert sorted(names & KAFKA_NAMES) == []
    assert [s for s in strings if any(k in s for k in KAFKA_STRINGS)] == []
