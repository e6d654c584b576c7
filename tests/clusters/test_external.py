"""The external backend (clusters/external.py) without a cluster, with real shell
commands: hooks parsed, rendered and run (placeholders, environment, node state), a
failing hook explained, missing hooks and unreachable faults refused by name; and hook
placeholders shell-quoted, so a host name from broker metadata cannot run a command.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.clusters import linkproxy
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
    assert {"partition", "loss", "memory"} <= set(refused)
    with pytest.raises(Unsupported, match="--hook stop="):
        ExternalNode(c, 1, "h", 1).stop()
    with pytest.raises(Unsupported, match="cannot run commands"):
        ExternalNode(c, 1, "h", 1).exec(["true"])
    with pytest.raises(ValueError, match="--bootstrap"):
        ExternalCluster("  ")


def test_link_faults_are_refused_only_where_the_redirect_cannot_be_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = ExternalCluster("h:1")
    monkeypatch.setattr(linkproxy, "unavailable", lambda: None)
    assert "toxic" not in c.unsupported_faults()
    monkeypatch.setattr(linkproxy, "unavailable", lambda: "run ktrial as root")
    assert c.unsupported_faults()["toxic"] == "run ktrial as root"
    node = ExternalNode(c, 2, "b-2.example", 9096)
    assert node.direct_client == "b-2.example:9096"  # the proxy's upstream
    c.link = {"how": "x"}
    assert c.metadata()["link_proxies"] == {"how": "x"}


# --------------------------------------------------------- placeholders are shell-quoted

EVIL = [
    "h1;touch {f}",
    "h1 && touch {f}",
    "$(touch {f})",
    "`touch {f}`",
    "h1'; touch {f}; echo '",
    'h1"; touch {f}; echo "',
    "h1\ntouch {f}",
    "h1|touch {f}",
]


@pytest.mark.parametrize("host", EVIL)
def test_a_malicious_host_name_cannot_run_a_command(tmp_path: Path, host: str) -> None:
    pwned, seen = tmp_path / "pwned", tmp_path / "seen"
    evil = host.format(f=pwned)
    hooks = {"pause": f"printf %s {{host}} > {seen}", "resume": "true"}
    node = ExternalNode(ExternalCluster("h:1", hooks), 1, evil, 9092)
    node.pause()
    assert not pwned.exists()
    assert seen.read_text() == evil  # the hook got the name, as one word, unchanged


def test_a_normal_host_still_works(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    hooks = {"kill": f"echo {{host}} {{port}} {{name}} {{id}} > {seen}", "start": "true"}
    node = ExternalNode(ExternalCluster("h:1", hooks), 2, "broker-2.example.com", 9093)
    node.kill()
    assert seen.read_text() == "broker-2.example.com 9093 n2 2\n"
    assert render_hook("ssh {host} kill", {"host": "10.0.0.2"}) == "ssh 10.0.0.2 kill"


@pytest.mark.parametrize(
    "template",
    ["ssh h 'kill {name}'", 'ssh "{host}" kill', "echo \\{host}", "echo 'a' \"b{port}\""],
)
def test_a_placeholder_inside_quotes_is_refused_before_the_run(template: str) -> None:
    with pytest.raises(ValueError, match=r"inside quotes; write it bare"):
        ExternalCluster("h:1", {"kill": template})


def test_quotes_around_other_words_are_fine() -> None:
    fields = {"host": "h1;x", "name": "n1"}
    out = render_hook("ssh {host} 'sudo systemctl kill kafka' # {name}", fields)
    assert out == "ssh 'h1;x' 'sudo systemctl kill kafka' # n1"


def test_the_run_command_refuses_a_quoted_placeholder_at_parse_time() -> None:
    from ktrial.clusters.external import parse_hooks

    with pytest.raises(ValueError, match="inside quotes"):
        parse_hooks(["kill=ssh h 'kill {name}'"])
    assert parse_hooks(["kill=ssh {host} kill"]) == {"kill": "ssh {host} kill"}
