"""Pure parts of clusters/: config rendering, address choice, naming, install cache, state."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest
from ktrial.clusters import cgroups, clean, install, kafka_config, netns, state
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
    assert kafka_config.format_features("unsafe") == {"eligible.leader.replicas.version": "0"}
    assert kafka_config.format_features("safe") == {}
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
    assert clean.CMDLINE_RE.search(b"\x00".join(a.encode() for a in args)).group(1) == b"abc123"


def test_log4j2_config_writes_to_the_node_file() -> None:
    xml = kafka_config.log4j2_xml("/w/n1/logs/server.log")
    assert 'fileName="/w/n1/logs/server.log"' in xml and "<Root level=" in xml


def test_pick_subnet_avoids_used_and_reserved() -> None:
    used = [ipaddress.IPv4Network("10.213.0.0/24"), ipaddress.IPv4Network("10.213.1.7/32")]
    assert str(netns.pick_subnet(used)) == "10.213.2.0/24"
    assert str(netns.pick_subnet(used, reserved=["10.213.2.0/24"])) == "10.213.3.0/24"
    # a covering route (e.g. a VPN's 10.0.0.0/8) pushes us into the fallback pool
    assert str(netns.pick_subnet([ipaddress.IPv4Network("10.0.0.0/8")])) == "172.29.0.0/24"
    with pytest.raises(netns.NetError, match="no free"):
        netns.pick_subnet([ipaddress.IPv4Network("0.0.0.0/0")])


def test_addresses_and_names() -> None:
    sub = ipaddress.IPv4Network("10.213.5.0/24")
    assert netns.host_address(sub) == "10.213.5.1"
    assert netns.node_address(sub, 3) == "10.213.5.13"
    assert netns.bridge_name("a1b2c3") == "kt-a1b2c3"
    assert netns.netns_name("a1b2c3", "n1") == "kt-a1b2c3-n1"
    assert len(netns.veth_name("a1b2c3", 99)) + 1 <= 15  # the peer adds a "p"
    assert cgroups.cgroup_name("a1b2c3", "n1") == "ktrial-a1b2c3-n1"
    rule = netns.forward_rule("a1b2c3")
    assert rule[0] == "FORWARD" and "ktrial:a1b2c3" in rule


def test_clean_patterns_match_only_ktrial_names() -> None:
    assert clean.NETNS_RE.match("kt-a1b2c3-n1").group(1) == "a1b2c3"  # type: ignore[union-attr]
    assert clean.LINK_RE.match("kt-a1b2c3").group(1) == "a1b2c3"  # type: ignore[union-attr]
    assert clean.LINK_RE.match("kt-a1b2c3-v12")
    assert not clean.LINK_RE.match("kt-a1b2c3-other")
    assert not clean.LINK_RE.match("docker0")
    assert clean.CGROUP_RE.match("ktrial-a1b2c3-n2")
    assert not clean.CGROUP_RE.match("ktrialx-a1b2c3-n2")
    assert clean.ENVIRON_RE.search(b"A=1\x00KTRIAL_RUN=a1b2c3\x00B=2").group(1) == b"a1b2c3"
    assert not clean.ENVIRON_RE.search(b"NOT_KTRIAL_RUN=a1b2c3")


def test_leftovers_only_selects_runs() -> None:
    lo = clean.Leftovers(
        processes={10: "aaaaaa", 11: "bbbbbb"},
        netns={"kt-aaaaaa-n1": "aaaaaa"},
        rules=[(["FORWARD"], "bbbbbb")],
    )
    assert lo.run_ids() == {"aaaaaa", "bbbbbb"}
    only_a = lo.only(["aaaaaa"])
    assert only_a.processes == {10: "aaaaaa"} and only_a.rules == []
    assert not only_a.empty() and clean.Leftovers().empty()


def test_parse_proc_cgroup_v1_and_v2() -> None:
    text = "4:memory:/a/b\n3:cpu,cpuacct:/c\n0::/user.slice/x\n"
    parsed = cgroups.parse_proc_cgroup(text)
    assert (
        parsed["memory"] == "/a/b" and parsed["cpuacct"] == "/c" and parsed[""] == "/user.slice/x"
    )


def test_install_cache_needs_the_marker(tmp_path: Path) -> None:
    assert install.find_installed("4.1.1", tmp_path) is None
    lib = install.version_dir("4.1.1", tmp_path) / "lib"
    lib.mkdir(parents=True)
    assert install.find_installed("4.1.1", tmp_path) is None  # half-done download
    (lib.parent / install.MARKER).write_text("x")
    found = install.find_installed("4.1.1", tmp_path)
    assert found is not None and found.lib_dir == lib and found.classpath.endswith("/*")
    with pytest.raises(install.InstallError, match="not a Kafka version"):
        install.find_installed("../etc", tmp_path)


def test_kafka_home_and_slf4j_detection(tmp_path: Path) -> None:
    with pytest.raises(install.InstallError, match="not an unpacked Kafka"):
        install.from_kafka_home(tmp_path)
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "kafka_2.13-4.0.0.jar").write_text("")
    (libs / "kafka_2.13-4.0.0-test.jar").write_text("")
    (libs / "slf4j-api-2.0.17.jar").write_text("")
    inst = install.from_kafka_home(tmp_path)
    assert inst.version == "4.0.0" and inst.source == "KAFKA_HOME"
    assert install.slf4j_major(libs) == 2


def test_missing_tool_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(install.InstallError, match="apt-get install maven"):
        install.require_tool("mvn", "maven")


def test_state_file_and_liveness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTRIAL_STATE_DIR", str(tmp_path))
    sf = state.for_run("abcdef")
    assert sf.read() == {}
    sf.write({"run_id": "abcdef", **state.owner_fields()})
    sf.update(status="ready")
    data = dict(state.all_states())["abcdef"]
    assert data["status"] == "ready" and state.state_is_live(data)
    # same pid, different start time: a recycled pid is not our owner
    assert not state.is_alive(os.getpid(), (data["owner_start"] or 0) + 1)
    assert not state.is_alive(None, None)
    sf.remove()
    assert not sf.dir.exists()
    assert len(state.new_run_id()) == 6
