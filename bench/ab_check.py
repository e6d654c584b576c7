"""CPU time and peak memory of one in-process check_file() run: for A/B comparisons.

Run two checkouts of ktrial alternately on the same history, back to back, so that a
machine whose speed drifts (a throttled VM) still gives a fair ratio:

    git archive <commit> --prefix=ktrial/ | tar -x -C /tmp/a
    PYTHONPATH=/tmp/a .venv/bin/python bench/ab_check.py HISTORY --label a
    PYTHONPATH=/tmp/b .venv/bin/python bench/ab_check.py HISTORY --label b

(bench_check.py makes the 1,000,000-op history.)
"""

from __future__ import annotations

import argparse
import resource
import time

from ktrial.checker import check_file


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history")
    ap.add_argument("--label", default="check")
    args = ap.parse_args()
    t = time.process_time()
    res = check_file(args.history)
    cpu = time.process_time() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(
        f"{args.label}: check CPU {cpu:.1f} s, peak RSS {rss} MiB, "
        f"valid={res['valid']} {res['error_types']}"
    )


if __name__ == "__main__":
    main()
