"""A fake worker program in host mode for hosted.py's tests: several logical processes
over one JSON-lines channel (``proc`` in every request), no Kafka. It stands in for the
program only where the unit under test is the Python side (workloads/worker/hosted.py);
the Java worker's real host mode runs in tests/workloads/worker/test_hosted.py and
against brokers in tests/integration.

Calls: ``open`` and ``close`` answer at once; ``echo`` answers ``{"said": said}`` after
``delay_ms`` on a thread of its own (so replies come back out of order); ``hang`` never
answers; ``die`` ends the program (exit 3); ``crash`` is never answered. Every request
is appended to $FAKE_LOG as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

lock = threading.Lock()


def reply(req: dict[str, Any], **fields: Any) -> None:
    line = json.dumps({"id": req["id"], "proc": req["proc"], "ok": True, **fields})
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> None:
    assert sys.argv[1:] == ["--host"], sys.argv
    log = os.environ.get("FAKE_LOG")
    for line in sys.stdin:
        req = json.loads(line)
        if log:
            with open(log, "a") as f:
                f.write(json.dumps(req) + "\n")
        call = req["call"]
        if call == "die":
            os._exit(3)
        if call in ("hang", "crash"):
            continue
        if call == "echo":
            delay = req.get("delay_ms", 0) / 1000

            def later(r: dict[str, Any] = req, d: float = delay) -> None:
                time.sleep(d)
                reply(r, said=r.get("said"))

            threading.Thread(target=later, daemon=True).start()
            continue
        reply(req)


if __name__ == "__main__":
    main()
