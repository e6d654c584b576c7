"""Docker leftovers (clusters/docker.py, for `cluster clean`): only containers and
networks with ktrial's exact labels and names, and on the system engine only with a
known, dead owner. Engine records are plain dicts, as the Docker API returns them."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from ktrial.clusters import clean, docker
from ktrial.clusters import state as statemod

SYSTEM = "unix:///var/run/docker.sock"


def dead_owner() -> str:
    p = subprocess.Popen(["true"])
    p.wait()
    return f"{p.pid}:1"


def live_owner() -> str:
    owner = statemod.owner_fields()
    return f"{owner['owner_pid']}:{owner['owner_start']}"


def container(rid: str, node: str = "n1", **labels: str) -> dict[str, Any]:
    base = {"ktrial.run": rid, "ktrial.node": node}
    return {"Id": f"id-{rid}-{node}", "Names": [f"/kt-{rid}-{node}"], "Labels": {**base, **labels}}


def test_only_exact_labels_and_names_are_ktrials() -> None:
    ok = docker.classify("container", container("a1b2c3"), SYSTEM, True)
    assert ok is not None and ok.run_id == "a1b2c3" and ok.name == "kt-a1b2c3-n1"
    foreign = [
        {**container("a1b2c3"), "Labels": {"ktrial.run": "notmine", "ktrial.node": "n1"}},
        {**container("a1b2c3"), "Names": ["/my-kafka"]},  # the label copied onto another
        {**container("a1b2c3"), "Names": ["/kt-ffffff-n1"]},  # name and label disagree
        container("a1b2c3", **{"ktrial.node": "n2"}),
        container("a1b2c3", **{"ktrial.owner": "me"}),
    ]
    assert [docker.classify("container", c, SYSTEM, True) for c in foreign] == [None] * 5
    net = {"Id": "x", "Name": "kt-a1b2c3", "Labels": {"ktrial.run": "a1b2c3"}}
    assert docker.classify("network", net, SYSTEM, True) is not None
    assert docker.classify("network", {**net, "Name": "prod"}, SYSTEM, True) is None


def test_owner_label_or_state_decides_and_unknown_means_unknown() -> None:
    dead = docker.classify(
        "container", container("a1b2c3", **{"ktrial.owner": dead_owner()}), SYSTEM, True
    )
    live = docker.classify(
        "container", container("a1b2c3", **{"ktrial.owner": live_owner()}), SYSTEM, True
    )
    bare = docker.classify("container", container("a1b2c3"), SYSTEM, True)
    assert dead and live and bare
    assert docker.owner_alive(dead, None) is False
    assert docker.owner_alive(live, None) is True
    assert docker.owner_alive(bare, None) is None
    assert docker.owner_alive(bare, {"owner_pid": int(dead_owner().split(":")[0])}) is False


def test_clean_skips_system_engine_containers_without_a_dead_owner(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("KTRIAL_STATE_DIR", str(tmp_path))
    items = {}
    for rid, owner, system in (
        ("aaaaaa", dead_owner(), True),  # gone: removable
        ("bbbbbb", live_owner(), True),  # a run in progress on a shared engine
        ("cccccc", None, True),  # no owner known on a shared engine: never
        ("dddddd", None, False),  # no owner, but on ktrial's own dockerd: a leftover
    ):
        labels = {"ktrial.owner": owner} if owner else {}
        item = docker.classify("container", container(rid, **labels), "e", system)
        assert item is not None
        items[item.key] = item
    monkeypatch.setattr(docker, "scan_items", lambda: items)
    monkeypatch.setattr(docker, "orphaned_dockerd", lambda removing=(): None)
    removed: list[docker.DockerItem] = []

    def remove_items(its: list[docker.DockerItem]) -> list[str]:
        removed.extend(its)
        return []

    monkeypatch.setattr(docker, "remove_items", remove_items)
    dry, _ = clean.clean(run_ids=["aaaaaa", "bbbbbb", "cccccc", "dddddd"], dry_run=True)
    assert sorted(dry.docker.values()) == ["aaaaaa", "dddddd"]
    assert any("kt-cccccc-n1" in r and "left alone" in r for r in dry.refused)
    real, _ = clean.clean(run_ids=["aaaaaa", "bbbbbb", "cccccc", "dddddd"])
    assert sorted(i.run_id for i in removed) == ["aaaaaa", "dddddd"]
    assert real.describe() == dry.describe()
