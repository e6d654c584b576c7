"""`ktrial run`: one command from nothing to a verdict (see trial.py for the sequence)."""

from __future__ import annotations

import dataclasses
import os
import random
import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from ..checker.faults import summary as faults_summary
from ..clusters.external import parse_hooks
from ..clusters.install import DEFAULT_KAFKA_VERSION
from ..clusters.kafka_versions import (
    UnsupportedVersion,
    check_supported,
    check_transaction_version,
    line_of,
    supported_text,
)
from ..histories.redact import MASK, redact
from ..histories.testmeta import TestMeta
from ..nemesis.options import NemesisOptions
from ..trial import (
    Trial,
    TrialOutcome,
    TrialSpec,
    build_system,
    default_store,
    fault_plan_lines,
    planned_node_names,
    system_name,
)
from ..watch import DEFAULT_EVERY_S, MAX_SHARE
from ..workloads.options import workload_options
from .nemesis_flags import nemesis_options, options_from_kwargs, validate_flags
from .ssh_flags import ssh_options, ssh_settings
from .trace import TRACEABLE

# Options a repeated run (--from) does not take from the earlier one.
NOT_REPEATED = frozenset({"dry_run"})

# --soak: the defaults of a nightly soak job (docs/soak.md). Each is only a default:
# --config, --from and flags win over it.
SOAK_PRESET: dict[str, Any] = {
    "name": "soak",  # one store folder, so `ktrial runs --trend soak` compares nights
    "time_limit": 1800.0,
    "nemesis_faults": "partition,kill,pause,memory,toxic",
    "nemesis_schedule": "interval",
    "liveness_bad": True,
    "check_every": 60.0,
    "node_stats_interval": 5.0,
}


def _load_soak(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """--soak: the preset's values go *under* every other source of defaults (--config,
    --from), whichever of them click processes first."""
    if value:
        ctx.default_map = {**SOAK_PRESET, **(ctx.default_map or {})}
    return value


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
        if isinstance(v, dict) and name in (
            "broker_config",
            "producer_config",
            "consumer_config",
            "security_config",
        ):
            v = [f"{a}={b}" for a, b in v.items()]
        defaults[name] = v
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def _load_from(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--from RUN_DIR: the options that run resolved (test.json "cli_options", its seed
    included) become defaults, so flags given besides --from still win."""
    if not value:
        return value
    test_json = Path(value) / "test.json"
    try:
        meta = TestMeta.read(test_json) if test_json.is_file() else None
    except (OSError, ValueError) as e:
        raise click.BadParameter(f"{test_json}: {e}", param_hint="--from") from None
    if meta is None:
        raise click.BadParameter(
            f"{value}: no test.json here; give a run directory (`ktrial runs` lists them)",
            param_hint="--from",
        )
    if not meta.cli_options:
        raise click.BadParameter(
            f"{test_json} records no options (a run of an older ktrial, or not made by "
            "`ktrial run`): repeat it with its flags and --seed "
            f"{meta.seed if meta.seed is not None else 'N'}",
            param_hint="--from",
        )
    names = {p.name for p in ctx.command.params if p.name}
    defaults, masked = repeatable_options(meta.cli_options, names)
    if masked:
        click.echo(
            f"[ktrial] --from {value}: secrets were masked in test.json and are not "
            f"repeated; give them again: {', '.join(masked)}",
            err=True,
        )
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def repeatable_options(
    options: dict[str, Any], names: set[str]
) -> tuple[dict[str, Any], list[str]]:
    """The recorded options a new run takes as defaults, and the masked secrets left out
    (``--producer-config sasl.password``): "***" must never reach a client as a value."""
    out: dict[str, Any] = {}
    masked: list[str] = []
    for name, v in options.items():
        if name not in names or name in NOT_REPEATED or name == "from_run":
            continue
        if isinstance(v, list):
            kept = [x for x in v if not (isinstance(x, str) and x.endswith("=" + MASK))]
            masked += [f"--{name.replace('_', '-')} {x.split('=')[0]}" for x in v if x not in kept]
            v = kept
        elif v == MASK:
            masked.append(f"--{name.replace('_', '-')}")
            continue
        out[name] = v
    return out, masked


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


def _driver_mix(text: str, workload: str, driver: str | None) -> list[str]:
    """--driver-mix's list, checked: the queue only, not with --driver, known drivers."""
    from ..workloads.queue import DRIVERS

    if workload != "queue":
        raise click.UsageError("--driver-mix runs the queue workload only")
    if driver is not None:
        raise click.UsageError("give --driver or --driver-mix, not both")
    mix = [d.strip() for d in text.split(",") if d.strip()]
    bad = [d for d in mix if d not in DRIVERS]
    if not mix or bad:
        raise click.BadParameter(
            f"{text!r}: a comma-separated list of {', '.join(DRIVERS)}",
            param_hint="--driver-mix",
        )
    return mix


@click.command("run")
@click.option(
    "--from",
    "from_run",
    type=click.Path(exists=True, file_okay=False),
    callback=_load_from,
    is_eager=True,
    expose_value=False,
    metavar="RUN_DIR",
    help="Repeat the run in RUN_DIR: its options and seed (from its test.json) become "
    "the defaults; flags given besides --from win.",
)
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False),
    callback=_load_config,
    is_eager=True,
    expose_value=False,
    help="TOML file of option defaults (keys = option names); flags win.",
)
@click.option(
    "--soak",
    is_flag=True,
    callback=_load_soak,
    is_eager=True,
    help="Defaults of a nightly soak job: --name soak, --time-limit 1800, every fault "
    "family of the main job (partition,kill,pause,memory,toxic), --liveness-bad, a running "
    "check every 60 s, node-stats every 5 s. --config, --from and flags win (docs/soak.md).",
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
    type=click.Choice(["local", "docker", "external", "kfake", "ssh"]),
    default="local",
    show_default=True,
    help="Where brokers run: local (embedded, started by ktrial), docker (the same nodes as "
    "containers of a locally built image), external (an existing cluster at --bootstrap; "
    "process faults through --hook commands) or kfake (franz-go's in-memory Kafka, one "
    "process for every node, with the control fault family) or ssh (one broker on each "
    "--node host, installed and faulted over SSH).",
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
@click.option(
    "--security-config",
    multiple=True,
    metavar="KEY=VALUE",
    help="TLS / SASL setting of every client (producers, consumers, admin, drivers), e.g. "
    "security.protocol=SASL_SSL, sasl.mechanism=SCRAM-SHA-512, sasl.username=U, "
    "ssl.ca.location=ca.pem; repeatable, wins over --security-config-file. Put passwords "
    "in the file rather than on the command line (docs/security.md).",
)
@click.option(
    "--security-config-file",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="PATH",
    help="Java-style client .properties file with the security settings (security.protocol, "
    "sasl.mechanism, sasl.username, sasl.password or sasl.jaas.config, ssl.ca.location, ...).",
)
@click.option(
    "--broker-security",
    type=click.Choice(["sasl-plain", "ssl", "sasl-ssl"]),
    default=None,
    help="Local cluster: secure the brokers' client listener with SASL/PLAIN (the login of "
    "--security-config-file, or a generated one), TLS (a throwaway CA), or both.",
)
@click.option(
    "--topic-prefix",
    default=None,
    metavar="PREFIX",
    help="Topic names start with PREFIX instead of ktrial-<run id> (queue: PREFIX-q-0 ...; "
    "copy: PREFIX-in, PREFIX-out; txn-cost: PREFIX-txncost).",
)
@click.option(
    "--use-existing-topics",
    is_flag=True,
    help="The topics were made beforehand (with --topic-prefix): check that they exist with "
    "enough partitions and empty them (DeleteRecords) instead of creating any.",
)
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option(
    "--profile",
    type=click.Choice(["safe", "unsafe"]),
    default="safe",
    show_default=True,
    help="Broker configuration profile.",
)
@click.option(
    "--system",
    "system",
    type=click.Choice(["kafka", "kfake"]),
    default="kafka",
    show_default=True,
    help="What runs on the nodes ktrial starts: kafka (Apache Kafka) or kfake (franz-go's "
    "in-memory Kafka, one process for every node, local backend only; --cluster kfake is "
    "the same). docs/systems.md.",
)
@click.option(
    "--system-spec",
    "system_spec",
    default=None,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="A system described by a node spec (TOML: ports, readiness, client profile, ...). "
    "With --cluster docker: any broker image (image, per-node environment, start command; "
    "systems/specs/ has examples, docs/systems.md). With --cluster ssh: a system already "
    "installed on the --node hosts, driven as found through the spec's [installed] table "
    "(start/stop commands or a systemd unit, pid, memory cgroup, logs; docs/clusters.md).",
)
@click.option(
    "--kafka-version",
    default=None,
    help=f"Apache Kafka version, fetched from Maven Central on first use; supported: "
    f"{supported_text()}. [default: {DEFAULT_KAFKA_VERSION}]",
)
@click.option(
    "--transaction-version",
    type=click.Choice(["1", "2"]),
    default=None,
    help="Kafka 4.0+: the transaction protocol the brokers are formatted with "
    "(transaction.version feature): 1 = classic transactions, as most clusters run; "
    "2 = KIP-890 transactions v2. [default: the version's own, 2 on 4.x]",
)
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
    "--driver",
    type=click.Choice(["confluent", "franz", "java"]),
    default=None,
    help="Kafka client: confluent (librdkafka), franz (franz-go worker) or java"
    " (kafka-clients worker); every workload runs on each (docs/drivers.md)."
    " [default: confluent]",
)
@click.option(
    "--driver-mix",
    default=None,
    metavar="D1,D2,...",
    help="Several clients in one queue run: worker slot s uses the s-th driver of the"
    " list, round-robin (e.g. confluent,java,franz); one client's transactions are read"
    " by another's consumers. Recorded per process in test.json.",
)
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
@ssh_options
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
    "node-stats ops (the checker's memory-growth metric); 0 turns sampling off. "
    "With --load and this left at 5, every second (the heap still every 5 s).",
)
@click.option(
    "--drain-timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Longest the drain may take.",
)
@click.option(
    "--check-every",
    type=click.FloatRange(min=0),
    default=DEFAULT_EVERY_S,
    show_default=True,
    metavar="SECONDS",
    help="While the run goes, check the history so far for safety anomalies every SECONDS "
    "(niced, in a child process; the interval grows so that checking takes at most "
    f"{MAX_SHARE:.0%} of the time) and show each one at once. Only anomalies a partial "
    "history decides are watched (duplicates, inconsistent offsets, aborted reads, "
    "order, G1c cycles; not lost or unseen writes). 0: only the final check.",
)
@click.option(
    "--stop-on-anomaly",
    is_flag=True,
    help="End the main phase at the first anomaly a running check finds: faults are "
    "healed, every key drained and the history checked as usual (the final check gives "
    "the verdict), so a long soak that breaks early does not run on.",
)
@click.option(
    "--liveness-bad/--no-liveness-bad",
    default=False,
    help="Liveness violations (starvation, stuck keys, slow recovery, memory growth; "
    "those no fault excuses) make the run invalid, exit 1: what a soak job gates on. "
    "Recorded in test.json, so `ktrial check RUN` judges the same way.  [default: off; "
    "on with --soak]",
)
@click.option(
    "--load",
    "load_rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="RATE",
    help="Background load beside the checked workload: ktrial-loadgen (franz-go) offering "
    "RATE messages/s, open loop, on its own topic, with consumers in a group; telemetry "
    "in load.jsonl, a plot in the report, and the liveness check `behind` (docs/load.md).",
)
@click.option(
    "--load-opt",
    "load_opt",
    multiple=True,
    metavar="KEY=VALUE",
    help="A load setting (repeatable): producers, consumers, partitions, replication, size, "
    "batch, acks, idempotent, compression, linger_ms, topic (docs/load.md).",
)
@click.option("--no-live", is_flag=True, help="No live progress view.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Resolve every option, print the plan (cluster, workload, the seeded fault "
    "schedule with times and targets) and exit 0; start nothing, write nothing.",
)
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
      ktrial run --time-limit 43200 --check-every 120 --stop-on-anomaly
      ktrial run --soak --time-limit 3600 --stop-on-anomaly
      ktrial run --nemesis partition,kill --dry-run
      ktrial run --from store/queue/latest --time-limit 120
    """
    resolved = {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}
    dry_run = kw.pop("dry_run")
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
                kw["driver"],
            )
        )
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if kw["driver_mix"]:
        wopts["driver_mix"] = _driver_mix(kw["driver_mix"], workload, kw["driver"])
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
    security = _security(kw)
    if kw["topic_prefix"]:
        wopts["topic_prefix"] = kw["topic_prefix"]
    _system_profile(kw, wopts)
    if kw["cluster_kind"] == "external" and not kw["bootstrap"].strip():
        raise click.UsageError("--cluster external needs --bootstrap HOST:PORT[,HOST:PORT...]")
    if kw["keep_data"] and kw["cluster_kind"] != "local":
        raise click.UsageError("--keep-data needs --cluster local")
    if kw["cluster_kind"] != "external" and (kw["bootstrap"] or hooks or kw["keep_topics"]):
        raise click.UsageError("--bootstrap, --hook and --keep-topics need --cluster external")
    if kw["stop_on_anomaly"] and kw["check_every"] <= 0:
        raise click.UsageError("--stop-on-anomaly needs running checks: --check-every > 0")
    load = _load(kw, security)
    ssh_nodes, ssh, n_hosts = ssh_settings(kw)
    if n_hosts:
        kw["nodes"] = n_hosts  # one node per host
    spec = TrialSpec(
        name=kw["name"] or workload,
        store=kw["store"],
        seed=kw["seed"],
        time_limit=kw["time_limit"],
        cluster=kw["cluster_kind"],
        nodes=kw["nodes"],
        profile=kw["profile"],
        kafka_version=kw["kafka_version"],
        transaction_version=_transaction_version(kw),
        system=kw["system"],
        system_spec=kw["system_spec"] or "",
        broker_config=parse_overrides(kw["broker_config"], "--broker-config"),
        heap_mb=kw["heap_mb"],
        netns=False if kw["no_netns"] else None,
        keep_data=kw["keep_data"],
        workload=workload,
        workload_opts=wopts,
        nemesis=nem,
        heal_wait=kw["heal_wait"],
        drain_timeout=kw["drain_timeout"],
        node_stats_interval=1.0
        if load is not None and kw["node_stats_interval"] == 5.0
        else kw["node_stats_interval"],
        bootstrap=kw["bootstrap"],
        hooks=hooks,
        keep_topics=kw["keep_topics"],
        security=security,
        broker_security=kw["broker_security"] or "",
        use_existing_topics=kw["use_existing_topics"],
        ssh_nodes=ssh_nodes,
        ssh=ssh,
        live=not kw["no_live"],
        check_every=kw["check_every"],
        stop_on_anomaly=kw["stop_on_anomaly"],
        liveness_bad=kw["liveness_bad"],
        soak=kw["soak"],
        load=load,
        argv=tuple(_argv()),
        cli_options={k: v for k, v in resolved.items() if k not in NOT_REPEATED},
    )
    try:
        from ..workloads import make_workload

        # validate options before starting brokers
        wl = make_workload(workload, dict(wopts), spec.seed or 0)
    except (ValueError, TypeError) as e:
        raise click.UsageError(str(e)) from None
    check_faults_fit(spec, nem)

    if dry_run:
        seed = spec.seed if spec.seed is not None else random.SystemRandom().randrange(2**31)
        for line in plan_lines(spec, seed, getattr(wl, "opts", None)):
            click.echo(line)
        sys.exit(0)
    outcome = Trial(spec, say=lambda m: click.echo(f"[ktrial] {m}", err=True)).execute()
    _summary(outcome)
    sys.exit(outcome.exit_code)


def _load(kw: dict[str, Any], security: dict[str, str]) -> Any:
    """--load RATE and --load-opt KEY=VALUE as LoadOptions (None without --load)."""
    from ..load.generator import LoadOptions, loadgen_program

    pairs = parse_overrides(kw["load_opt"], "--load-opt")
    if kw["load_rate"] is None:
        if pairs:
            raise click.UsageError("--load-opt needs --load RATE")
        return None
    if security:
        raise click.UsageError("--load does not speak TLS or SASL yet (docs/load.md)")
    try:
        opts = LoadOptions.parse(kw["load_rate"], pairs)
        loadgen_program()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--load / --load-opt") from None
    return opts


def _security(kw: dict[str, Any]) -> dict[str, str]:
    """--security-config / --security-config-file as canonical settings (clusters/security.py),
    --broker-security and --use-existing-topics checked against the rest; usage errors."""
    from ..clusters.security import SecurityError, load

    try:
        sec = load(kw["security_config"], kw["security_config_file"])
    except SecurityError as e:
        hint = "--security-config-file" if kw["security_config_file"] else "--security-config"
        raise click.BadParameter(str(e), param_hint=hint) from None
    if kw["broker_security"] and kw["cluster_kind"] != "local":
        raise click.UsageError(
            "--broker-security sets up the brokers ktrial starts with --cluster local; for "
            "another cluster give its settings with --security-config(-file)"
        )
    if kw["broker_security"]:
        from ..clusters.brokersec import plan

        try:  # the same checks the run makes, before anything starts (no files yet)
            files = {"ca": "ca.pem", "keystore": "broker.pem"}
            plan(kw["broker_security"], sec, files)
        except SecurityError as e:
            raise click.BadParameter(str(e), param_hint="--broker-security") from None
    elif sec and kw["cluster_kind"] in ("local", "docker", "kfake"):
        raise click.UsageError(
            f"--security-config: the {kw['cluster_kind']} cluster ktrial starts serves "
            "PLAINTEXT; add --broker-security (local) or use --cluster external"
        )
    if kw["use_existing_topics"] and not kw["topic_prefix"]:
        raise click.UsageError(
            "--use-existing-topics needs --topic-prefix: the names of the topics made beforehand"
        )
    return dict(sec.settings)


def _system_profile(kw: dict[str, Any], wopts: dict[str, Any]) -> None:
    """Check --system/--system-spec against --cluster, and start the clients from the
    node spec's client profile (--producer-config/--consumer-config win)."""
    cluster, system, spec_file = kw["cluster_kind"], kw["system"], kw["system_spec"]
    if system == "kfake" and cluster not in ("local", "kfake"):
        raise click.UsageError(
            f"--system kfake runs on the local backend (one process for every node), "
            f"not --cluster {cluster}"
        )
    if not spec_file:
        return
    if cluster not in ("docker", "ssh"):
        raise click.UsageError(
            f"--system-spec describes a container image: it needs --cluster docker (or, "
            f"with an [installed] table, a system installed on --cluster ssh hosts), not "
            f"--cluster {cluster}"
        )
    if system != "kafka":
        raise click.UsageError("--system-spec and --system kfake exclude each other")
    from ..clusters.nodespec import SpecError, load_spec

    try:
        node_spec = load_spec(spec_file)
        if cluster == "ssh":
            _installed_fits(kw, node_spec)
        elif not node_spec.image:
            raise SpecError(
                f"node spec {node_spec.path} describes a system installed on hosts (an "
                "[installed] table, no image): run it with --cluster ssh --node ..."
            )
    except SpecError as e:
        raise click.BadParameter(str(e), param_hint="--system-spec") from None
    profile = node_spec.profile
    for key, settings in (
        ("producer_config", profile.producer),
        ("consumer_config", profile.consumer),
    ):
        if settings:
            wopts[key] = {**settings, **wopts.get(key, {})}


def _installed_fits(kw: dict[str, Any], node_spec: Any) -> None:
    """--cluster ssh --system-spec: the spec has an [installed] table with one broker id
    per --node host, and no flag asks to configure brokers ktrial does not start."""
    from ..clusters.installed import check_hosts, load_installed
    from ..clusters.sshconn import parse_hosts

    load_installed(node_spec.path)  # SpecError without [installed]
    try:
        n_hosts = len(parse_hosts(kw.get("ssh_nodes") or ""))
    except ValueError:
        n_hosts = 0  # --node's own check says what is wrong
    if n_hosts:
        check_hosts(node_spec, n_hosts)
    given = [
        flag
        for flag, on in (
            ("--profile", kw.get("profile", "safe") != "safe"),
            ("--broker-config", bool(kw.get("broker_config"))),
            ("--heap-mb", kw.get("heap_mb", 512) != 512),
        )
        if on
    ]
    if given:
        raise click.UsageError(
            f"{', '.join(given)} {'configures' if len(given) == 1 else 'configure'} the "
            "brokers ktrial starts; an installed system "
            f"(--system-spec {node_spec.path}) runs as its admin configured it"
        )


def _transaction_version(kw: dict[str, Any]) -> int | None:
    """--transaction-version, refused (usage error) on a Kafka that cannot take it, on an
    external cluster, and --kafka-version refused when it is not a supported one."""
    wanted = None if kw["transaction_version"] is None else int(kw["transaction_version"])
    not_kafka = kw["system"] != "kafka" or kw["system_spec"]
    if not_kafka and (wanted is not None or kw["kafka_version"] is not None):
        raise click.UsageError(
            "--kafka-version and --transaction-version choose the Apache Kafka ktrial "
            "starts; they do not apply to --system kfake or --system-spec"
        )
    if kw["cluster_kind"] not in ("local", "docker", "ssh") or not_kafka:
        if wanted is not None:
            raise click.UsageError(
                "--transaction-version formats the Apache Kafka brokers ktrial starts "
                "(--cluster local or docker); an external cluster runs whatever its owner "
                "formatted it with"
            )
        return None
    version = kw["kafka_version"]
    try:
        if version is not None:
            row = check_supported(version)
        elif wanted is not None and not os.environ.get("KAFKA_HOME"):
            version, row = DEFAULT_KAFKA_VERSION, check_supported(DEFAULT_KAFKA_VERSION)
        else:
            return wanted  # KAFKA_HOME's version is known once installed (checked there)
        check_transaction_version(row, version, wanted)
    except UnsupportedVersion as e:
        hint = "--kafka-version" if line_of(version) is None else "--transaction-version"
        raise click.BadParameter(str(e), param_hint=hint) from None
    return wanted


def _argv() -> list[str]:
    """The command line as typed (cli.main passes it), [] when unknown."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    argv = obj.get("argv") if isinstance(obj, dict) else None
    return [str(a) for a in argv] if isinstance(argv, list) else []


def check_faults_fit(spec: TrialSpec, nem: NemesisOptions) -> None:
    """Refuse, before anything starts, faults this cluster cannot take: targets and
    partition shapes against its node names, network faults without namespaces, and
    on an external cluster the families its hooks do not cover."""
    from ..nemesis.composite import refusals

    validate_flags(nem, planned_node_names(spec))
    families = nem.all_faults()
    refused: dict[str, str] = {}
    if spec.cluster == "external":
        from ..clusters.external import ExternalCluster

        try:
            limits = ExternalCluster(spec.bootstrap, spec.hooks).unsupported_faults()
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--hook") from None
        refused = {f: why for f, why in limits.items() if f in families}
        refused.update(refusals(families, limits))
    system = None
    if spec.cluster == "ssh" and spec.system_spec:
        from ..clusters.installed import load_installed

        try:
            limits = load_installed(spec.system_spec).fault_limits()
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--system-spec") from None
        refused = {f: why for f, why in limits.items() if f in families}
        refused.update(refusals(families, limits))
    if spec.cluster in ("local", "docker", "kfake"):
        try:
            system = build_system(spec)
        except ValueError as e:
            hint = "--system-spec" if spec.system_spec else "--system"
            raise click.BadParameter(str(e), param_hint=hint) from None
        shared: dict[str, str] = {}
        if spec.netns is False or system.one_process:
            from ..clusters.base import SHARED_ADDRESS

            shared = {f: SHARED_ADDRESS for f in ("partition", "loss")}
            refused = {f: why for f, why in shared.items() if f in families}
        limits = system.fault_limits()
        refused.update({f: why for f, why in limits.items() if f in families})
        # a composite is refused where a family it uses is, and on one-process systems
        refused.update(refusals(families, {**shared, **limits}, one_process=system.one_process))
    if "control" in families and not (system is not None and system.has_control):
        from ..nemesis.control import NO_CONTROL

        refused["control"] = NO_CONTROL
    if refused:
        raise click.BadParameter(
            "; ".join(f"{f}: {why}" for f, why in refused.items()), param_hint="--nemesis"
        )


def plan_lines(spec: TrialSpec, seed: int, workload_opts: Any) -> list[str]:
    """`ktrial run --dry-run`: everything the run would do, as far as it is known before
    the cluster exists."""
    names = planned_node_names(spec)
    if spec.cluster == "external":
        cluster = f"external at {spec.bootstrap} (nodes discovered when it starts)"
        hooks = ", ".join(sorted(spec.hooks)) or "none"
        cluster += f"; hooks: {hooks}"
    elif system_name(spec) == "kfake":
        cluster = f"kfake (franz-go), {spec.nodes} nodes ({', '.join(names or [])}) in one process"
    elif spec.system_spec and spec.cluster == "ssh":
        cluster = (
            f"ssh, {spec.nodes} nodes ({', '.join(names or [])}) on hosts {spec.ssh_nodes} over "
            f"SSH as {spec.ssh.get('user', 'root')}: the system installed there, driven as "
            f"node spec {spec.system_spec} says (nothing uploaded; left running as found)"
        )
    elif spec.system_spec:
        cluster = (
            f"{spec.cluster}, {spec.nodes} nodes ({', '.join(names or [])}), "
            f"the system of node spec {spec.system_spec}"
        )
    else:
        from ..clusters.install import DEFAULT_KAFKA_VERSION

        cluster = (
            f"{spec.cluster}, {spec.nodes} nodes ({', '.join(names or [])}), "
            f"{spec.profile} profile, Kafka {spec.kafka_version or DEFAULT_KAFKA_VERSION}, "
            f"heap {spec.heap_mb} MB"
        )
        if spec.transaction_version is not None:
            cluster += f", transaction.version={spec.transaction_version}"
        if spec.broker_config:
            cluster += f", broker config {redact(spec.broker_config)}"
        if spec.netns is False:
            cluster += ", no network namespaces"
        if spec.cluster == "ssh":
            cluster += f"; on hosts {spec.ssh_nodes} over SSH as {spec.ssh.get('user', 'root')}"
    if dataclasses.is_dataclass(workload_opts) and not isinstance(workload_opts, type):
        wopts = redact(dataclasses.asdict(workload_opts))
    else:
        wopts = redact(spec.workload_opts)
    nem = spec.nemesis or NemesisOptions()
    fault_lines = fault_plan_lines(spec, seed, nem) or ["faults: none"]
    return [
        "plan (--dry-run: nothing started, nothing written)",
        f"  seed: {seed}" + ("" if spec.seed is not None else f" (random: --seed {seed} runs it)"),
        f"  cluster: {cluster}",
        f"  workload: {spec.workload}: " + ", ".join(f"{k}={v}" for k, v in sorted(wopts.items())),
        f"  time: {spec.time_limit:g} s of workload and faults, then a {spec.heal_wait:g} s "
        f"quiet wait and a drain of up to {spec.drain_timeout:g} s",
        *_security_lines(spec),
        *(
            ["  load: " + ", ".join(f"{k}={v}" for k, v in spec.load.to_json().items())]
            if spec.load is not None
            else []
        ),
        f"  store: {Path(spec.store) / spec.name}/<new run directory>",
        f"  checks: {_checks_line(spec)}",
        *(f"  {line}" for line in fault_lines),
    ]


def _security_lines(spec: TrialSpec) -> list[str]:
    """--dry-run's lines on TLS / SASL and pre-made topics (secrets as "***")."""
    from ..clusters.security import Security

    out = []
    sec = Security(dict(spec.security))
    if spec.broker_security:
        out.append(f"  brokers: client listener secured ({spec.broker_security})")
    if sec:
        out.append("  client security: " + ", ".join(f"{k}={v}" for k, v in sec.describe().items()))
    if spec.use_existing_topics:
        out.append("  topics: made beforehand (checked, emptied before the run, kept)")
    return out


def _checks_line(spec: TrialSpec) -> str:
    running = (
        f"safety every {spec.check_every:g} s while running"
        + (", stopping at the first anomaly" if spec.stop_on_anomaly else "")
        if spec.check_every > 0
        else "no running checks"
    )
    judged = (
        "liveness violations make the run invalid (--liveness-bad)"
        if spec.liveness_bad
        else "liveness reported, not judged"
    )
    return f"{running}; final check after the drain; {judged}" + (" (--soak)" if spec.soak else "")


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
        if TRACEABLE & set(res.get("bad_error_types", [])):
            click.echo(f"  into the brokers' logs: ktrial trace {outcome.run_dir.path}")
    faults = res.get("faults") if res else None
    if isinstance(faults, dict):
        click.echo(f"faults: {faults_summary(faults)}")
    for warning in (res or {}).get("warnings", []):
        click.secho(f"warning: {warning}", fg="yellow")
    if outcome.error:
        click.secho(f"harness error: {outcome.error}", fg="red", err=True)
    why = ""
    if isinstance(faults, dict) and faults.get("verdict"):
        why = f" ({faults['verdict'].split(': ', 1)[-1]})"
    click.secho(f"verdict: {verdict}{why}", fg=colour, bold=True)
    if outcome.report:
        click.echo(f"report: {outcome.report}")
    click.echo(f"run directory: {outcome.run_dir.path}")
