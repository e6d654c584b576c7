#!/usr/bin/env bash
# Replay the two schedules under which librdkafka lost acknowledged writes on the safe
# profile (bench/RESULTS.md, session 3 and session 10) with each client, ktrial's
# workarounds for the librdkafka losses switched off, several times each; one flock of
# the broker lock per run, one run at a time. Run directories (brokers' data kept for
# `ktrial trace`) go to $STORE; replay.log gets one line per run (load average before
# it, exit code); summarize.py prints the table.
#   [REPS=4] [STORE=bench/out/lost-write-replay] [SCHEDULES='session10 session3'] \
#     [TXN_VERSION=1] bash bench/findings/2026-12-02-lost-write-replay/replay.sh [DRIVERS...]
#   (default drivers: franz java confluent; rounds go rep by rep, so a run cut short
#    still has every driver and schedule equally often)
# TXN_VERSION=1 formats the brokers with classic transactions (test names get "-tv1"):
# librdkafka speaks only those, where kafka-clients and franz-go bump the producer epoch
# at every transaction on Kafka 4's default transactions v2.
# WARMUP_<driver>=S (default java 25, others 0): the driver's faults come S seconds later
# and its run S seconds longer. The session-10 test starts its faults once every slot has
# done an ok op; the Java workers (a JVM per slot, 4 spares) take ~15-25 s to get there on
# this 2-core machine under load, so without it the Java runs met the first faults before
# any op of theirs (summarize.py's "first ok txn" column shows it).
# UNTIL=HH:MM (UTC): start no run at or after that time, even one that got the lock
# late (a shared machine's broker deadline).
# Exit codes of ktrial run are recorded, not fatal (1 invalid is what we look for).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
STORE=${STORE:-bench/out/lost-write-replay}
LOCK=${LOCK:-/tmp/ktrial-brokers.lock}
REPS=${REPS:-4}
FIRST_REP=${FIRST_REP:-1}  # the number of the first repetition, for replay.log
SCHEDULES=${SCHEDULES:-session10 session3}
drivers=("$@")
[ ${#drivers[@]} -gt 0 ] || drivers=(franz java confluent)
mkdir -p "$STORE"
export STORE UNTIL=${UNTIL:-}
# Both workarounds off for every client: a client that made either mistake would lose
# the write here as librdkafka did (docs/drivers.md, "Duplicates and lost writes per client").
tv=() suffix=""
if [ -n "${TXN_VERSION:-}" ]; then tv=(--transaction-version "$TXN_VERSION"); suffix="-tv$TXN_VERSION"; fi
off=(--workload-opt retire_after_unsure_abort=false --workload-opt abort_unknown_offset=false)
args_for() {  # schedule, warm-up seconds
  case $1 in
    # tests/integration/test_workloads_faults.py::test_queue_txn_slots_recover_after_kill_and_partition
    session10) echo --txn --concurrency 6 --seed 5 --time-limit $((30 + $2)) --nemesis kill,partition ;;
    # the session-3 main-job command (its interval schedule as a script: session3.toml)
    session3) echo --txn --time-limit $((60 + $2)) --abort-p 0.2 --seed 102 \
      --nemesis partition,kill,pause,memory,toxic ;;
    *) echo "unknown schedule $1" >&2; return 1 ;;
  esac
}
for rep in $(seq "$FIRST_REP" $((FIRST_REP + REPS - 1))); do
  for sched in $SCHEDULES; do
    for d in "${drivers[@]}"; do
      name="$sched$suffix-$d"
      warm_var="WARMUP_$d" default_warm=0
      [ "$d" != java ] || default_warm=25
      warm=${!warm_var:-$default_warm}
      read -r -a args <<< "$(args_for "$sched" "$warm")"
      script="$here/$sched.toml"
      if [ "$warm" -gt 0 ]; then  # every `at` of the schedule, $warm seconds later
        script="$STORE/$sched-at+$warm.toml"
        awk -v s="$warm" '/^at = /{ $3 = $3 + s } { print }' "$here/$sched.toml" > "$script"
      fi
      export NAME=$name REP=$rep
      set +e
      # shellcheck disable=SC2016  # expanded by the inner shell, once it holds the lock
      flock "$LOCK" sh -c '
        if [ -n "$UNTIL" ] && [ "$(date -u +%H%M)" -ge "$(echo "$UNTIL" | tr -d :)" ]; then
          echo "$(date -u +%FT%TZ) skip $NAME rep $REP: past $UNTIL" >> "$STORE/replay.log"; exit 75
        fi
        echo "$(date -u +%FT%TZ) start $NAME rep $REP load $(cut -d" " -f1-3 /proc/loadavg)" >> "$STORE/replay.log"
        exec "$@"' sh \
        .venv/bin/python -m ktrial run --store "$STORE" --name "$name" --no-live --keep-data \
        --driver "$d" "${args[@]}" "${tv[@]}" "${off[@]}" --nemesis-schedule script \
        --nemesis-script "$script"
      rc=$?
      set -e
      [ $rc -ne 75 ] || exit 0
      echo "$(date -u +%FT%TZ) end $name rep $rep exit $rc load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$STORE/replay.log"
    done
  done
done
