"""`ktrial hunt`: search for a failing fault schedule, then shrink it (docs/hunt.md).

- ``plan``: the search plan (seeds × schedules × fault mixes), pure;
- ``verdict``: which anomalies count, and when a replay reproduces a failure, pure;
- ``repro``: the screened k-of-n test of a candidate, pure;
- ``shrink``: the delta-debugging shrinker of a fault schedule, pure;
- ``session``: the hunt's phases against a trial-runner collaborator;
- ``runner``: trials as `ktrial run` subprocesses (the side effects);
- ``output``: hunt.json, the scripts and the replay command.
"""
