"""Apache Kafka as a `BrokerSystem`: KRaft combined nodes from jars, configured by profile.

The pieces stay where they were (`kafka_config` renders server.properties, log4j2
and the JVM options; `install` resolves the jars; `kafka_versions` says what each
release line offers); this class is the small interface through which the local and
docker backends use them. A run may pick the transaction protocol where the version
has the transaction.version feature (4.0 on): it is fixed when the storage is
formatted, and once the brokers answer, `observe` asks them which level is in effect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .install import DEFAULT_KAFKA_VERSION, KafkaInstall, require_java, resolve
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
from .kafka_features import FeatureProbeError, finalized_features
from .kafka_versions import (
    TRANSACTION_FEATURE,
    KafkaLine,
    capabilities,
    check_supported,
    check_transaction_version,
    transaction_protocol,
)
from .system import Container, Layout, NodePaths, SystemDefaults

CONFIG = "server.properties"
LOG_CONFIG = "log4j2.xml"
# With SASL on a listener, the broker looks up the client's host name from its address
# (a reverse lookup) while authenticating, on the network thread. In a namespace that
# cannot reach the host's DNS server each lookup hangs until the resolver times out, so
# logins never finish (measured: the SaslAuthenticate answer never came within 120 s).
# Such brokers resolve names from this file only (the JVM's jdk.net.hosts.file).
HOSTS = "hosts"


class ApacheKafka(SystemDefaults):
    """Implements clusters.system.BrokerSystem for Apache Kafka."""

    name = "apache-kafka"
    profiles = PROFILES
    layout = Layout(
        stdout="stdout.log",
        log_files=("server.log", "stdout.log", "gc.log"),
        formatted_marker="meta.properties",
        # offset and time indexes are preallocated (10 MiB each, sparse) and rebuilt
        # by Kafka when missing: logs, transaction indexes, snapshots and checkpoints
        # are what an investigation needs
        data_skip=("*.index", "*.timeindex"),
    )

    def __init__(
        self,
        version: str | None = None,
        profile: str = "safe",
        broker_config: Mapping[str, str] | None = None,
        heap_mb: int = 512,
        transaction_version: int | None = None,
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
        if version is not None:  # else the default, or KAFKA_HOME's: checked in prepare()
            check_transaction_version(check_supported(version), version, transaction_version)
        self.wanted_version = version
        self.profile = profile
        self.broker_config = dict(broker_config or {})
        self.heap_mb = heap_mb
        self.transaction_version = transaction_version
        self.install: KafkaInstall | None = None
        # what the brokers said (`observe`): finalized feature levels, or why not asked
        self.observed_features: dict[str, int] | None = None
        self.observe_error: str | None = None

    @staticmethod
    def new_cluster_id() -> str:
        return new_cluster_id()

    def prepare(self, auto_install: bool, log: Callable[[str], None]) -> None:
        install = resolve(self.wanted_version, auto_install=auto_install, log=log)
        check_transaction_version(
            capabilities(install.version), install.version, self.transaction_version
        )
        self.install = install

    @property
    def line(self) -> KafkaLine:
        """What this version offers (its row of the supported-versions table)."""
        return capabilities(self.version or self.wanted_version or DEFAULT_KAFKA_VERSION)

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

    def observe(self, bootstrap: str) -> None:
        """Ask a running broker for its finalized features (once; a failure is recorded)."""
        if self.observed_features is not None:
            return
        try:
            self.observed_features = finalized_features(bootstrap)
            self.observe_error = None
        except FeatureProbeError as e:
            self.observe_error = str(e)

    def after_ready(self, bootstrap: str) -> None:
        """The transaction protocol in effect, asked of the brokers once they answer."""
        self.observe(bootstrap)

    def container(
        self,
        me: NodeAddr,
        peers: Sequence[NodeAddr],
        client_advertised: tuple[str, int] | None,
        cluster_id: str,
        engine: Any,
        say: Callable[[str], None],
    ) -> Container:
        """ktrial's start script in the locally built `ktrial-kafka:<version>` image."""
        from .docker_image import KAFKA_LIB, ensure_image

        # Java on the image's PATH, the jars in KAFKA_LIB
        return Container(ensure_image(engine, self._installed(), say), "java", f"{KAFKA_LIB}/*")

    def transactions(self) -> dict[str, object]:
        """The transaction protocol the brokers run: the transaction.version level and
        "v1"/"v2", as the brokers reported it (`observe`), else as formatted."""
        line = self.line
        if self.observed_features is not None:
            level: int | None = self.observed_features.get(TRANSACTION_FEATURE, 0)
            source = "broker"  # finalized features in the brokers' ApiVersions answer
        else:
            level = self.transaction_version
            if level is None:
                level = line.default_transaction_level
            source = "format"
        if not line.transaction_levels:
            level = None  # the version has no such feature: the classic protocol
        out: dict[str, object] = {
            "transaction_version": level,
            "protocol": transaction_protocol(level),
            "requested": self.transaction_version,
            "source": source,
        }
        if self.observe_error:
            out["observe_error"] = self.observe_error
        return out

    def metadata(self) -> dict[str, object]:
        meta: dict[str, object] = {
            "broker": self.name,
            "broker_versions": [self.install.version] if self.install else [],
            "kafka_source": self.install.source if self.install else None,
            "profile": self.profile,
            "broker_config": dict(self.broker_config),
            "heap_mb": self.heap_mb,
        }
        if self.install is not None:
            meta["kafka_line"] = self.line.line
            meta["transactions"] = self.transactions()
            if self.observed_features is not None:
                meta["features"] = dict(sorted(self.observed_features.items()))
        return meta

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
        files = {
            CONFIG: render_properties(props),
            LOG_CONFIG: log4j2_xml(f"{paths.logs}/server.log"),
        }
        if self._sasl():
            files[HOSTS] = hosts_file([me, *peers])
        return files

    def _sasl(self) -> bool:
        return "SASL" in self.broker_config.get("listener.security.protocol.map", "")

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
        features = format_features(self.profile, self.line, self.transaction_version)
        for feature, level in features.items():
            cmd += ["--feature", f"{feature}={level}"]
        return cmd

    def run_command(self, paths: NodePaths, run_id: str, node_name: str) -> list[str]:
        jvm = jvm_args(self.heap_mb, paths.logs, paths.file(LOG_CONFIG), run_id, node_name)
        if self._sasl():
            jvm.append(f"-Djdk.net.hosts.file={paths.file(HOSTS)}")
        return [paths.runtime, *jvm, "-cp", paths.program, "kafka.Kafka", paths.file(CONFIG)]


def hosts_file(nodes: Sequence[NodeAddr]) -> str:
    """A hosts file naming loopback and every node's address (by its node id), so name
    lookups a broker makes answer at once from the file instead of a DNS server."""
    lines = ["127.0.0.1 localhost"]
    lines += [f"{n.host} node-{n.node_id}" for n in nodes if n.host != "127.0.0.1"]
    return "\n".join(lines) + "\n"
