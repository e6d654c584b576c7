"""ktrial-loadgen's settings and the process that runs it (docs/load.md).

`LoadOptions` holds what `--load RATE` and `--load-opt KEY=VALUE` ask for, with the
benchmark's defaults (256-byte messages, acks=all, idempotent producers, lz4, 5 ms
linger, classic consumer groups). `LoadGenerator` starts the Go program with its
per-second JSON lines going straight into a file (load.jsonl) and stops it with
SIGTERM, so it writes its final line; a generator that does not stop is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

BIN = Path(__file__).resolve().parents[1] / "workers" / "bin" / "ktrial-loadgen"
ENV = "KTRIAL_LOADGEN"  # names another program


def loadgen_program() -> Path:
    """The generator's executable; a clear error when it was not built."""
    env = os.environ.get(ENV)
    path = Path(env) if env else BIN
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ValueError(
            f"the load generator {path} is not built: run scripts/setup.sh (it needs Go), "
            f"or set {ENV} to the program"
        )
    return path


COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class LoadOptions:
    """One load: the offered rate and the clients' settings (KEY names of --load-opt)."""

    rate: float = 1000.0  # messages per second offered over all producers
    producers: int = 1
    consumers: int = 2
    partitions: int = 6
    replication: int = 3
    size: int = 256
    batch: int = 50000  # records a producer buffers at most (franz-go's default); then shed
    batch_bytes: int = 0  # max bytes of one record batch (batch.size); 0: franz-go's 1 MB
    acks: str = "all"
    idempotent: bool = True
    compression: str = "lz4"
    linger_ms: float = 5.0
    topic: str = "ktrial-load"

    def __post_init__(self) -> None:
        problems = []
        if self.rate < 0:
            problems.append(f"rate must be >= 0, got {self.rate:g}")
        if self.producers < 0 or self.consumers < 0 or self.producers + self.consumers == 0:
            problems.append("want at least one producer or consumer")
        if self.partitions < 1 or self.replication < 1:
            problems.append("partitions and replication must be >= 1")
        if self.size < 16:
            problems.append(f"size must be >= 16 bytes (the stamp), got {self.size}")
        if self.batch < 1:
            problems.append("batch must be >= 1")
        if self.batch_bytes < 0:
            problems.append("batch_bytes must be >= 0")
        if self.acks not in ("all", "1", "0"):
            problems.append(f"acks must be all, 1 or 0, got {self.acks!r}")
        if self.idempotent and self.acks != "all":
            problems.append("idempotent producers need acks=all (or idempotent=false)")
        if self.compression not in COMPRESSIONS:
            problems.append(f"compression must be one of {', '.join(COMPRESSIONS)}")
        if self.linger_ms < 0:
            problems.append("linger_ms must be >= 0")
        if not self.topic:
            problems.append("topic must not be empty")
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def parse(cls, rate: float, pairs: dict[str, str] | None = None) -> LoadOptions:
        """The options of `--load RATE` and `--load-opt KEY=VALUE` (a ValueError names the
        key and what it wants)."""
        known = {f.name: f for f in fields(cls)}
        kw: dict[str, Any] = {"rate": rate}
        for key, raw in (pairs or {}).items():
            name = key.replace("-", "_").replace(".", "_")
            f = known.get(name)
            if f is None or name == "rate":
                choices = ", ".join(n for n in known if n != "rate")
                raise ValueError(f"unknown load option {key!r}; known: {choices}")
            kw[name] = _convert(key, raw, f.type)
        return cls(**kw)

    def with_topic(self, topic: str) -> LoadOptions:
        return replace(self, topic=topic)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def argv(self, brokers: str, duration_s: float | None = None) -> list[str]:
        """The generator's command line (the topic must exist already)."""
        args = [
            str(loadgen_program()),
            f"-brokers={brokers}",
            f"-topic={self.topic}",
            f"-rate={self.rate:g}",
            f"-producers={self.producers}",
            f"-consumers={self.consumers}",
            f"-size={self.size}",
            f"-batch={self.batch}",
            f"-batch-bytes={self.batch_bytes}",
            f"-acks={self.acks}",
            f"-idempotent={'true' if self.idempotent else 'false'}",
            f"-compression={self.compression}",
            f"-linger={self.linger_ms:g}ms",
        ]
        if duration_s is not None:
            args.append(f"-duration={duration_s:g}s")
        return args


def _convert(key: str, raw: str, kind: Any) -> Any:
    kind = kind if isinstance(kind, str) else kind.__name__
    try:
        if kind == "bool":
            low = raw.strip().lower()
            if low in ("true", "1", "yes", "on"):
                return True
            if low in ("false", "0", "no", "off"):
                return False
            raise ValueError
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise ValueError(f"load option {key}={raw!r}: want a {kind}") from None
    return raw


class LoadGenerator:
    """ktrial-loadgen running against `brokers`, its JSON lines appended to `out`.

    A context manager: the generator stops (SIGTERM, then SIGKILL after `stop_timeout`)
    when the block ends, on error and on Ctrl-C alike."""

    def __init__(
        self,
        opts: LoadOptions,
        brokers: str,
        out: Path,
        log: Path,
        duration_s: float | None = None,
        stop_timeout: float = 15.0,
    ) -> None:
        self.opts = opts
        self.cmd = opts.argv(brokers, duration_s)
        self.out = out
        self.log = log
        self.stop_timeout = stop_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LoadGenerator:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        with open(self.out, "ab") as out, open(self.log, "ab") as err:
            # its own process group, so a Ctrl-C at the terminal reaches it only through us
            self.proc = subprocess.Popen(
                self.cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for a generator started with a duration; its exit status."""
        if self.proc is None:
            return None
        return self.proc.wait(timeout)

    def stop(self) -> int | None:
        """SIGTERM (it flushes, lets consumers catch up briefly and writes its final
        line), SIGKILL if it has not ended after `stop_timeout`; the exit status."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + self.stop_timeout
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(10)
        return proc.returncode

    def __enter__(self) -> LoadGenerator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
