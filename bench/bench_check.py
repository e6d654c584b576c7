"""Benchmark: `ktrial check` on a valid 1,000,000-op history vs merely parsing it.

Usage (from the repository root):

    .venv/bin/python bench/bench_check.py                 # generate (once) + measure
    .venv/bin/python bench/bench_check.py --ops 200000    # a smaller run
    .venv/bin/python bench/bench_check.py --profile       # + cProfile of check_file

The history comes from the correct-log model (ktrial.testing.gen), streamed
to disk: 10 keys, plain sends and transactions of 1-4 micro-ops, about 10% of
ops polls reading many records each, aborts, info ops, crashes, null offsets,
then a drain. "ops" counts history lines, as docs/history-format.md does (one op
per line: an invoke and its completion are two ops).

Measured, each in a fresh child process so peak RSS is its own (os.wait4):
  parse          orjson.loads of every line, nothing else (the floor)
  parse-msgspec  msgspec decode_lines of 64 KiB blocks, untyped (the checker's
                 JSON library, used the way the checker's reader uses it)
  read           ktrial.histories.iter_history: parse + validate into Op objects
  check   check_file() in-process: read + every analysis
  cli     `ktrial check FILE --json` end to end (also writes results.json)
The checker's verdict must be valid: a benchmark of an invalid history would
measure the wrong thing, so the script fails loudly otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

# Each child prints one JSON line: {"seconds": ..., ...}.
CHILD = {
    "parse": """
import orjson, sys, time
t = time.perf_counter(); n = 0
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        orjson.loads(line); n += 1
print(orjson.dumps({"seconds": time.perf_counter() - t, "lines": n}).decode())
""",
    "parse-msgspec": """
import gc, msgspec, orjson, sys, time
gc.disable()  # a block's objects are garbage together; the checker runs with GC off too
t = time.perf_counter(); n = 0; dec = msgspec.json.Decoder()
with open(sys.argv[1], "rb") as fh:
    rest = b""
    while buf := fh.read(1 << 16):
        buf = rest + buf; cut = buf.rfind(b"\\n") + 1; rest = buf[cut:]
        n += len(dec.decode_lines(buf[:cut]))
print(orjson.dumps({"seconds": time.perf_counter() - t, "lines": n}).decode())
""",
    "read": """
import orjson, sys, time
from ktrial.histories import iter_history
t = time.perf_counter(); n = 0
for _ in iter_history(sys.argv[1]):
    n += 1
print(orjson.dumps({"seconds": time.perf_counter() - t, "ops": n}).decode())
""",
    "check": """
import orjson, sys, time
from ktrial.checker import CheckOptions, check_file
t = time.perf_counter()
res = check_file(sys.argv[1], CheckOptions(sub_via="assign"))
print(orjson.dumps({"seconds": time.perf_counter() - t, "valid": res["valid"],
                    "bad": res["bad_error_types"], "errors": res["error_types"],
                    "stats": res["stats"]}).decode())
""",
    "profile": """
import cProfile, pstats, sys
from ktrial.checker import CheckOptions, check_file
pr = cProfile.Profile(); pr.enable()
res = check_file(sys.argv[1], CheckOptions(sub_via="assign"))
pr.disable()
assert res["valid"] is True, res["bad_error_types"]
st = pstats.Stats(pr, stream=sys.stderr).sort_stats("tottime"); st.print_stats(25)
st.sort_stats("cumulative"); st.print_stats(30)
print('{"seconds": 0}')
""",
}


def bench_params(ops: int, seed: int) -> Any:
    from ktrial.testing.gen import GenParams

    # Each main-phase op is two lines (invoke + completion); the drain and the
    # assign ops add well under 1%: this lands just above the target line count.
    return GenParams(
        seed=seed,
        keys=10,
        processes=10,
        ops=int(ops * 0.5),
        txn=True,
        poll_weight=0.10,
        send_weight=0.45,
        txn_weight=0.45,
        max_sends=4,
        max_mops=4,
        txn_poll_p=0.2,
        abort_p=0.05,
        fail_p=0.02,
        info_p=0.02,
        crash_p=0.002,
        sub_via="assign",
        reassign_p=0.002,
        from_start_p=0.0,  # new consumers start at the end: polls stay bounded
        null_offset_p=0.05,
        max_batch=400,
        drain_batch=2000,
        drain_consumers=1,
    )


def generate(path: Path, ops: int, seed: int) -> dict[str, Any]:
    from ktrial.testing.gen import iter_ops, to_jsonl

    t = time.perf_counter()
    n = to_jsonl(iter_ops(bench_params(ops, seed)), path)
    return {"lines": n, "seconds": time.perf_counter() - t, "bytes": path.stat().st_size}


def run_child(args: list[str]) -> tuple[dict[str, Any], float, float, int, int, str]:
    """Run a child; return (its JSON line or {}, wall s, CPU s, peak RSS bytes, rc, stderr)."""
    t = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    # Read pipes in full before reaping so a chatty child cannot block on them.
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = out.decode(errors="replace")
    data: dict[str, Any] = {}
    for line in text.splitlines()[::-1]:
        if line.startswith("{"):
            try:
                data = json.loads(line) if "\n" not in line else {}
            except json.JSONDecodeError:
                continue
            break
    cpu = ru.ru_utime + ru.ru_stime
    return data, wall, cpu, ru.ru_maxrss * 1024, proc.returncode, err.decode(errors="replace")


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu}), "
        f"Python {platform.python_version()}, load average {load[0]:.2f} at start"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ops", type=int, default=1_000_000, help="history lines to generate")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", type=Path, default=ROOT / "bench" / "out")
    ap.add_argument("--regenerate", action="store_true", help="regenerate even if present")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measurement (best kept)")
    ap.add_argument("--profile", action="store_true", help="also cProfile check_file")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="also time check_file() in a child without the CLI",
    )
    a = ap.parse_args()

    a.dir.mkdir(parents=True, exist_ok=True)
    path = a.dir / f"history-{a.ops}-{a.seed}.jsonl"
    print(f"machine: {machine()}")
    if a.regenerate or not path.exists():
        g = generate(path, a.ops, a.seed)
        print(
            f"generated {g['lines']:,} ops ({g['bytes'] / 2**20:.0f} MiB) in {g['seconds']:.1f} s"
        )
    print(f"history: {path} ({path.stat().st_size / 2**20:.0f} MiB)")

    results: dict[str, dict[str, Any]] = {}
    cmds = {
        "parse": [PY, "-c", CHILD["parse"], str(path)],
        "parse-msgspec": [PY, "-c", CHILD["parse-msgspec"], str(path)],
        "read": [PY, "-c", CHILD["read"], str(path)],
        "check": [PY, "-c", CHILD["check"], str(path)],
        "cli": [
            PY,
            "-m",
            "ktrial",
            "check",
            str(path),
            "--json",
            "--sub-via",
            "assign",
            "--out",
            str(a.dir / "results.json"),
        ],
    }
    if not a.in_process:
        del cmds["check"]
    for name, cmd in cmds.items():
        best: dict[str, Any] | None = None
        for _ in range(a.repeat):
            data, wall, cpu, rss, rc, err = run_child(cmd)
            if name == "cli":
                if rc != 0:
                    print(f"cli: exit {rc}\n{err[-3000:]}", file=sys.stderr)
                    return 1
                res = json.loads((a.dir / "results.json").read_text())
                data = {
                    "seconds": wall,
                    "valid": res["valid"],
                    "bad": res["bad_error_types"],
                    "errors": res["error_types"],
                }
            elif rc != 0:
                print(f"{name}: exit {rc}\n{err[-3000:]}", file=sys.stderr)
                return 1
            cur = {
                "seconds": data.get("seconds", wall),
                "wall": wall,
                "cpu": cpu,
                "rss": rss,
                **data,
            }
            if best is None or cur["cpu"] < best["cpu"]:
                best = cur
        assert best is not None
        results[name] = best
        print(
            f"{name:13} CPU {best['cpu']:8.2f} s  wall {best['wall']:8.2f} s  "
            f"(timed section {best['seconds']:.2f} s)  peak RSS {best['rss'] / 2**20:6.0f} MiB"
        )
        if name in ("check", "cli"):
            if best.get("valid") is not True:
                print(
                    f"{name}: verdict {best.get('valid')!r}, bad {best.get('bad')}: the "
                    "benchmark history must be valid",
                    file=sys.stderr,
                )
                return 1
            print(f"       verdict valid; error types seen: {best.get('errors')}")

    # CPU time of the whole child is the fairest comparison on a shared, loaded machine.
    parse = results["parse"]["cpu"]
    for name in [n for n in ("parse-msgspec", "read", "check", "cli") if n in results]:
        r = results[name]
        print(
            f"{name} / parse: CPU {r['cpu'] / parse:.2f}x, "
            f"wall {r['wall'] / results['parse']['wall']:.2f}x"
        )
    st = results["cli"].get("stats", {})
    if st:
        print(
            "history:",
            json.dumps(
                {
                    k: st[k]
                    for k in ("ops", "keys", "sends", "polls", "txns", "reads", "writes")
                    if k in st
                }
            ),
        )
        print(
            "checker stats:",
            json.dumps({k: st[k] for k in ("cycle_search", "check_time_s") if k in st}),
        )
    ok_time = results["cli"]["cpu"] <= 3 * parse
    ok_mem = max(r["rss"] for r in results.values()) < 2 * 2**30
    print(
        f"target check <= 3x parse: {'met' if ok_time else 'MISSED'}; "
        f"peak memory < 2 GiB: {'met' if ok_mem else 'MISSED'}"
    )

    if a.profile:
        _, _, _, _, rc, err = run_child([PY, "-c", CHILD["profile"], str(path)])
        print(err[-12000:])
        if rc != 0:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
