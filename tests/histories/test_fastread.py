"""The fast (msgspec) reader (histories/fastread.py) gives exactly the ops of the strict
reader, or declines; and the block reader (many lines per call, what `ktrial check`
uses) and the strict reader (one line at a time, what runs where msgspec is absent)
agree exactly on every line: the same ops, or the same error naming the same line."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ktrial.histories.fastread import decode_line, fast_op, to_flat
from ktrial.histories.jsonl import HistoryError, iter_flat, iter_history, op_from_json
from ktrial.histories.model import DATA_FS, NEMESIS, Flat, FormatError, Op, Poll, flatten
from ktrial.tests.checker.common import run_main
from ktrial.tests.histlines import Line
from ktrial.tests.histories.common import KW, P1, S0, assert_readers_agree, line_of

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


# ------------------------------------------------ the block and the strict reader agree


AGREE: dict[str, str] = {
    "dup-field-last-wins": S0.replace('"type":"ok"', '"type":"fail","type":"ok"'),
    "dup-value-last-wins": S0[:-1] + ',"value":[["send",1,[0,2]]]}',
    "dup-poll-key": P1.replace('"index":1', '"index":9').replace(
        '{"1":[[0,1]]}', '{"1":[[0,1]],"1":[[0,2]]}'
    ),
    "poll-key-escaped": P1.replace('"index":1', '"index":9').replace(
        '{"1":[[0,1]]}', '{"1":[[0,1]],"\\u0031":[[1,2]]}'
    ),
    "dup-unknown-field": line_of(value=[], zz=1)[:-1] + ', "zz": 2}',
    "key-2^63": line_of(value=[["send", 2**63, [0, 1]]]),
    "key-2^64": line_of(value=[["send", 2**64, [0, 1]]]),
    "value-u64": line_of(value=[["send", 1, [0, 2**64 - 1]]]),
    "int64-extremes": line_of(value=[["send", -(2**63), [2**63 - 1, -(2**63)]]]),
    "offset-2^63": line_of(value=[["send", 1, [2**63, 1]]]),
    "process-2^63": line_of(process=2**63, value=[]),
    "index-2^63": line_of(index=2**63, value=[]),
    "time-2^63": line_of(time=2**63, value=[]),
    "time-1e300": line_of(time=1e300, value=[]),
    "time-negative": line_of(time=-5, value=[]),
    "time-null": line_of(time=None, value=[]),
    "index-null": line_of(index=None, value=[]),
    "offset-1e2": '{"process":0,"type":"ok","f":"send","value":[["send",1,[1e2,1]]]}',
    "lone-surrogate": '{"process":0,"type":"ok","f":"send","value":[["send","\\ud800",[0,1]]]}',
    "unicode-key": line_of(value=[["send", "ключ🔑", [0, 1]]]),
    "nul-escaped-in-key": line_of(value=[["send", "a\u0000b", [0, 1]]]),
    "raw-tab-in-string": '{"process":0,"type":"ok","f":"send","value":[["send","a\tb",[0,1]]]}',
    "bool-key": line_of(value=[["send", True, [0, 1]]]),
    "float-key": line_of(value=[["send", 1.0, [0, 1]]]),
    "negative-key": line_of(value=[["send", -1, [0, 1]]]),
    "negative-offsets-in-poll": line_of(f="poll", value=[["poll", {"1": [[-1, 1], [-5, 2]]}]]),
    "queen-minus-1-send": line_of(value=[["send", 1, [-1, 7]]]),
    "zero-and-minus-zero-offsets": '{"process":0,"type":"ok","f":"send",'
    '"value":[["send",1,[0,1]],["send",1,[-0,2]]]}',
    "poll-invoke-null": '{"process":0,"type":"invoke","f":"poll","value":null}',
    "fail-poll-without-records": line_of(type="fail", f="poll", value=[["poll"]], error=["x", {}]),
    "poll-null-records": line_of(f="poll", value=[["poll", None]]),
    "optional-fields-null": line_of(
        f="poll",
        value=[["poll", {}]],
        node=None,
        poll_ms=1.5,
        rebalance_log=None,
        seek_to_beginning=None,
    ),
    "assign-big-key": line_of(f="assign", value=[2**64]),
    "assign-nested": line_of(f="assign", value=[[1]]),
    "assign-map": line_of(f="assign", value={"keys": [1]}),
    "assign-string": line_of(f="assign", value="1"),
    "crash-with-value": line_of(type="info", f="crash", value=[["send", 1, 2]]),
    "string-values": line_of(value=[["send", "1", [0, "1"]]]),
    "poll-records-null": line_of(f="poll", value=[["poll", {"1": None}]]),
    "process-string": line_of(process="worker-1", f="poll", value=[["poll", {"1": [[0, 1]]}]]),
    "process-float": line_of(process=1.0, value=[]),
    "process-bool": line_of(process=True, value=[]),
    "type-uppercase": line_of(type="OK", value=[]),
    "mop-uppercase": line_of(value=[["SEND", 1, 2]]),
    "array-line": "[" + S0 + "]",
    "deep-nesting": line_of(process="nemesis", f="x", value=[])[:-3]
    + "[" * 3000
    + "]" * 3000
    + "}",
    "float-polled-value": line_of(f="poll", value=[["poll", {"1": [[0, 1.0]]}]]),
    "nemesis-big-int-in-list": line_of(process="nemesis", f="kill", value=[2**64]),
    "jepsen-seek-spelling": line_of(f="assign", value=[1], **{"seek-to-beginning?": True}),
}


@pytest.mark.parametrize("name", sorted(AGREE))
def test_readers_agree_on_odd_lines(tmp_path: Path, name: str) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes((S0 + "\n" + AGREE[name] + "\n" + P1 + "\n").encode("utf-8", "surrogatepass"))
    kind, got, _warns = assert_readers_agree(h)
    if kind == "err":
        assert got.startswith(f"{h}:2: "), got  # the odd line is line 2
    else:
        assert len(got) == 3


DISAGREE: list[Any] = [
    pytest.param(
        S0 + " " + P1,
        id="two-ops-on-one-line",
    ),
    pytest.param(
        S0 + "\r" + P1,
        id="ops-separated-by-bare-cr",
    ),
    pytest.param(
        '{"process":0,"type":"ok","f":"send","value":[["send",1,[0,1],"extra"]]}',
        id="send-with-4-elements",
    ),
    pytest.param(
        '{"process":0,"type":"ok","f":"poll","value":[["poll",{"1":[[0,1]]},5]]}',
        id="poll-with-3-elements",
    ),
    pytest.param(
        json.dumps({"process": "nemesis", "type": "info", "f": "kill", "value": {"a": 2**64}}),
        id="nemesis-big-int-in-map",
    ),
    pytest.param(
        json.dumps({"process": 0, "type": "info", "f": "send", "value": [], "error": [2**64]}),
        id="error-big-int",
    ),
    pytest.param(
        json.dumps(json.loads(S0), indent=2),
        id="pretty-printed-op",
    ),
]


@pytest.mark.parametrize("line", DISAGREE)
def test_readers_agree_on_lines_msgspec_reads_loosely(tmp_path: Path, line: str) -> None:
    h = tmp_path / "history.jsonl"
    h.write_text(S0 + "\n" + line + "\n" + P1 + "\n")
    assert_readers_agree(h)


def test_same_line_same_answer_whatever_its_neighbours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alone = tmp_path / "a" / "history.jsonl"
    alone.parent.mkdir()
    alone.write_text(S0 + " " + P1 + "\n")
    beside = tmp_path / "b" / "history.jsonl"
    beside.parent.mkdir()
    beside.write_text(S0 + " " + P1 + "\n" + KW + "\n")
    rc_beside, _, err_beside = run_main(["check", str(beside)], capsys)
    assert rc_beside == 254 and f"{beside}:1:" in err_beside  # rejected, as the strict reader
    rc_alone, _, err_alone = run_main(["check", str(alone)], capsys)
    assert rc_alone == 254, "accepted when no unusual line shares its block"
    assert f"{alone}:1:" in err_alone


def test_pretty_printed_history_is_rejected_at_line_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ops = [json.loads(S0), json.loads(P1)]
    h = tmp_path / "history.jsonl"
    h.write_text("".join(json.dumps(o, indent=2) + "\n" for o in ops))
    rc, _out, err = run_main(["check", str(h)], capsys)
    assert rc == 254, "a pretty-printed history was checked as if well-formed"
    assert f"{h}:1:" in err


def _block_edge_text(rng: random.Random) -> tuple[bytes, int, dict[str, Any]]:
    n = rng.randint(50, 2500)
    lines = []
    for i in range(n):
        o: Line = {
            "index": i,
            "time": i,
            "process": i % 3,
            "type": "ok",
            "f": "send",
            "value": [["send", 1, [i, i]]],
        }
        if rng.random() < 0.02:
            o["node"] = "x" * rng.choice([10, 300, 70_000])  # lines over 64 KiB too
        lines.append(json.dumps(o))
    bad = rng.randrange(n)
    kind = rng.choice(["bad-json", "bad-op", "jepsen-keyword", "fine", "torn-last"])
    if kind == "bad-json":
        lines[bad] = lines[bad][:-5]
    elif kind == "bad-op":
        lines[bad] = lines[bad].replace('"ok"', '"done"')
    elif kind == "jepsen-keyword":
        lines[bad] = lines[bad].replace('"ok"', '":ok"')
    out = b""
    lineno = 1
    linenos = []
    for i, ln in enumerate(lines):
        linenos.append(lineno)
        if kind == "torn-last" and i == n - 1:
            out += ln[: len(ln) // 2].encode()
            break
        sep = rng.choice(["\n", "\r\n", "\n\n", "  \n"])
        out += (ln + sep).encode()
        lineno += sep.count("\n")
    want_line = linenos[n - 1 if kind == "torn-last" else bad]
    return out, want_line, {"kind": kind, "n": n}


def test_readers_agree_at_block_edges_and_name_the_true_line(tmp_path: Path) -> None:
    rng = random.Random(7)
    h = tmp_path / "history.jsonl"
    for _ in range(25):
        text, line, info = _block_edge_text(rng)
        h.write_bytes(text)
        kind, got, warns = assert_readers_agree(h)
        if info["kind"] in ("bad-json", "bad-op"):
            assert kind == "err" and got.startswith(f"{h}:{line}: "), (info, got)
        elif info["kind"] == "torn-last":
            assert kind == "ok" and len(got) == info["n"] - 1, info
            assert len(warns) == 1 and warns[0].startswith(f"{h}:{line}: "), (info, warns)
        else:
            assert kind == "ok" and len(got) == info["n"] and not warns, info
