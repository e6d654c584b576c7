#!/usr/bin/env bash
# A leak in node n2 of the next ktrial run: wait for a new ktrial-*-n2 memory cgroup,
# then run a process inside it that keeps 2 MiB/s more memory resident (cap 1.5 GiB).
set -euo pipefail
before=$(find /sys/fs/cgroup/memory -maxdepth 4 -name 'ktrial-*-n2' -type d | sort)
while :; do
  now=$(find /sys/fs/cgroup/memory -maxdepth 4 -name 'ktrial-*-n2' -type d | sort)
  new=$(comm -13 <(echo "$before") <(echo "$now") | head -1)
  [ -n "$new" ] && break
  sleep 1
done
sleep 30   # let the broker settle first
echo "leaking into $new"
exec sh -c 'echo $$ > "$1/cgroup.procs" && exec python3 -c "
import time
keep = []
while sum(map(len, keep)) < 1536 << 20:
    keep.append(b\"x\" * (1 << 20)); time.sleep(0.5)
time.sleep(3600)
"' leak "$new"
