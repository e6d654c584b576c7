"""workloads/options.py: each workload's rules for the settings every workload is asked
about (`ktrial run --txn/--idempotence/--sub-via/--abort-p/--crash-clients/--rate/
--concurrency`)."""

from __future__ import annotations

import pytest
from ktrial.workloads import make_workload
from ktrial.workloads.copy import CopyOptions
from ktrial.workloads.options import CommonOptions, workload_options
from ktrial.workloads.queue import QueueOptions
from ktrial.workloads.txn_cost import TxnCostOptions


def test_the_queue_takes_every_setting_and_transactions_by_default() -> None:
    assert QueueOptions.from_common(CommonOptions()) == {"txn": True}
    assert QueueOptions.from_common(CommonOptions(txn=False, rate=5.0)) == {
        "txn": False,
        "rate": 5.0,
    }


def test_copy_renames_concurrency_and_refuses_queue_only_settings() -> None:
    assert CopyOptions.from_common(CommonOptions(concurrency=4, abort_p=0.1)) == {
        "copiers": 4,
        "abort_p": 0.1,
    }
    assert CopyOptions.from_common(CommonOptions(idempotence=True)) == {}  # the default
    for bad in (CommonOptions(txn=True), CommonOptions(idempotence=False)):
        with pytest.raises(ValueError, match="apply to the queue workload"):
            CopyOptions.from_common(bad)
    with pytest.raises(ValueError, match="apply to the queue workload"):
        CopyOptions.from_common(CommonOptions(sub_via="assign"))


def test_txn_cost_takes_none_and_its_options_refuse_them_by_name() -> None:
    opts = TxnCostOptions.from_common(CommonOptions(concurrency=8, crash_clients=3))
    with pytest.raises(ValueError, match="--concurrency does not apply"):
        make_workload("txn-cost", opts, 1)
    with pytest.raises(ValueError, match="apply to the queue workload"):
        TxnCostOptions.from_common(CommonOptions(txn=False))


def test_dispatch_by_workload_name() -> None:
    assert workload_options("queue", concurrency=2) == {"txn": True, "concurrency": 2}
    assert workload_options("copy", rate=1.0) == {"rate": 1.0}
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        workload_options("nope")
