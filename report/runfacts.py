"""What ran, in words: the broker system, its transaction protocol and the client driver.

Read from test.json (through :class:`TestMeta`): the cluster's ``metadata()`` (Apache
Kafka's ``broker_versions``, ``transactions``; kfake's ``system`` and ``kfake_version``)
and the workload's ``driver`` and ``driver_version``. report.html shows the long texts,
junit.xml the short values. A test.json written before a fact was recorded (or by
another tool) gives None for it: the fact is left out, never guessed, except the
driver of a run ktrial recorded without one, which can only be confluent-kafka.
Pure functions.
"""

from __future__ import annotations

from typing import Any

from ..histories.testmeta import TestMeta

KFAKE_SYSTEM = "franz-go-kfake"
# test.json's `broker` -> the system's name
BROKER_NAMES = {"apache-kafka": "Apache Kafka"}
# test.json's `driver` -> the client library's name
DRIVER_NAMES = {
    "confluent": "confluent-kafka",
    "franz": "franz-go",
    "java": "kafka-clients",
    "mix": "mixed clients",
}
# what the library is, when test.json has no version of it
DRIVER_NOTES = {
    "confluent": "confluent-kafka (librdkafka)",
    "franz": "franz-go (worker process)",
    "java": "Apache kafka-clients (Java worker process)",
    "mix": "mixed clients (a driver per worker slot)",
}
PROTOCOLS = {"v1": "transactions v1 (classic)", "v2": "transactions v2 (KIP-890)"}


def _text(v: Any) -> str | None:
    """A non-empty string as itself, a number as text; anything else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return f"{v:g}" if isinstance(v, float) else str(v)
    return v if isinstance(v, str) and v.strip() else None


def _cluster(test: TestMeta) -> dict[str, Any]:
    return test.cluster or {}


def is_kfake(test: TestMeta) -> bool:
    c = _cluster(test)
    return c.get("kind") == "kfake" or c.get("system") == KFAKE_SYSTEM


def kafka_versions(test: TestMeta) -> list[str]:
    """The broker versions the cluster reported (older runs: `broker_version`), each once."""
    versions: list[Any] = test.broker_versions
    if not versions and _text(_cluster(test).get("broker_version")):
        versions = [_cluster(test)["broker_version"]]
    return list(dict.fromkeys(t for v in versions if (t := _text(v))))


def system_text(test: TestMeta) -> str | None:
    """ "Apache Kafka 4.1.1", "kfake (franz-go) v1.2.3"; None when not recorded."""
    c = _cluster(test)
    if is_kfake(test):
        version = _text(c.get("kfake_version"))
        return "kfake (franz-go)" + (f" {version}" if version else "")
    versions = kafka_versions(test)
    broker = _text(c.get("broker"))
    if broker is None and not versions:
        return _text(c.get("system"))
    name = BROKER_NAMES.get(broker, broker) if broker else "Kafka"
    return " ".join([name, ", ".join(versions)]).strip()


def transactions(test: TestMeta) -> dict[str, Any]:
    """The cluster's `transactions` record ({} when not recorded or not a map)."""
    t = _cluster(test).get("transactions")
    return t if isinstance(t, dict) else {}


def transaction_protocol(test: TestMeta) -> str | None:
    """ "v1" or "v2": the protocol the brokers offer; None when not recorded."""
    p = transactions(test).get("protocol")
    return p if p in PROTOCOLS else None


def transaction_level(test: TestMeta) -> int | None:
    """The finalized transaction.version level (None: not recorded, or no such feature)."""
    level = transactions(test).get("transaction_version")
    return level if isinstance(level, int) and not isinstance(level, bool) else None


def transaction_text(test: TestMeta) -> str | None:
    """ "transactions v2 (KIP-890), transaction.version=2, read from the brokers", with
    what was asked for when the brokers said otherwise and, on a v2 cluster driven by
    librdkafka, that its producers keep the classic protocol; None when not recorded."""
    protocol = transaction_protocol(test)
    if protocol is None:
        return None
    t = transactions(test)
    level = transaction_level(test)
    parts = [PROTOCOLS[protocol]]
    parts.append(
        f"transaction.version={level}" if level is not None else "no transaction.version feature"
    )
    requested = t.get("requested")
    if isinstance(requested, int) and not isinstance(requested, bool) and requested != level:
        parts.append(f"asked for transaction.version={requested}")
    source = t.get("source")
    if source == "broker":
        parts.append("read from the brokers")
    elif source == "format":
        why = _text(t.get("observe_error"))
        parts.append("as formatted, not read from the brokers" + (f" ({why})" if why else ""))
    text = ", ".join(parts)
    if protocol == "v2" and driver_key(test) == "confluent":
        text += "; librdkafka's producers keep the classic protocol (no KIP-890 client side)"
    return text


def driver_key(test: TestMeta) -> str | None:
    """test.json's `driver` (or `client`) setting as written; "confluent" for a run ktrial
    recorded without one (its only driver then); None for a history another tool wrote."""
    given = test.setting("driver") or test.setting("client")
    if given:
        return given if isinstance(given, str) else str(given)
    return "confluent" if test.ktrial_version is not None else None


def driver_name(test: TestMeta) -> str | None:
    """The client library: "confluent-kafka", "franz-go", or the setting as written."""
    key = driver_key(test)
    return None if key is None else DRIVER_NAMES.get(key, key)


def driver_version(test: TestMeta) -> str | None:
    """The client library's version as the run recorded it (None: not recorded)."""
    return _text(test.setting("driver_version"))


def driver_text(test: TestMeta) -> str | None:
    """ "confluent-kafka 2.16.1, librdkafka 2.16.0", "franz-go v1.22.3", or the library
    without a version when none was recorded; None when the driver is unknown."""
    key = driver_key(test)
    if key is None:
        return None
    version = driver_version(test)
    if key == "mix":
        mix = test.setting("driver_mix")
        names = ", ".join(str(d) for d in mix) if isinstance(mix, list) else "?"
        return f"mix of {names}, round-robin over worker slots" + (
            f" ({version})" if version else ""
        )
    if version is None:
        return DRIVER_NOTES.get(key, key)
    name = DRIVER_NAMES.get(key, key)
    return version if version.startswith(name) else f"{name} {version}"
