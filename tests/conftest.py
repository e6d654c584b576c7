"""Shared pytest configuration. Integration fixtures live in tests/integration/conftest.py."""
