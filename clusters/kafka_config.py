"""Broker configuration: profiles, server.properties and log4j2 config, as pure functions.

Every node runs in KRaft combined mode (broker + controller) with a static quorum
(`controller.quorum.voters`) and three listeners: CLIENT (what producers and
consumers use; its advertised address may be a Toxiproxy in front of the broker),
REPLICATION (inter-broker fetches) and CONTROLLER (Raft). Separate listeners let the
nemesis cut or slow one kind of traffic without the others.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .kafka_versions import ELR_FEATURE, TRANSACTION_FEATURE, KafkaLine

CLIENT = "CLIENT"
REPLICATION = "REPLICATION"
CONTROLLER = "CONTROLLER"


@dataclass(frozen=True)
class Ports:
    client: int
    replication: int
    controller: int


@dataclass(frozen=True)
class NodeAddr:
    """What the config of one node needs to know about itself and its peers."""

    node_id: int
    host: str  # the address the node binds to (netns address or 127.0.0.1)
    ports: Ports


def _fast_and_small(nodes: int) -> dict[str, str]:
    """Settings for small test clusters: start fast, use little memory, no waiting."""
    rf = str(min(3, nodes))
    return {
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "share.coordinator.state.topic.replication.factor": rf,
        "default.replication.factor": rf,
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "4",
        # the cleaner's dedupe buffer is on heap and 128 MiB by default
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "log.cleaner.threads": "1",
        "auto.create.topics.enable": "true",
    }


def profile_settings(profile: str, nodes: int) -> dict[str, str]:
    """Durability settings of a profile.

    safe: acks=all means at least 2 in-sync copies; never elect an out-of-sync leader.
    unsafe: acks=all may mean one copy (min ISR 1), followers drop out of the ISR fast
    (replica.lag.time.max.ms), and an out-of-sync replica may become leader (unclean
    leader election), so a kill -9 or a partition of the only in-sync replica can lose
    acknowledged writes. Kafka never fsyncs by default (log.flush.interval.* unset), so
    kill -9 alone does not lose data from the page cache; what loses it is the
    leadership moving to a replica that never had it.
    """
    min_isr = str(min(2, nodes))
    if profile == "safe":
        return {
            "min.insync.replicas": min_isr,
            "unclean.leader.election.enable": "false",
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.min.isr": min_isr,
        }
    if profile == "unsafe":
        return {
            "min.insync.replicas": "1",
            "unclean.leader.election.enable": "true",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "replica.lag.time.max.ms": "3000",
            # flush only by the OS, never on our account (explicit for the record)
            "log.flush.interval.messages": str(2**63 - 1),
            "log.flush.interval.ms": str(2**63 - 1),
        }
    raise ValueError(f"unknown profile {profile!r}: use 'safe' or 'unsafe'")


PROFILES = ("safe", "unsafe")


def format_features(
    profile: str, line: KafkaLine, transaction_version: int | None = None
) -> dict[str, str]:
    """Feature levels fixed when the storage is formatted (`StorageTool format --feature`).

    Kafka 4.1 turns Eligible Leader Replicas (KIP-966) on for new clusters: the
    controller then prefers replicas that were safely caught up, which masks the
    classic unclean-election losses the unsafe profile is meant to expose. unsafe
    formats with ELR off where the feature exists (4.0 on); safe keeps the version's
    default. `transaction_version` (checked against the line by the caller) sets the
    transaction.version feature; None keeps the version's default. A line whose format
    takes no `--feature` (3.7) gets none.
    """
    if not line.format_features:
        return {}
    out: dict[str, str] = {}
    if profile == "unsafe" and line.elr_feature:
        out[ELR_FEATURE] = "0"
    if transaction_version is not None:
        out[TRANSACTION_FEATURE] = str(transaction_version)
    return out


def quorum_voters(nodes: Sequence[NodeAddr]) -> str:
    return ",".join(f"{n.node_id}@{n.host}:{n.ports.controller}" for n in nodes)


def server_properties(
    me: NodeAddr,
    peers: Sequence[NodeAddr],
    data_dir: str,
    profile: str,
    client_advertised: tuple[str, int] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The full server.properties of one combined broker+controller node.

    `peers` lists every node including `me`; `client_advertised` replaces the CLIENT
    listener's advertised host:port (e.g. a Toxiproxy listening for this broker).
    """
    adv_host, adv_port = client_advertised or (me.host, me.ports.client)
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(me.node_id),
        "controller.quorum.voters": quorum_voters(peers),
        "listeners": (
            f"{CLIENT}://{me.host}:{me.ports.client},"
            f"{REPLICATION}://{me.host}:{me.ports.replication},"
            f"{CONTROLLER}://{me.host}:{me.ports.controller}"
        ),
        "advertised.listeners": (
            f"{CLIENT}://{adv_host}:{adv_port},{REPLICATION}://{me.host}:{me.ports.replication}"
        ),
        "listener.security.protocol.map": (
            f"{CLIENT}:PLAINTEXT,{REPLICATION}:PLAINTEXT,{CONTROLLER}:PLAINTEXT"
        ),
        "inter.broker.listener.name": REPLICATION,
        "controller.listener.names": CONTROLLER,
        "log.dirs": data_dir,
    }
    props.update(_fast_and_small(len(peers)))
    props.update(profile_settings(profile, len(peers)))
    props.update(overrides or {})
    return props


PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def client_listener_security(
    protocol: str,
    users: Mapping[str, str] | None = None,
    keystore: str | None = None,
    truststore: str | None = None,
) -> dict[str, str]:
    """Overrides that secure the CLIENT listener only (clusters/brokersec.py).

    SASL_* take the PLAIN mechanism with `users` (name -> password) as the accounts;
    SSL / SASL_SSL a PEM key store (key + chain) and a PEM trust store. REPLICATION and
    CONTROLLER stay PLAINTEXT. The JAAS line holds passwords: Kafka logs it as
    [hidden], and histories.redact masks any key ending in sasl.jaas.config.
    """
    prefix = f"listener.name.{CLIENT.lower()}."
    out = {
        "listener.security.protocol.map": (
            f"{CLIENT}:{protocol},{REPLICATION}:PLAINTEXT,{CONTROLLER}:PLAINTEXT"
        )
    }
    if protocol.startswith("SASL_"):
        if not users:
            raise ValueError(f"{protocol} needs at least one user")
        accounts = " ".join(f"user_{u}={_jaas_quote(p)}" for u, p in sorted(users.items()))
        out["sasl.enabled.mechanisms"] = "PLAIN"
        out[prefix + "sasl.enabled.mechanisms"] = "PLAIN"
        out[prefix + "plain.sasl.jaas.config"] = f"{PLAIN_LOGIN} required {accounts};"
    if protocol.endswith("SSL"):
        if not keystore or not truststore:
            raise ValueError(f"{protocol} needs a key store and a trust store")
        out[prefix + "ssl.keystore.type"] = "PEM"
        out[prefix + "ssl.keystore.location"] = keystore
        out[prefix + "ssl.truststore.type"] = "PEM"
        out[prefix + "ssl.truststore.location"] = truststore
        out[prefix + "ssl.client.auth"] = "none"
    return out


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_properties(props: Mapping[str, str]) -> str:
    """Java .properties text (values here never need escaping beyond backslashes)."""
    lines = ["# written by ktrial; regenerated on every start"]
    lines += [f"{k}={v.replace(chr(92), chr(92) * 2)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """`key=value` strings (from --broker-config) into a dict; errors name the bad item."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--broker-config expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 chars)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):  # Kafka avoids ids a CLI would take for an option
            return cid


def log4j2_xml(log_file: str) -> str:
    """log4j2 config: everything of this node into its own rolling file."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- written by ktrial -->
<Configuration status="warn" shutdownHook="disable">
  <Appenders>
    <RollingFile name="file" fileName="{log_file}" filePattern="{log_file}.%i">
      <PatternLayout pattern="[%d{{ISO8601}}] %p %m (%c)%n"/>
      <Policies><SizeBasedTriggeringPolicy size="64 MB"/></Policies>
      <DefaultRolloverStrategy max="4"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="file"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="kafka.network.RequestChannel$" level="WARN"/>
    <Logger name="state.change.logger" level="INFO"/>
    <Logger name="org.apache.kafka.clients.NetworkClient" level="WARN"/>
    <Logger name="org.apache.kafka.common.utils.AppInfoParser" level="WARN"/>
  </Loggers>
</Configuration>
"""


def jvm_args(
    heap_mb: int, log_dir: str, log4j_config: str, run_id: str, node_name: str
) -> list[str]:
    """JVM options. `-Dktrial.run` / `-Dktrial.node` mark the process for `cluster clean`."""
    return [
        f"-Xms{heap_mb}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
        "-XX:-UsePerfData",
        "-XX:+ExitOnOutOfMemoryError",
        f"-Xlog:gc*:file={log_dir}/gc.log:time,uptime:filecount=2,filesize=10M",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j_config}",
        f"-Dkafka.logs.dir={log_dir}",
        f"-Dktrial.run={run_id}",
        f"-Dktrial.node={node_name}",
    ]
