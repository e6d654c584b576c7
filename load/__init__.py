"""Background load beside a trial, and the latency-under-load study (docs/load.md).

- ``generator``: the settings of ktrial-loadgen (workers/loadgen, Go with franz-go)
  and the process that runs it, its telemetry written to ``load.jsonl``;
- ``sweep`` and ``knee``: `ktrial bench load`, a rate x partition sweep and its knee.

The telemetry's reader lives in ``histories/loadlog.py`` and the "behind" judgement in
``checker/behind.py``: the checker reads load.jsonl as data, like the history.
"""
