#!/usr/bin/env bash
# The per-client comparison (docs/drivers.md "The same faults, each client", and
# bench/RESULTS.md "Driver throughput"): for each driver, a queue run under the fixed
# fault schedule bench/drivers/faults.toml (same seed), then a fault-free run without
# and one with transactions. One flock of the broker lock per run. Run directories go
# to $STORE (default bench/out/drivers); bench/drivers/summarize.py makes the tables.
#   [KINDS='faults txn notxn'] bash bench/drivers/compare.sh [DRIVERS...]
#   (default: java franz confluent, every kind)
set -euo pipefail
cd "$(dirname "$0")/../.."
STORE=${STORE:-bench/out/drivers}
LOCK=${LOCK:-/tmp/ktrial-brokers.lock}
drivers=("$@")
[ ${#drivers[@]} -gt 0 ] || drivers=(java franz confluent)
kinds=${KINDS:-faults txn notxn}
run() { flock "$LOCK" .venv/bin/python -m ktrial run --store "$STORE" --no-live "$@"; }
for kind in $kinds; do
  for d in "${drivers[@]}"; do
    case $kind in
      faults) run --name "faults-$d" --driver "$d" --seed 3 --time-limit 75 --abort-p 0.1 \
        --nemesis partition,kill,pause,memory,toxic --nemesis-schedule script \
        --nemesis-script bench/drivers/faults.toml || true ;;
      txn) run --name "txn-$d" --driver "$d" --seed 5 --txn --time-limit 30 --heal-wait 0 \
        --check-every 0 || true ;;
      notxn) run --name "notxn-$d" --driver "$d" --seed 5 --no-txn --time-limit 30 \
        --heal-wait 0 --check-every 0 || true ;;
    esac
  done
done
