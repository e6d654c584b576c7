"""A small PNG of a load run's latency over its memory telemetry (issue 18, docs/load.md).

The report's node-memory plot has every panel; this one keeps what the soak at the knee
with memory pressure is about, on one time axis with the fault windows shaded: produce
and e2e p99 on top, then per node the cgroup's usage and limit, its limit hits/s
(direct reclaim of the cgroup), refaults/s, the memory PSI and anonymous memory.

    .venv/bin/python bench/load/soakplot.py RUN_DIR bench/load/soak-memory.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO.parent))

from ktrial.histories.loadlog import LOAD_FILE, read_loadlog  # noqa: E402
from ktrial.report.loadplots import load_offset, plot_node_memory, read_node_samples  # noqa: E402
from ktrial.report.scan import scan_history  # noqa: E402

PANELS = ("limit", "hits", "refault", "psi", "anon", "cache")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--dpi", type=int, default=60)
    a = ap.parse_args()
    history = a.run_dir / "history.jsonl"
    test = json.loads((a.run_dir / "test.json").read_text())
    log = read_loadlog(a.run_dir / LOAD_FILE)
    scan = scan_history(history)
    out = plot_node_memory(
        read_node_samples(history),
        log,
        load_offset(log, test),
        scan.faults,
        scan.end_s,
        a.out,
        panels=PANELS,
        height=1.35,
        dpi=a.dpi,
    )
    if out is None:
        print("nothing to draw (no node-stats samples?)", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
