"""The ssh backend's proof runs: a `ktrial run --cluster ssh` against sshd "hosts" on this
machine (testing/sshhosts.py), then what the run recorded and what it left on the hosts.

Makes 3 hosts (network namespaces, each with its own sshd, address and /var/tmp), runs
``python -m ktrial run --cluster ssh --node ... <ARGS>`` against them, and prints (and
writes to --json) the exit status, wall time, verdict, bad anomaly types, the faults
injected, the nemesis ops per f, and the residue: processes, tagged iptables rules,
memory cgroups and files outside the program cache on every host, plus the run's
control sockets and state record on this machine. With --sigint-after S it sends SIGINT
S seconds after "cluster ready" (Ctrl-C mid-run). The hosts are removed at the end.
Needs root, sshd, stress-ng; the brokers run under the lock:

    flock /tmp/ktrial-brokers.lock .venv/bin/python bench/ssh/proof.py --out /tmp/p -- \\
        --time-limit 120 --nemesis partition,loss,kill,stop,pause,restart,memory,toxic
"""

from __future__ import annotations

import argparse
import glob
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any


def latest_run(store: Path) -> Path | None:
    runs = [
        p
        for p in store.glob("*/*")
        if p.is_dir() and not p.is_symlink() and (p / "test.json").exists()
    ]
    return max(runs, key=lambda p: p.stat().st_mtime) if runs else None


def summarize(run: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"run_dir": str(run)}
    meta = json.loads((run / "test.json").read_text())
    out["run_id"] = meta.get("cluster", {}).get("run_id")
    out["hosts"] = meta.get("cluster", {}).get("hosts")
    out["uploaded"] = meta.get("cluster", {}).get("uploaded")
    out["interrupted"] = meta.get("interrupted")
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines() if line]
    out["ops"] = len(ops)
    nem = Counter(
        o["f"] for o in ops if o.get("process") == "nemesis" and o.get("f") != "node-stats"
    )
    out["nemesis_ops"] = dict(sorted(nem.items()))
    out["node_stats_samples"] = sum(1 for o in ops if o.get("f") == "node-stats")
    results_path = run / "results.json"
    if results_path.exists():
        res = json.loads(results_path.read_text())
        out["valid"] = res.get("valid")
        out["bad_error_types"] = res.get("bad_error_types")
        out["error_types"] = res.get("error_types")
        out["faults"] = res.get("faults")
    return out


def control_residue(run_id: str | None) -> list[str]:
    """What the run left on the control machine: its control sockets' directory, its
    state record, processes carrying its marker."""
    if not run_id:
        return []
    from ktrial.clusters import state as statemod

    found = [f"control dir {d}" for d in glob.glob(f"/tmp/ktrial-ssh-{run_id}-*")]
    rec = statemod.for_run(run_id)
    path = getattr(rec, "path", None)
    if path is not None and Path(path).exists():
        found.append(f"state record {path}")
    mark = f"KTRIAL_RUN={run_id}".encode()
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in env.read_bytes().split(b"\0"):
                found.append(f"process {env.parent.name} carrying {mark.decode()}")
        except OSError:
            continue
    return found


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for the store and the summary")
    ap.add_argument("--sigint-after", type=float, help="SIGINT this long after 'cluster ready'")
    ap.add_argument("--json", help="write the summary here (default OUT/summary.json)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then `ktrial run` flags")
    a = ap.parse_args(argv)
    extra = a.args[1:] if a.args[:1] == ["--"] else a.args
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    store = out / "store"

    from ktrial.testing.sshhosts import SshHosts

    summary: dict[str, Any] = {}
    with SshHosts(3) as hosts:
        cmd = [sys.executable, "-m", "ktrial", "run", *hosts.cli_args(), "--store", str(store)]
        cmd += ["--no-live", *extra]
        summary["command"] = " ".join(["ktrial run", *cmd[4:]])
        print("$", summary["command"], flush=True)
        t0 = time.monotonic()
        child = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # Python keeps SIGINT ignored if it started ignored: give it the default
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        lines: list[str] = []
        assert child.stderr is not None
        err = child.stderr

        def read() -> None:
            for line in err:
                lines.append(line)
                sys.stderr.write(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        ready_at = None
        while child.poll() is None:
            if ready_at is None and any("cluster ready" in x for x in lines):
                ready_at = time.monotonic()
                summary["ready_s"] = round(ready_at - t0, 1)
            due = ready_at is not None and a.sigint_after is not None
            if due and time.monotonic() - ready_at >= a.sigint_after:  # type: ignore[operator]
                summary["sigint_at_s"] = round(time.monotonic() - t0, 1)
                summary["active_at_sigint"] = active_faults(hosts)
                child.send_signal(signal.SIGINT)
                t_int = time.monotonic()
                child.wait(300)
                summary["exit_after_sigint_s"] = round(time.monotonic() - t_int, 1)
                break
            time.sleep(0.2)
        child.wait()
        reader.join(10)
        summary["exit"] = child.returncode
        summary["wall_s"] = round(time.monotonic() - t0, 1)
        run = latest_run(store)
        if run is not None:
            summary.update(summarize(run))
        summary["residue_hosts"] = hosts.residue(summary.get("run_id"))
        summary["residue_control"] = control_residue(summary.get("run_id"))
    path = Path(a.json) if a.json else out / "summary.json"
    path.write_text(json.dumps(summary, indent=1) + "\n")
    brief = {k: v for k, v in summary.items() if k not in ("faults",)}
    print(json.dumps(brief, indent=1))
    return 0


def active_faults(hosts: Any) -> dict[str, Any]:
    """What is active on the hosts at this moment: tagged rules, balloons, stopped brokers."""
    # the test hosts share this machine's processes: a node's by its marker
    find = (
        "r=$(iptables-save 2>/dev/null | grep -c ktrial-nemesis); echo rules=$r; "
        "for p in /proc/[0-9]*; do e=$(tr '\\0' '\\n' < $p/environ 2>/dev/null) || continue; "
        "printf '%s\\n' \"$e\" | grep -qx KTRIAL_NODE={node} || continue; "
        "printf '%s\\n' \"$e\" | grep -q '^KTRIAL_BALLOON=' && echo balloon; "
        "grep -q ') T ' $p/stat && echo stopped; done; true"
    )
    seen: dict[str, Any] = {}
    for i, h in enumerate(hosts.hosts, start=1):
        seen[f"n{i}"] = hosts.ssh(h, find.format(node=f"n{i}")).stdout.split()
    return seen


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
