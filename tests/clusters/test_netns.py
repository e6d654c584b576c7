"""Network namespaces and addresses (clusters/netns.py): subnets, names, rules."""

from __future__ import annotations

import ipaddress

import pytest
from ktrial.clusters import cgroups, netns


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
