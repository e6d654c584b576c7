"""The tables of the per-client comparison, from the run directories compare.sh made.

    .venv/bin/python bench/drivers/summarize.py [STORE]     (default bench/out/drivers)

For each test name (faults-D, notxn-D, txn-D) its newest run: the verdict, the
anomalies, ok/fail/info counts, ok data ops per second and ok transactions per second
over the main phase, the commit latency p50/p99 and the e2e latency p99 (offered ->
consumed, results.json metrics.liveness), and, for worker drivers, where the time went
per worker call (test.json workload_results.clients: mean ms per call).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def newest(store: Path, name: str) -> Path | None:
    runs = sorted(p for p in (store / name).glob("2*") if (p / "results.json").exists())
    return runs[-1] if runs else None


def row(run: Path) -> dict[str, Any]:
    r = json.loads((run / "results.json").read_text())
    t = json.loads((run / "test.json").read_text())
    m = r.get("metrics", {})
    counts = m.get("counts", {})
    tot = {k: sum(c.get(k, 0) for c in counts.values()) for k in ("ok", "fail", "info")}
    tp = m.get("throughput", {})
    live = m.get("liveness", {})
    e2e = live.get("e2e_latency_ms") or {}
    commit = live.get("commit_latency_ms") or {}
    anomalies = r.get("anomalies", {})
    # every anomaly found, with its count; the verdict says whether any is illegal under
    # the run's model (G0 write cycles, for one, are Kafka's normal interleaving)
    names = (
        [f"{k}×{v.get('count', '?') if isinstance(v, dict) else v}" for k, v in anomalies.items()]
        if isinstance(anomalies, dict)
        else list(anomalies)
    )
    clients = (t.get("workload_results") or {}).get("clients", {})
    return {
        "run": str(run),
        "driver": t.get("driver"),
        "valid": r.get("valid"),
        "anomalies": names,
        "counts": tot,
        "ops_per_s": tp.get("ok_data_per_s"),
        "txn_per_s": (tp.get("ok_per_s_by_f") or {}).get("txn"),
        "commit_p50": commit.get("p50"),
        "commit_p99": commit.get("p99"),
        "e2e_p99": e2e.get("p99"),
        "clients": clients,
    }


def fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.0f}" if v >= 100 else f"{v:.1f}"
    return str(v)


def main() -> None:
    store = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/out/drivers")
    print(
        "| run | driver | verdict | anomalies | ok/fail/info | ok data ops/s | txn/s |"
        " commit p50/p99 ms | e2e p99 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    calls: list[str] = []
    for kind in ("faults", "notxn", "txn"):
        for d in ("confluent", "java", "franz"):
            run = newest(store, f"{kind}-{d}")
            if run is None:
                continue
            x = row(run)
            c = x["counts"]
            print(
                f"| {kind} | {d} | {'VALID' if x['valid'] else 'INVALID'} |"
                f" {', '.join(x['anomalies']) or '–'} | {c['ok']}/{c['fail']}/{c['info']} |"
                f" {fmt(x['ops_per_s'])} | {fmt(x['txn_per_s'])} |"
                f" {fmt(x['commit_p50'])}/{fmt(x['commit_p99'])} | {fmt(x['e2e_p99'])} |"
            )
            for name, facts in x["clients"].items():
                ms = facts.get("call_ms", {})
                parts = ", ".join(f"{k} {v['mean']:g}" for k, v in ms.items() if v["n"] > 0)
                proto = facts.get("txn_protocol", "txn protocol not reported")
                calls.append(f"- {kind}-{d} ({name}, {proto}): {parts}")
    if calls:
        print("\nmean ms per worker call:")
        print("\n".join(calls))


if __name__ == "__main__":
    main()
