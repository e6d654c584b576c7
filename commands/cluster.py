"""`ktrial cluster`: install Kafka, start/inspect/stop local clusters, clean leftovers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import click

from ..clusters import clean as cleanmod
from ..clusters import state as statemod
from ..clusters.install import DEFAULT_KAFKA_VERSION, InstallError, cache_root, install
from ..clusters.kafka_config import PROFILES, parse_overrides
from ..clusters.local import tail
from .ssh_flags import ssh_options, ssh_settings


@click.group("cluster")
def cluster() -> None:
    """Local Kafka clusters: install, up, status, down, clean.

    `up` starts real Apache Kafka brokers (KRaft), each in its own network
    namespace and memory cgroup, and leaves them running; `down` stops them;
    `clean` removes what a killed run left behind.
    """


@cluster.command("install")
@click.option("--kafka-version", default=DEFAULT_KAFKA_VERSION, show_default=True)
@click.option("--force", is_flag=True, help="Download again even if cached.")
def install_cmd(kafka_version: str, force: bool) -> None:
    """Download Kafka's jars from Maven Central into the cache.

    The cache is $KTRIAL_CACHE or ~/.cache/ktrial; KAFKA_HOME (an unpacked Apache
    distribution) is used instead when set and no version is asked for.
    """
    try:
        inst = install(kafka_version, force=force, log=lambda m: click.echo(m, err=True))
    except InstallError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"Kafka {inst.version}: {inst.lib_dir}")


@cluster.command("up")
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(1, 99))
@click.option("--profile", type=click.Choice(PROFILES), default="safe", show_default=True)
@click.option("--kafka-version", default=None, help=f"Default {DEFAULT_KAFKA_VERSION}.")
@click.option(
    "--broker-config",
    "broker_config",
    multiple=True,
    metavar="KEY=VALUE",
    help="Broker setting overriding the profile; repeatable.",
)
@click.option("--heap-mb", default=512, show_default=True, type=click.IntRange(64))
@click.option("--no-netns", is_flag=True, help="All brokers on 127.0.0.1 (no partitions/exec).")
@click.option("--timeout", default=240.0, show_default=True, help="Seconds to wait for readiness.")
@click.option("--json", "as_json", is_flag=True, help="Print the cluster state as JSON.")
def up(
    nodes: int,
    profile: str,
    kafka_version: str | None,
    broker_config: tuple[str, ...],
    heap_mb: int,
    no_netns: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Start a local cluster, wait until it is ready, print how to reach it, leave it running."""
    try:
        overrides = parse_overrides(broker_config)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    if not no_netns and os.geteuid() != 0:
        click.echo("not root: using loopback ports (--no-netns); partitions unavailable", err=True)
        no_netns = True
    try:
        install(kafka_version or DEFAULT_KAFKA_VERSION, log=lambda m: click.echo(m, err=True))
    except InstallError as e:
        raise click.ClickException(str(e)) from e
    run_id = statemod.new_run_id()
    opts: dict[str, Any] = {
        "nodes": nodes,
        "profile": profile,
        "kafka_version": kafka_version,
        "broker_config": overrides,
        "heap_mb": heap_mb,
        "use_netns": not no_netns,
        "run_id": run_id,
        "ready_timeout": timeout,
    }
    log_dir = cache_root() / "keeper-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{run_id}.log"
    with open(log_path, "ab") as out:
        keeper = subprocess.Popen(
            [sys.executable, "-m", "ktrial.clusters.keeper", json.dumps(opts)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    click.echo(f"starting cluster {run_id} ({nodes} nodes, {profile}); log {log_path}", err=True)
    sf = statemod.for_run(run_id)
    try:
        deadline = time.monotonic() + timeout + 120
        while True:
            st = sf.read()
            if st.get("status") == "ready":
                break
            if keeper.poll() is not None:
                raise click.ClickException(
                    f"cluster {run_id} failed to start (keeper exit {keeper.returncode}); "
                    f"last lines of {log_path}:\n{tail(log_path, 40)}"
                )
            if time.monotonic() > deadline:
                keeper.terminate()
                keeper.wait(120)
                raise click.ClickException(f"cluster {run_id} not ready; see {log_path}")
            time.sleep(0.3)
    except KeyboardInterrupt:
        keeper.terminate()
        keeper.wait(120)
        raise
    _print_state(st, as_json)
    if not as_json:
        click.echo(f"stop it with: ktrial cluster down {run_id}")


def _print_state(st: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(st, indent=2, sort_keys=True))
        return
    alive = statemod.state_is_live(st)
    owner = (
        f"owner pid {st.get('owner_pid')} ({st.get('owner_kind')}, {'alive' if alive else 'DEAD'})"
    )
    click.echo(
        f"cluster {st.get('run_id')}: {st.get('status')}, "
        f"{st.get('system', 'apache-kafka')} {st.get('version', st.get('kafka_version'))}, "
        f"{owner}"
    )
    click.echo(f"  bootstrap servers: {st.get('bootstrap_servers')}")
    if st.get("subnet"):
        click.echo(f"  subnet {st.get('subnet')} on bridge {st.get('bridge')}")
    for n in st.get("nodes", []):
        pid = n.get("pid")
        running = pid is not None and statemod.proc_start_time(pid) is not None
        click.echo(
            f"  {n['name']}: {n['address']} client {n['client_bootstrap']} "
            f"pid {pid if running else '-'} netns {n.get('netns') or '-'} log {n.get('log')}"
        )


@cluster.command("status")
@click.option("--json", "as_json", is_flag=True)
def status(as_json: bool) -> None:
    """List the clusters on this machine (from their state files)."""
    states = list(statemod.all_states())
    if as_json:
        click.echo(json.dumps({rid: st for rid, st in states}, indent=2, sort_keys=True))
        return
    if not states:
        click.echo("no clusters")
    for _, st in states:
        _print_state(st, False)


@cluster.command("down")
@click.argument("run_id", required=False)
@click.option("--force", is_flag=True, help="Also stop clusters owned by another program.")
def down(run_id: str | None, force: bool) -> None:
    """Stop a cluster (the only one, or RUN_ID) and remove all it created."""
    states = dict(statemod.all_states())
    if run_id is None:
        if len(states) != 1:
            raise click.UsageError(
                f"{len(states)} clusters: name one of {', '.join(states) or '(none)'}"
            )
        run_id = next(iter(states))
    st = states.get(run_id)
    if st is None:
        raise click.UsageError(f"no cluster {run_id} in {statemod.state_root()}")
    if statemod.state_is_live(st):
        if st.get("owner_kind") != "keeper" and not force:
            raise click.ClickException(
                f"cluster {run_id} is owned by pid {st.get('owner_pid')} (not `cluster up`); "
                "stop that program, or use --force to SIGTERM it"
            )
        if not cleanmod.stop_owner(st, timeout=120):
            raise click.ClickException(f"owner {st.get('owner_pid')} did not exit; try clean --all")
    removed, problems = cleanmod.clean(run_ids=[run_id])
    for p in problems:
        click.echo(f"problem: {p}", err=True)
    click.echo(
        f"cluster {run_id} down"
        + (f" (cleaned {len(removed.describe())} leftovers)" if not removed.empty() else "")
    )
    if problems:
        sys.exit(1)


@cluster.command("clean")
@click.option("--all", "all_", is_flag=True, help="Also clusters whose owner is alive.")
@click.option("--dry-run", is_flag=True, help="Only list what a real clean would remove.")
@click.option(
    "--cluster",
    "cluster_kind",
    type=click.Choice(["local", "ssh"]),
    default="local",
    show_default=True,
    help="local: this machine; ssh: the --node hosts (over SSH).",
)
@ssh_options
def clean(all_: bool, dry_run: bool, cluster_kind: str, **kw: Any) -> None:
    """Remove leftovers (namespaces, links, iptables rules, cgroups, processes, dirs,
    containers) of ktrial clusters whose owner died, and nemesis leftovers (tagged
    iptables rules, stress-ng balloons, Toxiproxy servers).

    Touches only what carries ktrial's exact markers and whose owner is gone; lists
    what it left alone and why. --dry-run lists exactly what a real clean removes.
    With --cluster ssh, the same on every --node host (clusters/sshclean.py)."""
    if cluster_kind == "ssh":
        _clean_ssh(all_, dry_run, {**kw, "cluster_kind": "ssh"})
        return
    _ = ssh_settings({**kw, "cluster_kind": "local"})  # refuses --node without --cluster ssh
    from ..nemesis.clean import clean_leftovers

    verb = "would remove" if dry_run else "removed"
    nemesis_removed = clean_leftovers(all_, dry_run=dry_run)
    for line in nemesis_removed:
        click.echo(f"{verb} {line}")
    removed, problems = cleanmod.clean(all_=all_, dry_run=dry_run)
    for line in removed.describe():
        click.echo(f"{verb} {line}")
    for line in removed.refused:
        click.echo(f"left alone: {line}")
    if removed.empty() and not nemesis_removed:
        click.echo("nothing to clean")
    for p in problems:
        click.echo(f"problem: {p}", err=True)
    if problems:
        sys.exit(1)


def _clean_ssh(all_: bool, dry_run: bool, kw: dict[str, Any]) -> None:
    from ..clusters import sshclean
    from ..clusters.sshconn import SshHost, SshOptions, close_all, control_dir, parse_hosts
    from ..clusters.sshremote import DEFAULT_ROOT

    nodes, fields, _ = ssh_settings(kw)
    opts = SshOptions(**fields)
    cdir = control_dir()
    hosts = [SshHost(h, opts, cdir, retry_for=10.0) for h in parse_hosts(nodes)]
    try:
        done, refused, problems = sshclean.clean(hosts, DEFAULT_ROOT, all_, dry_run)
    finally:
        close_all(hosts, cdir)
    verb = "would remove" if dry_run else "removed"
    for line in done:
        click.echo(f"{verb} {line}")
    for line in refused:
        click.echo(f"left alone: {line}")
    if not done:
        click.echo("nothing to clean")
    for p in problems:
        click.echo(f"problem: {p}", err=True)
    if problems:
        sys.exit(1)


__all__ = ["cluster"]
