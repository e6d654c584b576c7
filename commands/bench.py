"""`ktrial bench`: measurements of a cluster rather than checks (docs/load.md).

`ktrial bench load` sweeps offered rates and partition counts with the load generator
(workers/loadgen) and finds the knee: the most the cluster sustains without falling
behind.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from ..load.generator import LoadOptions, loadgen_program
from .run import parse_overrides


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(
            f"want comma-separated numbers, got {text!r}", param_hint=what
        ) from None
    if not out:
        raise click.BadParameter("want at least one number", param_hint=what)
    return out


@click.group()
def bench() -> None:
    """Measure a cluster: latency under load (`ktrial bench load`)."""


@bench.command("load")
@click.option(
    "--rates",
    default="5000,10000,20000,40000",
    show_default=True,
    help="Offered rates to sweep, messages/s, comma separated (each partition count climbs "
    "them in order and stops at the first point behind).",
)
@click.option(
    "--partitions",
    default="6",
    show_default=True,
    help="Partition counts to sweep, comma separated.",
)
@click.option("--point-seconds", type=click.FloatRange(min=1), default=60.0, show_default=True)
@click.option(
    "--measure-seconds",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="The figures of a point are those of its last SECONDS (the benchmark's method).",
)
@click.option(
    "--load-opt",
    multiple=True,
    metavar="KEY=VALUE",
    help="A load setting for every point (docs/load.md): producers, consumers, size, "
    "batch, batch_bytes, acks, idempotent, compression, linger_ms, replication, topic.",
)
@click.option(
    "--cluster",
    "cluster_kind",
    type=click.Choice(["local", "docker", "external"]),
    default="local",
    show_default=True,
)
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option("--bootstrap", default="", help="--cluster external: HOST:PORT[,HOST:PORT...].")
@click.option("--heap-mb", type=int, default=512, show_default=True)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Output directory. [default: store/bench-load/<time>]",
)
def load_cmd(
    rates: str,
    partitions: str,
    point_seconds: float,
    measure_seconds: float,
    load_opt: tuple[str, ...],
    cluster_kind: str,
    nodes: int,
    bootstrap: str,
    heap_mb: int,
    out: Path | None,
) -> None:
    """Sweep offered rates x partition counts; print and plot the table; find the knee.

    \b
    Each point: a fresh topic, the load for --point-seconds, figures over the last
    --measure-seconds: offered, consumed, e2e p50/p99, produce p99, the brokers' CPU
    (cores; local clusters) and the generator's, and whether it was behind (consumed
    under 97% of offered, or e2e p99 over 5 s). The numbers are this machine's.

    \b
    Example:
      ktrial bench load --rates 2000,8000,32000 --partitions 3,12 --point-seconds 40
    """
    from ..load.sweep import SweepPlan, plot_sweep, sweep, write_results

    try:
        base = LoadOptions.parse(1.0, parse_overrides(load_opt, "--load-opt"))
        plan = SweepPlan(
            rates=_floats(rates, "--rates"),
            partitions=tuple(int(p) for p in _floats(partitions, "--partitions")),
            point_s=point_seconds,
            measure_s=measure_seconds,
            base=base,
        )
        loadgen_program()
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if cluster_kind == "external" and not bootstrap.strip():
        raise click.UsageError("--cluster external needs --bootstrap HOST:PORT[,...]")
    out_dir = out or Path("store") / "bench-load" / time.strftime("%Y%m%dT%H%M%S")
    cluster = _cluster(cluster_kind, nodes, bootstrap, heap_mb)
    say = click.echo
    say(f"bench load: {len(plan.points())} points; output {out_dir}", err=True)
    try:
        if cluster_kind != "external":
            say(f"starting {nodes} nodes ({cluster_kind})...", err=True)
        cluster.start(wait=True)
        points, ks = sweep(cluster, plan, out_dir, say=lambda m: say(m, err=True))
    except KeyboardInterrupt:
        raise click.ClickException(
            f"interrupted; the points done so far are in {out_dir}"
        ) from None
    finally:
        cluster.teardown()
    write_results(out_dir, plan, points)
    png = plot_sweep(points, ks, out_dir / "sweep.png")
    click.echo((out_dir / "table.txt").read_text(), nl=False)
    if png is not None:
        say(f"plot: {png}", err=True)


def _cluster(kind: str, nodes: int, bootstrap: str, heap_mb: int) -> Any:
    if kind == "external":
        from ..clusters.external import ExternalCluster

        return ExternalCluster(bootstrap, {}, keep_topics=False)
    if kind == "docker":
        from ..clusters.docker import DockerCluster

        return DockerCluster(nodes=nodes, heap_mb=heap_mb)
    from ..clusters.local import LocalCluster

    return LocalCluster(nodes=nodes, heap_mb=heap_mb)
