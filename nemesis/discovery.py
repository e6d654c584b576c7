"""Who is the active KRaft controller, and who leads the workload's partitions — asked at
the moment of the fault.

The controller: a KRaft broker answers DescribeCluster/Metadata with a *random alive
broker* as "controller" (clients cannot reach controllers), so the admin API does not
name the quorum leader. For nodes that expose their data directory (the local backend's
``node.data_dir``) we read each node's ``__cluster_metadata-0/quorum-state`` and take the
leader of the highest epoch; otherwise we fall back to the admin API's answer, which
is right for ZooKeeper-era clusters and for facades that report a real controller.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..clusters.base import Cluster, Node

log = logging.getLogger("ktrial.nemesis")

PartitionRef = tuple[str, int | None] | str
Partitions = Iterable[PartitionRef] | Callable[[], Iterable[PartitionRef]] | None


def parse_quorum_state(text: str) -> tuple[int, int] | None:
    """(leaderEpoch, leaderId) from a quorum-state file, None without a known leader (pure)."""
    try:
        d = json.loads(text)
    except ValueError:
        return None
    leader, epoch = d.get("leaderId", -1), d.get("leaderEpoch", -1)
    if not isinstance(leader, int) or leader < 0:
        return None
    return int(epoch), leader


def leader_from_files(nodes: Sequence[Node]) -> str | None:
    """The quorum leader named with the highest epoch among the nodes' quorum-state files."""
    best: tuple[int, int] | None = None
    for n in nodes:
        data_dir = getattr(n, "data_dir", None)
        if data_dir is None:
            continue
        try:
            found = parse_quorum_state(
                (Path(data_dir) / "__cluster_metadata-0" / "quorum-state").read_text()
            )
        except OSError:
            continue
        if found and (best is None or found[0] > best[0]):
            best = found
    if best is None:
        return None
    return next((n.name for n in nodes if n.node_id == best[1]), None)


def _admin(cluster: Cluster | str) -> Any:
    """An AdminClient for `cluster` with its TLS / SASL settings (clusters/security.py);
    a bare bootstrap string gets none."""
    from confluent_kafka.admin import AdminClient

    from ..clusters.security import client_settings

    bootstrap = cluster if isinstance(cluster, str) else cluster.bootstrap_servers
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 5000,
        "logger": logging.getLogger("ktrial.nemesis.admin"),
        **({} if isinstance(cluster, str) else client_settings(cluster)),
    }
    return AdminClient(conf)


def controller(cluster: Cluster, timeout: float = 10.0) -> str | None:
    return controller_with_source(cluster, timeout)[0]


def parse_quorum_status(text: str) -> int | None:
    """The LeaderId of ``kafka-metadata-quorum describe --status`` output (pure)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "LeaderId" and value.strip().lstrip("-").isdigit():
            leader = int(value.strip())
            return leader if leader >= 0 else None
    return None


def quorum_leader_via_tool(bootstrap: str, timeout: float = 40.0) -> int | None:
    """DescribeQuorum through Kafka's own tool (MetadataQuorumCommand, in the cached jars):
    the brokers forward it to the active controller, so the answer is the quorum leader.
    None when no Kafka is installed here or the tool fails."""
    import subprocess

    from ..clusters.install import InstallError, require_java, resolve

    try:
        cp = resolve(auto_install=False).classpath
        java = require_java()
    except (InstallError, RuntimeError, OSError) as e:
        log.info("no Kafka tools to ask DescribeQuorum with: %s", e)
        return None
    cmd = [java, "-Xmx128m", "-cp", cp, "org.apache.kafka.tools.MetadataQuorumCommand"]
    cmd += ["--bootstrap-server", bootstrap, "describe", "--status"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        log.warning("DescribeQuorum through kafka-metadata-quorum failed: %s", e)
        return None
    return parse_quorum_status(out.stdout)


def controller_with_source(cluster: Cluster, timeout: float = 10.0) -> tuple[str | None, str]:
    """The active KRaft controller and how it was found: the nodes' quorum-state files
    (local and docker backends), else DescribeQuorum through Kafka's tool (any KRaft
    cluster reachable from here, slower: a JVM starts), else DescribeCluster's answer
    (right for ZooKeeper-era clusters; a random broker on KRaft, said so)."""
    name = leader_from_files(cluster.nodes)
    if name is not None:
        return name, "quorum-state files (highest leader epoch)"
    if not any(getattr(n, "data_dir", None) for n in cluster.nodes):
        leader = quorum_leader_via_tool(cluster.bootstrap_servers)
        if leader is not None:
            found = next((n.name for n in cluster.nodes if n.node_id == leader), None)
            if found is not None:
                return found, "DescribeQuorum (kafka-metadata-quorum)"
    try:
        admin = _admin(cluster)  # keep it alive until the result is in
        ctrl = admin.describe_cluster(request_timeout=timeout).result(timeout).controller
    except Exception as e:
        log.warning("could not ask the cluster for its controller: %s", e)
        return None, f"quorum-state unreadable and DescribeCluster failed: {e}"
    if ctrl is None:
        return None, "DescribeCluster named no controller"
    name = next((n.name for n in cluster.nodes if n.node_id == ctrl.id), None)
    return name, "DescribeCluster (on KRaft this may name any broker)"


def _refs(partitions: Partitions) -> list[PartitionRef]:
    if partitions is None:
        return []
    return list(partitions() if callable(partitions) else partitions)


def leaders(cluster: Cluster, partitions: Partitions, timeout: float = 10.0) -> list[str]:
    """Names of the nodes leading any of `partitions` ((topic, partition) or whole topics)."""
    refs = _refs(partitions)
    if not refs:
        return []
    try:
        md = _admin(cluster).list_topics(timeout=timeout)
    except Exception as e:
        log.warning("could not read metadata for partition leaders: %s", e)
        return []
    ids: set[int] = set()
    for ref in refs:
        topic, part = (ref, None) if isinstance(ref, str) else ref
        t = md.topics.get(topic)
        if t is None:
            continue
        for pid, p in t.partitions.items():
            if (part is None or pid == part) and p.leader >= 0:
                ids.add(p.leader)
    return [n.name for n in cluster.nodes if n.node_id in ids]
