"""Checker options: what changes which anomalies count as bad.

`sub_via`, `ww_deps` and `consumer_rewinds` come from test.json (written by
`ktrial run`) and may be overridden on the command line; the defaults are those of
a plain assign-mode run with write-write inference on and Jepsen's consumer-position
rule, as in Jepsen's kafka test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ..histories.testmeta import TestMeta

SUB_VIAS = ("assign", "subscribe")
# Liveness thresholds test.json may set (top level, or its workload/options/checker section).
LIVENESS_NUMBERS = (
    "liveness_window_s",
    "starvation_ratio",
    "starvation_min_offered",
    "starvation_lag_s",
    "stuck_s",
    "recovery_s",
    "memory_growth_ratio",
    "memory_growth_min_bytes",
    "throughput_ratio",
)


# Numbers beyond this are typos or "infinity" (a run of 30 years, 10^18 bytes): they
# would overflow the nanosecond arithmetic (and NaN would disable every comparison).
MAX_NUMBER = 1e15
NO_LIMIT_OK = frozenset({"cycle_timeout_s", "recovery_s"})  # these may be inf


@dataclass(frozen=True)
class CheckOptions:
    """Options of one check.

    sub_via: "assign" or "subscribe"; None infers it from the history ("subscribe"
        if any op has f == "subscribe", else "assign"). With subscribe, consumers
        are rebalanced between ops, so poll-skip and nonmonotonic-poll are expected.
    ww_deps: infer write-write edges from log order. With them, G1c cycles are
        normal for Kafka (no write isolation); without them any G1c is bad.
    consumer_rewinds: the clients seek back to where a failed or indeterminate op
        began reading (ktrial's and Jepsen's drivers do), so such an op does not move
        the consumer: every read of a key, whatever its op's outcome, must begin right
        after the process's last ok read of it (Jepsen's rule). False for clients known
        not to rewind (Kafka itself does not on abort): failed and indeterminate reads
        are not judged, and the next ok read may begin anywhere up to just after the
        furthest record they read.
    cycle_timeout_s: time budget of the cycle search per strongly connected component.
    max_examples: examples kept per anomaly type (the most telling first).
    copy: reserved for the copy workload's exactly-once checks.

    Liveness (checker/liveness.py, docs/anomalies.md "Liveness"): faults legitimately
    slow a run down, so liveness violations are reported but only make the run
    invalid with ``liveness_bad`` (soak jobs that must fail on starvation set it).
    liveness_window_s: window length of the starvation check.
    starvation_ratio: a window starves when under this share of the values offered
        (acknowledged) in it were consumed by its end plus the lag allowance.
    starvation_min_offered: windows offering fewer values are not judged.
    starvation_lag_s: the lag allowance; None = the p99 end-to-end latency clamped
        to [1 s, one window].
    stuck_s: an acknowledged value unread by ok polls for longer marks its key stuck.
    recovery_s: sends or reads coming back later than this after a heal are slow.
    memory_growth_ratio / memory_growth_min_bytes: a broker process whose memory
        (outside the JVM heap when known) grows at a steady rate over the later half of
        its life by more than both (share of its settled size, bytes) is flagged
        (checker/memory.py).
    throughput_ratio: a window whose acknowledged values are under this share of the
        run's reference window (the median of its fault-free windows) collapsed
        (checker/throughput.py).
    """

    sub_via: str | None = None
    ww_deps: bool = True
    consumer_rewinds: bool = True
    cycle_timeout_s: float = 10.0
    max_examples: int = 8
    copy: dict[str, Any] | None = None
    liveness_bad: bool = False
    liveness_window_s: float = 10.0
    starvation_ratio: float = 0.97
    starvation_min_offered: int = 20
    starvation_lag_s: float | None = None
    stuck_s: float = 30.0
    recovery_s: float = 60.0
    memory_growth_ratio: float = 0.5
    memory_growth_min_bytes: int = 64 * 1024 * 1024
    throughput_ratio: float = 0.1

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or v is None or not isinstance(v, (int, float)):
                continue
            if math.isnan(v):
                raise ValueError(f"{f.name} must be a number, got {v!r}")
            if f.name in NO_LIMIT_OK:  # compared as floats only: inf means no limit
                continue
            if not math.isfinite(v) or abs(v) > MAX_NUMBER:
                raise ValueError(
                    f"{f.name} must be a finite number up to {MAX_NUMBER:.0e}, got {v!r}"
                )
        if self.sub_via is not None and self.sub_via not in SUB_VIAS:
            raise ValueError(f"sub_via must be one of {SUB_VIAS} or None, got {self.sub_via!r}")
        if not isinstance(self.consumer_rewinds, bool):
            raise ValueError(
                f"consumer_rewinds must be true or false, got {self.consumer_rewinds!r}"
            )
        if self.cycle_timeout_s <= 0:
            raise ValueError(f"cycle_timeout_s must be positive, got {self.cycle_timeout_s!r}")
        if self.max_examples < 0:
            raise ValueError(f"max_examples must be >= 0, got {self.max_examples!r}")
        for name in ("liveness_window_s", "stuck_s", "recovery_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if not 0.0 < self.starvation_ratio <= 1.0:
            raise ValueError(f"starvation_ratio must be in (0, 1], got {self.starvation_ratio!r}")
        if self.starvation_lag_s is not None and self.starvation_lag_s < 0:
            raise ValueError(f"starvation_lag_s must be >= 0, got {self.starvation_lag_s!r}")
        if self.starvation_min_offered < 1:
            raise ValueError(
                f"starvation_min_offered must be >= 1, got {self.starvation_min_offered!r}"
            )
        if not 0.0 < self.throughput_ratio <= 1.0:
            raise ValueError(f"throughput_ratio must be in (0, 1], got {self.throughput_ratio!r}")
        if self.memory_growth_ratio < 0 or self.memory_growth_min_bytes < 0:
            raise ValueError("memory_growth_ratio and memory_growth_min_bytes must be >= 0")

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _find(meta: TestMeta, name: str) -> Any:
    """A setting of test.json: its top level, then its workload/options/checker section."""
    return meta.setting(name)


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


def _flag(meta: TestMeta, name: str, given: set[str], kw: dict[str, Any]) -> None:
    """A true/false setting of test.json into kw (also "true"/"false" as strings); any
    other value is an error unless the command line gives the setting."""
    v = _find(meta, name)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        v = v.lower() == "true"
    if isinstance(v, bool):
        kw[name] = v
    elif v is not None and name not in given:  # a typo must not change the verdict
        flag = name.replace("_", "-")
        raise ValueError(
            f"{name} {v!r} in test.json: expected true or false (or pass --{flag}/--no-{flag})"
        )


def options_from_test_json(
    meta: TestMeta | dict[str, Any] | None, overrides: dict[str, Any] | None = None
) -> CheckOptions:
    """CheckOptions from test.json metadata, then `overrides` (None values are ignored)."""
    meta = meta if isinstance(meta, TestMeta) else TestMeta.from_json(meta)
    given = {k for k, v in (overrides or {}).items() if v is not None}
    kw: dict[str, Any] = {}
    raw = _find(meta, "sub_via")
    sv = _norm_sub_via(raw)
    if sv is not None:
        kw["sub_via"] = sv
    elif raw is not None and "sub_via" not in given:  # a typo must not change the verdict
        raise ValueError(
            f'sub_via {raw!r} in test.json: expected "assign" or "subscribe" (or pass --sub-via)'
        )
    for name in ("ww_deps", "consumer_rewinds"):
        _flag(meta, name, given, kw)
    copy = _find(meta, "copy")
    if isinstance(copy, dict):
        from .copy import validate_copy  # a usage error (254) here, not a crash mid-check

        kw["copy"] = validate_copy(copy)
    lb = _find(meta, "liveness_bad")
    if isinstance(lb, bool):
        kw["liveness_bad"] = lb
    for name in LIVENESS_NUMBERS:
        v = _find(meta, name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            kw[name] = v
    # the command line wins over test.json, also over a value there that is unusable
    kw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return CheckOptions(**kw)
