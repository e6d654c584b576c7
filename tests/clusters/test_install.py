"""Kafka installation (clusters/install.py): the cache marker, KAFKA_HOME, missing tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.clusters import install


def test_install_cache_needs_the_marker(tmp_path: Path) -> None:
    assert install.find_installed("4.1.1", tmp_path) is None
    lib = install.version_dir("4.1.1", tmp_path) / "lib"
    lib.mkdir(parents=True)
    assert install.find_installed("4.1.1", tmp_path) is None  # half-done download
    (lib.parent / install.MARKER).write_text("x")
    found = install.find_installed("4.1.1", tmp_path)
    assert found is not None and found.lib_dir == lib and found.classpath.endswith("/*")
    with pytest.raises(install.InstallError, match="not a Kafka version"):
        install.find_installed("../etc", tmp_path)


def test_kafka_home_and_slf4j_detection(tmp_path: Path) -> None:
    with pytest.raises(install.InstallError, match="not an unpacked Kafka"):
        install.from_kafka_home(tmp_path)
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "kafka_2.13-4.0.0.jar").write_text("")
    (libs / "kafka_2.13-4.0.0-test.jar").write_text("")
    (libs / "slf4j-api-2.0.17.jar").write_text("")
    inst = install.from_kafka_home(tmp_path)
    assert inst.version == "4.0.0" and inst.source == "KAFKA_HOME"
    assert install.slf4j_major(libs) == 2


def test_missing_tool_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(install.InstallError, match="apt-get install maven"):
        install.require_tool("mvn", "maven")
