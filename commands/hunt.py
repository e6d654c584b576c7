"""`ktrial hunt`: run many short trials until one fails, then shrink its faults.

The logic lives in the ``hunt`` package (docs/hunt.md); this module parses the flags,
checks the pass-through `ktrial run` flags once (a dry run) before any broker starts,
and prints progress and the result.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from ..hunt import runner as hunt_runner
from ..hunt.output import Context, rate_text, replay_command, write_outputs
from ..hunt.plan import SCHEDULES, SearchSpace, registry_families
from ..hunt.repro import Rule
from ..hunt.runner import Interrupts, SubprocessRunner, recorded_faults
from ..hunt.session import Hunt, HuntConfig
from ..hunt.shrink import PASSES, Options, describe
from ..hunt.verdict import MATCHES, parse_anomalies
from ..nemesis.options import NemesisOptionError
from ..trial import default_store

# `ktrial run` flags a hunt decides itself (per trial), refused among the pass-through ones.
OWNED = {
    "--nemesis-schedule": "the hunt draws schedules (--schedules)",
    "--nemesis-script": "the hunt writes the scripts of its replays",
    "--nemesis-interval": "the hunt draws holds per trial",
    "--nemesis-period": "the hunt draws periods per trial",
    "--nemesis-quiet": "the hunt sets the quiet share of its stable trials",
    "--name": "trials are named after their phase (search, replay, confirm)",
    "--from": "give the run's flags instead (a repeated run's recorded schedule would "
    "override the hunt's)",
    "--config": "give the flags on the command line (a config's nemesis keys would "
    "override the hunt's)",
    "--dry-run": "a hunt runs its trials",
}


def check_run_args(run_args: tuple[str, ...]) -> None:
    """Refuse a pass-through flag the hunt owns, and anything that is not a flag first."""
    if run_args and not run_args[0].startswith("-"):
        raise click.UsageError(
            f"unexpected argument {run_args[0]!r}: `ktrial hunt` takes its own flags and "
            "any `ktrial run` flag (--profile, --acks, --workload ...)"
        )
    for a in run_args:
        flag = a.split("=", 1)[0]
        if flag in OWNED:
            raise click.UsageError(f"{flag} cannot be given to `ktrial hunt`: {OWNED[flag]}")


def dry_run(run_args: list[str], time_limit: float, families: tuple[str, ...]) -> str | None:
    """`ktrial run ... --dry-run` with these flags: None if it accepts them, else what it
    said (the usage error)."""
    with tempfile.TemporaryDirectory(prefix="ktrial-hunt-") as tmp:
        nemesis = ["--nemesis", ",".join(families)] if families else []
        proc = subprocess.run(
            [
                *hunt_runner.KTRIAL,
                "run",
                *run_args,
                "--seed",
                "0",
                "--time-limit",
                f"{time_limit:g}",
                *nemesis,
                "--store",
                tmp,
                "--dry-run",
            ],
            capture_output=True,
            text=True,
        )
    if proc.returncode == 0:
        return None
    lines = [x for x in (proc.stderr + proc.stdout).splitlines() if x.strip()]
    return "\n".join(lines[-4:]) or f"ktrial run exited {proc.returncode}"


def runnable_families(
    run_args: list[str], time_limit: float, families: tuple[str, ...]
) -> tuple[str, ...]:
    """The families this cluster takes: all of them when the dry run accepts the pool;
    otherwise each is tried alone and the refused ones are left out (and said)."""
    if dry_run(run_args, time_limit, families) is None:
        return families
    err = dry_run(run_args, time_limit, ())
    if err is not None:
        raise click.UsageError(f"the `ktrial run` flags are refused:\n{err}")
    kept = []
    for f in families:
        why = dry_run(run_args, time_limit, (f,))
        if why is None:
            kept.append(f)
        else:
            click.echo(f"[hunt] leaving out {f}: {why.splitlines()[-1]}", err=True)
    if not kept:
        raise click.UsageError("this cluster takes none of the fault families asked for")
    return tuple(kept)


def _hunt_dir(store: str, output: str | None) -> Path:
    if output:
        path = Path(output)
        if path.exists() and any(path.iterdir()):
            raise click.BadParameter(f"{path} is not empty", param_hint="--output")
        path.mkdir(parents=True, exist_ok=True)
        return path
    base = Path(store) / "hunts"
    base.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path, n = base / stamp, 1
    while path.exists():
        n += 1
        path = base / f"{stamp}-{n}"
    path.mkdir()
    return path


def _seeds(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected seeds such as 1,2,3") from None


@click.command(
    "hunt",
    context_settings={"ignore_unknown_options": True},
)
@click.option(
    "--store",
    default=default_store,
    show_default="./store or $KTRIAL_STORE",
    type=click.Path(file_okay=False),
    help="The hunt's directory goes to STORE/hunts/<time> (unless --output).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    default=None,
    help="The hunt's directory (new or empty): hunt.json, the scripts, runs/ of every trial.",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="The hunt's seed: its plan, and trial i runs on seed SEED+i. [default: random]",
)
@click.option("--seeds", default=None, metavar="N,N,...", help="Seeds the trials take in turn.")
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds of each trial's main phase (search and replays).",
)
@click.option(
    "--nemesis",
    "families",
    default="all",
    show_default=True,
    metavar="FAULTS",
    help="Fault families the search mixes; all: every family in the nemesis registry "
    "(as `ktrial run --nemesis all`). Families the cluster cannot take are left out.",
)
@click.option(
    "--schedules",
    default=",".join(SCHEDULES),
    show_default=True,
    help="Schedules the search takes in turn (interval, stable).",
)
@click.option(
    "--max-mix",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Most families in one trial's mix (the first trial takes them all).",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="Seconds of searching: no trial begins that would not fit (the first always runs).",
)
@click.option(
    "--max-trials",
    type=click.IntRange(min=0),
    default=0,
    help="Most search trials (0: as many as the budget allows).",
)
@click.option(
    "--anomalies",
    default="safety",
    show_default=True,
    help="Anomaly types that end the search: safety (every type but liveness), liveness, "
    "all, or names (lost-write,duplicate).",
)
@click.option(
    "--match",
    type=click.Choice(MATCHES),
    default="same",
    show_default=True,
    help="When a replay reproduces: same = the failure's most serious type again; "
    "any = any of the --anomalies types.",
)
@click.option("--shrink/--no-shrink", default=True, show_default=True, help="Shrink the find.")
@click.option(
    "--shrink-passes",
    default=",".join(PASSES),
    show_default=True,
    help="What the shrinker tries: remove faults, shorten them, move them earlier.",
)
@click.option(
    "--verify/--no-verify",
    default=True,
    show_default=True,
    help="Replay the recorded schedule (K of N) before shrinking it; a failure that does "
    "not replay is not shrunk.",
)
@click.option(
    "--shrink-budget",
    type=click.FloatRange(min=0),
    default=900.0,
    show_default=True,
    help="Seconds of shrinking and confirming (room for the confirmation is kept).",
)
@click.option(
    "--max-replays",
    type=click.IntRange(min=0),
    default=0,
    help="Most replays for shrinking and confirming (0: as the shrink budget allows).",
)
@click.option(
    "--repro",
    default="2/3",
    show_default=True,
    metavar="K/N",
    help="A shrink step is kept when K of N replays reproduce (the first screens).",
)
@click.option(
    "--confirm",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Replays of the final script; its reproduction rate is measured over them.",
)
@click.option(
    "--min-duration",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    help="Shortest fault the shrinker tries (seconds).",
)
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def hunt(**kw: Any) -> None:
    """Search for a failing fault schedule, then shrink it to a minimal reproducer.

    \b
    Runs short `ktrial run` trials (seeds x schedules x fault mixes) until one is
    INVALID with a safety anomaly, then replays that trial's recorded faults as a
    --nemesis-script on its seed, removing faults, shortening them and moving them
    earlier, keeping a change only when the failure reproduces in K of N replays.
    Writes the minimal script, the seed, the replay command and its reproduction
    rate to the hunt's directory (docs/hunt.md). Any other flag is passed to every
    `ktrial run` (cluster, profile, clients, workload ...). Ctrl-C stops cleanly:
    the running trial heals and tears down, and what was found so far is written.
    Exit code: 1 a failure was found, 0 none within the budget, 2 the trials could
    not run, 130 interrupted before a find.

    \b
    Examples:
      ktrial hunt --budget 600 --nemesis kill,partition --profile unsafe \\
          --no-txn --no-idempotence --acks 1
      ktrial hunt --time-limit 60 --budget 3600 --profile unsafe
    """
    run_args = tuple(kw["run_args"])
    check_run_args(run_args)
    try:
        targets = parse_anomalies(kw["anomalies"])
        rule = Rule.parse(kw["repro"])
        asked = registry_families(kw["families"])
        passes = tuple(p.strip() for p in kw["shrink_passes"].split(",") if p.strip())
        opts = Options(
            time_limit=kw["time_limit"],
            min_duration=kw["min_duration"],
            passes=passes,
            verify=kw["verify"],
        )
        schedules = tuple(s.strip() for s in kw["schedules"].split(",") if s.strip())
        seeds = _seeds(kw["seeds"])
        hunt_seed = kw["seed"] if kw["seed"] is not None else random.SystemRandom().randrange(2**31)
        SearchSpace(asked, kw["time_limit"], hunt_seed, seeds, schedules, kw["max_mix"])
    except (ValueError, NemesisOptionError) as e:
        raise click.UsageError(str(e)) from None
    say = _say
    families = runnable_families(list(run_args), kw["time_limit"], asked)
    space = SearchSpace(families, kw["time_limit"], hunt_seed, seeds, schedules, kw["max_mix"])
    cfg = HuntConfig(
        space=space,
        hunt_seed=hunt_seed,
        targets=targets,
        match=kw["match"],
        budget_s=kw["budget"],
        max_trials=kw["max_trials"],
        shrink=kw["shrink"],
        shrink_budget_s=kw["shrink_budget"],
        max_replays=kw["max_replays"],
        rule=rule,
        confirm=kw["confirm"],
        shrink_opts=opts,
    )
    hunt_dir = _hunt_dir(kw["store"], kw["output"])
    ctx = Context(hunt_dir, tuple(_argv()), run_args, kw["time_limit"], time.time())
    interrupts = Interrupts()
    runner = SubprocessRunner(hunt_dir, run_args, kw["time_limit"], interrupts)
    say(
        f"hunting in {hunt_dir} (seed {hunt_seed}): faults {','.join(families)}; "
        f"{kw['time_limit']:g} s trials, search budget {kw['budget']:g} s"
        + (f", at most {kw['max_trials']} trials" if kw["max_trials"] else "")
        + f"; anomalies: {kw['anomalies']}"
    )
    h = Hunt(
        cfg,
        runner,
        recorded_faults,
        say=say,
        on_change=lambda x: write_outputs(x, ctx, time.time()),
        stop_requested=lambda: interrupts.count > 0,
    )
    with interrupts.installed():
        h.run()
    sys.exit(_summary(h, ctx))


def _say(msg: str) -> None:
    click.echo(f"[hunt] {time.strftime('%H:%M:%S')} {msg}", err=True)


def _argv() -> list[str]:
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    argv = obj.get("argv") if isinstance(obj, dict) else None
    return ["ktrial", *[str(a) for a in argv]] if isinstance(argv, list) else []


def _summary(h: Hunt, ctx: Context) -> int:
    searched = sum(1 for t in h.trials if t.request.phase == "search")
    if h.found is None:
        why = h.stopped or "the search ended"
        click.echo(f"hunt: no failure in {searched} trial(s), {h.search_seconds:.0f} s ({why})")
        click.echo(f"hunt directory: {ctx.hunt_dir}")
        if h.stopped == "interrupted":
            return 130
        if h.trials and all(t.error for t in h.trials[-2:]):
            return 2
        return 0
    f = h.found
    click.secho(
        f"hunt: trial {f.request.number} of {searched} failed: {', '.join(h.found_types)} "
        f"(seed {f.request.seed}, {h.search_seconds:.0f} s of search)",
        fg="red",
        bold=True,
    )
    click.echo(f"  run directory: {f.run_dir}")
    if h.shrunk is not None:
        s = h.shrunk
        state = "" if s.stopped is None else f" (stopped early: {s.stopped})"
        if s.verified is False:
            state = " (not shrunk: the recorded schedule did not reproduce it)"
        n_replays = sum(1 for t in h.trials if t.request.phase == "replay")
        click.echo(
            f"shrunk {len(h.recorded or ())} -> {len(s.entries)} faults in {n_replays} "
            f"replays{state}"
        )
        if h.pending:
            p = h.pending
            click.echo(
                f"  left half-judged: {p['action']} (reproduced {p['reproduced']} of "
                f"{p['replays']}; a larger --shrink-budget would finish it)"
            )
    final = h.final or ()
    name = "minimal.toml" if h.phase == "done" else "found.toml"
    click.echo(f"script: {ctx.hunt_dir / name}")
    for line in describe(final) or ["no fault at all"]:
        click.echo(f"  {line}")
    k, n = h.rate()
    click.echo(f"reproduction rate: {k}/{n}, {rate_text(h)}" if n else rate_text(h))
    script = ctx.hunt_dir / "minimal.toml" if final else None
    click.echo(f"replay: {replay_command(ctx, f.request.seed, script)}")
    click.echo(f"hunt directory: {ctx.hunt_dir} (hunt.json, runs/)")
    return 1
