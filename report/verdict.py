"""The verdict word of a results dict: light enough for `ktrial runs` to import."""

from __future__ import annotations

from typing import Any


def verdict_of(results: dict[str, Any] | None) -> str:
    """'valid', 'invalid', 'unknown' or 'not checked' (no results at all)."""
    if results is None:
        return "not checked"
    v = results.get("valid")
    if v is True:
        return "valid"
    if v is False:
        return "invalid"
    return "unknown"
