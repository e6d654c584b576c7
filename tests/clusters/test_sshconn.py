"""clusters/sshconn.py: host specs, the ssh command line, retries of ssh's own failures."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from ktrial.clusters import sshconn
from ktrial.clusters.sshconn import (
    HostSpec,
    HostUnreachable,
    RemoteError,
    SshHost,
    SshOptions,
    as_root,
    parse_host,
    parse_hosts,
    ssh_argv,
)


def test_parse_host_forms() -> None:
    assert parse_host("h1") == HostSpec("h1")
    assert parse_host("admin@h1:2222") == HostSpec("h1", "admin", 2222)
    assert parse_host(" 10.0.0.5 ") == HostSpec("10.0.0.5")


@pytest.mark.parametrize("bad", ["", "@h", "h:0", "h:x", "h;rm -rf /", "h 2", "$(x)"])
def test_parse_host_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_host(bad)


def test_parse_hosts_refuses_duplicates_and_nothing() -> None:
    assert [h.host for h in parse_hosts("a,b,,c")] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="twice"):
        parse_hosts("a,root@a")
    with pytest.raises(ValueError, match="at least one"):
        parse_hosts(" , ")


def test_options_validate() -> None:
    with pytest.raises(ValueError, match="host key"):
        SshOptions(host_key_check="maybe")
    with pytest.raises(ValueError, match="port"):
        SshOptions(port=0)


def test_argv_shares_one_connection_and_checks_host_keys() -> None:
    opts = SshOptions(identity="/k", known_hosts="/kh", options={"ProxyJump": "b"})
    argv = ssh_argv(HostSpec("h", "u", 2022), opts, "/tmp/c", "true")
    joined = " ".join(argv)
    assert "ControlMaster=auto" in joined and "ControlPath=/tmp/c/%C" in joined
    assert "StrictHostKeyChecking=yes" in joined and "UserKnownHostsFile=/kh" in joined
    assert "BatchMode=yes" in joined and "ProxyJump=b" in joined
    assert argv[argv.index("-p") + 1] == "2022" and argv[argv.index("-l") + 1] == "u"
    assert argv[-2:] == ["--", "true"]
    no_mux = ssh_argv(HostSpec("h"), SshOptions(), None, "true")
    assert not any("ControlMaster" in a for a in no_mux)


def test_as_root_uses_sudo_unless_root() -> None:
    assert as_root("echo 'a b'", "root") == "sh -c 'echo '\"'\"'a b'\"'\"''"
    assert as_root("id", "ops").startswith("sudo -n sh -c ")


class FakeRun:
    """subprocess.run answering from a list of (returncode, stderr)."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        self.answers = answers
        self.calls = 0

    def __call__(self, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        rc, err = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return subprocess.CompletedProcess(argv, rc, b"out", err)


def _host(
    monkeypatch: pytest.MonkeyPatch, answers: list[tuple[int, bytes]], retry: float
) -> tuple[SshHost, FakeRun, list[Any]]:
    fake = FakeRun(answers)
    monkeypatch.setattr(sshconn.subprocess, "run", fake)
    monkeypatch.setattr(sshconn.time, "sleep", lambda s: None)
    h = SshHost(HostSpec("h1"), SshOptions(), None, retry_for=retry)
    events: list[Any] = []
    h.on_unreachable = lambda host, outage: events.append((host, outage))
    return h, fake, events


def test_ssh_failures_are_retried_and_the_outage_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    down = (255, b"ssh: connect to host h1 port 22: Connection refused\n")
    h, fake, events = _host(monkeypatch, [down, down, (0, b"")], retry=5.0)
    assert h.out("true") == "out"
    assert fake.calls == 3
    assert events == [("h1", "ssh: connect to host h1 port 22: Connection refused"), ("h1", None)]


def test_a_host_that_stays_down_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    down = (255, b"ssh: connect to host h1 port 22: No route to host\n")
    h, _fake, events = _host(monkeypatch, [down], retry=0.0)
    with pytest.raises(HostUnreachable, match="No route"):
        h.run("true")
    assert events[0][1] is not None


def test_a_failed_command_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    h, fake, events = _host(monkeypatch, [(1, b"iptables: Bad rule\n")], retry=5.0)
    with pytest.raises(RemoteError, match="exit 1"):
        h.run("iptables -D INPUT x", what="delete")
    assert fake.calls == 1 and events == []
    assert h.run("false", check=False).returncode == 1
