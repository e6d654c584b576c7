"""Checker options: what changes which anomalies count as bad.

`sub_via` and `ww_deps` come from test.json (written by `ktrial run`) and may be
overridden on the command line; the defaults are those of a plain assign-mode
run with write-write inference on, as in Jepsen's kafka test.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

SUB_VIAS = ("assign", "subscribe")


@dataclass(frozen=True)
class CheckOptions:
    """Options of one check.

    sub_via: "assign" or "subscribe"; None infers it from the history ("subscribe"
        if any op has f == "subscribe", else "assign"). With subscribe, consumers
        are rebalanced between ops, so poll-skip and nonmonotonic-poll are expected.
    ww_deps: infer write-write edges from log order. With them, G1c cycles are
        normal for Kafka (no write isolation); without them any G1c is bad.
    cycle_timeout_s: time budget of the cycle search per strongly connected component.
    max_examples: examples kept per anomaly type (the most telling first).
    copy: reserved for the copy workload's exactly-once checks.
    """

    sub_via: str | None = None
    ww_deps: bool = True
    cycle_timeout_s: float = 10.0
    max_examples: int = 8
    copy: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.sub_via is not None and self.sub_via not in SUB_VIAS:
            raise ValueError(f"sub_via must be one of {SUB_VIAS} or None, got {self.sub_via!r}")
        if self.cycle_timeout_s <= 0:
            raise ValueError(f"cycle_timeout_s must be positive, got {self.cycle_timeout_s!r}")
        if self.max_examples < 0:
            raise ValueError(f"max_examples must be >= 0, got {self.max_examples!r}")

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _find(meta: dict[str, Any], name: str) -> Any:
    """Look a setting up at the top level of test.json, then in its workload section."""
    for d in (meta, meta.get("workload"), meta.get("options"), meta.get("checker")):
        if isinstance(d, dict):
            for k in (name, name.replace("_", "-")):
                if k in d:
                    return d[k]
    return None


def _norm_sub_via(v: Any) -> str | None:
    """test.json may say "subscribe", ["subscribe"], or ["assign", "subscribe"] (Jepsen's set)."""
    if v is None:
        return None
    if isinstance(v, str):
        v = [v]
    if isinstance(v, list):
        names = {str(x).lstrip(":") for x in v}
        if "subscribe" in names:
            return "subscribe"
        if "assign" in names:
            return "assign"
    return None


def options_from_test_json(
    meta: dict[str, Any] | None, overrides: dict[str, Any] | None = None
) -> CheckOptions:
    """CheckOptions from test.json metadata, then `overrides` (None values are ignored)."""
    meta = meta or {}
    kw: dict[str, Any] = {}
    sv = _norm_sub_via(_find(meta, "sub_via"))
    if sv is not None:
        kw["sub_via"] = sv
    ww = _find(meta, "ww_deps")
    if isinstance(ww, bool):
        kw["ww_deps"] = ww
    copy = _find(meta, "copy")
    if isinstance(copy, dict):
        kw["copy"] = copy
    opts = CheckOptions(**kw)
    if overrides:
        opts = replace(opts, **{k: v for k, v in overrides.items() if v is not None})
    return opts
