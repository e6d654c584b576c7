"""What a run asks of the nemesis (NemesisOptions), and the parsing and validation of it.

Pure: bad input raises :class:`NemesisOptionError` (a ValueError) that says what is
wrong; the command line (commands/nemesis_flags.py) turns it into a usage error
naming the flag.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .core import COMPOSITE_NAMES, FAULT_NAMES, check_params
from .schedule import (
    Schedule,
    ScriptEntry,
    check_entries,
    load_script,
    make_schedule,
)

# The interval schedule's hold (and quiet) when --nemesis-interval is not given: fitted
# so that every family asked for runs once within the time limit, within these bounds.
DEFAULT_INTERVAL = 10.0
MIN_FITTED_INTERVAL = 5.0
SCHEDULES = ("interval", "stable", "script")


class NemesisOptionError(ValueError):
    """A fault name, fault parameter or schedule the nemesis cannot use."""


def fitted_interval(n_families: int, time_limit: float) -> float:
    """The interval schedule's default hold: 10 s, shortened (to no less than 5 s) so
    that quiet + fault for each of `n_families` families, plus one quiet of slack for
    slow heals, fit in `time_limit` s: time_limit / (2n + 1)."""
    if n_families <= 0 or time_limit <= 0:
        return DEFAULT_INTERVAL
    fit = time_limit / (2 * n_families + 1)
    return round(min(DEFAULT_INTERVAL, max(MIN_FITTED_INTERVAL, fit)), 3)


@dataclass(frozen=True)
class NemesisOptions:
    faults: tuple[str, ...] = ()
    schedule: str = "interval"
    interval: float | None = None  # None: fitted_interval(len(faults), time limit)
    period: float = 20.0
    quiet_p: float = 0.3
    script: str | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    def resolved(self, time_limit: float) -> NemesisOptions:
        """These options with every default decided (the interval fitted to the run)."""
        if self.interval is not None:
            return self
        return replace(self, interval=fitted_interval(len(self.faults), time_limit))

    def validate(self, nodes: Sequence[str] | None = None) -> None:
        """Refuse (NemesisOptionError) anything the nemesis could only find out when a
        fault fires: schedule numbers, every fault parameter value and target, a script's
        entries; with the cluster's node names, targets and shapes against them too."""
        if self.schedule not in SCHEDULES:
            raise NemesisOptionError(
                f"schedule {self.schedule!r}: choose one of {', '.join(SCHEDULES)}"
            )
        numbers = (
            ("--nemesis-interval", self.interval, 0.0, None),
            ("--nemesis-period", self.period, 0.0, None),
            ("--nemesis-quiet", self.quiet_p, None, 1.0),
        )
        for flag, value, above, at_most in numbers:
            if value is None:
                continue
            if above is not None and not value > above:
                raise NemesisOptionError(f"{flag} {value:g}: must be > {above:g} seconds")
            if at_most is not None and not 0.0 <= value <= at_most:
                raise NemesisOptionError(f"{flag} {value:g}: must be a probability in [0, 1]")
        try:
            for fault, p in self.params.items():
                check_params(fault, p, "", nodes)
            if self.schedule == "script" and self.script:
                check_entries(load_script(self.script), nodes, self.script)
        except ValueError as e:
            raise NemesisOptionError(str(e)) from None

    def preview(
        self, time_limit: float, seed: int, nodes: Sequence[str] | None
    ) -> list[ScriptEntry]:
        """The faults the schedule will start within `time_limit` s, planned as the run
        plans them from `seed` (see nemesis.schedule)."""
        if not self.faults and self.schedule != "script":
            return []
        sched = self.resolved(time_limit).make_schedule(seed)
        preview = getattr(sched, "preview", None)
        return list(preview(time_limit, nodes, self.params, seed)) if preview else []

    @property
    def needs_toxiproxy(self) -> bool:
        """Whether the cluster must start with Toxiproxy in front (plan_proxies)."""
        proxied = ("toxic", "asymmetric-link")
        if any(f in self.faults for f in proxied):
            return True
        if self.schedule == "script" and self.script:
            return any(e.fault in proxied for e in load_script(self.script))
        return False

    def all_faults(self) -> list[str]:
        """Families the run may use (the scripted ones included)."""
        if self.schedule == "script" and self.script:
            return sorted({e.fault for e in load_script(self.script)})
        return list(self.faults)

    def make_schedule(self, seed: int | None = None) -> Schedule:
        """The schedule; `seed` (the run's) makes its plan a function of the seed alone."""
        return make_schedule(
            self.schedule,
            self.faults,
            DEFAULT_INTERVAL if self.interval is None else self.interval,
            self.period,
            self.quiet_p,
            script=self.script,
            seed=seed,
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
    if "all" in names:  # not control: only a system with a control API takes it
        # nor the composites: each is a sequence of the plain families, asked for by name
        names = tuple(n for n in FAULT_NAMES if n not in ("restart", "control", *COMPOSITE_NAMES))
    bad = [n for n in names if n not in FAULT_NAMES]
    if bad:
        raise NemesisOptionError(
            f"unknown fault(s) {bad}; choose among {', '.join(FAULT_NAMES)} (or all, none)"
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
            raise NemesisOptionError(f"{pair!r}: expected FAULT.PARAM=VALUE")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        out.setdefault(fault.strip(), {})[name.strip()] = value
    for fault, params in out.items():
        try:
            check_params(fault, params)
        except ValueError as e:
            raise NemesisOptionError(str(e)) from None
    return out


def check_script(path: str) -> None:
    """Load a schedule script once, so that a bad one is refused before the run starts."""
    try:
        load_script(path)
    except ValueError as e:
        raise NemesisOptionError(str(e)) from None
