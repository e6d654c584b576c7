"""Kafka installation: resolve the broker jars from Maven Central into a per-version cache.

ktrial must run on a fresh machine with no Kafka tarball and no container registry, so
the broker comes from Maven: `clusters/kafka-maven/pom.xml` pins `kafka_2.13`, `kafka-tools`
and the SLF4J->log4j2 binding, and `mvn dependency:copy-dependencies` copies every
runtime jar into `<cache>/kafka/<version>/lib`. The copy goes to a temporary directory
that is renamed into place and a marker file is written last, so a half-finished
download is never mistaken for an installation. An unpacked Apache distribution in
`$KAFKA_HOME` (its `libs/`) is accepted instead.

Only the versions of `kafka_versions.LINES` are fetched (any patch release of a listed
line); the pom leaves out the SLF4J binding Kafka 3.x brings (slf4j-reload4j), so every
version logs through the one binding ktrial adds, into the node's log4j2 file. A 3.x
installation made before that (it holds slf4j-reload4j) is fetched again.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .kafka_versions import UnsupportedVersion, check_supported, supported_text

DEFAULT_KAFKA_VERSION = "4.1.1"
POM = Path(__file__).parent / "kafka-maven" / "pom.xml"  # a data folder, not a package
MARKER = "ktrial-install-complete"
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+(?:-[A-Za-z0-9.]+)?$")


class InstallError(RuntimeError):
    """Kafka cannot be installed or found; the message says what to install or fix."""


@dataclass(frozen=True)
class KafkaInstall:
    """Where a usable Kafka lives: a directory of jars and the version they are."""

    version: str
    lib_dir: Path
    source: str  # "maven-cache" or "KAFKA_HOME"

    @property
    def classpath(self) -> str:
        """The JVM classpath (a wildcard over the lib directory)."""
        return str(self.lib_dir / "*")


def cache_root() -> Path:
    """ktrial's cache directory: $KTRIAL_CACHE, else ~/.cache/ktrial."""
    env = os.environ.get("KTRIAL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "ktrial"


def version_dir(version: str, cache: Path | None = None) -> Path:
    return (cache or cache_root()) / "kafka" / version


def require_tool(name: str, debian_package: str) -> str:
    """Path of an executable, or an InstallError naming the Debian package that has it."""
    path = shutil.which(name)
    if path is None:
        raise InstallError(
            f"`{name}` not found on PATH; install it (Debian: apt-get install {debian_package}) "
            "or run scripts/setup.sh"
        )
    return path


def require_java() -> str:
    return require_tool("java", "openjdk-17-jre-headless")


def check_version(version: str) -> str:
    if not _VERSION_RE.match(version):
        raise InstallError(
            f"not a Kafka version: {version!r} (expected e.g. {DEFAULT_KAFKA_VERSION})"
        )
    return version


def check_fetchable(version: str) -> str:
    """A version ktrial may fetch from Maven Central: well formed and of a supported line."""
    try:
        check_supported(version)
    except UnsupportedVersion as e:
        raise InstallError(str(e)) from None
    return version


# A jar whose presence marks an installation resolved before the pom left Kafka 3.x's
# own SLF4J binding out: two bindings, and the broker's log may go nowhere.
STALE_BINDINGS = ("slf4j-reload4j-*.jar", "slf4j-log4j12-*.jar")


def stale_bindings(lib_dir: Path) -> list[str]:
    """Names of the extra SLF4J bindings in `lib_dir` (empty: one binding, as it should be)."""
    return sorted(p.name for pattern in STALE_BINDINGS for p in lib_dir.glob(pattern))


def from_kafka_home(home: Path) -> KafkaInstall:
    """An unpacked Apache Kafka distribution: jars in libs/, version from the kafka_ jar."""
    libs = home / "libs"
    jars = sorted(libs.glob("kafka_2.13-*.jar")) if libs.is_dir() else []
    jars = [j for j in jars if not re.search(r"-(test|sources|javadoc)", j.name)]
    if not jars:
        raise InstallError(
            f"KAFKA_HOME={home} is not an unpacked Kafka distribution (no libs/kafka_2.13-*.jar)"
        )
    version = jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar")
    return KafkaInstall(version=version, lib_dir=libs, source="KAFKA_HOME")


def find_installed(version: str, cache: Path | None = None) -> KafkaInstall | None:
    """The cached installation of `version` if it is complete, else None."""
    vdir = version_dir(check_version(version), cache)
    lib = vdir / "lib"
    if (vdir / MARKER).is_file() and lib.is_dir() and not stale_bindings(lib):
        return KafkaInstall(version=version, lib_dir=vdir / "lib", source="maven-cache")
    return None


def slf4j_major(lib_dir: Path) -> int | None:
    """Major version of the slf4j-api jar among the resolved dependencies."""
    for jar in lib_dir.glob("slf4j-api-*.jar"):
        m = re.match(r"slf4j-api-(\d+)\.", jar.name)
        if m:
            return int(m.group(1))
    return None


def _mvn_copy(mvn: str, version: str, out: Path, slf4j2: bool, log: Callable[[str], None]) -> None:
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(POM),
        f"-Dkafka.version={version}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={out}",
    ]
    if slf4j2:
        cmd.append("-Dslf4j2")
    log(f"resolving Kafka {version} from Maven Central: {' '.join(cmd)}")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=out.parent)
    if proc.returncode != 0:
        said = proc.stdout + proc.stderr
        if missing := _missing_artifact(said, version):
            raise InstallError(
                f"Kafka {version} is not on Maven Central as ktrial needs it ({missing} "
                f"could not be resolved); supported: {supported_text()}"
            )
        tail = "\n".join(said.strip().splitlines()[-25:])
        raise InstallError(
            f"mvn failed for Kafka {version} (exit {proc.returncode}); is {version} on Maven "
            f"Central and is the network to it open?\n{tail}"
        )


def _missing_artifact(mvn_output: str, version: str) -> str | None:
    """The org.apache.kafka artifact of `version` mvn could not find, if that is why it failed."""
    m = re.search(rf"org\.apache\.kafka:([\w.-]+):jar:{re.escape(version)}\b", mvn_output)
    unresolved = "not found" in mvn_output or "Could not find artifact" in mvn_output
    return f"org.apache.kafka:{m[1]}:{version}" if m and unresolved else None


def install(
    version: str = DEFAULT_KAFKA_VERSION,
    cache: Path | None = None,
    force: bool = False,
    log: Callable[[str], None] = lambda _m: None,
) -> KafkaInstall:
    """Download Kafka `version` into the cache unless it is already there.

    The slf4j binding must match the slf4j-api major version Kafka was built with
    (log4j-slf4j-impl for 1.x, log4j-slf4j2-impl for 2.x); the pom picks the 1.x
    binding unless `-Dslf4j2` is given, and we redo the copy when the resolved
    slf4j-api says otherwise.
    """
    check_version(version)
    check_fetchable(version)
    if not force and (found := find_installed(version, cache)):
        return found
    require_java()
    mvn = require_tool("mvn", "maven")
    vdir = version_dir(version, cache)
    vdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".lib-", dir=vdir))
    try:
        lib = tmp / "lib"
        lib.mkdir()
        _mvn_copy(mvn, version, lib, slf4j2=False, log=log)
        if slf4j_major(lib) == 2:
            shutil.rmtree(lib)
            lib.mkdir()
            _mvn_copy(mvn, version, lib, slf4j2=True, log=log)
        if not list(lib.glob(f"kafka_2.13-{version}.jar")):
            raise InstallError(f"mvn finished but {lib} holds no kafka_2.13-{version}.jar")
        if extra := stale_bindings(lib):
            raise InstallError(
                f"Kafka {version} resolved with a second SLF4J binding ({', '.join(extra)}); "
                f"the exclusions in {POM} no longer cover it"
            )
        final = vdir / "lib"
        (vdir / MARKER).unlink(missing_ok=True)
        if final.exists():
            shutil.rmtree(final)
        os.replace(lib, final)
        marker_tmp = vdir / f".{MARKER}.tmp"
        marker_tmp.write_text(f"kafka {version}\n")
        os.replace(marker_tmp, vdir / MARKER)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(OSError):
            vdir.rmdir()  # only if empty: a version that failed to resolve leaves no folder
    installed = find_installed(version, cache)
    assert installed is not None
    return installed


def resolve(
    version: str | None = None,
    cache: Path | None = None,
    auto_install: bool = True,
    log: Callable[[str], None] = lambda _m: None,
) -> KafkaInstall:
    """The Kafka to run: $KAFKA_HOME if set (and no explicit version), else the cache.

    With `auto_install` a missing version is downloaded; otherwise InstallError says
    how to install it.
    """
    home = os.environ.get("KAFKA_HOME")
    if home and version is None:
        return from_kafka_home(Path(home))
    version = check_fetchable(version or DEFAULT_KAFKA_VERSION)
    found = find_installed(version, cache)
    if found:
        return found
    if not auto_install:
        raise InstallError(
            f"Kafka {version} is not installed in {version_dir(version, cache)}; "
            f"run `ktrial cluster install --kafka-version {version}` (or set KAFKA_HOME)"
        )
    return install(version, cache, log=log)
