#!/bin/sh
# the shrunken schedule, on seed 17
exec ktrial run --profile unsafe --drain-timeout 20 --node-stats-interval 0 --seed 17 --time-limit 60 --nemesis-script /tmp/hunt-careful/h2/minimal.toml
