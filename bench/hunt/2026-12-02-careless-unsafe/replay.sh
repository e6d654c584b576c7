#!/bin/sh
# the shrunken schedule, on seed 11
exec ktrial run --profile unsafe --no-txn --no-idempotence --acks 1 --producer-config retries=5 --heal-wait 1 --drain-timeout 8 --node-stats-interval 0 --seed 11 --time-limit 25 --nemesis-script /tmp/hunt-scratch/hunt2/minimal.toml
