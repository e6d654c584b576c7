"""The `ktrial` command line.

Each command lives in its own module under `commands/`; this file only assembles
the group and maps outcomes to exit codes (0 valid, 1 invalid, 2 unknown,
254 usage error, 255 crash of ktrial itself).
"""

from __future__ import annotations

import sys

import click

from . import __version__
from .commands import register

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_USAGE = 254
EXIT_CRASH = 255


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ktrial")
def cli() -> None:
    """ktrial puts Kafka-protocol brokers on trial.

    Drive idempotent and transactional producers and read_committed consumers
    against a real cluster while a nemesis injects faults, record every
    operation, then prove from the history that nothing acknowledged was lost,
    duplicated, or read while aborted.
    """


register(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and translate errors into ktrial's exit codes."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        # obj: the command line as typed, for test.json's "argv" (commands/run.py)
        rc = cli.main(args=args, prog_name="ktrial", standalone_mode=False, obj={"argv": args})
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as e:  # the last line of defence: exit 255, never a bare traceback
        import traceback

        traceback.print_exc()
        click.echo(f"ktrial crashed: {type(e).__name__}: {e}", err=True)
        sys.exit(EXIT_CRASH)
    sys.exit(rc if isinstance(rc, int) else 0)
