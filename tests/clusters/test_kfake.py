"""The kfake backend's side of its control channel (clusters/kfake.py): the ready line,
command lines and replies, a client against a loopback server speaking the protocol,
the node/cluster mapping, and the run's refusals of what kfake cannot take."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.cli import main
from ktrial.clusters.kfake import (
    LIMITS,
    ControlError,
    Kfake,
    KfakeControl,
    format_command,
    kfake_version,
    parse_ready,
    parse_reply,
)

# ------------------------------------------------------------ the ready line


def test_the_ready_line_is_read() -> None:
    r = parse_ready(
        "KFAKE-READY brokers=127.0.0.1:9092,127.0.0.1:9093 control=127.0.0.1:7000 nodes=0,1"
    )
    assert r.brokers == ("127.0.0.1:9092", "127.0.0.1:9093")
    assert r.control == ("127.0.0.1", 7000) and r.nodes == (0, 1)


@pytest.mark.parametrize(
    "line",
    [
        "",
        "READY brokers=a:1 control=b:2 nodes=0",
        "KFAKE-READY brokers=a:1 control=b:2",  # no nodes
        "KFAKE-READY brokers=a:1 control=b nodes=0",  # no port
        "KFAKE-READY brokers=a:1,b:2 control=b:2 nodes=0",  # 2 brokers, 1 node
        "KFAKE-READY brokers=a:1 control=b:2 nodes=x",
        "KFAKE-READY brokers control=b:2 nodes=0",
    ],
)
def test_a_malformed_ready_line_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match="ready line"):
        parse_ready(line)


# ------------------------------------------------------------ commands and replies


def test_commands_are_one_line_of_key_value_words() -> None:
    line = format_command(
        "FAULT",
        id="ab-1-control",
        api="produce",
        error="REQUEST_TIMED_OUT",
        count=-1,
        nodes=[0, 2],
        topic=None,
    )
    assert line == "FAULT id=ab-1-control api=produce error=REQUEST_TIMED_OUT count=-1 nodes=0,2"
    assert format_command("ping") == "PING"


@pytest.mark.parametrize("bad", ["a b", "x\nPING", "k=v", "", "é"])
def test_a_value_that_would_break_the_line_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="control argument topic="):
        format_command("FAULT", topic=bad)


def test_replies_are_read_and_an_err_raises_its_reason() -> None:
    assert parse_reply("OK pong\n") == {"reply": "pong"}
    assert parse_reply("OK cleared=1 hits=12") == {"cleared": "1", "hits": "12"}
    assert parse_reply("OK") == {}
    with pytest.raises(ControlError, match=r'^FAULT: error: unknown Kafka error "X"$'):
        parse_reply('ERR FAULT: error: unknown Kafka error "X"')
    with pytest.raises(ControlError, match="unexpected reply"):
        parse_reply("HELLO")


@given(
    st.dictionaries(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True),
        st.from_regex(r"[A-Za-z0-9._,:/-]{1,12}", fullmatch=True),
        max_size=5,
    )
)
def test_what_a_command_says_reads_back_from_an_ok_reply(args: dict[str, str]) -> None:
    line = format_command("FAULT", **args)
    assert parse_reply("OK " + line.partition(" ")[2]) == args


# ------------------------------------------------------------ the client


@pytest.fixture
def server() -> Iterator[tuple[int, list[str]]]:
    """A loopback server answering as the program does (and recording the lines)."""
    lines: list[str] = []
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen()
    ls.settimeout(0.2)
    stop = threading.Event()

    def answer(line: str) -> str:
        verb = line.split()[0]
        if verb == "PING":
            return "OK pong"
        if verb == "FAULT":
            return "OK id=f1 api=Produce error=REQUEST_TIMED_OUT code=7 applied=true"
        if verb == "CLEAR":
            return "OK cleared=1 hits=3"
        if verb == "MOVE":
            return "ERR topic/partition not found"
        return "OK"

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = ls.accept()
            except OSError:
                continue
            with conn, conn.makefile("rw") as f:
                line = f.readline().strip()
                lines.append(line)
                if line != "SILENT":
                    f.write(answer(line) + "\n")
                    f.flush()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield ls.getsockname()[1], lines
    stop.set()
    t.join(2)
    ls.close()


def test_the_client_speaks_the_protocol(server: tuple[int, list[str]]) -> None:
    port, lines = server
    c = KfakeControl("127.0.0.1", port)
    assert c.ping()
    reply = c.inject("f1", "produce", "REQUEST_TIMED_OUT", count=5, nodes=[1])
    assert reply["applied"] == "true" and reply["code"] == "7"
    assert c.clear("f1") == {"cleared": "1", "hits": "3"}
    c.clear_prefix("ab-")
    c.shuffle_leaders()
    c.rehash_coordinators()
    with pytest.raises(ControlError, match="topic/partition not found"):
        c.move_leader("t", 0, 2)
    assert lines == [
        "PING",
        "FAULT id=f1 api=produce error=REQUEST_TIMED_OUT count=5 nodes=1",
        "CLEAR id=f1",
        "CLEAR prefix=ab-",
        "SHUFFLE",
        "REHASH",
        "MOVE topic=t partition=0 node=2",
    ]


def test_a_channel_that_is_down_or_silent_is_a_control_error(
    server: tuple[int, list[str]],
) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    assert not KfakeControl("127.0.0.1", dead, timeout=1).ping()
    with pytest.raises(ControlError, match=f"127.0.0.1:{dead}"):
        KfakeControl("127.0.0.1", dead, timeout=1).rehash_coordinators()
    port, _ = server
    with pytest.raises(ControlError, match="closed without a reply"):
        KfakeControl("127.0.0.1", port, timeout=2).call("SILENT")


# ------------------------------------------------------------ the cluster


def _kfake_cluster(tmp_path: Path, system: Kfake | None = None) -> Any:
    """A 3-node local cluster running kfake, its nodes made but nothing started."""
    from ktrial.clusters.local import LocalCluster
    from ktrial.clusters.system import Ports

    c = LocalCluster(nodes=3, system=system or Kfake())
    c.work_dir = tmp_path
    for i in range(1, 4):
        c._add_node(i, "127.0.0.1", Ports(9000 + i, 9100 + i, 9200 + i), None)
    return c


def test_nodes_share_the_first_nodes_process(tmp_path: Path) -> None:
    c = _kfake_cluster(tmp_path)
    assert not c.use_netns and not c.use_cgroups  # one process on 127.0.0.1
    assert [(n.name, n.node_id) for n in c.nodes] == [("n1", 0), ("n2", 1), ("n3", 2)]
    assert all(n.owner is c.nodes[0] for n in c.nodes)
    assert c.nodes[1].process_nodes == ["n1", "n2", "n3"]
    assert c.bootstrap_servers == "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003"
    assert not c.nodes[2].is_running() and c.control_api() is None  # not started
    assert c.offers_control
    assert c.nodes[0].log_paths == [tmp_path / "n1" / "logs" / "kfake.log"]
    assert c.nodes[1].log_paths == []  # the listeners have no log of their own
    meta = c.metadata()
    assert meta["kind"] == "local" and meta["system"] == "franz-go-kfake"
    assert meta["one_process"] is True and meta["kfake_version"] == kfake_version()
    assert str(kfake_version()).startswith("v0.0.0-")
    assert set(meta["unavailable_faults"]) >= {"partition", "loss", "memory", "toxic"}
    assert meta["unavailable_faults"] == sorted(c.unsupported_faults())
    assert c.unsupported_faults()["partition"].startswith("kfake is one process")


def test_the_command_lists_every_listener_and_the_control_channel(tmp_path: Path) -> None:
    k = Kfake(broker_config={"group.min.session.timeout.ms": "100"}, sync=True)
    c = _kfake_cluster(tmp_path, k)
    n1 = c.nodes[0]
    n1.write_config()  # the system learns the listeners and picks the control port
    cmd = k.run_command(n1.paths(), c.run_id, "n1")
    assert cmd[cmd.index("-ports") + 1] == "9001,9002,9003"
    control = cmd[cmd.index("-control") + 1]
    assert control.startswith("127.0.0.1:") and control == k.metadata()["control"]
    assert cmd[cmd.index("-data-dir") + 1] == str(tmp_path / "n1" / "data")
    assert "-sync" in cmd and cmd[-2:] == ["-c", "group.min.session.timeout.ms=100"]
    assert c.control_api() is k.control and k.control is not None
    assert k.format_command(n1.paths(), "x") is None  # type: ignore[func-returns-value]


def test_kfake_has_no_image_for_the_docker_backend() -> None:
    from ktrial.clusters.base import Unsupported
    from ktrial.clusters.docker import DockerCluster

    with pytest.raises(Unsupported, match="one process"):
        DockerCluster(nodes=3, system=Kfake())


def test_a_missing_program_is_refused_saying_how_to_build_it(tmp_path: Path) -> None:
    from ktrial.clusters.base import Unsupported
    from ktrial.clusters.kfake import kfake_cluster

    c = kfake_cluster(binary=tmp_path / "nope")
    with pytest.raises(Unsupported, match=r"scripts/setup\.sh"):
        c.start()


# ------------------------------------------------------------ refusals of a run


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(["run", "--dry-run", *args])
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out + err


def test_control_on_a_system_without_a_control_api_exits_254(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = _run(["--nemesis", "control", "--time-limit", "10"], capsys)
    assert code == 254, text
    assert "control: this system has no control API" in text and "--cluster kfake" in text
    assert "Traceback" not in text


@pytest.mark.parametrize("family", sorted(LIMITS))
def test_kfake_refuses_what_one_process_cannot_take(
    family: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _run(["--cluster", "kfake", "--nemesis", family], capsys)
    assert code == 254, text
    assert f"{family}: kfake is one process on 127.0.0.1" in text


def test_kfake_plans_control_and_process_faults(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(["--cluster", "kfake", "--nemesis", "control,kill", "--seed", "4"], capsys)
    assert code == 0, text
    assert "kfake (franz-go), 3 nodes (n1, n2, n3) in one process" in text
    assert "control" in text and "kill" in text
