"""Build the `ktrial-kafka:<version>` image locally: nothing is pulled from a registry.

Three cached steps, each skipped when its result exists:
1. a Debian root filesystem by `debootstrap --variant=minbase` with Java, iptables,
   iproute2, procps and stress-ng (minutes, ~500 MB) in `<cache>/docker/rootfs/`;
2. `ktrial-base:<suite>`, that tree streamed into `docker import`;
3. `ktrial-kafka:<version>`, the base plus the Kafka jars (resolved by clusters.install)
   built from a small context with `FROM` the local base, so no pull happens.
A label with a digest of the recipe makes a changed recipe rebuild step 3.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .install import KafkaInstall, cache_root

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("openjdk-17-jre-headless", "iptables", "iproute2", "procps", "stress-ng")
KAFKA_LIB = "/opt/kafka/lib"
DONE_MARK = ".ktrial-rootfs-complete"
Say = Callable[[str], None]


class ImageError(RuntimeError):
    """The image could not be built; the message has the failing step and its output."""


def base_tag(suite: str = SUITE) -> str:
    return f"ktrial-base:{suite}"


def image_tag(kafka_version: str) -> str:
    return f"ktrial-kafka:{kafka_version}"


def rootfs_dir(cache: Path | None = None, suite: str = SUITE) -> Path:
    return (cache or cache_root()) / "docker" / "rootfs" / suite


def debootstrap_cmd(
    target: Path, suite: str = SUITE, packages: Sequence[str] = PACKAGES, mirror: str = MIRROR
) -> list[str]:
    return [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        suite,
        str(target),
        mirror,
    ]


def dockerfile(base: str) -> str:
    return f"FROM {base}\nCOPY lib/ {KAFKA_LIB}/\n"


def recipe_digest(base: str, jar_names: Sequence[str]) -> str:
    """Digest of what goes into the Kafka image (pure): Dockerfile and jar names."""
    h = hashlib.sha256(dockerfile(base).encode())
    for name in sorted(jar_names):
        h.update(name.encode() + b"\0")
    return h.hexdigest()[:16]


def ensure_rootfs(say: Say, cache: Path | None = None) -> Path:
    """The debootstrapped tree (built into a .partial dir, renamed when complete)."""
    target = rootfs_dir(cache)
    if (target / DONE_MARK).exists():
        return target
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed: apt-get install debootstrap")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    say(f"debootstrap {SUITE} with {', '.join(PACKAGES)} into {partial} (a few minutes, once)")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        debootstrap_cmd(partial), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    last: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        last = [*last[-30:], line.rstrip()]
        if line.startswith("I: ") and line.rstrip().endswith(("...", "successfully.")):
            say(line.strip())  # stage lines only, not one per package
    if proc.wait() != 0:
        raise ImageError(f"debootstrap failed (exit {proc.returncode}):\n" + "\n".join(last))
    shutil.rmtree(partial / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    (partial / DONE_MARK).write_text(" ".join(PACKAGES) + "\n")
    partial.rename(target)
    say(f"root filesystem ready in {time.monotonic() - t0:.0f}s")
    return target


def _has_image(client: Any, tag: str) -> Any | None:
    import docker

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def ensure_base(client: Any, say: Say, cache: Path | None = None) -> str:
    """`ktrial-base:<suite>` in the engine, imported from the root filesystem if missing."""
    tag = base_tag()
    if _has_image(client, tag) is not None:
        return tag
    root = ensure_rootfs(say, cache)
    say(f"docker import {root} as {tag}")
    t0 = time.monotonic()
    tar = subprocess.Popen(
        ["tar", "-C", str(root), "--exclude", f"./{DONE_MARK}", "-cf", "-", "."],
        stdout=subprocess.PIPE,
    )
    assert tar.stdout is not None
    try:
        repo, _, version = tag.partition(":")
        client.api.import_image_from_data(
            tar.stdout,
            repository=repo,
            tag=version,
            changes=['LABEL ktrial.image="base"', 'ENV LANG="C.UTF-8"'],
        )
    finally:
        tar.stdout.close()
        tar.wait()
    if tar.returncode != 0 or _has_image(client, tag) is None:
        raise ImageError(f"importing {root} as {tag} failed (tar exit {tar.returncode})")
    say(f"imported {tag} in {time.monotonic() - t0:.0f}s")
    return tag


def _context(kafka: KafkaInstall, base: str) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        data = dockerfile(base).encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        for jar in sorted(kafka.lib_dir.iterdir()):
            if jar.is_file():
                tf.add(jar, arcname=f"lib/{jar.name}")
    buf.seek(0)
    return buf


def ensure_image(client: Any, kafka: KafkaInstall, say: Say, cache: Path | None = None) -> str:
    """`ktrial-kafka:<version>` in the engine (built, with its base, if missing or stale)."""
    tag = image_tag(kafka.version)
    jars = [p.name for p in kafka.lib_dir.iterdir() if p.is_file()]
    base = base_tag()
    digest = recipe_digest(base, jars)
    img = _has_image(client, tag)
    if img is not None and (img.labels or {}).get("ktrial.recipe") == digest:
        return tag
    ensure_base(client, say, cache)
    say(f"building {tag} from {base} and {len(jars)} jars in {kafka.lib_dir}")
    t0 = time.monotonic()
    try:
        client.images.build(
            fileobj=_context(kafka, base),
            custom_context=True,
            tag=tag,
            pull=False,
            rm=True,
            forcerm=True,
            network_mode="none",
            labels={
                "ktrial.image": "kafka",
                "ktrial.kafka_version": kafka.version,
                "ktrial.recipe": digest,
            },
        )
    except Exception as e:
        raise ImageError(f"building {tag} failed: {e}") from e
    say(f"built {tag} in {time.monotonic() - t0:.0f}s")
    return tag
