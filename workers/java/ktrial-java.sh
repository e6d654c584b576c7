#!/bin/sh
# ktrial's Java driver worker (docs/drivers.md): scripts/setup.sh copies this launcher
# to workers/bin/ktrial-java, beside the jar it builds into workers/bin/java/.
# One JVM per logical process: a small heap, the serial collector, C1 only and the
# class-data-sharing archive setup.sh trains (ktrial-java.jsa) keep its start-up and
# footprint small (16 of them start at once). KTRIAL_JAVA_OPTS adds JVM options;
# KTRIAL_JAVA_LOG sets kafka-clients' log level (default: error).
here=$(cd "$(dirname "$0")" && pwd)
cds=""
[ -f "$here/java/ktrial-java.jsa" ] && cds="-XX:SharedArchiveFile=$here/java/ktrial-java.jsa"
# With --host one JVM serves several logical processes (docs/drivers.md): more heap.
heap=256m
[ "${1:-}" = "--host" ] && heap=1g
exec java -Xms32m -Xmx$heap -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto $cds \
  $KTRIAL_JAVA_OPTS -jar "$here/java/ktrial-java.jar" "$@"
