#!/usr/bin/env bash
# The degraded variants of docs/soak.md, each a 5-minute --soak run on a local cluster
# (run as root from the repository root; one broker cluster at a time).
# Usage: bash bench/soak/variants.sh [STORE]
# Each run takes the broker lock when one is there (several users share the machine).
set -u
store=${1:-/tmp/soak-store}
here=$(dirname "$0")
mkdir -p "$store"
lock=/tmp/ktrial-brokers.lock
K=".venv/bin/ktrial run --soak --time-limit 300 --store $store --no-live"
[ -e "$lock" ] && K="flock $lock $K"
echo "== consumers stop reading after 5,000 ops"
$K --seed 22 --name soak-consumer-stops --workload-opt stop_polls_after=5000; echo "exit $?"
echo "== one broker paused from 30 s to the end (replication factor 3: Kafka fails over)"
$K --seed 23 --name soak-paused --nemesis pause --nemesis-schedule script \
  --nemesis-script "$here/pause-n1.toml"; echo "exit $?"
echo "== the same with replication factor 1 (no failover possible)"
$K --seed 25 --name soak-paused-rf1 --nemesis pause --nemesis-schedule script \
  --nemesis-script "$here/pause-n1.toml" --workload-opt replication_factor=1 \
  --broker-config min.insync.replicas=1; echo "exit $?"
echo "== a leak in node n2's memory cgroup (2 MiB/s)"
"$here/leak.sh" > "$store/leak.log" 2>&1 & lp=$!
$K --seed 24 --name soak-leak --nemesis partition,kill,pause,toxic; echo "exit $?"
kill "$lp" 2>/dev/null; true  # leak.sh execs its leaking process: $lp is that process
echo "== every stored run re-checked with this tree's checker (offline; no brokers)"
for run in soak soak-consumer-stops soak-paused soak-paused-rf1 soak-leak; do
  [ -d "$store/$run/latest" ] || continue
  .venv/bin/ktrial check "$store/$run/latest" --liveness-bad | grep -E "VALID|BAD"
done
