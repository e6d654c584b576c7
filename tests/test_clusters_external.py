"""The external backend's hooks and refusals, without a cluster: real shell commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.clusters.base import Unsupported
from ktrial.clusters.external import (
    ExternalCluster,
    ExternalNode,
    HookError,
    parse_hooks,
    render_hook,
)


def test_parse_hooks_accepts_known_actions_and_names_bad_items() -> None:
    assert parse_hooks(["kill=echo {name}", "start= systemctl start kafka"]) == {
        "kill": "echo {name}",
        "start": " systemctl start kafka",
    }
    with pytest.raises(ValueError, match="ACTION=COMMAND"):
        parse_hooks(["kill"])
    with pytest.raises(ValueError, match="unknown action; known: kill, start"):
        parse_hooks(["reboot=true"])


def test_render_hook_fills_placeholders_and_explains_bad_ones() -> None:
    fields = {"name": "n2", "id": 2, "host": "10.0.0.2", "port": 9092}
    assert render_hook("ssh {host} kill {{x}} # {name}/{id}:{port}", fields) == (
        "ssh 10.0.0.2 kill {x} # n2/2:9092"
    )
    with pytest.raises(ValueError, match=r"bad placeholder.*\{name\} \{id\}"):
        render_hook("kill {pid}", fields)
    with pytest.raises(ValueError, match="bad placeholder"):
        ExternalCluster("h:1", {"kill": "kill {pid}"})


def test_hooks_run_with_placeholders_and_environment_and_track_state(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    hooks = {
        a: f"echo {a} {{name}} {{id}} {{host}} {{port}} $KTRIAL_NODE $KTRIAL_PORT >> {log}"
        for a in ("kill", "start", "pause", "resume", "stop")
    }
    node = ExternalNode(ExternalCluster("h:1", hooks), 3, "10.1.2.3", 9093)
    assert node.is_running() and not node.paused
    node.pause()
    assert node.paused and node.is_running()
    node.resume()
    node.kill()
    assert not node.is_running()
    node.start()
    node.restart()
    assert node.is_running()
    lines = log.read_text().splitlines()
    assert [ln.split()[0] for ln in lines] == ["pause", "resume", "kill", "start", "stop", "start"]
    assert set(ln.split(" ", 1)[1] for ln in lines) == {"n3 3 10.1.2.3 9093 n3 9093"}


def test_a_failing_hook_says_which_node_command_and_output(tmp_path: Path) -> None:
    node = ExternalNode(ExternalCluster("h:1", {"kill": "echo nope >&2; exit 3"}), 1, "h", 1)
    with pytest.raises(HookError, match=r"kill hook for n1 exited with 3(.|\n)*nope"):
        node.kill()
    assert node.is_running()  # a failed kill changed nothing ktrial knows of


def test_missing_hooks_and_unreachable_faults_are_refused_by_name() -> None:
    c = ExternalCluster("h:1", {"pause": "true", "resume": "true", "kill": "true"})
    refused = c.unsupported_faults()
    assert "pause" not in refused
    assert refused["kill"] == "external cluster: add --hook start='COMMAND'"
    assert "--hook stop='COMMAND' --hook start='COMMAND'" in refused["restart"]
    assert {"partition", "loss", "memory", "toxic"} <= set(refused)
    with pytest.raises(Unsupported, match="--hook stop="):
        ExternalNode(c, 1, "h", 1).stop()
    with pytest.raises(Unsupported, match="cannot run commands"):
        ExternalNode(c, 1, "h", 1).exec(["true"])
    with pytest.raises(ValueError, match="--bootstrap"):
        ExternalCluster("  ")
