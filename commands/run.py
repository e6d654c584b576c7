"""`ktrial run`: one command from nothing to a verdict (see trial.py for the sequence)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from ..clusters.external import parse_hooks
from ..trial import Trial, TrialOutcome, TrialSpec, default_store
from ..workloads.options import workload_options
from .nemesis_flags import nemesis_options, options_from_kwargs


def _load_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--config run.toml: its keys become defaults, so command-line flags still win.

    Keys are the long option names with dashes or underscores (`time-limit = 60`,
    `nemesis = "kill,partition"`); tables are not needed.
    """
    if not value:
        return value
    try:
        data = tomllib.loads(Path(value).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise click.BadParameter(f"{value}: {e}", param_hint="--config") from None
    names = {p.name for p in ctx.command.params if p.name}
    defaults: dict[str, Any] = {}
    for k, v in data.items():
        name = k.replace("-", "_")
        if name == "nemesis":
            name = "nemesis_faults"
            v = ",".join(v) if isinstance(v, list) else v
        if name not in names:
            raise click.BadParameter(
                f"{value}: unknown key {k!r}; keys are option names such as "
                "time-limit, nodes, profile, workload, txn, nemesis",
                param_hint="--config",
            )
        if name in ("broker_config", "producer_config", "consumer_config") and isinstance(v, dict):
            v = [f"{a}={b}" for a, b in v.items()]
        defaults[name] = v
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def parse_overrides(values: tuple[str, ...], hint: str) -> dict[str, str]:
    """KEY=VALUE pairs -> dict (librdkafka and broker settings are strings)."""
    out: dict[str, str] = {}
    for item in values:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint=hint)
        out[k.strip()] = v.strip()
    return out


def _parse_value(v: str) -> Any:
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


@click.command("run")
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False),
    callback=_load_config,
    is_eager=True,
    expose_value=False,
    help="TOML file of option defaults (keys = option names); flags win.",
)
@click.option("--name", default=None, help="Test name (store sub-directory). [default: workload]")
@click.option(
    "--store",
    default=default_store,
    show_default="./store or $KTRIAL_STORE",
    type=click.Path(file_okay=False),
    help="Where run directories go.",
)
@click.option("--seed", type=int, default=None, help="Seed for ops and faults (random if unset).")
@click.option(
    "--time-limit",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds of the main phase (workload + nemesis).",
)
@click.option(
    "--cluster",
    "cluster_kind",
    type=click.Choice(["local", "docker", "external"]),
    default="local",
    show_default=True,
    help="Where brokers run: local (embedded, started by ktrial), docker (the same nodes as "
    "containers of a locally built image) or external (an existing cluster at --bootstrap; "
    "process faults through --hook commands).",
)
@click.option(
    "--bootstrap",
    default="",
    metavar="HOST:PORT,...",
    help="Bootstrap servers of an external cluster (with --cluster external).",
)
@click.option(
    "--hook",
    "hooks",
    multiple=True,
    metavar="ACTION=COMMAND",
    help="External cluster: shell command for kill/start/stop/pause/resume of one broker, "
    "with {name} {id} {host} {port} filled in; repeatable. "
    "E.g. --hook kill='ssh {host} sudo systemctl kill -s KILL kafka'.",
)
@click.option(
    "--keep-topics",
    is_flag=True,
    help="External cluster: keep the run's topics (default: deleted at teardown).",
)
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option(
    "--profile",
    type=click.Choice(["safe", "unsafe"]),
    default="safe",
    show_default=True,
    help="Broker configuration profile.",
)
@click.option("--kafka-version", default=None, help="Apache Kafka version (Maven Central).")
@click.option(
    "--broker-config",
    multiple=True,
    metavar="KEY=VALUE",
    help="Broker property override (repeatable).",
)
@click.option("--heap-mb", type=int, default=512, show_default=True, help="Broker JVM heap.")
@click.option("--no-netns", is_flag=True, help="Brokers on loopback (no partitions/loss faults).")
@click.option(
    "--keep-data",
    is_flag=True,
    help="Local cluster: copy each broker's data directory to RUN_DIR/data at teardown"
    " (inspect logs and transaction markers with kafka-dump-log).",
)
@click.option(
    "--workload",
    type=click.Choice(["queue", "copy", "txn-cost"]),
    default="queue",
    show_default=True,
)
@click.option("--txn/--no-txn", default=None, help="Transactions (queue). [default: on]")
@click.option(
    "--idempotence/--no-idempotence", default=None, help="Idempotent producers. [default: on]"
)
@click.option(
    "--acks",
    type=click.Choice(["all", "1", "0"]),
    default=None,
    help="Producer acks. [default: all]",
)
@click.option(
    "--sub-via",
    type=click.Choice(["assign", "subscribe"]),
    default=None,
    help="How consumers get partitions (queue). [default: assign]",
)
@click.option(
    "--abort-p",
    type=click.FloatRange(0, 1),
    default=None,
    help="Probability of deliberately aborting a transaction.",
)
@click.option(
    "--crash-clients", type=int, default=None, help="Crash a client every N ops (0: never)."
)
@click.option("--rate", type=float, default=None, help="Target ops/s (0: unlimited).")
@click.option("--concurrency", type=int, default=None, help="Client processes at once.")
@click.option(
    "--producer-config",
    multiple=True,
    metavar="KEY=VALUE",
    help="librdkafka producer property override (repeatable).",
)
@click.option(
    "--consumer-config",
    multiple=True,
    metavar="KEY=VALUE",
    help="librdkafka consumer property override (repeatable).",
)
@click.option(
    "--workload-opt",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any other workload option, e.g. n_keys=16 (see docs).",
)
@nemesis_options
@click.option(
    "--heal-wait",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds to wait after the final heal before the drain.",
)
@click.option(
    "--node-stats-interval",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds between samples of each broker's RSS and page cache, recorded as "
    "node-stats ops (the checker's memory-growth metric); 0 turns sampling off.",
)
@click.option(
    "--drain-timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Longest the drain may take.",
)
@click.option("--no-live", is_flag=True, help="No live progress view.")
def run(**kw: Any) -> None:
    """Run a workload against a fresh cluster under a nemesis, then check it.

    \b
    Sequence: start cluster -> workload + nemesis -> heal -> drain -> check
    -> report -> teardown (also on error and Ctrl-C). Exit code: 0 valid,
    1 invalid, 2 unknown, 254 usage error, 255 ktrial itself failed.

    \b
    Examples:
      ktrial run --time-limit 60 --nemesis partition,kill,pause,memory,toxic
      ktrial run --workload copy --nemesis kill --seed 7
      ktrial run --profile unsafe --no-idempotence --acks 1 --nemesis kill,partition
      ktrial run --config soak.toml --time-limit 3600
    """
    nem = options_from_kwargs(kw)
    workload = kw["workload"]
    wopts: dict[str, Any] = {
        k: _parse_value(v) for k, v in parse_overrides(kw["workload_opt"], "--workload-opt").items()
    }
    try:
        wopts.update(
            workload_options(
                workload,
                kw["txn"],
                kw["idempotence"],
                kw["sub_via"],
                kw["abort_p"],
                kw["crash_clients"],
                kw["rate"],
                kw["concurrency"],
            )
        )
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    producer = parse_overrides(kw["producer_config"], "--producer-config")
    if kw["acks"] is not None:
        producer["acks"] = kw["acks"]
    if producer:
        wopts["producer_config"] = {**wopts.get("producer_config", {}), **producer}
    consumer = parse_overrides(kw["consumer_config"], "--consumer-config")
    if consumer:
        wopts["consumer_config"] = {**wopts.get("consumer_config", {}), **consumer}
    try:
        hooks = parse_hooks(kw["hooks"])
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--hook") from None
    if kw["cluster_kind"] == "external" and not kw["bootstrap"].strip():
        raise click.UsageError("--cluster external needs --bootstrap HOST:PORT[,HOST:PORT...]")
    if kw["keep_data"] and kw["cluster_kind"] != "local":
        raise click.UsageError("--keep-data needs --cluster local")
    if kw["cluster_kind"] != "external" and (kw["bootstrap"] or hooks or kw["keep_topics"]):
        raise click.UsageError("--bootstrap, --hook and --keep-topics need --cluster external")
    spec = TrialSpec(
        name=kw["name"] or workload,
        store=kw["store"],
        seed=kw["seed"],
        time_limit=kw["time_limit"],
        cluster=kw["cluster_kind"],
        nodes=kw["nodes"],
        profile=kw["profile"],
        kafka_version=kw["kafka_version"],
        broker_config=parse_overrides(kw["broker_config"], "--broker-config"),
        heap_mb=kw["heap_mb"],
        netns=False if kw["no_netns"] else None,
        keep_data=kw["keep_data"],
        workload=workload,
        workload_opts=wopts,
        nemesis=nem,
        heal_wait=kw["heal_wait"],
        drain_timeout=kw["drain_timeout"],
        node_stats_interval=kw["node_stats_interval"],
        bootstrap=kw["bootstrap"],
        hooks=hooks,
        keep_topics=kw["keep_topics"],
        live=not kw["no_live"],
    )
    try:
        from ..workloads import make_workload

        make_workload(workload, dict(wopts), 0)  # validate options before starting brokers
    except (ValueError, TypeError) as e:
        raise click.UsageError(str(e)) from None

    outcome = Trial(spec, say=lambda m: click.echo(f"[ktrial] {m}", err=True)).execute()
    _summary(outcome)
    sys.exit(outcome.exit_code)


def _summary(outcome: TrialOutcome) -> None:
    res = outcome.results
    verdict = {True: "VALID", False: "INVALID", "unknown": "UNKNOWN"}.get(
        res.get("valid") if res else "unknown", "UNKNOWN"
    )
    colour = {"VALID": "green", "INVALID": "red"}.get(verdict, "yellow")
    if res:
        for t in res.get("bad_error_types", []):
            a = res["anomalies"].get(t, {})
            click.echo(f"  {t}: {a.get('count')}")
            ex = (a.get("examples") or [{}])[0]
            if ex.get("explanation"):
                click.echo(f"    e.g. {ex['explanation']}")
    if outcome.error:
        click.secho(f"harness error: {outcome.error}", fg="red", err=True)
    click.secho(f"verdict: {verdict}", fg=colour, bold=True)
    if outcome.report:
        click.echo(f"report: {outcome.report}")
    click.echo(f"run directory: {outcome.run_dir.path}")
