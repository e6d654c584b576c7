"""ktrial: put Kafka-protocol brokers on trial (Jepsen-style fault injection and checking)."""

__version__ = "0.1.0"
