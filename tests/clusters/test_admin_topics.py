"""clusters/admin.py: topics made beforehand (--use-existing-topics) and the security
settings of every admin client, with a scripted admin client (no brokers)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from ktrial.clusters import admin as adminmod
from ktrial.clusters.admin import (
    AdminCluster,
    ExistingTopicsError,
    existing_topic_problems,
    use_existing_topics,
)
from ktrial.clusters.external import ExternalCluster
from ktrial.clusters.security import Security


def _done(value: Any = None, error: Exception | None = None) -> Future[Any]:
    f: Future[Any] = Future()
    if error is not None:
        f.set_exception(error)
    else:
        f.set_result(value)
    return f


class TopicsAdmin:
    """Topics with partition counts and (low, high) offsets per partition."""

    def __init__(self, topics: dict[str, list[tuple[int, int]]], refuse_delete: bool = False):
        self.topics = topics
        self.refuse_delete = refuse_delete
        self.deleted: list[tuple[str, int, int]] = []
        self.created: list[str] = []

    def list_topics(self, timeout: float = 0) -> Any:
        return SimpleNamespace(
            brokers={1: None},
            topics={
                t: SimpleNamespace(
                    error=None,
                    partitions={
                        i: SimpleNamespace(id=i, leader=1, replicas=[1], isrs=[1])
                        for i in range(len(ps))
                    },
                )
                for t, ps in self.topics.items()
            },
        )

    def list_offsets(self, specs: dict[Any, Any], request_timeout: float = 0) -> Any:
        from confluent_kafka.admin import OffsetSpec

        out = {}
        for tp, spec in specs.items():
            lo, hi = self.topics[tp.topic][tp.partition]
            latest = isinstance(spec, type(OffsetSpec.latest()))
            out[tp] = _done(SimpleNamespace(offset=hi if latest else lo))
        return out

    def delete_records(self, tps: list[Any], request_timeout: float = 0) -> Any:
        if self.refuse_delete:
            return {tp: _done(error=RuntimeError("TOPIC_AUTHORIZATION_FAILED")) for tp in tps}
        for tp in tps:
            self.deleted.append((tp.topic, tp.partition, tp.offset))
        return {tp: _done() for tp in tps}

    def create_topics(self, new: list[Any], **kw: Any) -> Any:
        self.created += [n.topic for n in new]
        return {n.topic: _done() for n in new}


def test_problems_name_each_missing_or_small_topic_and_the_command_to_fix_it() -> None:
    got = existing_topic_problems({"a": 4, "b": 2, "c": None}, {"a": 4, "b": 4, "c": 1, "d": 8})
    assert got == [
        "topic b has 2 partitions, the workload needs 4: add partitions "
        "(kafka-topics.sh --alter --topic b --partitions 4)",
        "topic c does not exist: create it with 1 partitions (kafka-topics.sh --create "
        "--topic c --partitions 1 --replication-factor 3)",
        "topic d does not exist: create it with 8 partitions (kafka-topics.sh --create "
        "--topic d --partitions 8 --replication-factor 3)",
    ]
    assert existing_topic_problems({"a": 8}, {"a": 4}) == []  # more partitions are fine


def test_existing_topics_are_emptied_where_they_hold_records() -> None:
    admin = TopicsAdmin({"p-q-0": [(0, 0), (3, 10)], "p-q-1": [(5, 5)], "other": [(0, 9)]})
    deleted = use_existing_topics(admin, {"p-q-0": 2, "p-q-1": 1})
    assert deleted == {"p-q-0": 7, "p-q-1": 0}
    assert admin.deleted == [("p-q-0", 1, 10)]  # up to the high watermark, only non-empty ones


def test_missing_topics_and_a_refused_deletion_are_clear_errors() -> None:
    with pytest.raises(
        ExistingTopicsError, match=r"topic p-q-1 does not exist.*without --use-existing"
    ):
        use_existing_topics(TopicsAdmin({"p-q-0": [(0, 0)]}), {"p-q-0": 1, "p-q-1": 1})
    with pytest.raises(ExistingTopicsError, match=r"p-q-0 holds records .*ACL operation DELETE"):
        use_existing_topics(TopicsAdmin({"p-q-0": [(0, 4)]}, refuse_delete=True), {"p-q-0": 1})


class Plain(AdminCluster[Any]):
    kind = "plain"

    def __init__(self, admin: TopicsAdmin) -> None:
        super().__init__()
        self.admin = admin

    def _admin(self) -> Any:
        return self.admin


def test_a_cluster_with_existing_topics_creates_none_and_records_what_it_emptied() -> None:
    admin = TopicsAdmin({"p-q-0": [(0, 2)]})
    c = Plain(admin)
    c.use_existing_topics = True
    c.create_topics({"p-q-0": 1}, replication_factor=3, timeout=2)
    assert admin.created == [] and c.emptied_topics == {"p-q-0": 2}
    ext = ExternalCluster("h:1")
    ext.use_existing_topics = True
    ext._nodes = []
    ext._admin = lambda: admin  # type: ignore[method-assign]
    ext.create_topics({"p-q-0": 1}, timeout=2)
    assert ext.created_topics == []  # so teardown deletes nothing that was there before


def test_every_admin_client_gets_the_clusters_security(monkeypatch: pytest.MonkeyPatch) -> None:
    confs: list[dict[str, Any]] = []
    import confluent_kafka.admin as ck_admin

    def fake_client(conf: dict[str, Any]) -> object:
        confs.append(conf)
        return object()

    monkeypatch.setattr(ck_admin, "AdminClient", fake_client)
    sec = Security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": "u", "sasl.password": "p"})  # fmt: skip
    ext = ExternalCluster("h:1", security=sec, admin_config={"client.id": "x"})
    ext._admin()
    assert confs[-1]["sasl.username"] == "u" and confs[-1]["client.id"] == "x"
    assert "error_cb" in confs[-1]  # a refused login is reported, not only a timeout

    from ktrial.nemesis import discovery

    discovery._admin(ext)
    assert confs[-1]["security.protocol"] == "SASL_PLAINTEXT"
    assert confs[-1]["bootstrap.servers"] == "h:1"


def test_a_refused_login_is_named_when_readiness_times_out() -> None:
    class Never(AdminCluster[Any]):
        ready_poll_s = 0.0

        def _admin(self) -> Any:
            return None

        def _ready_step(self, admin: Any) -> str:
            adminmod._report_security_error(
                SimpleNamespace(name=lambda: "_AUTHENTICATION", str=lambda: "SASL failed"),
                self._security_failed,
            )
            return "no answer"

    with pytest.raises(Exception, match="refused the connection: _AUTHENTICATION: SASL failed"):
        Never().wait_ready(timeout=0)
