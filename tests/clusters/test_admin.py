"""The one cluster base (clusters/admin.py AdminCluster, clusters/nodebase.py OwnedCluster)
and the broker-system seam (clusters/system.py, clusters/apache_kafka.py), without brokers.

A scripted admin client stands in for Kafka's: the readiness loop, topic creation,
in-sync waits and heal are the same code for local, docker and external clusters, so
they are pinned here once; the real-broker side is tests/integration/test_cluster_*.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ktrial.clusters import admin as adminmod
from ktrial.clusters.admin import AdminCluster, ClusterNotReady
from ktrial.clusters.apache_kafka import ApacheKafka
from ktrial.clusters.base import SHARED_ADDRESS, Cluster, node_fault_limits
from ktrial.clusters.docker import DockerCluster
from ktrial.clusters.external import ExternalCluster, ExternalNode
from ktrial.clusters.install import KafkaInstall
from ktrial.clusters.kafka_config import NodeAddr, Ports
from ktrial.clusters.local import LocalCluster
from ktrial.clusters.system import NodePaths


class FakeNode:
    def __init__(self, i: int, address: str = "", cgroup: str | None = "/cg") -> None:
        self.name, self.node_id = f"n{i}", i
        self.address = address or f"10.0.0.{i}"
        self.client_bootstrap = f"{self.address}:9092"
        self.cgroup = cgroup
        self.running = True
        self.log: list[str] = []

    def is_running(self) -> bool:
        return self.running

    def start(self) -> None:
        self.log.append("start")
        self.running = True

    # the rest of the Node protocol: the admin code under test never calls it
    pid: int | None = None
    log_paths: Sequence[Path] = ()

    def stop(self, timeout: float = 30.0) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def pause(self) -> None:
        raise NotImplementedError

    def resume(self) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError

    def exec(self, cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
        raise NotImplementedError


class Partition:
    def __init__(self, pid: int, replicas: list[int], isrs: list[int], leader: int = 1) -> None:
        self.id, self.replicas, self.isrs, self.leader = pid, replicas, isrs, leader


class ScriptedAdmin:
    """list_topics answers from a script (one answer per call, the last one repeats)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls = 0

    def list_topics(self, timeout: float = 0) -> Any:
        a = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(a, Exception):
            raise a
        return a


def metadata(topics: dict[str, list[Partition]]) -> Any:
    return SimpleNamespace(
        brokers={1: None, 2: None},
        topics={
            t: SimpleNamespace(error=None, partitions={p.id: p for p in ps})
            for t, ps in topics.items()
        },
    )


class Toy(AdminCluster[FakeNode]):
    """An AdminCluster whose readiness is scripted: ready after `ready_after` probes."""

    kind = "toy"
    ready_poll_s = 0.0

    def __init__(self, nodes: list[FakeNode], admin: Any = None, ready_after: int = 0) -> None:
        super().__init__()
        self._nodes = nodes
        self.admin = admin
        self.ready_after = ready_after
        self.probes = 0
        self.healed: list[str] = []

    def _admin(self) -> Any:
        return self.admin

    def _ready_step(self, admin: Any) -> str:
        self.probes += 1
        if self.probes == 1:
            raise ConnectionError("refused")
        return "" if self.probes > self.ready_after else "not yet"

    def _heal_node(self, node: FakeNode) -> None:
        self.healed.append(node.name)


def test_node_lookup_names_the_nodes_there_are() -> None:
    c = Toy([FakeNode(1), FakeNode(2)])
    assert c.node("n2").node_id == 2
    assert c.bootstrap_servers == "10.0.0.1:9092,10.0.0.2:9092"
    with pytest.raises(KeyError, match="no node 'n9'; nodes are n1, n2"):
        c.node("n9")


def test_wait_ready_probes_through_errors_until_ready_and_then_times_out_with_the_reason() -> None:
    c = Toy([FakeNode(1)], ready_after=3)
    c.wait_ready(5)
    assert c.probes == 4  # an exception is a reason to probe again, not a failure
    stuck = Toy([FakeNode(1)], ready_after=10**9)
    with pytest.raises(ClusterNotReady, match=r"not ready after 0s \(ConnectionError: refused\)"):
        stuck.wait_ready(0)


def test_create_topics_waits_in_sync_and_a_lagging_replica_fails_with_its_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[tuple[dict[str, int], int]] = []

    def fake_create(admin: Any, topics: Any, rf: int, config: Any = None) -> list[str]:
        made.append((dict(topics), rf))
        return list(topics)

    monkeypatch.setattr(adminmod, "create_topics", fake_create)
    lagging = metadata({"t": [Partition(0, [1, 2], [1])]})
    in_sync = metadata({"t": [Partition(0, [1, 2], [1, 2])]})
    c = Toy([FakeNode(1), FakeNode(2)], ScriptedAdmin([lagging, in_sync]))
    c.create_topics({"t": 1}, replication_factor=2)
    assert made == [({"t": 1}, 2)] and c.admin.calls == 2
    never = Toy([FakeNode(1), FakeNode(2)], ScriptedAdmin([lagging]))
    with pytest.raises(ClusterNotReady, match=r"topics t not in sync after 0s: t/0 replicas"):
        never.create_topics({"t": 1}, replication_factor=2, timeout=0.01)


def test_heal_undoes_each_node_then_starts_the_stopped_ones_then_waits_ready() -> None:
    n1, n2 = FakeNode(1), FakeNode(2)
    n2.running = False
    c = Toy([n1, n2])
    c.heal(5)
    assert c.healed == ["n1", "n2"] and n1.log == [] and n2.log == ["start"]
    assert c.probes == 1 + 1  # one failed probe (scripted), then ready


def test_fault_limits_come_from_the_nodes_and_the_backend_in_one_method() -> None:
    shared = [FakeNode(1, "127.0.0.1"), FakeNode(2, "127.0.0.1")]
    assert node_fault_limits(shared) == {"partition": SHARED_ADDRESS, "loss": SHARED_ADDRESS}
    no_cg = [FakeNode(1, cgroup=None), FakeNode(2)]
    assert set(node_fault_limits(no_cg)) == {"memory"}
    assert Toy([FakeNode(1), FakeNode(2)]).unsupported_faults() == {}
    # local without namespaces: network faults are out even for one node (one address)
    local = LocalCluster(nodes=1, use_netns=False, use_cgroups=False)
    assert local.unsupported_faults()["partition"] == SHARED_ADDRESS
    assert local.metadata()["unavailable_faults"] == ["loss", "partition"]
    ext = ExternalCluster("h:1", {"kill": "true", "start": "true"})
    assert "kill" not in ext.unsupported_faults() and "pause" in ext.unsupported_faults()
    assert ext.metadata()["unavailable_faults"] == sorted(ext.unsupported_faults())


def test_every_backend_is_a_cluster_on_the_one_base() -> None:
    for c in (LocalCluster(use_netns=False), DockerCluster(), ExternalCluster("h:1")):
        assert isinstance(c, Cluster) and isinstance(c, AdminCluster)
    assert not issubclass(DockerCluster, LocalCluster)


def test_external_caps_the_replication_factor_and_remembers_its_topics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[int] = []

    def fake_create(admin: Any, topics: Any, rf: int, config: Any = None) -> list[str]:
        made.append(rf)
        return ["t"]

    monkeypatch.setattr(adminmod, "create_topics", fake_create)
    c = ExternalCluster("h:1")
    c._nodes = [ExternalNode(c, 1, "h", 1)]
    monkeypatch.setattr(c, "_admin", lambda: ScriptedAdmin([metadata({"t": []})]))
    c.create_topics({"t": 1}, replication_factor=3)
    assert made == [1] and c.created_topics == ["t"]


def test_external_heal_resumes_paused_and_starts_stopped_brokers_through_hooks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = ExternalCluster("h:1")
    a, b = ExternalNode(c, 1, "h", 1), ExternalNode(c, 2, "h", 2)
    a.state, b.state = "paused", "stopped"
    c._nodes = [a, b]
    done: list[tuple[str, str]] = []
    monkeypatch.setattr(
        ExternalNode, "_hook", lambda self, act, timeout=0: done.append((act, self.name))
    )
    monkeypatch.setattr(c, "wait_ready", lambda timeout=0: done.append(("ready", "")))
    c.heal()
    assert done == [("resume", "n1"), ("start", "n2"), ("ready", "")]
    assert a.state == b.state == "running"


# ---------------------------------------------------------------- the broker system


def _kafka(profile: str = "safe") -> ApacheKafka:
    k = ApacheKafka("4.1.1", profile, {"num.io.threads": "2"}, heap_mb=384)
    k.install = KafkaInstall("4.1.1", Path("/opt/k/libs"), "maven-cache")
    return k


def test_apache_kafka_commands_and_files_for_host_and_container_paths() -> None:
    k = _kafka("unsafe")
    host = NodePaths("/usr/bin/java", k.program(), "/w/n1", "/w/n1/data", "/w/n1/logs")
    # the same commands the backends built by hand before the seam existed
    assert k.format_command(host, "CID") == [
        "/usr/bin/java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-Dlog4j2.configurationFile=/w/n1/log4j2.xml",
        "-cp",
        "/opt/k/libs/*",
        "kafka.tools.StorageTool",
        "format",
        "-t",
        "CID",
        "-c",
        "/w/n1/server.properties",
        "--feature",
        "eligible.leader.replicas.version=0",
    ]
    run = k.run_command(host, "abc123", "n1")
    assert run[0] == "/usr/bin/java"
    assert run[-4:] == ["-cp", "/opt/k/libs/*", "kafka.Kafka", "/w/n1/server.properties"]
    assert "-Xmx384m" in run and "-Dktrial.run=abc123" in run and "-Dktrial.node=n1" in run
    box = NodePaths("java", "/opt/kafka/lib/*", "/ktrial", "/ktrial/data", "/ktrial/logs")
    me = NodeAddr(1, "10.1.0.2", Ports(9092, 9093, 9094))
    files = k.node_files(me, [me], box, ("127.0.0.1", 3000))
    assert set(files) == {"server.properties", "log4j2.xml"}
    props = files["server.properties"]
    assert "log.dirs=/ktrial/data" in props and "num.io.threads=2" in props
    assert "CLIENT://127.0.0.1:3000" in props and "unclean.leader.election.enable=true" in props
    assert 'fileName="/ktrial/logs/server.log"' in files["log4j2.xml"]
    assert k.metadata() == {
        "broker": "apache-kafka",
        "broker_versions": ["4.1.1"],
        "kafka_source": "maven-cache",
        "kafka_line": "4.1",
        "profile": "unsafe",
        "broker_config": {"num.io.threads": "2"},
        "heap_mb": 384,
        "transactions": {
            "transaction_version": 2,
            "protocol": "v2",
            "requested": None,
            "source": "format",
        },
    }


def test_a_cluster_runs_the_system_it_is_given(tmp_path: Path) -> None:
    class Recording(ApacheKafka):
        name = "recording"

        def node_files(
            self, me: NodeAddr, peers: Sequence[NodeAddr], paths: NodePaths, adv: Any
        ) -> dict[str, str]:
            return {"node.conf": f"{me.node_id} {len(peers)} {paths.data} {adv}"}

    sys_ = Recording()
    sys_.install = KafkaInstall("9.9.9", tmp_path, "KAFKA_HOME")
    c = LocalCluster(nodes=2, use_netns=False, use_cgroups=False, system=sys_)
    c.work_dir = tmp_path
    n1 = c._add_node(1, "127.0.0.1", Ports(1, 2, 3), None)
    c._add_node(2, "127.0.0.1", Ports(4, 5, 6), None)
    c.runtime = "/bin/java"
    n1.write_config()
    assert (tmp_path / "n1" / "node.conf").read_text() == f"1 2 {tmp_path}/n1/data ('127.0.0.1', 1)"
    meta = c.metadata()
    assert meta["broker"] == "recording" and meta["broker_versions"] == ["9.9.9"]
    assert meta["client_profile"] == {  # Kafka's clients need nothing changed
        "name": "kafka",
        "producer": {},
        "consumer": {},
        "checker": {},
        "notes": [],
    }
    assert n1.paths().program == f"{tmp_path}/*"
