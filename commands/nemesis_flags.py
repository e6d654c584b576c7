"""The --nemesis* flags of `ktrial run` (not a command: the flags a command may add).

`nemesis_options` adds the flags to a click command; `options_from_kwargs` turns
their values into the nemesis's own NemesisOptions. Parsing and validation are
the nemesis's (nemesis/options.py); this module only names the flag a bad value
came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from ..nemesis.core import FAULT_NAMES
from ..nemesis.options import (
    NemesisOptionError,
    NemesisOptions,
    check_script,
    parse_faults,
    parse_params,
)

F = TypeVar("F", bound=Callable[..., Any])


def parse_faults_flag(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """--nemesis "kill,pause" -> ("kill", "pause"); a bad name is a usage error."""
    try:
        return parse_faults(text)
    except NemesisOptionError as e:
        raise click.BadParameter(str(e), param_hint="--nemesis") from None


def parse_params_flag(pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """--nemesis-param FAULT.PARAM=VALUE (repeated) -> {fault: {param: value}}."""
    try:
        return parse_params(pairs)
    except NemesisOptionError as e:
        raise click.BadParameter(str(e), param_hint="--nemesis-param") from None


def nemesis_options(f: F) -> F:
    """Decorator adding the --nemesis* options; read them with :func:`options_from_kwargs`."""
    opts = [
        click.option(
            "--nemesis",
            "nemesis_faults",
            default="",
            metavar="FAULTS",
            help="Comma-separated faults: " + ",".join(FAULT_NAMES) + " (or all).",
        ),
        click.option(
            "--nemesis-schedule",
            type=click.Choice(["interval", "stable", "script"]),
            default="interval",
            show_default=True,
            help="interval: one random fault at a time; stable: random mixes per "
            "period, some quiet; script: --nemesis-script file.",
        ),
        click.option(
            "--nemesis-interval",
            type=float,
            default=None,
            help="Seconds a fault is held, then as many quiet (interval schedule). "
            "[default: 10, shortened to no less than 5 so that every family asked for "
            "runs once within --time-limit]",
        ),
        click.option(
            "--nemesis-period",
            type=float,
            default=20.0,
            show_default=True,
            help="Length of a stable period (stable schedule).",
        ),
        click.option(
            "--nemesis-quiet",
            type=float,
            default=0.3,
            show_default=True,
            help="Probability that a stable period is quiet.",
        ),
        click.option(
            "--nemesis-script",
            type=click.Path(exists=True, dir_okay=False),
            default=None,
            help="TOML schedule: [[entry]] at, fault, targets, duration.",
        ),
        click.option(
            "--nemesis-param",
            multiple=True,
            metavar="FAULT.PARAM=VALUE",
            help="Fault parameter, e.g. memory.balloon_bytes=134217728, "
            "toxic.kind=latency, partition.shape=ring, loss.probability=0.3.",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def validate_flags(opts: NemesisOptions, nodes: Sequence[str] | None = None) -> None:
    """Every value the nemesis will use, checked before anything starts (with the node
    names when they are known); a bad one is a usage error naming its flag."""
    try:
        opts.validate(nodes)
    except NemesisOptionError as e:
        msg = str(e)
        if msg.startswith("--nemesis"):
            raise click.UsageError(msg) from None
        hint = "--nemesis-script" if opts.script and msg.startswith(opts.script) else None
        raise click.BadParameter(msg, param_hint=hint or "--nemesis-param") from None


def options_from_kwargs(kwargs: dict[str, Any], pop: bool = True) -> NemesisOptions:
    """Build NemesisOptions from the click kwargs added by :func:`nemesis_options`
    (validated without the cluster's node names: see :func:`validate_flags`)."""
    get = kwargs.pop if pop else kwargs.get
    faults = parse_faults_flag(get("nemesis_faults", ""))
    schedule = get("nemesis_schedule", "interval")
    script = get("nemesis_script", None)
    if schedule == "script" and not script:
        raise click.BadParameter(
            "--nemesis-schedule script needs --nemesis-script FILE", param_hint="--nemesis-script"
        )
    if script:
        schedule = "script"
        try:
            check_script(script)
        except NemesisOptionError as e:
            raise click.BadParameter(str(e), param_hint="--nemesis-script") from None
    interval = get("nemesis_interval", None)
    opts = NemesisOptions(
        faults=faults,
        schedule=schedule,
        interval=None if interval is None else float(interval),
        period=float(get("nemesis_period", 20.0)),
        quiet_p=float(get("nemesis_quiet", 0.3)),
        script=script,
        params=parse_params_flag(get("nemesis_param", ()) or ()),
    )
    validate_flags(opts)
    return opts
