"""`ktrial run`: a local cluster, one workload, the drain, the checker's verdict.

This first version runs without a nemesis: it starts a LocalCluster, then hands
over to :func:`ktrial.workloads.runner.execute` (setup -> main phase -> drain ->
check) and prints the verdict. Exit codes: 0 valid, 1 invalid, 2 unknown.
"""

from __future__ import annotations

import os
from typing import Any

import click

from ..histories.store import create_run
from ..workloads import WORKLOADS, make_workload

EXIT_BY_VALID: dict[Any, int] = {True: 0, False: 1, "unknown": 2}


def workload_options(
    workload: str,
    txn: bool | None,
    idempotence: bool,
    sub_via: str | None,
    abort_p: float,
    crash_clients: int,
    rate: float | None,
    concurrency: int | None,
) -> dict[str, Any]:
    """CLI flags -> the workload's option dict (only what the workload understands)."""
    if workload == "queue":
        opts: dict[str, Any] = {
            "txn": bool(txn),
            "idempotence": idempotence,
            "sub_via": sub_via or "assign",
            "abort_p": abort_p,
            "crash_clients": crash_clients,
        }
        if rate is not None:
            opts["rate"] = rate
        if concurrency is not None:
            opts["concurrency"] = concurrency
        return opts
    opts = {"crash_clients": crash_clients, "abort_p": abort_p}
    if rate is not None:
        opts["rate"] = rate
    if concurrency is not None:
        opts["copiers"] = concurrency
    return opts


def parse_overrides(items: tuple[str, ...], flag: str) -> dict[str, str]:
    """KEY=VALUE pairs -> dict (librdkafka takes every setting as a string)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(
                f"{item!r}: expected KEY=VALUE, e.g. linger.ms=5", param_hint=flag
            )
        out[key.strip()] = value.strip()
    return out


@click.command("run")
@click.option("--workload", type=click.Choice(WORKLOADS), default="queue", show_default=True)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds of the main phase.",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Makes the op sequence reproducible (random when omitted; always written to test.json).",
)
@click.option(
    "--txn/--no-txn",
    default=False,
    show_default=True,
    help="queue: transactions of 1-4 micro-ops (copy is always transactional).",
)
@click.option("--idempotence/--no-idempotence", default=True, show_default=True)
@click.option(
    "--sub-via",
    type=click.Choice(["assign", "subscribe"]),
    default=None,
    help="queue: how consumers get partitions [default: assign].",
)
@click.option(
    "--abort-p",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Probability that a transaction is deliberately aborted.",
)
@click.option(
    "--crash-clients",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Crash a client every N ops (queue) or copier steps (copy); 0: never.",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0),
    default=None,
    help="Ops/s over all workers (queue; 0 unlimited) or input sends/s (copy).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (queue) or copiers (copy).",
)
@click.option(
    "--producer-config",
    "producer_config",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a librdkafka producer setting (repeatable).",
)
@click.option(
    "--consumer-config",
    "consumer_config",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a librdkafka consumer setting (repeatable).",
)
@click.option("--drain-timeout", type=click.FloatRange(min=1), default=60.0, show_default=True)
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option("--profile", type=click.Choice(["safe", "unsafe"]), default="safe", show_default=True)
@click.option("--store", type=click.Path(file_okay=False), default="./store", show_default=True)
@click.option(
    "--name",
    default=None,
    help="Test name (directory under the store) [default: the workload name].",
)
def run(
    workload: str,
    time_limit: float,
    seed: int | None,
    txn: bool,
    idempotence: bool,
    sub_via: str | None,
    abort_p: float,
    crash_clients: int,
    rate: float | None,
    concurrency: int | None,
    producer_config: tuple[str, ...],
    consumer_config: tuple[str, ...],
    drain_timeout: float,
    nodes: int,
    profile: str,
    store: str,
    name: str | None,
) -> int:
    """Run a workload against a fresh local cluster and check the history."""
    from ..clusters.local import LocalCluster
    from ..workloads.runner import execute

    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big")
    opts = workload_options(
        workload, txn, idempotence, sub_via, abort_p, crash_clients, rate, concurrency
    )
    opts["producer_config"] = parse_overrides(producer_config, "--producer-config")
    opts["consumer_config"] = parse_overrides(consumer_config, "--consumer-config")
    try:
        wl = make_workload(workload, opts, seed)
    except (ValueError, TypeError) as e:
        raise click.UsageError(str(e)) from e
    run_dir = create_run(store, name or workload)
    click.echo(f"run directory: {run_dir.path}", err=True)
    with LocalCluster(nodes=nodes, profile=profile) as cluster:
        click.echo(f"cluster up: {cluster.bootstrap_servers}", err=True)
        out = execute(
            cluster,
            wl,
            run_dir,
            seed,
            time_limit,
            drain_timeout,
            extra_meta={"test_name": name or workload},
        )
    res = out.results
    ops = sum(n for k, n in out.counts.items() if not k.endswith(":invoke"))
    click.echo(
        f"{ops} ops in {out.seconds:.1f}s; drain caught up: "
        f"{out.drain.get('caught_up')}{' (interrupted)' if out.interrupted else ''}"
    )
    for t, a in sorted(res.get("anomalies", {}).items()):
        bad = " (bad)" if t in res.get("bad_error_types", []) else ""
        click.echo(f"  {t}: {a.get('count')}{bad}")
    if out.interrupted:
        click.echo("  (interrupted before the drain: `unseen` values are not evidence of loss)")
    click.echo(f"valid: {res.get('valid')}  ->  {run_dir.results}")
    return EXIT_BY_VALID.get(res.get("valid"), 2)
