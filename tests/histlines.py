"""Builders of history lines (JSON op objects) shared by the hand-written checker tests.

`ok(1, "send", [snd("x", 0, 10)])` is process 1's ok send of value 10 to key x, landed
at offset 0; `pl({"x": [[0, 10]]})` a poll micro-op that read it.
"""

from __future__ import annotations

from typing import Any

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
