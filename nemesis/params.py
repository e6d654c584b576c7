"""Checks of fault parameter values, shared by every fault family's ``validate``.

Pure: each helper raises :class:`ParamError` (a ValueError) whose message names the
parameter as the user wrote it (``partition.shape``), the bad value and what is
allowed, so ``--nemesis-param partition.shape=bogus`` and a script entry are refused
before anything starts, never when the fault fires.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any


class ParamError(ValueError):
    """A fault parameter whose value the family cannot use."""


def _name(fault: str, param: str) -> str:
    return f"{fault}.{param}"


def choice(fault: str, param: str, value: Any, allowed: Collection[str]) -> None:
    """`value` must be one of `allowed` (None: the default, drawn at fault time)."""
    if value is None or (isinstance(value, str) and value in allowed):
        return
    raise ParamError(f"{_name(fault, param)}={value!r}: choose one of {', '.join(allowed)}")


def number(
    fault: str,
    param: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    integer: bool = False,
    optional: bool = False,
) -> None:
    """`value` must be a number (an integer if `integer`) in the given range."""
    if value is None and optional:
        return
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if not ok_type or isinstance(value, bool) or not math.isfinite(float(value)):
        raise ParamError(
            f"{_name(fault, param)}={value!r}: must be {kind}{_range(low, high, low_open)}"
        )
    v = float(value)
    too_low = low is not None and (v <= low if low_open else v < low)
    if too_low or (high is not None and v > high):
        raise ParamError(
            f"{_name(fault, param)}={value!r}: must be {kind}{_range(low, high, low_open)}"
        )


def _range(low: float | None, high: float | None, low_open: bool) -> str:
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low:g}, {high:g}]"
    if low is not None:
        return f" {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f" <= {high:g}"
    return ""


def boolean(fault: str, param: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ParamError(f"{_name(fault, param)}={value!r}: must be true or false")


def mapping(fault: str, param: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ParamError(
            f'{_name(fault, param)}={value!r}: must be a table, e.g. {{"latency": 1000}}'
        )
    return value
