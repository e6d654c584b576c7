"""Command-line options of the nemesis, for `ktrial run` (and anything else)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import click

from .core import FAULT_NAMES, check_params
from .schedule import Schedule, load_script, make_schedule

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class NemesisOptions:
    faults: tuple[str, ...] = ()
    schedule: str = "interval"
    interval: float = 10.0
    period: float = 20.0
    quiet_p: float = 0.3
    script: str | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def needs_toxiproxy(self) -> bool:
        """Whether the cluster must start with Toxiproxy in front (plan_proxies)."""
        if "toxic" in self.faults:
            return True
        if self.schedule == "script" and self.script:
            return any(e.fault == "toxic" for e in load_script(self.script))
        return False

    def all_faults(self) -> list[str]:
        """Families the run may use (the scripted ones included)."""
        if self.schedule == "script" and self.script:
            return sorted({e.fault for e in load_script(self.script)})
        return list(self.faults)

    def make_schedule(self) -> Schedule:
        return make_schedule(
            self.schedule, self.faults, self.interval, self.period, self.quiet_p, script=self.script
        )

    def to_json(self) -> dict[str, Any]:
        """For test.json."""
        return asdict(self)


def parse_faults(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """ "kill,pause,partition" -> ("kill", "pause", "partition"); "none"/"" -> ()."""
    if text is None:
        return ()
    items = text.split(",") if isinstance(text, str) else [x for t in text for x in t.split(",")]
    names = tuple(dict.fromkeys(i.strip() for i in items if i.strip() and i.strip() != "none"))
    if "all" in names:
        names = tuple(n for n in FAULT_NAMES if n != "restart")
    bad = [n for n in names if n not in FAULT_NAMES]
    if bad:
        raise click.BadParameter(
            f"unknown fault(s) {bad}; choose among {', '.join(FAULT_NAMES)} (or all, none)",
            param_hint="--nemesis",
        )
    return names


def parse_params(pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """["memory.balloon_bytes=134217728", "toxic.kind=latency"] -> nested dict.
    Values are parsed as JSON when they can be (numbers, true, lists), else kept as text."""
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        fault, dot, name = key.partition(".")
        if not sep or not dot:
            raise click.BadParameter(
                f"{pair!r}: expected FAULT.PARAM=VALUE", param_hint="--nemesis-param"
            )
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        out.setdefault(fault.strip(), {})[name.strip()] = value
    for fault, params in out.items():
        try:
            check_params(fault, params)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--nemesis-param") from None
    return out


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
            default=10.0,
            show_default=True,
            help="Seconds a fault is held, then as many quiet (interval schedule).",
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


def options_from_kwargs(kwargs: dict[str, Any], pop: bool = True) -> NemesisOptions:
    """Build NemesisOptions from the click kwargs added by :func:`nemesis_options`."""
    get = kwargs.pop if pop else kwargs.get
    faults = parse_faults(get("nemesis_faults", ""))
    schedule = get("nemesis_schedule", "interval")
    script = get("nemesis_script", None)
    if schedule == "script" and not script:
        raise click.BadParameter(
            "--nemesis-schedule script needs --nemesis-script FILE", param_hint="--nemesis-script"
        )
    if script:
        schedule = "script"
        try:
            load_script(script)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--nemesis-script") from None
    return NemesisOptions(
        faults=faults,
        schedule=schedule,
        interval=float(get("nemesis_interval", 10.0)),
        period=float(get("nemesis_period", 20.0)),
        quiet_p=float(get("nemesis_quiet", 0.3)),
        script=script,
        params=parse_params(get("nemesis_param", ()) or ()),
    )
