"""The confluent-kafka (librdkafka) driver, in parts.

* :mod:`.config`: librdkafka settings a careful tester chooses, and `DriverConfig`;
* :mod:`.errors`: librdkafka's error rules (the `ErrorRules` of :mod:`..errors`);
* :mod:`.driver`: `ConfluentDriver`, the client calls of the shared op flow
  (:mod:`..ops`), and the drain's read-only clients.
"""

from __future__ import annotations

from .config import DEFAULT_CONSUMER_CONFIG, DEFAULT_PRODUCER_CONFIG, DriverConfig
from .driver import CLIENT_LOG, ConfluentDriver, drain_clients, library_version

__all__ = [
    "CLIENT_LOG",
    "DEFAULT_CONSUMER_CONFIG",
    "DEFAULT_PRODUCER_CONFIG",
    "ConfluentDriver",
    "DriverConfig",
    "drain_clients",
    "library_version",
]
