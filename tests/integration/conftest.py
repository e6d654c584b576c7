"""Fixtures for integration tests against real Kafka brokers (clusters.local).

- `local_cluster` (session): one 3-node `safe` cluster shared by every test; tests that
  fault it should end with `local_cluster.heal()` or use `healed_local_cluster`.
- `healed_local_cluster` (function): the session cluster, healed after the test
  (paused nodes resumed, namespace iptables flushed, cgroup limits lifted, stopped
  nodes started, readiness awaited).
- `make_local_cluster` (function): a factory for a fresh cluster when a test must
  destroy state; every cluster it made is torn down after the test.

All of them skip, with the reason, when the machine cannot run brokers (not root,
no java, Kafka jars not installed: run `ktrial cluster install`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ktrial.clusters.install import InstallError, resolve
from ktrial.clusters.local import LocalCluster


def local_cluster_skip_reason() -> str | None:
    """Why real brokers cannot run here, or None if they can."""
    if os.geteuid() != 0:
        return "local cluster needs root (network namespaces, iptables, cgroups)"
    for tool in ("java", "ip", "iptables", "nsenter"):
        if shutil.which(tool) is None:
            return f"`{tool}` not installed (run scripts/setup.sh)"
    try:
        resolve(auto_install=False)
    except InstallError as e:
        return str(e)
    return None


@pytest.fixture
def require_local_cluster() -> None:
    """Skip the test unless real brokers can run here (for tests that build their own)."""
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = LocalCluster(nodes=3, profile="safe")
    with cluster:  # not `as`: OwnedCluster.__enter__ is typed as the base class
        yield cluster


@pytest.fixture
def healed_local_cluster(local_cluster: LocalCluster) -> Iterator[LocalCluster]:
    yield local_cluster
    local_cluster.heal()


@pytest.fixture
def make_local_cluster() -> Iterator[Callable[..., LocalCluster]]:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    made: list[LocalCluster] = []

    def make(**kwargs: Any) -> LocalCluster:
        cluster = LocalCluster(**kwargs)
        made.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in reversed(made):
        cluster.teardown()
