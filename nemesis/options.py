"""What a run asks of the nemesis (NemesisOptions), and the parsing and validation of it.

Pure: bad input raises :class:`NemesisOptionError` (a ValueError) that says what is
wrong; the command line (commands/nemesis_flags.py) turns it into a usage error
naming the flag.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .core import FAULT_NAMES, check_params
from .schedule import Schedule, load_script, make_schedule


class NemesisOptionError(ValueError):
    """A fault name, fault parameter or schedule the nemesis cannot use."""


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
