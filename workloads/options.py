"""The settings every workload is asked about, and how each workload takes them.

`ktrial run` has one flag for each of these (--txn, --idempotence, --sub-via,
--abort-p, --crash-clients, --rate, --concurrency, --driver); a workload may take a setting,
rename it (copy's `concurrency` is its number of copiers) or refuse it. Each
workload's rules live with its options class (``from_common``); this module holds
the shared record and the dispatch. Refusals are ValueErrors the command line shows
as usage errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")


def topic_stem(topic_prefix: str, run_id: str) -> str:
    """What a workload's topic names start with: `--topic-prefix` as given (the same
    names every run: topics made beforehand, `--use-existing-topics`), else
    ``ktrial-<run id>`` (fresh topics per run). ValueError for a name Kafka refuses."""
    if not topic_prefix:
        return f"ktrial-{run_id}"
    if not _TOPIC_CHARS.fullmatch(topic_prefix) or len(topic_prefix) > 200:
        raise ValueError(
            f"topic prefix {topic_prefix!r}: Kafka topic names take letters, digits, "
            "'.', '_' and '-' (at most 200 characters here)"
        )
    return topic_prefix


@dataclass(frozen=True)
class CommonOptions:
    """Settings asked of every workload; None means "not given: the workload's default"."""

    txn: bool | None = None
    idempotence: bool | None = None
    sub_via: str | None = None
    abort_p: float | None = None
    crash_clients: int | None = None
    rate: float | None = None
    concurrency: int | None = None
    driver: str | None = None  # the client library (docs/drivers.md)

    def given(self, *names: str) -> dict[str, Any]:
        """{name: value} of those of `names` that were given."""
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def refuse_queue_only(self, takes_driver: bool = False) -> None:
        """Workloads other than queue choose their own transactions, idempotence and
        partition assignment; asking for others is an error, not silently ignored.
        A workload that runs on the worker drivers too (copy, txn-cost) says so
        (`takes_driver`)."""
        if self.txn is not None or self.idempotence is False or self.sub_via is not None:
            raise ValueError(
                "--txn, --no-idempotence and --sub-via apply to the queue workload; copy is "
                "always transactional and idempotent and reads through its consumer group"
            )
        if not takes_driver and self.driver not in (None, "confluent"):
            raise ValueError(
                f"--driver {self.driver} does not run this workload; it uses --driver confluent"
            )


def workload_options(
    workload: str,
    txn: bool | None = None,
    idempotence: bool | None = None,
    sub_via: str | None = None,
    abort_p: float | None = None,
    crash_clients: int | None = None,
    rate: float | None = None,
    concurrency: int | None = None,
    driver: str | None = None,
) -> dict[str, Any]:
    """The common settings -> workload `workload`'s option dict (only what it takes)."""
    common = CommonOptions(
        txn, idempotence, sub_via, abort_p, crash_clients, rate, concurrency, driver
    )
    if workload == "queue":
        from .queue import QueueOptions

        return QueueOptions.from_common(common)
    if workload == "copy":
        from .copy import CopyOptions

        return CopyOptions.from_common(common)
    if workload == "txn-cost":
        from .txn_cost import TxnCostOptions

        return TxnCostOptions.from_common(common)
    from . import WORKLOADS

    raise ValueError(f"unknown workload {workload!r}; choose one of {', '.join(WORKLOADS)}")
