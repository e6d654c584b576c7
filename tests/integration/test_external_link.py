"""Link faults against a cluster ktrial did not start (clusters/linkproxy.py, linkfront.py).

The session's local cluster stands in for a separately started one: `ktrial run
--cluster external` sees only its bootstrap servers, puts a Toxiproxy listener in front
of every discovered broker and redirects its own connections to the brokers' advertised
addresses through them. A latency toxic and a reset toxic are scripted; the history must
show both, clients that reconnected through the proxies during and after the reset
(the redirect rules' connection counts in the toxic ops and at the end of the run), ops
completing after it, a VALID verdict, and nothing left behind: no rule, no Toxiproxy, no
topic. A run killed with SIGKILL leaves its rule and its Toxiproxy, which `ktrial
cluster clean` lists and removes.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from ktrial.clusters import linkproxy
from ktrial.nemesis.clean import marked_processes
from ktrial.nemesis.toxiproxy import ENV_MARK as TOXIPROXY_MARK

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(linkproxy.unavailable() is not None, reason="needs root and iptables"),
]

SCRIPT = """
[[entry]]
at = 2
fault = "toxic"
kind = "latency"
duration = 6

[[entry]]
at = 10
fault = "toxic"
kind = "reset_peer"
duration = 4
"""


def ktrial_run(bootstrap: str, store: Path, script: Path, time_limit: int, name: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ktrial",
        "run",
        "--cluster",
        "external",
        "--bootstrap",
        bootstrap,
        "--nemesis-schedule",
        "script",
        "--nemesis-script",
        str(script),
        "--time-limit",
        str(time_limit),
        "--heal-wait",
        "2",
        "--node-stats-interval",
        "0",
        "--check-every",
        "0",
        "--store",
        str(store),
        "--name",
        name,
        "--seed",
        "11",
        "--no-live",
    ]


def leftovers(owner: int) -> tuple[list[str], list[int]]:
    """The link rules and Toxiproxy servers of the ktrial process `owner`."""
    rules = [ln for ln in linkproxy.nat_save().splitlines() if f"ktrial-link:{owner}:" in ln]
    servers = [pid for pid, own in marked_processes(TOXIPROXY_MARK) if own == owner]
    return rules, servers


def wait_topics_gone(cluster: Any, topics: list[str]) -> None:
    admin = cluster._admin()
    deadline = time.monotonic() + 60
    while left := set(topics) & set(admin.list_topics(timeout=10).topics):
        assert time.monotonic() < deadline, f"the run's topics {sorted(left)} are still there"
        time.sleep(0.5)


def test_latency_and_reset_through_the_proxies_of_an_external_cluster(
    local_cluster: Any, tmp_path: Path
) -> None:
    script = tmp_path / "faults.toml"
    script.write_text(SCRIPT)
    store = tmp_path / "store"
    cmd = ktrial_run(local_cluster.bootstrap_servers, store, script, 20, "link")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    assert "verdict: VALID" in out

    run = (store / "link" / "latest").resolve()
    meta = orjson.loads((run / "test.json").read_bytes())
    link = meta["cluster"]["link_proxies"]
    brokers = {n.name: n for n in local_cluster.nodes}
    assert set(link["proxies"]) == {f"n{n.node_id}" for n in local_cluster.nodes}
    for name, p in link["proxies"].items():  # each broker's own address goes to its proxy
        node = next(n for n in local_cluster.nodes if f"n{n.node_id}" == name)
        assert p["addresses"] == [f"{node.address}:9092"], (p, brokers)
        assert p["proxy"].startswith("127.0.0.1:")

    ops = [orjson.loads(line) for line in (run / "history.jsonl").read_bytes().splitlines()]
    on = {o["fault_id"]: o for o in ops if o.get("f") == "toxic-on"}
    off = {o["fault_id"]: o for o in ops if o.get("f") == "toxic-off"}
    kinds = {o["value"]["toxic"]: fid for fid, o in on.items()}
    assert set(kinds) == {"latency", "reset_peer"} and set(off) == set(on)

    def total(op: dict[str, Any]) -> int:
        return sum(op["value"]["connections"].values())

    # latency: the ops that ran wholly inside its window took at least two of its 300 ms
    # round trips (a transaction makes several; 2.6 s measured, 0.3-0.5 s without it)
    lat_on, lat_off = on[kinds["latency"]]["time"], off[kinds["latency"]]["time"]
    invoked: dict[Any, int] = {}
    inside = []
    for o in ops:
        if o["process"] == "nemesis":
            continue
        if o["type"] == "invoke":
            invoked[o["process"]] = o["time"]
        elif o["type"] == "ok" and o["f"] in ("txn", "send", "poll"):
            start = invoked.get(o["process"], 0)
            if lat_on < start and o["time"] < lat_off:
                inside.append((o["time"] - start) / 1e6)
    assert inside and statistics.median(inside) >= 600, inside

    # reset: every client connection carrying data was cut; the clients reconnected
    # through the proxies (the rules counted new connections) and went on after it
    reset_on, reset_off = on[kinds["reset_peer"]], off[kinds["reset_peer"]]
    assert total(reset_off) > total(reset_on), (reset_on, reset_off)
    after = [
        o
        for o in ops
        if o["process"] != "nemesis" and o["type"] == "ok" and o["time"] > reset_off["time"]
    ]
    assert len(after) >= 5, f"only {len(after)} ok ops after the reset ended"
    final = orjson.loads((run / "logs" / "link-proxies.json").read_bytes())
    assert sum(final["connections"].values()) > total(reset_off)

    owner = int(link["comment"].split(":")[1])
    assert leftovers(owner) == ([], [])
    # The run deleted its topics at teardown. Transactional calls abandoned during the
    # reset return only when the proxies go; their producers must not auto-create a
    # topic again after the deletion (allow.auto.create.topics=false).
    wait_topics_gone(local_cluster, list(meta["topics"]))


def test_a_killed_runs_redirect_and_toxiproxy_are_removed_by_cluster_clean(
    local_cluster: Any, tmp_path: Path
) -> None:
    script = tmp_path / "faults.toml"
    script.write_text(SCRIPT)
    store = tmp_path / "store"
    cmd = ktrial_run(local_cluster.bootstrap_servers, store, script, 60, "killed")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while (
            leftovers(proc.pid)[0] == [] or not (store / "killed" / "latest" / "test.json").exists()
        ):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the run never redirected its clients"
            time.sleep(0.2)
        time.sleep(4)  # the latency toxic is on
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    rules, servers = leftovers(proc.pid)
    assert rules and servers
    dry = subprocess.run(
        [sys.executable, "-m", "ktrial", "cluster", "clean", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    for server in servers:
        assert (
            f"would remove toxiproxy-server pid {server} (started by pid {proc.pid})" in dry.stdout
        )
    assert f"ktrial-link:{proc.pid}:" in dry.stdout
    assert leftovers(proc.pid) == (rules, servers)  # a dry run removes nothing
    real = subprocess.run(
        [sys.executable, "-m", "ktrial", "cluster", "clean"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "removed iptables nat rule: -A OUTPUT" in real.stdout, real.stdout + real.stderr
    deadline = time.monotonic() + 10
    while leftovers(proc.pid) != ([], []):
        assert time.monotonic() < deadline, leftovers(proc.pid)
        time.sleep(0.2)
    # the killed run's topics stay on the borrowed cluster: delete them here
    meta = orjson.loads(((store / "killed" / "latest").resolve() / "test.json").read_bytes())
    admin = local_cluster._admin()  # referenced until the deletion is done
    for fut in admin.delete_topics(list(meta["topics"]), operation_timeout=30).values():
        fut.result(60)
    wait_topics_gone(local_cluster, list(meta["topics"]))


TLS_PASSWORD = "It-Link-tls-pw-0815"


def test_link_faults_reach_a_tls_and_sasl_cluster_through_the_proxies(
    tmp_path: Path,
) -> None:
    """The proxies carry TCP, so TLS and SASL pass them untouched: a separately started
    SASL_SSL cluster, clients with the CA and credentials from a file, a latency toxic
    that slows them and a reset they come back from; nothing in the run holds the
    password."""
    from ktrial.clusters.brokersec import prepare
    from ktrial.clusters.local import LocalCluster
    from ktrial.clusters.security import Security
    from ktrial.clusters.system import system_for

    sec = prepare("sasl-ssl", Security({"sasl.username": "carol", "sasl.password": TLS_PASSWORD}))
    try:
        cluster = LocalCluster(
            nodes=3, system=system_for("kafka", profile="safe", broker_config=sec.broker_config)
        )
        cluster.security = sec.client  # the admin client's readiness checks log in too
        creds = tmp_path / "client.properties"
        creds.write_text("".join(f"{k}={v}\n" for k, v in sec.client.settings.items()))
        script = tmp_path / "faults.toml"
        script.write_text(SCRIPT)
        store = tmp_path / "store"
        with cluster:
            cmd = ktrial_run(cluster.bootstrap_servers, store, script, 20, "tls-link")
            cmd += ["--security-config-file", str(creds), "--txn"]
            proc = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600
            )
    finally:
        sec.cleanup()
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:]
    assert "verdict: VALID" in out and TLS_PASSWORD not in out
    run = (store / "tls-link" / "latest").resolve()
    meta = orjson.loads((run / "test.json").read_bytes())
    assert meta["cluster"]["security"]["security.protocol"] == "SASL_SSL"
    assert set(meta["cluster"]["link_proxies"]["proxies"]) == {"n1", "n2", "n3"}
    ops = [orjson.loads(line) for line in (run / "history.jsonl").read_bytes().splitlines()]
    on = {o["value"]["toxic"]: o for o in ops if o.get("f") == "toxic-on"}
    off = {o["value"]["toxic"]: o for o in ops if o.get("f") == "toxic-off"}
    assert set(on) == set(off) == {"latency", "reset_peer"}
    # the clients' TLS connections were cut by the reset and made again through the proxies
    assert sum(off["reset_peer"]["value"]["connections"].values()) > sum(
        on["reset_peer"]["value"]["connections"].values()
    )
    txns_after = [
        o
        for o in ops
        if o["f"] == "txn" and o["type"] == "ok" and o["time"] > off["reset_peer"]["time"]
    ]
    assert len(txns_after) >= 3, "no transactions over TLS after the reset"
    assert [
        str(p) for p in run.rglob("*") if p.is_file() and TLS_PASSWORD.encode() in p.read_bytes()
    ] == []
    owner = int(meta["cluster"]["link_proxies"]["comment"].split(":")[1])
    assert leftovers(owner) == ([], [])
