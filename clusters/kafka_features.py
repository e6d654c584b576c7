"""Ask a running broker which feature levels its cluster has finalized.

Kafka says it in every ApiVersions response from version 3 on (KIP-584): tagged field 2
of the body lists each finalized feature with its level; a feature at level 0 is left
out. One request on a plain socket costs milliseconds, where `kafka-features describe`
costs a JVM start, and it works against any Kafka-protocol broker. The encoding and
decoding are pure functions (tested on bytes); `finalized_features` is the socket edge.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

API_VERSIONS = 18
REQUEST_VERSION = 3
_FINALIZED_TAG = 2


class FeatureProbeError(RuntimeError):
    """The broker could not be asked, or answered something unreadable."""


def encode_request(correlation_id: int, client_id: str = "ktrial") -> bytes:
    """A size-prefixed ApiVersions v3 request (header v2, flexible body)."""
    cid = client_id.encode()
    header = struct.pack(">hhih", API_VERSIONS, REQUEST_VERSION, correlation_id, len(cid))
    header += cid + b"\x00"  # no tagged fields
    body = _compact_string("ktrial") + _compact_string("1") + b"\x00"
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    return _uvarint(len(raw) + 1) + raw


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise FeatureProbeError("ApiVersions response ends early")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise FeatureProbeError("ApiVersions response has a malformed varint")

    def compact_string(self) -> str:
        n = self.uvarint()
        return "" if n == 0 else self.take(n - 1).decode()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def decode_response(frame: bytes, correlation_id: int) -> dict[str, int]:
    """Feature name -> finalized max level, from a response frame without its size prefix."""
    r = _Reader(frame)
    if (got := r.int32()) != correlation_id:
        raise FeatureProbeError(f"ApiVersions answer to request {got}, not {correlation_id}")
    error = r.int16()
    if error != 0:
        raise FeatureProbeError(f"ApiVersions v{REQUEST_VERSION} refused with error code {error}")
    for _ in range(max(0, r.uvarint() - 1)):  # api keys: key, min, max, tags
        r.take(6)
        r.skip_tags()
    r.int32()  # throttle time
    features: dict[str, int] = {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        body = r.take(size)
        if tag == _FINALIZED_TAG:
            t = _Reader(body)
            for _ in range(max(0, t.uvarint() - 1)):
                name = t.compact_string()
                max_level, _min_level = t.int16(), t.int16()
                t.skip_tags()
                features[name] = max_level
    return features


def _address(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    if not host or not port.isdigit():
        raise FeatureProbeError(f"not a host:port: {server!r}")
    return host.strip("[]"), int(port)


def finalized_features(bootstrap: str | Sequence[str], timeout: float = 5.0) -> dict[str, int]:
    """The finalized feature levels, asked of the first broker in `bootstrap` that answers."""
    servers = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    errors: list[str] = []
    for server in servers:
        try:
            with socket.create_connection(_address(server), timeout=timeout) as sock:
                sock.settimeout(timeout)
                sock.sendall(encode_request(1))
                size = int(struct.unpack(">i", _recv(sock, 4))[0])
                return decode_response(_recv(sock, size), 1)
        except (OSError, FeatureProbeError) as e:
            errors.append(f"{server}: {e}")
    raise FeatureProbeError("no broker answered ApiVersions (" + "; ".join(errors) + ")")


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise FeatureProbeError("the broker closed the connection mid-answer")
        buf += chunk
    return bytes(buf)
