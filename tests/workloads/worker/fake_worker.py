"""A fake driver worker for the Python adapter's tests: the JSON-lines contract over an
in-memory log, no Kafka. It stands in for the worker process only where the unit under
test is the Python side (workloads/worker/); the real worker runs in tests/integration.

Behaviour is scripted through the environment:

* FAKE_LOG: a file each request is appended to, one JSON line (the calls the adapter made);
* FAKE_FAIL: ``call=NAME`` pairs (comma-separated): that call answers an error record named NAME;
* FAKE_FAIL_SEND: an error name every send's delivery report carries;
* FAKE_HANG: a call that never answers; FAKE_DIE: a call on which the worker exits;
* FAKE_TXN_PROTOCOL: what `begin` and `commit` say of the transaction protocol ("v2");
* `open`'s value_bytes pads every produced value with spaces and is echoed in the reply,
  as the contract says; FAKE_OLD_OPEN: a worker that predates the field (no echo, no pad);
* subscribe mode: `subscribe` assigns partitions 0..FAKE_PARTITIONS-1 (default 4) of each
  topic at offset 0, reported as a rebalance event of its reply; FAKE_REVOKE_ON_FETCH=N:
  the N-th fetch revokes every assigned partition first (an event of its reply).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def main() -> None:
    log_path = os.environ.get("FAKE_LOG")
    fail = dict(p.split("=", 1) for p in os.environ.get("FAKE_FAIL", "").split(",") if p)
    fail_send = os.environ.get("FAKE_FAIL_SEND")
    hang, die = os.environ.get("FAKE_HANG"), os.environ.get("FAKE_DIE")
    logs: dict[tuple[str, int], list[str]] = {}
    pos: dict[tuple[str, int], int] = {}
    pending: list[dict[str, Any]] = []
    partitions = int(os.environ.get("FAKE_PARTITIONS", "4"))
    revoke_on = int(os.environ.get("FAKE_REVOKE_ON_FETCH", "0"))
    fetches = 0
    value_bytes = 0
    for line in sys.stdin:
        req = json.loads(line)
        call = req["call"]
        if log_path:
            with open(log_path, "a") as f:
                f.write(json.dumps(req) + "\n")
        if call == die:
            sys.exit(3)
        if call == hang:
            time.sleep(3600)
        reply: dict[str, Any] = {"id": req["id"], "ok": True}
        if call in fail:
            reply = {
                "id": req["id"],
                "ok": False,
                "error": {"name": fail[call], "message": "scripted"},
            }
        elif call == "open" and not os.environ.get("FAKE_OLD_OPEN"):
            value_bytes = int(req.get("value_bytes", 0))
            reply["value_bytes"] = value_bytes
        elif call in ("begin", "commit") and os.environ.get("FAKE_TXN_PROTOCOL"):
            reply["txn_protocol"] = os.environ["FAKE_TXN_PROTOCOL"]
        elif call == "produce":
            for r in req["records"]:
                tp = (r["topic"], r["partition"])
                if fail_send:
                    d = {"op": r["op"], "i": r["i"], "error": {"name": fail_send, "message": "x"}}
                else:
                    logs.setdefault(tp, []).append(r["value"].ljust(value_bytes))
                    d = {"op": r["op"], "i": r["i"], "offset": len(logs[tp]) - 1}
                pending.append(d)
        elif call == "flush":
            reply["results"], reply["unreported"] = pending, 0
            pending = []
        elif call == "assign":
            pos = {(o["topic"], o["partition"]): o["offset"] for o in req["offsets"]}
        elif call == "seek":
            for o in req["offsets"]:
                pos[(o["topic"], o["partition"])] = o["offset"]
        elif call == "subscribe":
            parts = [{"topic": t, "partition": p} for t in req["topics"] for p in range(partitions)]
            pos = {(o["topic"], o["partition"]): 0 for o in parts}
            reply["rebalance"] = [{"type": "assigned", "partitions": parts}]
        elif call == "fetch":
            fetches += 1
            if fetches == revoke_on:
                parts = [{"topic": t, "partition": p} for t, p in sorted(pos)]
                reply["rebalance"] = [{"type": "revoked", "partitions": parts}]
                pos = {}
            recs = []
            for (t, p), off in sorted(pos.items()):
                for o, v in enumerate(logs.get((t, p), [])[off:], start=off):
                    recs.append([t, p, o, v])
                pos[(t, p)] = len(logs.get((t, p), []))
            reply["records"], reply["errors"] = recs[: req.get("max") or None], []
        elif call == "position":
            reply["positions"] = [
                {**o, "offset": pos.get((o["topic"], o["partition"]), -1)} for o in req["offsets"]
            ]
        print(json.dumps(reply), flush=True)
        if call == "close":
            return


if __name__ == "__main__":
    main()
