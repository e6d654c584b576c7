"""Night over night: the stored runs of one test side by side, the newest judged.

`ktrial runs --trend NAME` shows the key figures (report/figures.py) of the newest
checked run of test NAME and of the runs of the same test before it, and flags each
figure that regressed. The rule (`judge`, pure):

* the baseline of a figure is the median of its values over the previous `last` runs
  of the same test (default 5) — a median, so one bad night in the baseline does not
  move it; at least `min_history` (3) of those runs must have the figure, else it is
  "not enough history";
* a figure regressed when the newest value is worse than the baseline by more than
  a factor 1 + `tolerance` (default 25%: a latency over 1.25 × the baseline, a
  throughput under baseline / 1.25, i.e. 20% lower; so a tolerance of 100% allows
  twice as bad either way and a throughput limit never goes below 0) *and* by more
  than the figure's floor (its smallest meaningful change: 5 ms of latency, 1 s of
  recovery, 0.5 op/s, 8 MiB/min; 0 for counts). Worse is higher for latencies,
  recovery times, memory slopes and counts, lower for throughput. A count whose
  baseline is 0 therefore regresses on its first occurrence: a new anomaly type
  fails the trend;
* a figure better by the same factor is "better", anything between "ok", and a
  figure the newest run lacks "missing" (never judged).

Only anomaly types that are bad in at least one run of the window are figures
(a benign G0 count varies with the seed and says nothing about a regression).

Loading (`load_trend`) is the only part here that reads files: test.json of the
test's runs newest first, results.json only of the runs it keeps. The junit XML of a
trend is report/trendjunit.py.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..histories.store import MAX_TEST_JSON, RunDir, list_runs, load_json
from ..histories.testmeta import TestMeta
from .figures import (
    COUNTED,
    FAMILIES,
    FIXED,
    Number,
    RunFigures,
    SeriesKey,
    Worse,
    family,
    label,
    order_key,
    run_figures,
    series_key,
    spec,
)
from .runs import run_date

DEFAULT_LAST = 5
MIN_HISTORY = 3
DEFAULT_TOLERANCE = 0.25

REGRESSION = "regression"
BETTER = "better"
OK = "ok"
SHORT = "not enough history"
MISSING = "missing"
JUDGED = (REGRESSION, BETTER, OK)


# ---------------------------------------------------------------------- the rule


@dataclass(frozen=True)
class Verdict:
    status: str
    baseline: float | None = None  # median of the previous values
    limit: float | None = None  # worse than this is a regression
    history: int = 0  # how many previous values the baseline is the median of


def judge(
    newest: Number | None,
    previous: Sequence[Number | None],
    *,
    worse: Worse,
    tolerance: float,
    floor: float = 0.0,
    min_history: int = MIN_HISTORY,
) -> Verdict:
    """One figure of the newest run against its values in the runs before (pure).

    `previous` are the values of the runs the baseline is taken over (None where a run
    lacks the figure); see the module's docstring for the rule."""
    if tolerance < 0 or floor < 0:
        raise ValueError("tolerance and floor must not be negative")
    values = [float(v) for v in previous if v is not None]
    if len(values) < min_history:
        return Verdict(SHORT if newest is not None else MISSING, history=len(values))
    base = statistics.median(values)
    # a factor (1 + tolerance) either way: up by tolerance × |base|, down by
    # tolerance / (1 + tolerance) × |base| (25%: a latency 1.25× the median, a
    # throughput at median / 1.25, i.e. 20% lower)
    up = tolerance * abs(base)
    down = up / (1 + tolerance)
    if worse == "higher":
        sign, margin, better = 1.0, max(up, floor), max(down, floor)
    else:
        sign, margin, better = -1.0, max(down, floor), max(up, floor)
    limit = base + sign * margin
    if newest is None:
        return Verdict(MISSING, base, limit, len(values))
    delta = sign * (float(newest) - base)  # > 0: worse than the baseline
    if delta > margin:
        status = REGRESSION
    elif -delta > better:
        status = BETTER
    else:
        status = OK
    return Verdict(status, base, limit, len(values))


@dataclass(frozen=True)
class Tolerances:
    """The relative tolerance of each figure: by its name (`e2e_p99`,
    `anomaly.lost-write`), else its family (`anomaly`, `mem_slope`), else `default`."""

    default: float = DEFAULT_TOLERANCE
    per: Mapping[str, float] = field(default_factory=dict)

    def of(self, name: str) -> float:
        if name in self.per:
            return self.per[name]
        return self.per.get(family(name), self.default)

    def to_json(self) -> dict[str, Any]:
        return {"default": self.default, **dict(sorted(self.per.items()))}


def tolerance_names() -> list[str]:
    """The names `--tolerance NAME=X` accepts (besides `family.part`)."""
    return [*FIXED, *FAMILIES]


def parse_tolerances(items: Sequence[str]) -> Tolerances:
    """`["0.3", "e2e_p99=0.5", "anomaly=100%"]` -> Tolerances; ValueError saying what is
    wrong with an item."""
    default = DEFAULT_TOLERANCE
    per: dict[str, float] = {}
    for item in items:
        name, sep, text = item.rpartition("=")
        value = _fraction(text.strip(), item)
        if not sep:
            default = value
            continue
        name = name.strip()
        if name not in FIXED and name not in FAMILIES and spec(name) is None:
            raise ValueError(
                f"{item!r}: no figure {name!r}; figures: {', '.join(tolerance_names())} "
                "(or one member: mem_slope.NODE, anomaly.TYPE, violation.TYPE)"
            )
        per[name] = value
    return Tolerances(default, per)


def _fraction(text: str, item: str) -> float:
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(
            f"{item!r}: a tolerance is a fraction or a percentage (0.25 or 25%)"
        ) from None
    if not v >= 0 or v == float("inf"):
        raise ValueError(f"{item!r}: a tolerance must be a finite number ≥ 0")
    return v


# ---------------------------------------------------------------------- a trend


@dataclass(frozen=True)
class TrendRun:
    path: Path
    date: str
    figures: RunFigures

    @property
    def run(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Judgement:
    figure: str
    status: str
    newest: Number | None
    baseline: float | None
    limit: float | None
    tolerance: float
    history: int

    @property
    def change(self) -> float | None:
        """(newest - baseline) / |baseline|; None without both or with a 0 baseline."""
        if self.newest is None or self.baseline is None or self.baseline == 0:
            return None
        return (self.newest - self.baseline) / abs(self.baseline)

    def to_json(self, values: list[Number | None]) -> dict[str, Any]:
        s = spec(self.figure)
        return {
            "figure": self.figure,
            "label": label(self.figure),
            "unit": s.unit if s else "",
            "worse": s.worse if s else None,
            "status": self.status,
            "newest": self.newest,
            "baseline": self.baseline,
            "limit": self.limit,
            "change": None if self.change is None else round(self.change, 4),
            "tolerance": self.tolerance,
            "floor": s.floor if s else 0.0,
            "history": self.history,
            "values": values,
        }


@dataclass(frozen=True)
class LeftOut:
    run: str
    why: str


@dataclass(frozen=True)
class Trend:
    key: SeriesKey
    runs: list[TrendRun]  # the window, oldest first: the baseline runs, then the newest
    judgements: list[Judgement]
    last: int
    tolerances: Tolerances
    min_history: int = MIN_HISTORY
    left_out: list[LeftOut] = field(default_factory=list)

    @property
    def newest(self) -> TrendRun:
        return self.runs[-1]

    @property
    def regressions(self) -> list[Judgement]:
        return [j for j in self.judgements if j.status == REGRESSION]

    @property
    def status(self) -> str:
        """'regression', 'ok', or 'not enough history' when no figure could be judged."""
        if self.regressions:
            return REGRESSION
        return OK if any(j.status in JUDGED for j in self.judgements) else SHORT

    def figures(self) -> list[str]:
        return [j.figure for j in self.judgements]

    def values(self, figure: str) -> list[Number | None]:
        return [r.figures.value(figure) for r in self.runs]

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.key.to_json(),
            "status": self.status,
            "newest": str(self.newest.path),
            "last": self.last,
            "min_history": self.min_history,
            "tolerance": self.tolerances.to_json(),
            "runs": [
                {"path": str(r.path), "run": r.run, "date": r.date, **r.figures.to_json()}
                for r in self.runs
            ],
            "judgements": [j.to_json(self.values(j.figure)) for j in self.judgements],
            "regressions": [j.figure for j in self.regressions],
            "left_out": [{"run": x.run, "why": x.why} for x in self.left_out],
        }


def figure_names(runs: Sequence[RunFigures]) -> list[str]:
    """The figures a window shows: every figure some run has, anomaly types only when
    bad in some run, counts of a family only when some run counts it."""
    bad = set().union(*(r.bad_types for r in runs)) if runs else set()
    names: set[str] = set()
    for r in runs:
        for name, v in r.values.items():
            if family(name) == "anomaly" and name.split(".", 1)[1] not in bad:
                continue
            if v is not None or family(name) in COUNTED:
                names.add(name)
    for t in bad:  # a type bad in a run whose results listed it without a count
        if any("anomaly" in r.counted for r in runs):
            names.add(f"anomaly.{t}")
    return sorted(names, key=order_key)


def build_trend(
    series: Sequence[TrendRun],
    key: SeriesKey,
    *,
    last: int = DEFAULT_LAST,
    tolerances: Tolerances | None = None,
    min_history: int = MIN_HISTORY,
    left_out: Sequence[LeftOut] = (),
) -> Trend:
    """Judge the newest run of `series` (runs of one test, oldest first) against the
    `last` runs before it (pure)."""
    if not series:
        raise ValueError("a trend needs at least one run")
    if last < 1:
        raise ValueError("last must be at least 1")
    tol = tolerances or Tolerances()
    window = list(series[-(last + 1) :])
    newest, previous = window[-1], window[:-1]
    judgements = []
    for name in figure_names([r.figures for r in window]):
        s = spec(name)
        assert s is not None
        v = judge(
            newest.figures.value(name),
            [r.figures.value(name) for r in previous],
            worse=s.worse,
            tolerance=tol.of(name),
            floor=s.floor,
            min_history=min_history,
        )
        judgements.append(
            Judgement(
                name,
                v.status,
                newest.figures.value(name),
                v.baseline,
                v.limit,
                tol.of(name),
                v.history,
            )
        )
    return Trend(key, window, judgements, last, tol, min_history, list(left_out))


# ---------------------------------------------------------------------- loading


class UnknownTest(LookupError):
    """No runs of that name in the store; `known` lists the names there are."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(name)
        self.name = name
        self.known = known


class NoCheckedRun(LookupError):
    """Runs of the test exist, but none has a readable results.json."""


def _read(path: Path, max_bytes: int | None = None) -> dict[str, Any] | None:
    try:
        data = load_json(path) if max_bytes is None else load_json(path, max_bytes)
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _differs(key: SeriesKey, other: SeriesKey) -> str:
    a, b = key.to_json(), other.to_json()
    diffs = [f"{k} {shown(b[k])} (not {shown(a[k])})" for k in a if a[k] != b[k]]
    return "other settings: " + "; ".join(diffs)


def shown(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(map(str, v)) or "none"
    return "unknown" if v is None else str(v)


def load_trend(
    store: str | os.PathLike[str],
    name: str,
    *,
    last: int = DEFAULT_LAST,
    tolerances: Tolerances | None = None,
    min_history: int = MIN_HISTORY,
) -> Trend:
    """The trend of test `name` in `store`. The newest run with a readable results.json
    sets the key; runs before it with another key, or unchecked, are left out (and
    said so). UnknownTest when the store has no run of that name; NoCheckedRun when
    none of its runs is checked."""
    all_runs = list_runs(store)
    runs = [rd for rd in all_runs if rd.path.parent.name == name]
    if not runs:
        raise UnknownTest(name, sorted({rd.path.parent.name for rd in all_runs}))
    kept: list[TrendRun] = []
    left: list[LeftOut] = []
    key: SeriesKey | None = None
    for rd in reversed(runs):
        if len(kept) > last:
            break
        why, item, k = _load_run(rd, name)
        if item is None or k is None:
            left.append(LeftOut(rd.path.name, why))
            continue
        if key is None:
            key = k
        if k != key:
            left.append(LeftOut(rd.path.name, _differs(key, k)))
            continue
        kept.append(item)
    if key is None:
        raise NoCheckedRun(name)
    kept.reverse()
    left.reverse()
    return build_trend(
        kept, key, last=last, tolerances=tolerances, min_history=min_history, left_out=left
    )


def _load_run(rd: RunDir, name: str) -> tuple[str, TrendRun | None, SeriesKey | None]:
    if not rd.results.exists():
        return "not checked (no results.json)", None, None
    test = _read(rd.test_json, MAX_TEST_JSON) if rd.test_json.exists() else {}
    if test is None:
        return "test.json unreadable", None, None
    results = _read(rd.results)
    if results is None:
        return "results.json unreadable", None, None
    meta = TestMeta.from_json(test)
    return "", TrendRun(rd.path, run_date(rd), run_figures(results, meta)), series_key(name, meta)


# ---------------------------------------------------------------------- text


def fmt(figure: str, v: float | None) -> str:
    """A figure's value as shown: counts whole, others to 3 significant places or so."""
    if v is None:
        return "–"
    if family(figure) in COUNTED:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def describe(j: Judgement) -> str:
    """One line saying how a figure was judged."""
    s = spec(j.figure)
    unit = f" {s.unit}" if s and s.unit else ""
    if j.status == SHORT:
        return f"{fmt(j.figure, j.newest)}{unit}; {j.history} earlier runs have it (not enough)"
    if j.status == MISSING:
        return "the newest run's results do not have it"
    change = f", {j.change:+.0%}" if j.change is not None else ""
    word = {REGRESSION: "beyond", BETTER: "better than", OK: "within"}[j.status]
    return (
        f"{fmt(j.figure, j.newest)}{unit} against a median of {fmt(j.figure, j.baseline)}"
        f"{unit} over {j.history} runs{change}: {word} the limit {fmt(j.figure, j.limit)}"
        f"{unit} (tolerance {j.tolerance:.0%})"
    )
