"""Builders of history lines (JSON op objects) shared by the hand-written checker tests.

`ok(1, "send", [snd("x", 0, 10)])` is process 1's ok send of value 10 to key x, landed
at offset 0; `pl({"x": [[0, 10]]})` a poll micro-op that read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ktrial.checker import CheckOptions, check_file

Line = dict[str, Any]


def op(process: Any, typ: str, f: str, value: Any = None, **extra: Any) -> Line:
    return {"process": process, "type": typ, "f": f, "value": value, **extra}


def ok(process: Any, f: str, value: Any = None, **extra: Any) -> Line:
    return op(process, "ok", f, value, **extra)


def fail(process: Any, f: str, value: Any = None, **extra: Any) -> Line:
    return op(process, "fail", f, value, **extra)


def info(process: Any, f: str, value: Any = None, **extra: Any) -> Line:
    return op(process, "info", f, value, **extra)


def inv(process: Any, f: str, value: Any = None, **extra: Any) -> Line:
    return op(process, "invoke", f, value, **extra)


def snd(k: Any, o: int | None, v: Any) -> list[Any]:
    return ["send", k, [o, v]]


def pl(recs: dict[str, list[list[Any]]]) -> list[Any]:
    return ["poll", recs]


def write(path: Path, lines: list[Line]) -> Path:
    """A history.jsonl of `lines`: index = line number, time = line number in ms."""
    path.write_text(
        "".join(
            json.dumps({"index": i, "time": i * 1_000_000, **o}) + "\n" for i, o in enumerate(lines)
        )
    )
    return path


def run(tmp_path: Path, lines: list[Line], **opts: Any) -> dict[str, Any]:
    """Check from a file, as `ktrial check` does."""
    return check_file(write(tmp_path / "history.jsonl", lines), CheckOptions(**opts))


def types(res: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(error types, bad error types) of a result."""
    return set(res["error_types"]), set(res["bad_error_types"])


def examples(res: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return res["anomalies"][name]["examples"]  # type: ignore[no-any-return]
