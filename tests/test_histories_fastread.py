"""The fast (msgspec) reader gives exactly the ops of the strict reader, or declines."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ktrial.histories.fastread import decode_line, fast_op, to_flat
from ktrial.histories.jsonl import HistoryError, iter_flat, iter_history, op_from_json
from ktrial.histories.model import DATA_FS, NEMESIS, Flat, FormatError, Op, Poll, flatten

pytest.importorskip("msgspec")

BASE = {"index": 3, "time": 10, "process": 1, "type": "ok", "f": "txn"}

LINES: list[dict[str, Any]] = [
    {**BASE, "value": [["send", 1, [4, 7]], ["send", "k", 8], ["poll"]]},
    {**BASE, "value": [["poll", {"1": [[3, 7], [None, 8]], "2": []}], ["poll", None]]},
    {**BASE, "value": [["send", 1, [None, 7]]]},
    {**BASE, "value": None},
    {**BASE, "value": []},
    {**BASE, "time": 12.9},
    {"time": 5, "process": 2, "type": "invoke", "f": "poll", "value": [["poll"]]},
    {**BASE, "f": "assign", "value": [1, "2"], "seek_to_beginning": True},
    {**BASE, "process": "nemesis", "type": "info", "f": "kill", "value": ["n1"]},
    {**BASE, "process": "nemesis", "type": "info", "f": "txn", "value": [["send", 1, 2]]},
    {**BASE, "f": "crash", "value": [["send", 1, 2]]},
    {**BASE, "error": {"type": "timeout"}, "node": "n1", "poll_ms": 100},
    {**BASE, "value": [["poll", {"1": [[1, 2]]}]], "rebalance_log": [{"keys": [1]}]},
    {**BASE, "something_else": 1},
    # Jepsen spellings and Queen's -1 offsets: the strict reader's business
    {**BASE, "type": ":ok", "f": ":send", "process": ":nemesis"},
    {**BASE, "value": [[":send", 1, [0, 1]]]},
    {**BASE, "value": [["send", 1, [-1, 7]]]},
    {**BASE, "value": [["poll", {"1": [[-1, 7], [2, 8]]}]]},
]

BAD: list[dict[str, Any]] = [
    {**BASE, "type": "done"},
    {**BASE, "f": ""},
    {**BASE, "process": True},
    {**BASE, "index": "3"},
    {**BASE, "time": "now"},
    {**BASE, "value": [["send", True, 1]]},
    {**BASE, "value": [["send", 1, 1.5]]},
    {**BASE, "value": [["send", 1, [1, 2, 3]]]},
    {**BASE, "value": [["send", 1]]},
    {**BASE, "value": [["poll", {"1": [[1, 2, 3]]}]]},
    {**BASE, "value": [["poll", {"1": [["a", 2]]}]]},
    {**BASE, "value": [["poll", {"1": [[1, None]]}]]},
    {**BASE, "value": [["poll", [1]]]},
    {**BASE, "value": [["fetch"]]},
    {**BASE, "value": "x"},
]


def same(d: Any, n: int = 0) -> None:
    raw = json.dumps(d).encode() + b"\n"  # orjson cannot write ints beyond 64 bits
    fast = fast_op(raw, n)
    try:
        strict = op_from_json(orjson.loads(raw), n)
    except FormatError:
        assert fast is None  # malformed: only the strict reader may say why
        return
    d = decode_line(raw)
    flat = None if d is None else to_flat(d, n)
    if flat is not None:
        assert flat == for_checker(strict)
    if fast is not None:
        assert fast == strict
        assert fast.to_json() == strict.to_json()
        for a, b in zip(fast.value or [], strict.value or [], strict=False):
            if isinstance(a, Poll) and a.records:
                for k, recs in a.records.items():
                    assert [tuple(r) for r in recs] == [tuple(r) for r in b.records[k]]
                    if recs:  # the columns the checker relies on
                        assert recs.offsets == [r[0] for r in recs]  # type: ignore[attr-defined]
                        assert recs.values == [r[1] for r in recs]  # type: ignore[attr-defined]


def for_checker(op: Op) -> Op | Flat:
    """What the checker's reader must give for a line the strict reader read as `op`."""
    return flatten(op) if op.f in DATA_FS and op.process != NEMESIS else op


@pytest.mark.parametrize("d", LINES)
def test_fast_reader_matches_strict_reader(d: dict[str, Any]) -> None:
    same(d, 7)


def test_fast_reader_handles_the_common_shapes_itself() -> None:
    assert fast_op(orjson.dumps(LINES[0]), 0) is not None
    assert fast_op(orjson.dumps(LINES[1]), 0) is not None
    op = fast_op(orjson.dumps(LINES[6]), 9)
    assert op is not None and op.index == 9  # no index: the line's ordinal


@pytest.mark.parametrize("d", BAD)
def test_fast_reader_declines_malformed_lines(d: dict[str, Any]) -> None:
    assert fast_op(orjson.dumps(d), 0) is None
    with pytest.raises(FormatError):
        op_from_json(d, 0)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["send", "poll", "1", ":ok", "ok", ""]),
)
jsonish = st.recursive(
    scalars,
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.sampled_from("12ab"), c)),
    max_leaves=12,
)
# Integers at the 64-bit bounds where the format reads integers (keys, values, offsets,
# process, index): beyond them both readers refuse the line. (In free-form fields such
# as "error" the JSON parsers differ -- orjson reads a float -- and nothing is checked.)
big = st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**26])
mop = st.one_of(
    st.tuples(st.just("send"), st.one_of(st.integers(-2, 9), big, st.text(max_size=2)), jsonish),
    st.tuples(st.just("send"), st.integers(0, 9), st.one_of(big, st.tuples(big, big))),
    st.tuples(
        st.just("poll"),
        st.dictionaries(
            st.sampled_from(["0", "1", "x"]),
            st.lists(
                st.tuples(st.one_of(st.none(), st.integers(-2, 50), big), st.one_of(jsonish, big)),
                max_size=4,
            ),
        ),
    ),
    st.lists(jsonish, max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(
    typ=st.sampled_from(["invoke", "ok", "fail", "info", ":ok", "x"]),
    f=st.sampled_from(["send", "poll", "txn", "assign", "kill", ":poll"]),
    process=st.one_of(st.integers(0, 3), big, st.sampled_from(["nemesis", ":nemesis"])),
    value=st.one_of(st.none(), st.lists(mop, max_size=3), st.lists(big, max_size=2), jsonish),
    extra=st.dictionaries(
        st.sampled_from(["time", "index", "error", "node", "poll_ms", "rebalance_log", "zz"]),
        jsonish,
        max_size=2,
    ),
)
def test_fast_reader_agrees_on_arbitrary_ops(
    typ: str, f: str, process: Any, value: Any, extra: dict[str, Any]
) -> None:
    same({"type": typ, "f": f, "process": process, "value": value, **extra}, 5)


def _strict_lines(path: Any) -> list[Op]:
    out: list[Op] = []
    for raw in path.read_bytes().split(b"\n"):
        if raw.strip():
            out.append(op_from_json(orjson.loads(raw), len(out)))
    return out


def test_block_reader_matches_the_strict_reader_line_by_line(tmp_path: Any) -> None:
    """Many 64 KiB blocks, some decoded whole, some holding an unusual line (read one
    line at a time), blank lines, lines longer than a block, no index on some lines."""
    from ktrial.testing.gen import GenParams, iter_ops

    lines = [orjson.dumps(d) for d in iter_ops(GenParams(seed=3, ops=3000, txn=True))]
    odd = [
        orjson.dumps({**BASE, "type": ":ok", "f": ":poll", "value": [[":poll"]]}),
        orjson.dumps({**BASE, "value": [["send", 1, [-1, 7]]], "zz": 1}),
        orjson.dumps({"process": 4, "type": "ok", "f": "send", "value": [["send", 9, 1]]}),
        b"",
        b"   ",
        orjson.dumps(
            {**BASE, "f": "poll", "value": [["poll", {"5": [[i, i] for i in range(9000)]}]]}
        ),
    ]
    for i, o in enumerate(odd):
        if o.strip():  # an index of its own: indices used twice are an error
            o = orjson.dumps({**orjson.loads(o), "index": 10**6 + i})
        lines.insert(200 + i * 997, o)
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert path.stat().st_size > 6 * (1 << 16)
    strict = _strict_lines(path)
    assert list(iter_history(path)) == strict
    # unusual lines come as Ops (the checker flattens them), the rest as Flats already
    got = list(iter_flat(path))
    assert [for_checker(x) if type(x) is Op else x for x in got] == [
        for_checker(op) for op in strict
    ]
    assert sum(type(x) is Flat for x in got) > 0.9 * len(got)


def test_block_reader_names_the_line_of_a_malformed_op(tmp_path: Any) -> None:
    from ktrial.testing.gen import GenParams, iter_ops

    lines = [orjson.dumps(d) for d in iter_ops(GenParams(seed=4, ops=3000))]
    lines.insert(2345, b'{"type": "ok", "f": "send", "process": 1, "value": [["send", 1]]}')
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    for reader in (iter_history, iter_flat):
        with pytest.raises(HistoryError) as e:
            list(reader(path))  # type: ignore[operator]
        assert e.value.line == 2346 and "send micro-op" in e.value.reason
