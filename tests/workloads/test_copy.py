"""The copy workload's names for the nemesis (workloads/copy.py): the copiers'
transactional ids and group, so role targets (`txn-coordinator`, `kill-during-commit`)
aim at the coordinators the copiers really use."""

from __future__ import annotations

from typing import Any, cast

from ktrial.clusters.base import Cluster
from ktrial.workloads.copy import CopyOptions, CopyWorkload


class Topics:
    """The one thing setup asks of the cluster besides its address: create the topics."""

    bootstrap_servers = "127.0.0.1:1"

    def __init__(self) -> None:
        self.created: dict[str, int] = {}

    def create_topics(self, topics: dict[str, int], **_: Any) -> None:
        self.created.update(topics)


def test_the_copiers_transactional_ids_and_group_are_named() -> None:
    w = CopyWorkload(CopyOptions(copiers=3, run_id="ab12"), seed=1)
    w.setup(cast(Cluster, Topics()))
    keys = w.coordinator_keys()
    assert keys == {
        "transactional_ids": [
            "ktrial-ab12-copier-w0",
            "ktrial-ab12-copier-w1",
            "ktrial-ab12-copier-w2",
        ],
        "groups": ["ktrial-ab12-copy"],
    }
    # the ids are the ones the copiers' slots write on their txn invokes
    assert w.cfg is not None and keys["transactional_ids"][1].startswith(w.cfg.txn_id_prefix)
