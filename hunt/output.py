"""What a hunt leaves behind, in its directory (written after every trial).

- ``hunt.json``: the log: options, every trial (phase, seed, faults, run directory,
  verdict, seconds), the find, every shrink step, the result;
- ``found.toml``: the faults the failing trial injected, as a ``--nemesis-script``;
- ``minimal.toml``: the shrunken script, with the seed, the reproduction rate and
  the command that replays it in its header;
- ``replay.sh``: that command;
- ``runs/``: the store of every trial (``ktrial runs --store HUNT_DIR/runs``);
  ``scripts/`` the script of every replay; ``logs/`` each trial's output.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..histories.redact import redact
from ..histories.store import write_json
from ..nemesis.schedule import ScriptEntry, format_script
from .runner import TrialResult, run_command
from .session import Hunt
from .shrink import describe, size

VERSION = 1


@dataclass(frozen=True)
class Context:
    hunt_dir: Path
    argv: tuple[str, ...]  # the hunt's command line
    run_args: tuple[str, ...]  # the flags passed through to every `ktrial run`
    time_limit: float
    started_at: float  # wall clock


def replay_command(ctx: Context, seed: int, script: Path | None) -> str:
    """The `ktrial run` command that replays a schedule on the found trial's seed."""
    nemesis = ["--nemesis-script", str(script)] if script is not None else []
    args = run_command(ctx.run_args, seed, ctx.time_limit, nemesis)
    return shlex.join(["ktrial", "run", *[str(a) for a in redact(list(args))]])


def _trial(t: TrialResult, h: Hunt) -> dict[str, Any]:
    r = t.request
    out: dict[str, Any] = {
        "number": r.number,
        "phase": r.phase,
        "what": r.what,
        "seed": r.seed,
        "run_dir": t.run_dir,
        "exit_code": t.exit_code,
        "verdict": t.verdict,
        "bad": list(t.bad),
        "seconds": t.seconds,
    }
    if r.phase == "search":
        out["nemesis"] = list(r.nemesis_args)
    else:
        out["script"] = t.script_path
        out["faults"] = len(r.script or ())
        out["reproduced"] = h.reproduced.get(r.number)
    if t.interrupted:
        out["interrupted"] = True
    if t.error:
        out["error"] = t.error
    if t.log_path:
        out["log"] = t.log_path
    return out


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hunt_json(h: Hunt, ctx: Context, now: float) -> dict[str, Any]:
    cfg = h.cfg
    tl = cfg.space.time_limit
    doc: dict[str, Any] = {
        "version": VERSION,
        "command": list(redact(list(ctx.argv))),
        "run_args": list(redact(list(ctx.run_args))),
        "started": _iso(ctx.started_at),
        "updated": _iso(now),
        "phase": h.phase,
        "search": {
            "families": list(cfg.space.families),
            "schedules": list(cfg.space.schedules),
            "max_mix": cfg.space.max_mix,
            "time_limit": tl,
            "hunt_seed": cfg.hunt_seed,
            "budget_s": cfg.budget_s,
            "max_trials": cfg.max_trials,
            "seconds": h.search_seconds,
            "trials": sum(1 for t in h.trials if t.request.phase == "search"),
        },
        "targets": sorted(cfg.targets),
        "match": cfg.match,
        "rule": str(cfg.rule),
        "confirm": cfg.confirm,
        "shrink_budget_s": cfg.shrink_budget_s,
        "trials": [_trial(t, h) for t in h.trials],
        "stopped": h.stopped,
    }
    if h.found is not None:
        doc["found"] = {
            "trial": h.found.request.number,
            "run_dir": h.found.run_dir,
            "seed": h.found.request.seed,
            "types": list(h.found_types),
            "reproduce_when": h.match.describe(),
            "script": "found.toml" if h.recorded is not None else None,
            "faults": describe(h.recorded or ()),
        }
    if h.shrunk is not None:
        doc["shrink"] = {
            "verified": h.shrunk.verified,
            "stopped": h.shrunk.stopped,
            "from": list(size(h.recorded or (), tl)),
            "to": list(size(h.shrunk.entries, tl)),
            "size_is": ["faults", "fault-seconds", "sum of start times"],
            "steps": [
                {"action": s.action, "kept": s.kept, "faults": len(s.entries)}
                for s in h.shrunk.steps
            ],
            "seconds": h.shrink_seconds,
            "pending": h.pending,
        }
    if h.final is not None and h.found is not None:
        k, n = h.rate()
        script = ctx.hunt_dir / "minimal.toml"
        doc["result"] = {
            "script": "minimal.toml",
            "seed": h.found.request.seed,
            "faults": describe(h.final),
            "replay": replay_command(ctx, h.found.request.seed, script if h.final else None),
            "rate": {
                "reproduced": k,
                "replays": n,
                "text": f"{k}/{n}" if n else "not measured",
                "of": rate_text(h),
            },
        }
    return doc


def rate_text(h: Hunt) -> str:
    """The final script's reproduction rate, saying which replays it counts."""
    k, n = h.rate()
    if h.confirmations:
        return f"{k} of {n} confirmation replays"
    if n:
        return f"{k} of {n} replays of the recorded schedule (not shrunk, not confirmed)"
    return "not measured (the hunt stopped before its confirmation)"


def _header(h: Hunt, ctx: Context, title: str, script: Path | None, rate: bool) -> str:
    assert h.found is not None
    lines = [
        title,
        f"written by `ktrial hunt` ({ctx.hunt_dir}); failure: {', '.join(h.found_types)} "
        f"in trial {h.found.request.number} ({h.found.run_dir})",
    ]
    if rate:
        lines.append(
            f"seed: {h.found.request.seed}; reproduces ({h.match.describe()}): {rate_text(h)}"
        )
    else:
        lines.append(f"seed: {h.found.request.seed}")
    lines.append("Replay: " + replay_command(ctx, h.found.request.seed, script))
    return "\n".join(lines) + "\n"


def write_outputs(h: Hunt, ctx: Context, now: float) -> None:
    """hunt.json, and once a failure is found its scripts and replay command."""
    d = ctx.hunt_dir
    d.mkdir(parents=True, exist_ok=True)
    if h.found is not None and h.recorded is not None:
        found = d / "found.toml" if h.recorded else None
        _script(
            d / "found.toml",
            h.recorded,
            _header(h, ctx, "The faults of the failing trial", found, rate=False),
        )
    if h.found is not None and h.final is not None and h.phase == "done":
        title = "The shrunken schedule" if h.shrunk is not None else "The failing schedule"
        minimal = d / "minimal.toml" if h.final else None
        _script(d / "minimal.toml", h.final, _header(h, ctx, title, minimal, rate=True))
        cmd = replay_command(ctx, h.found.request.seed, minimal)
        (d / "replay.sh").write_text(
            f"#!/bin/sh\n# {title.lower()}, on seed {h.found.request.seed}\nexec {cmd}\n"
        )
        (d / "replay.sh").chmod(0o755)
    write_json(d / "hunt.json", hunt_json(h, ctx, now))


def _script(path: Path, entries: Sequence[ScriptEntry], header: str) -> None:
    if entries:
        path.write_text(format_script(entries, header))
    else:  # `--nemesis-script` refuses a file without entries: say what it means
        path.write_text(
            "\n".join(f"# {x}" for x in header.splitlines())
            + "\n# No fault at all: the failure reproduced without one; replay without "
            "--nemesis-script.\n"
        )
