"""Admin-API steps every backend shares: create topics, find replicas out of sync.

Readiness and topic creation go through Kafka's admin API (never log scraping), so the
same functions serve the embedded cluster and brokers ktrial did not start.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any


def admin_client(bootstrap: str, logger: str, extra: Mapping[str, Any] | None = None) -> Any:
    """An AdminClient whose librdkafka log lines go to `logger` (connection noise)."""
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 5000,
        "logger": logging.getLogger(logger),
        **(extra or {}),
    }
    return AdminClient(conf)


def create_topics(
    admin: Any, topics: Mapping[str, int], rf: int, config: Mapping[str, str] | None = None
) -> list[str]:
    """Create topics (name -> partitions); an existing topic is fine. Returns those created."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    new = [
        NewTopic(t, num_partitions=p, replication_factor=rf, config=dict(config or {}))
        for t, p in topics.items()
    ]
    created = []
    for t, fut in admin.create_topics(new, operation_timeout=30, request_timeout=30).items():
        try:
            fut.result()
            created.append(t)
        except Exception as e:
            err = e.args[0] if e.args else None
            if getattr(err, "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise RuntimeError(f"creating topic {t} failed: {e}") from e
    return created


def out_of_sync(admin: Any, topics: Sequence[str]) -> tuple[set[int], str]:
    """Broker ids missing from some partition's ISR, and a reason text ('' when all in sync)."""
    md = admin.list_topics(timeout=5)
    missing: set[int] = set()
    reasons = []
    for t in topics:
        tm = md.topics.get(t)
        if tm is None or tm.error is not None:
            reasons.append(f"topic {t} not in metadata ({tm.error if tm else 'absent'})")
            continue
        for p in tm.partitions.values():
            if p.leader < 0:
                reasons.append(f"{t}/{p.id} has no leader")
            lag = set(p.replicas) - set(p.isrs)
            if lag:
                missing |= lag
                reasons.append(f"{t}/{p.id} replicas {p.replicas} isr {p.isrs}")
    return missing, "; ".join(reasons[:5])
