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


def test_a_3x_install_with_its_own_slf4j_binding_is_fetched_again(tmp_path: Path) -> None:
    """Installs from before the pom left slf4j-reload4j out had two bindings (the
    broker's log could go to reload4j and nowhere): they no longer count as installed."""
    lib = install.version_dir("3.9.2", tmp_path) / "lib"
    lib.mkdir(parents=True)
    (lib.parent / install.MARKER).write_text("kafka 3.9.2\n")
    for jar in ("log4j-slf4j-impl-2.24.3.jar", "slf4j-api-1.7.36.jar"):
        (lib / jar).write_text("")
    assert install.find_installed("3.9.2", tmp_path) is not None
    (lib / "slf4j-reload4j-1.7.36.jar").write_text("")
    assert install.stale_bindings(lib) == ["slf4j-reload4j-1.7.36.jar"]
    assert install.find_installed("3.9.2", tmp_path) is None


def test_the_pom_leaves_out_kafkas_own_binding_and_bridges_log4j1() -> None:
    pom = install.POM.read_text()
    for art in ("slf4j-reload4j", "reload4j", "slf4j-log4j12"):
        # excluded from both Kafka artifacts
        assert pom.count(f"<artifactId>{art}</artifactId></exclusion>") == 2, art
    assert "<artifactId>log4j-1.2-api</artifactId>" in pom


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("3.5.0", "Kafka 3.5.0 is not a supported version; supported: 3.7.x (tested 3.7.2)"),
        ("2.8.1", "Kafka 2.8.1 is not a supported version"),
        ("nope", "not a Kafka version: 'nope'"),
    ],
)
def test_an_unsupported_version_is_refused_before_mvn_runs(
    version: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install, "require_tool", lambda *a: pytest.fail("mvn must not run"))
    with pytest.raises(install.InstallError) as e:
        install.install(version, tmp_path)
    assert message in str(e.value)
    assert not (tmp_path / "kafka").exists()
    with pytest.raises(install.InstallError, match="not"):
        install.resolve(version, tmp_path, auto_install=True)


def test_a_version_maven_central_does_not_serve_is_named() -> None:
    said = (
        "[ERROR] Failed to execute goal on project ktrial-kafka-install: Could not resolve "
        "dependencies for project ktrial:ktrial-kafka-install:pom:1: The following artifacts "
        "could not be resolved: org.apache.kafka:kafka_2.13:jar:3.9.9 (absent): "
        "org.apache.kafka:kafka_2.13:jar:3.9.9 was not found in https://repo.example"
    )
    assert install._missing_artifact(said, "3.9.9") == "org.apache.kafka:kafka_2.13:3.9.9"
    assert install._missing_artifact("[ERROR] Connection refused", "3.9.9") is None
