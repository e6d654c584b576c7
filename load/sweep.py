"""`ktrial bench load`: a rate x partition sweep of the latency under load (docs/load.md).

For each partition count and each offered rate, a fresh topic gets the load for
`point_s` seconds; the figures are those of the last `measure_s` seconds (load/knee.py),
with the CPU the brokers used over that stretch when ktrial can see their processes
(local clusters; None elsewhere). Each point's load.jsonl is kept in the output
directory, with points.json (every point, the knees, the settings), table.txt and
sweep.png.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..clusters.base import Cluster
from ..histories.loadlog import read_loadlog
from ..nemesis.nodestats import proc_cpu
from .generator import LoadGenerator, LoadOptions
from .knee import Knee, Point, knees, measured, point_figures, table


@dataclass(frozen=True)
class SweepPlan:
    rates: tuple[float, ...]
    partitions: tuple[int, ...]
    point_s: float = 60.0
    measure_s: float = 30.0
    base: LoadOptions = field(default_factory=LoadOptions)

    def __post_init__(self) -> None:
        if not self.rates or not self.partitions:
            raise ValueError("a sweep needs at least one rate and one partition count")
        if any(r <= 0 for r in self.rates):
            raise ValueError("every rate must be > 0")
        if any(p < 1 for p in self.partitions):
            raise ValueError("every partition count must be >= 1")
        if not 0 < self.measure_s <= self.point_s:
            raise ValueError("want 0 < measure seconds <= point seconds")

    def points(self) -> list[tuple[int, float]]:
        return [(p, r) for p in self.partitions for r in sorted(self.rates)]


def broker_cpu_s(cluster: Cluster) -> float | None:
    """CPU seconds the brokers used so far; None when any broker's process is unseen."""
    total = 0.0
    for n in cluster.nodes:
        pid = n.pid
        cpu = proc_cpu(pid) if pid is not None else None
        if cpu is None:
            return None
        total += cpu[0]
    return total


def run_point(
    cluster: Cluster,
    plan: SweepPlan,
    partitions: int,
    rate: float,
    out_dir: Path,
    index: int,
) -> Point:
    """One point: its topic, the load for point_s, the figures of its last measure_s."""
    topic = f"{plan.base.topic}-p{partitions}-{index}"
    opts = replace(plan.base, rate=rate, partitions=partitions, topic=topic)
    cluster.create_topics({topic: partitions}, replication_factor=opts.replication)
    path = out_dir / f"load-p{partitions}-r{rate:g}.jsonl"
    gen = LoadGenerator(
        opts, cluster.bootstrap_servers, path, out_dir / "loadgen.log", plan.point_s
    )
    with gen:
        # the generator starts offering once its consumers have joined (up to ~10 s)
        deadline = time.monotonic() + 30
        while gen.running() and time.monotonic() < deadline and not _started(path):
            time.sleep(0.2)
        time.sleep(max(0.0, plan.point_s - plan.measure_s))
        cpu0, t0 = broker_cpu_s(cluster), time.monotonic()
        gen.wait(plan.measure_s + 60)
        cpu1, t1 = broker_cpu_s(cluster), time.monotonic()
    cores = (cpu1 - cpu0) / (t1 - t0) if cpu0 is not None and cpu1 is not None else None
    log = read_loadlog(path)
    return point_figures(
        rate,
        partitions,
        measured(log.seconds, plan.point_s, plan.measure_s),
        round(cores, 2) if cores is not None else None,
    )


def _started(path: Path) -> bool:
    try:
        with path.open() as f:
            return any('"start"' in line for line in f)
    except OSError:
        return False


def sweep(
    cluster: Cluster,
    plan: SweepPlan,
    out_dir: Path,
    say: Callable[[str], Any] = print,
    stop: Callable[[], bool] = lambda: False,
) -> tuple[list[Point], list[Knee]]:
    """Every point of the plan in order (a behind point ends its partition count's
    climb: higher rates would only be more behind); points.json rewritten after each."""
    out_dir.mkdir(parents=True, exist_ok=True)
    points: list[Point] = []
    behind_at: set[int] = set()
    for i, (parts, rate) in enumerate(plan.points()):
        if stop():
            break
        if parts in behind_at:
            say(f"  {parts} partitions, {rate:g} msg/s: skipped (a lower rate was behind)")
            continue
        say(f"  {parts} partitions, {rate:g} msg/s for {plan.point_s:g} s ...")
        p = run_point(cluster, plan, parts, rate, out_dir, i)
        points.append(p)
        say(
            f"    e2e p50 {p.e2e_p50_ms} ms, p99 {p.e2e_p99_ms} ms, consumed "
            f"{p.consumed_rate}/s, brokers {p.broker_cores} cores"
            + (f"  BEHIND ({p.why})" if p.behind else "")
        )
        if p.behind:
            behind_at.add(parts)
        write_results(out_dir, plan, points)
    return points, knees(points)


def write_results(out_dir: Path, plan: SweepPlan, points: Sequence[Point]) -> None:
    ks = knees(points)
    doc = {
        "plan": {
            "rates": list(plan.rates),
            "partitions": list(plan.partitions),
            "point_s": plan.point_s,
            "measure_s": plan.measure_s,
            "load": plan.base.to_json(),
        },
        "points": [p.to_json() for p in points],
        "knees": [
            {"partitions": k.partitions, "rate": k.rate, "reached": k.reached, "text": k.text()}
            for k in ks
        ],
    }
    (out_dir / "points.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out_dir / "table.txt").write_text(
        "\n".join([*table(points), "", *(k.text() for k in ks)]) + "\n"
    )


def plot_sweep(points: Sequence[Point], ks: Sequence[Knee], out: Path) -> Path | None:
    """e2e p50 and p99 against the offered rate, one colour per partition count; behind
    points marked with a red cross, each knee with a dashed line."""
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.0, 4.5))
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")
    for i, parts in enumerate(sorted({p.partitions for p in points})):
        c = colours[i % len(colours)]
        row = sorted((p for p in points if p.partitions == parts), key=lambda p: p.rate)
        for attr, style in (("e2e_p50_ms", "-"), ("e2e_p99_ms", ":")):
            pts = [(p.rate, getattr(p, attr)) for p in row if getattr(p, attr)]
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    style,
                    marker="o",
                    color=c,
                    label=f"{parts} partitions {attr[4:7]}",
                )
        bad = [p for p in row if p.behind and p.e2e_p99_ms]
        if bad:
            ax.scatter(
                [p.rate for p in bad],
                [p.e2e_p99_ms or 0.0 for p in bad],
                marker="x",
                s=90,
                color="#d62728",
                zorder=5,
            )
        for k in ks:
            if k.partitions == parts and k.rate is not None and k.reached:
                ax.axvline(k.rate, color=c, linestyle="--", alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered rate (messages/s)")
    ax.set_ylabel("end-to-end latency (ms)")
    ax.set_title("Latency under load (red x: behind; dashed: knee)", loc="left", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=96)
    plt.close(fig)
    return out
