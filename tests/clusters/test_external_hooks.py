"""Hook placeholders are shell-quoted (clusters/external.py): a host name from broker
metadata cannot run a command, with a real `sh -c` running the hooks."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.clusters.external import ExternalCluster, ExternalNode, render_hook

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
