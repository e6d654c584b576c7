"""Apache Kafka as a `BrokerSystem`: KRaft combined nodes from jars, configured by profile.

The pieces stay where they were (`kafka_config` renders server.properties, log4j2
and the JVM options; `install` resolves the jars); this class is the small interface
through which the local and docker backends use them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .install import KafkaInstall, require_java, resolve
from .kafka_config import (
    PROFILES,
    NodeAddr,
    format_features,
    jvm_args,
    log4j2_xml,
    new_cluster_id,
    render_properties,
    server_properties,
)
from .system import NodePaths

CONFIG = "server.properties"
LOG_CONFIG = "log4j2.xml"


class ApacheKafka:
    """Implements clusters.system.BrokerSystem for Apache Kafka."""

    name = "apache-kafka"
    profiles = PROFILES

    def __init__(
        self,
        version: str | None = None,
        profile: str = "safe",
        broker_config: Mapping[str, str] | None = None,
        heap_mb: int = 512,
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
        self.wanted_version = version
        self.profile = profile
        self.broker_config = dict(broker_config or {})
        self.heap_mb = heap_mb
        self.install: KafkaInstall | None = None

    @staticmethod
    def new_cluster_id() -> str:
        return new_cluster_id()

    def prepare(self, auto_install: bool, log: Callable[[str], None]) -> None:
        self.install = resolve(self.wanted_version, auto_install=auto_install, log=log)

    def _installed(self) -> KafkaInstall:
        if self.install is None:
            raise RuntimeError("Apache Kafka: prepare() first (no installation resolved yet)")
        return self.install

    @property
    def version(self) -> str | None:
        return self.install.version if self.install else None

    def runtime(self) -> str:
        return require_java()

    def program(self) -> str:
        return self._installed().classpath

    def metadata(self) -> dict[str, object]:
        return {
            "broker": self.name,
            "broker_versions": [self.install.version] if self.install else [],
            "kafka_source": self.install.source if self.install else None,
        }

    def node_files(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        paths: NodePaths,
        client_advertised: tuple[str, int] | None,
    ) -> dict[str, str]:
        props = server_properties(
            me=me,
            peers=peers,
            data_dir=paths.data,
            profile=self.profile,
            client_advertised=client_advertised,
            overrides=self.broker_config,
        )
        return {
            CONFIG: render_properties(props),
            LOG_CONFIG: log4j2_xml(f"{paths.logs}/server.log"),
        }

    def format_command(self, paths: NodePaths, cluster_id: str) -> list[str]:
        cmd = [
            paths.runtime,
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            f"-Dlog4j2.configurationFile={paths.file(LOG_CONFIG)}",
            "-cp",
            paths.program,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            paths.file(CONFIG),
        ]
        for feature, level in format_features(self.profile).items():
            cmd += ["--feature", f"{feature}={level}"]
        return cmd

    def run_command(self, paths: NodePaths, run_id: str, node_name: str) -> list[str]:
        jvm = jvm_args(self.heap_mb, paths.logs, paths.file(LOG_CONFIG), run_id, node_name)
        return [paths.runtime, *jvm, "-cp", paths.program, "kafka.Kafka", paths.file(CONFIG)]
