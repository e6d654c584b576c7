"""CLI commands, one module each. `register` attaches whichever are present.

Each module exposes a click command or group named in COMMANDS; a module that
fails to import is a bug and is allowed to raise.
"""

from __future__ import annotations

import importlib

import click

# module name -> attribute holding the click command
COMMANDS: dict[str, str] = {
    "bench": "bench",
    "check": "check",
    "cluster": "cluster",
    "faults": "faults",
    "hunt": "hunt",
    "run": "run",
    "report": "report",
    "runs": "runs",
    "trace": "trace",
}


def register(group: click.Group) -> None:
    for module, attr in COMMANDS.items():
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{module}":
                continue  # command not built yet
            raise
        group.add_command(getattr(mod, attr))
