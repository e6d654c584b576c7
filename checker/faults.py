"""Did the faults a run asked for happen? (pure: test.json's nemesis section + nemesis ops)

A run that asked for faults is a test of the system *under those faults*. When none
was injected, when a family asked for never ran, or when a fault failed to start (a
``fault-error`` op), a clean history says nothing about the faults, so the run must
not read VALID as usual: :func:`apply` turns a VALID verdict into ``unknown`` and says
why in ``warnings``; an INVALID verdict stays INVALID (the anomalies are real whatever
the faults did). A history without test.json, or whose test.json asked for no faults,
is left alone. The rule is documented in docs/faults.md and docs/anomalies.md.

What was asked: ``nemesis.families`` (every family the run may use, a script's
included), else ``nemesis.faults`` of ktrial's older runs (a section that also has
``schedule``: another tool's ``nemesis`` map is not read). What happened: the start
op of each family (``start-partition``, ``kill``, ``pause``, ... — or any op carrying
a ``fault`` field that names the family, which ktrial's nemesis adds with
``fault_id``) and the ``fault-error`` ops.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ..histories.model import FAULT_START_F, Op
from .liveness import VIOLATION_TYPES

START_F = FAULT_START_F  # the op that begins each fault family
HARNESS_ERROR_F = "harness-error"  # ktrial's own helper died mid-run (nemesis/harness.py)
MAX_ERRORS = 20  # errors kept in results.json (the count is always exact)


def asked_families(meta: Mapping[str, Any] | None) -> list[str]:
    """Fault families test.json says the run asked for ([] when none or unknown)."""
    nem = (meta or {}).get("nemesis")
    if not isinstance(nem, Mapping):
        return []
    fams = nem.get("families")
    if not isinstance(fams, list) and "schedule" in nem:  # ktrial's options, older runs
        fams = nem.get("faults")
    if not isinstance(fams, list):
        return []
    return [str(f) for f in dict.fromkeys(fams) if isinstance(f, str) and f]


def start_family(op: Op) -> str | None:
    """The family whose activation `op` begins, or None."""
    family = START_F.get(op.f)
    if family is None:
        return None
    tagged = op.extra.get("fault") if isinstance(op.extra, dict) else None
    return str(tagged) if isinstance(tagged, str) and tagged else family


def outcome(meta: Mapping[str, Any] | None, nemesis_ops: Iterable[Op]) -> dict[str, Any] | None:
    """The ``faults`` section of results.json, or None when the run asked for no faults."""
    asked = asked_families(meta)
    if not asked:
        return None
    injected: Counter[str] = Counter()
    errors: list[dict[str, Any]] = []
    n_errors = 0
    heal_errors: list[str] = []
    for op in nemesis_ops:
        if op.f == "fault-error":
            n_errors += 1
            v = op.value if isinstance(op.value, Mapping) else {}
            if len(errors) < MAX_ERRORS:
                errors.append(
                    {
                        "fault": str(v.get("fault", "?")),
                        "error": str(v.get("error", op.value)),
                        "time_s": round(op.time / 1e9, 3),
                    }
                )
            continue
        if op.f == "heal" and isinstance(op.value, Mapping) and op.value.get("errors"):
            heal_errors += [str(e) for e in op.value["errors"]]
            continue
        family = start_family(op)
        if family is not None:
            injected[family] += 1
    missing = [f for f in asked if injected[f] == 0]
    total = sum(injected.values())
    warnings: list[str] = []
    if total == 0:
        warnings.append(f"asked for faults {', '.join(asked)}; injected: none")
    elif missing:
        warnings.append(
            f"asked for faults {', '.join(asked)}; never injected: {', '.join(missing)}"
        )
    if n_errors:
        attempts = total + n_errors
        first = errors[0]
        warnings.append(
            f"{n_errors} of {attempts} fault start(s) failed (fault-error ops); first: "
            f"{first['fault']}: {first['error']}"
        )
    if heal_errors:
        warnings.append(f"the heal reported errors: {'; '.join(heal_errors[:3])}")
    return {
        "asked": asked,
        "injected": {f: injected[f] for f in sorted(injected, key=_order(asked))},
        "not_injected": missing,
        "errors": errors,
        "error_count": n_errors,
        "ok": total > 0 and not missing and n_errors == 0,
        "warnings": warnings,
    }


def _order(asked: list[str]) -> Any:
    return lambda f: (asked.index(f) if f in asked else len(asked), f)


def harness_failures(nemesis_ops: Iterable[Op]) -> list[dict[str, Any]]:
    """The ``harness-error`` ops: ktrial's own helper processes that died mid-run."""
    out = []
    for op in nemesis_ops:
        if op.f == HARNESS_ERROR_F:
            v = op.value if isinstance(op.value, Mapping) else {"error": str(op.value)}
            out.append({**v, "time_s": round(op.time / 1e9, 3)})
    return out


def apply_harness(results: dict[str, Any], failures: list[dict[str, Any]]) -> dict[str, Any]:
    """A run whose harness failed cannot be VALID, and its liveness violations are the
    harness's, not the system's: such a verdict becomes ``unknown`` (safety anomalies
    keep it INVALID: a lost or duplicated value is real whatever the harness did)."""
    if not failures:
        return results
    first = failures[0]
    results["harness_errors"] = failures
    results["warnings"] = [
        f"HARNESS FAILURE at t={first['time_s']:g} s: {first.get('error', first)}",
        *results.get("warnings", []),
    ]
    bad = set(results.get("bad_error_types") or [])
    if results.get("valid") is True or (
        results.get("valid") is False and bad and bad <= set(VIOLATION_TYPES)
    ):
        results["valid"] = "unknown"
    return results


def apply(
    results: dict[str, Any], meta: Mapping[str, Any] | None, nemesis_ops: Iterable[Op]
) -> dict[str, Any]:
    """Add the ``faults`` section and its ``warnings`` to `results`; a VALID verdict of a
    run whose faults did not all happen becomes ``unknown``; so does one whose harness
    failed (:func:`apply_harness`)."""
    nemesis_ops = list(nemesis_ops)
    apply_harness(results, harness_failures(nemesis_ops))
    section = outcome(meta, nemesis_ops)
    if section is None:
        return results
    results["faults"] = section
    if section["warnings"]:
        results["warnings"] = [*results.get("warnings", []), *section["warnings"]]
    if not section["ok"] and results.get("valid") is True:
        results["valid"] = "unknown"
        section["verdict"] = "unknown: the faults asked for did not all happen"
    return results


def summary(section: Mapping[str, Any] | None) -> str:
    """'partition ×2, kill ×1; not injected: toxic' — one line for the terminal."""
    if not section:
        return ""
    injected = section.get("injected") or {}
    parts = [f"{f} ×{n}" for f, n in injected.items()] or ["none injected"]
    line = ", ".join(parts)
    if section.get("not_injected"):
        line += f"; not injected: {', '.join(section['not_injected'])}"
    if section.get("error_count"):
        line += f"; {section['error_count']} failed to start"
    return line
