"""The owner process of a cluster started by `ktrial cluster up`.

`cluster up` must return while the brokers keep running, yet every cluster needs a
live owner holding its ExitStack (that is what makes teardown structural and lets
`clean` tell a live cluster from a leftover). So `up` launches this small process in
its own session: it starts the cluster, records itself as owner (owner_kind
"keeper"), and sleeps until SIGTERM/SIGINT/SIGHUP (`cluster down`), then tears the
cluster down. If it is SIGKILLed, its cluster becomes a leftover for `cluster clean`.

Usage: python -m ktrial.clusters.keeper '<json options for LocalCluster>'
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from types import FrameType

from .local import LocalCluster


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("ktrial.clusters.admin").setLevel(logging.CRITICAL)
    opts = json.loads(argv[1])
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logging.info("signal %d: tearing down", signum)
        if not stop.is_set():
            stop.set()
            raise KeyboardInterrupt  # interrupt a start in progress; teardown follows

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    cluster = LocalCluster(**opts)
    cluster.owner_kind = "keeper"
    try:
        cluster.start()
        logging.info("ready: %s", cluster.bootstrap_servers)
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    except Exception:
        logging.exception("cluster failed")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cluster.teardown()
        logging.info("torn down")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
