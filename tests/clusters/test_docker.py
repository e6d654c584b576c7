"""Pure parts of the docker backend: names, subnets, dockerd's arguments, cgroup paths."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from ktrial.clusters import docker as dk
from ktrial.clusters import docker_image as img
from ktrial.clusters import dockerd
from ktrial.clusters.clean import LINK_RE


def test_names_fit_interfaces_and_clean_patterns() -> None:
    assert dk.container_name("0a1b2c", 3) == "kt-0a1b2c-n3"
    net = dk.network_name("0a1b2c")
    assert len(net) <= 15  # it is also the bridge's interface name
    m = LINK_RE.match(net)
    assert m and m.group(1) == "0a1b2c"  # so `cluster clean` finds a leaked bridge


def test_subnet_avoids_local_backend_and_used_networks() -> None:
    used = [ipaddress.IPv4Network("10.214.0.0/24"), ipaddress.IPv4Network("10.213.0.0/16")]
    sub = dk.pick_subnet(used, reserved=["10.214.1.0/24"])
    assert sub == ipaddress.IPv4Network("10.214.2.0/24")
    assert not sub.overlaps(ipaddress.IPv4Network("10.213.0.0/16"))


def test_subnet_exhausted_raises() -> None:
    with pytest.raises(RuntimeError, match="no free /24"):
        dk.pick_subnet([ipaddress.IPv4Network("10.214.0.0/16")])


def test_dockerd_args_leave_host_network_alone() -> None:
    paths = dockerd.default_paths(cache=Path("/c"), run_dir=Path("/r"))
    args = dockerd.dockerd_args(paths, "/usr/sbin/dockerd")
    assert args[0] == "/usr/sbin/dockerd"
    for flag in ("--iptables=false", "--ip6tables=false", "--bridge=none", "--ip-masq=false"):
        assert flag in args
    assert args[args.index("--data-root") + 1] == "/c/docker/data"  # images persist
    assert args[args.index("--exec-root") + 1] == "/r/exec"
    assert args[args.index("--pidfile") + 1] == "/r/dockerd.pid"
    assert args[args.index("--host") + 1] == "unix:///r/docker.sock"
    assert "/var/run/docker.sock" not in " ".join(args)  # never squats the system socket


def test_memory_cgroup_v1_and_v2() -> None:
    v1 = (
        "12:pids:/docker/abc\n"
        "5:memory:/docker/abc\n"
        "4:cpu,cpuacct:/docker/abc\n"
        "1:name=systemd:/docker/abc\n"
    )
    assert dk.memory_cgroup(v1, Path("/sys/fs/cgroup")) == Path("/sys/fs/cgroup/memory/docker/abc")
    v2 = "0::/system.slice/docker-abc.scope\n"
    assert dk.memory_cgroup(v2, Path("/cg")) == Path("/cg/system.slice/docker-abc.scope")
    assert dk.memory_cgroup("3:cpu:/x\n") is None


def test_start_script_formats_once_then_execs_broker() -> None:
    text = dk.start_script(
        ["java", "-cp", "/l/*", "Fmt", "-t", "id x"], ["java", "kafka.Kafka"], "meta.properties"
    )
    lines = text.splitlines()
    fmt = next(i for i, line in enumerate(lines) if "Fmt" in line)
    assert "meta.properties" in lines[fmt - 1]  # guarded: a restart keeps the storage
    assert "'/l/*'" in lines[fmt] and "'id x'" in lines[fmt]  # quoted for sh
    assert lines[-1].startswith("exec java kafka.Kafka")  # the JVM is the container's init
    # a system with no marker file: formatted once the data directory is not empty
    other = dk.start_script(["fmt"], ["run"], None, "out.log").splitlines()
    assert other[other.index("  fmt >> /ktrial/logs/out.log 2>&1") - 1].endswith(
        '[ -z "$(ls -A /ktrial/data)" ]; then'
    )


def test_image_recipe_digest_tracks_jars_not_order() -> None:
    a = img.recipe_digest("ktrial-base:bookworm", ["b.jar", "a.jar"])
    assert a == img.recipe_digest("ktrial-base:bookworm", ["a.jar", "b.jar"])
    assert a != img.recipe_digest("ktrial-base:bookworm", ["a.jar", "c.jar"])
    assert img.image_tag("4.1.1") == "ktrial-kafka:4.1.1"


def test_debootstrap_command() -> None:
    cmd = img.debootstrap_cmd(Path("/t"))
    assert cmd[:2] == ["debootstrap", "--variant=minbase"]
    inc = next(a for a in cmd if a.startswith("--include="))
    for pkg in ("openjdk-17-jre-headless", "iptables", "iproute2", "procps", "stress-ng"):
        assert pkg in inc.split("=", 1)[1].split(",")
    assert cmd[-3:-1] == ["bookworm", "/t"]
