"""Memory cgroups (clusters/cgroups.py): /proc/<pid>/cgroup in v1 and v2."""

from __future__ import annotations

from ktrial.clusters import cgroups


def test_parse_proc_cgroup_v1_and_v2() -> None:
    text = "4:memory:/a/b\n3:cpu,cpuacct:/c\n0::/user.slice/x\n"
    parsed = cgroups.parse_proc_cgroup(text)
    assert (
        parsed["memory"] == "/a/b" and parsed["cpuacct"] == "/c" and parsed[""] == "/user.slice/x"
    )
