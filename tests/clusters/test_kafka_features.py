"""The finalized-features probe (clusters/kafka_features.py): ApiVersions v3 on bytes,
and once over a local socket with a scripted broker."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.clusters import kafka_features as kf


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(s: str) -> bytes:
    return uvarint(len(s.encode()) + 1) + s.encode()


def response(
    features: dict[str, int],
    correlation_id: int = 1,
    error: int = 0,
    api_keys: int = 3,
    extra_tags: bool = True,
) -> bytes:
    """An ApiVersions v3 response body as a broker writes it (header v0, no size prefix)."""
    out = struct.pack(">ih", correlation_id, error)
    out += uvarint(api_keys + 1)
    for k in range(api_keys):
        out += struct.pack(">hhh", k, 0, 9) + b"\x00"
    out += struct.pack(">i", 0)  # throttle
    tags: list[tuple[int, bytes]] = []
    if extra_tags:  # supported features (tag 0) and the epoch (tag 1) come first
        supported = uvarint(2) + cstr("x.version") + struct.pack(">hh", 0, 5) + b"\x00"
        tags += [(0, supported), (1, struct.pack(">q", 42))]
    fin = uvarint(len(features) + 1)
    for name, level in features.items():
        fin += cstr(name) + struct.pack(">hh", level, 1) + b"\x00"  # max, then min
    tags.append((2, fin))
    out += uvarint(len(tags))
    for tag, body in tags:
        out += uvarint(tag) + uvarint(len(body)) + body
    return out


def test_the_request_is_api_versions_v3_with_a_flexible_header() -> None:
    req = kf.encode_request(7, "ktrial")
    (size,) = struct.unpack(">i", req[:4])
    assert size == len(req) - 4
    assert struct.unpack(">hhih", req[4:14]) == (18, 3, 7, 6)
    assert req[14:20] == b"ktrial" and req[20] == 0  # client id, then no tagged fields
    assert req[21:] == b"\x07ktrial" + b"\x021" + b"\x00"


def test_finalized_features_are_read_past_the_other_tags() -> None:
    body = response({"metadata.version": 27, "transaction.version": 1, "group.version": 1})
    assert kf.decode_response(body, 1) == {
        "metadata.version": 27,
        "transaction.version": 1,
        "group.version": 1,
    }
    # a 3.x broker: transaction.version at level 0 is not listed at all
    assert kf.decode_response(response({"metadata.version": 21}, extra_tags=False), 1) == {
        "metadata.version": 21
    }


@given(
    st.dictionaries(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz.", min_size=1, max_size=40),
        st.integers(0, 32767),
        max_size=8,
    ),
    st.integers(0, 200),
    st.booleans(),
)
def test_decoding_returns_what_was_encoded(
    features: dict[str, int], api_keys: int, extra: bool
) -> None:
    assert kf.decode_response(response(features, api_keys=api_keys, extra_tags=extra), 1) == (
        features
    )


def test_unreadable_answers_are_errors_not_tracebacks() -> None:
    body = response({"transaction.version": 2})
    with pytest.raises(kf.FeatureProbeError, match="answer to request 1, not 5"):
        kf.decode_response(body, 5)
    with pytest.raises(kf.FeatureProbeError, match="error code 35"):
        kf.decode_response(response({}, error=35), 1)
    for cut in (3, 10, len(body) - 3):
        with pytest.raises(kf.FeatureProbeError, match="ends early"):
            kf.decode_response(body[:cut], 1)


@pytest.fixture
def broker() -> Iterator[tuple[str, list[bytes]]]:
    """A one-shot scripted broker on loopback: reads one request, answers one frame."""
    srv = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []
    answer = response({"transaction.version": 2, "metadata.version": 25})

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            (size,) = struct.unpack(">i", conn.recv(4))
            seen.append(conn.recv(size))
            conn.sendall(struct.pack(">i", len(answer)) + answer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"127.0.0.1:{srv.getsockname()[1]}", seen
    t.join(5)
    srv.close()


def test_the_first_broker_that_answers_is_asked(broker: tuple[str, list[bytes]]) -> None:
    addr, seen = broker
    closed = socket.create_server(("127.0.0.1", 0))
    dead = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there any more
    got = kf.finalized_features(f"{dead},{addr}", timeout=2)
    assert got == {"transaction.version": 2, "metadata.version": 25}
    assert seen and struct.unpack(">h", seen[0][:2]) == (18,)


def test_no_broker_answering_is_one_error_naming_each() -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    dead = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    with pytest.raises(kf.FeatureProbeError, match=f"no broker answered.*{dead}.*bogus"):
        kf.finalized_features(f"{dead},bogus", timeout=1)
