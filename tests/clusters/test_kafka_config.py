"""Broker configuration (clusters/kafka_config.py): properties, profiles, JVM args, log4j2."""

from __future__ import annotations

import pytest
from ktrial.clusters import clean, kafka_config, kafka_versions
from ktrial.clusters.kafka_config import NodeAddr, Ports


def three_nodes() -> list[NodeAddr]:
    return [NodeAddr(i, f"10.0.0.{10 + i}", Ports(9092, 9093, 9094)) for i in (1, 2, 3)]


def test_server_properties_combined_mode_static_quorum_and_three_listeners() -> None:
    peers = three_nodes()
    props = kafka_config.server_properties(peers[1], peers, "/d", "safe")
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == (
        "1@10.0.0.11:9094,2@10.0.0.12:9094,3@10.0.0.13:9094"
    )
    assert props["listeners"] == (
        "CLIENT://10.0.0.12:9092,REPLICATION://10.0.0.12:9093,CONTROLLER://10.0.0.12:9094"
    )
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["advertised.listeners"] == "CLIENT://10.0.0.12:9092,REPLICATION://10.0.0.12:9093"
    assert props["offsets.topic.num.partitions"] == "3"
    assert props["transaction.state.log.num.partitions"] == "3"
    assert props["group.initial.rebalance.delay.ms"] == "0"


def test_client_listener_can_advertise_a_proxy() -> None:
    peers = three_nodes()
    props = kafka_config.server_properties(
        peers[0], peers, "/d", "safe", client_advertised=("127.0.0.1", 21001)
    )
    assert props["advertised.listeners"].startswith("CLIENT://127.0.0.1:21001,")
    # the broker still binds its own address; replication is never proxied
    assert "REPLICATION://10.0.0.11:9093" in props["advertised.listeners"]
    assert props["listeners"].startswith("CLIENT://10.0.0.11:9092")


def test_profiles() -> None:
    safe = kafka_config.profile_settings("safe", 3)
    assert safe["min.insync.replicas"] == "2"
    assert safe["unclean.leader.election.enable"] == "false"
    assert safe["transaction.state.log.min.isr"] == "2"
    unsafe = kafka_config.profile_settings("unsafe", 3)
    assert unsafe["min.insync.replicas"] == "1"
    assert unsafe["unclean.leader.election.enable"] == "true"
    k41 = kafka_versions.check_supported("4.1.1")
    assert kafka_config.format_features("unsafe", k41) == {"eligible.leader.replicas.version": "0"}
    assert kafka_config.format_features("safe", k41) == {}
    with pytest.raises(ValueError, match="unknown profile"):
        kafka_config.profile_settings("reckless", 3)


def test_small_clusters_never_ask_for_more_replicas_than_nodes() -> None:
    one = [NodeAddr(1, "127.0.0.1", Ports(1, 2, 3))]
    props = kafka_config.server_properties(one[0], one, "/d", "safe")
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["min.insync.replicas"] == "1"


def test_overrides_win_and_parse() -> None:
    peers = three_nodes()
    over = kafka_config.parse_overrides(["min.insync.replicas=3", " a.b = c=d "])
    assert over == {"min.insync.replicas": "3", "a.b": "c=d"}
    props = kafka_config.server_properties(peers[0], peers, "/d", "safe", overrides=over)
    assert props["min.insync.replicas"] == "3"
    with pytest.raises(ValueError, match="key=value"):
        kafka_config.parse_overrides(["novalue"])


def test_render_properties_roundtrip_lines() -> None:
    text = kafka_config.render_properties({"a": "1", "log.dirs": "C:\\x"})
    assert "a=1\n" in text and "log.dirs=C:\\\\x\n" in text


def test_cluster_id_is_a_kafka_uuid() -> None:
    ids = {kafka_config.new_cluster_id() for _ in range(50)}
    assert len(ids) == 50
    for cid in ids:
        assert len(cid) == 22 and not cid.startswith("-") and "=" not in cid


def test_jvm_args_carry_the_run_marker_and_heap() -> None:
    args = kafka_config.jvm_args(384, "/l", "/l/log4j2.xml", "abc123", "n2")
    assert "-Xmx384m" in args and "-Xms384m" in args
    assert "-Dktrial.run=abc123" in args and "-Dktrial.node=n2" in args
    assert "-Dlog4j2.configurationFile=/l/log4j2.xml" in args
    m = clean.CMDLINE_RE.search(b"\x00".join(a.encode() for a in args))
    assert m is not None and m.group(1) == b"abc123"


def test_log4j2_config_writes_to_the_node_file() -> None:
    xml = kafka_config.log4j2_xml("/w/n1/logs/server.log")
    assert 'fileName="/w/n1/logs/server.log"' in xml and "<Root level=" in xml
