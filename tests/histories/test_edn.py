"""Jepsen history.edn import (histories/edn.py).

Hand-written fixtures in tests/data/jepsen/ follow the exact shapes Jepsen's
Kafka test writes (jepsen.tests.kafka, jepsen-io/redpanda): one `prn`-ed op map
per line, or a vector of `#jepsen.history.Op{...}` records pretty-printed over
many lines. They are converted and checked; the EDN reader is tested on its
own; generated ktrial histories survive a trip through EDN unchanged and, laid out
any way Jepsen writes EDN, give the results of their JSONL form; malformed EDN is
exit 254 naming file:line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial.checker import CheckOptions, check, check_file
from ktrial.histories import edn
from ktrial.histories.edn import (
    EdnError,
    dump_edn,
    dump_edn_op,
    is_edn_history,
    iter_any_history,
    iter_edn_history,
    loads_edn,
)
from ktrial.histories.jsonl import HistoryError, iter_history, op_from_json
from ktrial.histories.model import Op, Poll, Send
from ktrial.testing.gen import GenParams, generate, to_jsonl
from ktrial.tests.checker.common import assert_refused, run_main
from ktrial.tests.histlines import Line
from ktrial.tests.histories.common import core, corpus, dump_lines

DATA = Path(__file__).parent.parent / "data" / "jepsen"


def _edn(name: str) -> list[Op]:
    return list(iter_edn_history(DATA / name))


# ------------------------------------------------------------------------ fixtures


def test_valid_queue_history_converts_and_checks_valid() -> None:
    ops = _edn("queue-valid.edn")
    assert [op.index for op in ops] == list(range(24))
    by_index = {op.index: op for op in ops}

    assign = by_index[1]
    assert (assign.type, assign.f, assign.process, assign.value) == ("ok", "assign", 0, ["0", "1"])
    send = by_index[3]
    assert send.value == [Send("0", 1, 0), Send("1", 2, 0)]
    txn = by_index[7]
    assert txn.f == "txn"
    assert txn.value == [Poll({"0": [[0, 1]], "1": [[0, 2]]}), Send("0", 3, 1)]
    assert by_index[6].value == [Poll(None), Send("0", 3, None)]
    timeout = by_index[9]
    assert (timeout.type, timeout.error) == ("info", "timeout")

    nemesis = by_index[5]
    assert nemesis.process == "nemesis" and not nemesis.is_client
    assert nemesis.f == "start-partition"
    assert nemesis.value == ["isolated", {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}]

    aborted = by_index[15]
    assert aborted.error == {
        "type": "abort",
        "definite?": True,
        "body-error": {
            "type": "org.apache.kafka.common.errors.InvalidTxnStateException",
            "message": "intentional abort",
        },
    }
    # #object[Class 0xhash "text"] reads as its contents; (0 1) lists as lists.
    assert by_index[16].value == [0, 1]
    assert by_index[17].value["0"]["leader"] == [
        "org.apache.kafka.common.Node",
        0x1A2B3C4D,
        "n1:9092 (id: 1 rack: null)",
    ]
    final_assign = by_index[19]
    assert final_assign.extra == {"seek_to_beginning": True}
    assert by_index[21].extra == {"poll_ms": 1000}
    assert by_index[23].value == [Poll({})]

    res = check(ops, CheckOptions())
    assert res["valid"] is True, res["error_types"]
    assert res["stats"]["nemesis_ops"] == 4


def test_lost_write_is_reported() -> None:
    res = check(_edn("queue-lost-write.edn"))
    assert res["valid"] is False
    assert "lost-write" in res["bad_error_types"]
    ex = res["anomalies"]["lost-write"]["examples"][0]
    assert (ex["key"], ex["value"], ex["offset"]) == ("0", 11, 1)
    assert ex["ops"] == [5, 11]  # Jepsen's :index values name the ops


def test_duplicate_is_reported() -> None:
    res = check(_edn("queue-duplicate.edn"))
    assert res["valid"] is False
    assert res["bad_error_types"] == ["duplicate"]
    ex = res["anomalies"]["duplicate"]["examples"][0]
    assert (ex["key"], ex["value"], ex["offsets"]) == ("0", 20, [0, 1])


def test_vector_of_op_records_over_many_lines() -> None:
    ops = _edn("queue-subscribe-records.edn")
    assert [op.index for op in ops] == list(range(6))
    assert ops[0].f == "subscribe" and ops[0].value == ["0", "1"]
    assert ops[5].extra == {"rebalance_log": [{"type": "assigned", "keys": [0, 1]}]}
    res = check(ops)
    assert res["valid"] is True
    assert res["stats"]["options"]["sub_via"] == "subscribe"


def test_same_verdicts_as_the_jsonl_form(tmp_path: Path) -> None:
    for name in ("queue-valid.edn", "queue-lost-write.edn", "queue-duplicate.edn"):
        ops = _edn(name)
        jsonl = tmp_path / (name + ".jsonl")
        to_jsonl((op.to_json() for op in ops), jsonl)
        assert list(iter_history(jsonl)) == ops
        a, b = check(ops), check(iter_history(jsonl))
        assert (a["valid"], a["error_types"]) == (b["valid"], b["error_types"])


# ------------------------------------------------------------------------ detection


def test_iter_any_history_picks_the_format(tmp_path: Path) -> None:
    edn_text = (DATA / "queue-duplicate.edn").read_text()
    expected = _edn("queue-duplicate.edn")
    # By suffix, by content (no suffix, or a misleading one), and in a directory.
    plain = tmp_path / "history"
    plain.write_text(edn_text)
    assert is_edn_history(plain)
    assert list(iter_any_history(plain)) == expected
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.edn").write_text(edn_text)
    assert list(iter_any_history(run)) == expected
    vec = tmp_path / "ops.txt"
    vec.write_text("[" + edn_text.split("\n", 1)[1] + "]")
    assert list(iter_any_history(vec)) == expected

    jsonl = tmp_path / "history.jsonl"
    to_jsonl((op.to_json() for op in expected), jsonl)
    assert not is_edn_history(jsonl)
    assert list(iter_any_history(jsonl)) == expected
    unsuffixed = tmp_path / "h"
    unsuffixed.write_bytes(jsonl.read_bytes())
    assert not is_edn_history(unsuffixed)
    (run / "history.jsonl").write_bytes(jsonl.read_bytes())  # JSONL wins in a run dir
    assert list(iter_any_history(run)) == expected

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(HistoryError, match=r"no history\.jsonl or history\.edn"):
        iter_any_history(empty)


# ------------------------------------------------------------------------ the reader


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("nil", None),
        ("true", True),
        ("false", False),
        ("-5", -5),
        ("+7", 7),
        ("12N", 12),
        ("-1.5e3", -1500.0),
        ("2.5M", 2.5),
        ("1/4", 0.25),
        ("-3/2", -1.5),
        ("0x1F", 31),
        ("2r101", 5),
        (":ok", "ok"),
        (":jepsen.tests.kafka/lost-write", "jepsen.tests.kafka/lost-write"),
        ("java.util.concurrent.TimeoutException", "java.util.concurrent.TimeoutException"),
        ('"a\\"b\\\\c\\n\\t\\u00e9"', 'a"b\\c\n\té'),
        ('"line one\nline two"', "line one\nline two"),
        ('"ünïcödé ✓"', "ünïcödé ✓"),
        ("\\a", "a"),
        ("\\newline", "\n"),
        ("\\space", " "),
        ("\\u0041", "A"),
        ("[1 [2 [3 []]] (4 5)]", [1, [2, [3, []]], [4, 5]]),
        ("#{:a}", ["a"]),
        ("{:a {:b [1 {:c #{}}]}}", {"a": {"b": [1, {"c": []}]}}),
        (
            "{1 :x, nil :y, true :z, [1 2] :w, 1.5 :v}",
            {"1": "x", "nil": "y", "true": "z", "[1 2]": "w", "1.5": "v"},
        ),
        ("{:a 1, :b 2,, ,}", {"a": 1, "b": 2}),
        ("; comment\n[1 ; two\n 3] ; trailing", [1, 3]),
        ("[1 #_ 2 #_[3 4] 5 #_ #_ 6 7]", [1, 5]),
        ('#inst "2026-11-29T21:00:00.000-00:00"', "2026-11-29T21:00:00.000-00:00"),
        ('#uuid "6f1b2c3d-0000-4000-8000-000000000000"', "6f1b2c3d-0000-4000-8000-000000000000"),
        ("#jepsen.history.Op{:index 3, :f :poll}", {"index": 3, "f": "poll"}),
        ('#object[java.lang.Thread 0x6f1b2c3d "main"]', ["java.lang.Thread", 0x6F1B2C3D, "main"]),
        ('#error {:cause "boom" :via []}', {"cause": "boom", "via": []}),
        ("#:jepsen.op{:a 1, :other/b 2}", {"jepsen.op/a": 1, "other/b": 2}),
        ('#"\\d+"', "\\d+"),
        ("^{:meta 1} [1]", [1]),
    ],
)
def test_reader_values(text: str, value: Any) -> None:
    assert loads_edn(text) == value


def test_reader_special_floats() -> None:
    assert loads_edn("[##Inf ##-Inf]") == [math.inf, -math.inf]
    assert math.isnan(loads_edn("##NaN"))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{:a 1", "end of text inside a map"),
        ("[1 2", "end of text inside a vector"),
        ('"abc', "end of text inside a string"),
        ("{:a}", "even number of forms"),
        ("{:a 1 :a 2}", "key 'a' twice"),
        ("[1 2)", "unexpected ')' inside a vector"),
        ("]", "nothing is open"),
        ("1x", "invalid number"),
        ("1/0", "divides by zero"),
        ('"\\q"', "unknown escape"),
        ("#?(:clj 1)", "unknown dispatch"),
        ("##Foo", "Inf, -Inf or NaN"),
        ("1 2", "text after the form"),
        ("   ", "empty"),
    ],
)
def test_reader_rejects(text: str, reason: str) -> None:
    with pytest.raises(EdnError, match=re.escape(reason)):
        loads_edn(text)


def test_reader_nesting_limit() -> None:
    deep = loads_edn("[" * 1000 + "]" * 1000)  # no recursion: depth is only a limit
    for _ in range(999):
        (deep,) = deep
    assert deep == []
    with pytest.raises(EdnError, match="nested more than 1000 deep"):
        loads_edn("[" * 100_000 + "]" * 100_000)


# ------------------------------------------------------------------------ errors with lines

GOOD = "{:type :invoke, :f :poll, :value [[:poll]], :time 1, :process 0, :index 0}\n"


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        ("{:type :ok, :f :poll, :value [[:poll {0 [[0 1]}]], :process 0}\n", 3, "invalid EDN"),
        ("{:type :ok, :f :poll, :value [[:poll]], :time 2, :process 0\n", 3, "ends inside a map"),
        ("[:type :ok]\n", 3, "must be an EDN map"),
        ("{:type :done, :f :poll, :process 0}\n", 3, "unknown op type 'done'"),
        ("{:type :ok, :f :poll, :value [[:poll {0 [[0 nil]]}]], :process 0}\n", 3, "polled value"),
        ("{:type :ok, :f :send, :value [[:append 0 1]], :process 0}\n", 3, "unknown function"),
        ("{:type :ok, :f :poll, :process 1.5}\n", 3, "process"),
        ('{:type :ok, :f :poll, :value "unterminated\n\n', 3, "ends inside a map"),
        ("\n{:type :ok,\n :f :poll,\n :value [[:poll {0 [[0 1] ]]]]}\n", 6, "unexpected ']'"),
    ],
)
def test_malformed_ops_name_the_line(tmp_path: Path, body: str, line: int, reason: str) -> None:
    p = tmp_path / "history.edn"
    p.write_text(GOOD + "; the next op is broken\n" + body + GOOD)
    with pytest.raises(HistoryError, match=re.escape(reason)) as ei:
        list(iter_edn_history(p))
    assert (ei.value.path, ei.value.line) == (str(p), line)
    assert str(ei.value).startswith(f"{p}:{line}: ")


def test_unclosed_vector_and_bad_bytes(tmp_path: Path) -> None:
    p = tmp_path / "history.edn"
    p.write_text("\n[" + GOOD + GOOD.replace(":index 0", ":index 1"))
    with pytest.raises(HistoryError, match="never closed") as ei:
        list(iter_edn_history(p))
    assert ei.value.line == 2

    p.write_bytes(GOOD.encode() * 2 + b"{:type \xff}\n")
    with pytest.raises(HistoryError, match="not UTF-8") as ei:
        list(iter_edn_history(p))
    assert ei.value.line == 3

    p.write_bytes(GOOD.encode() + b"\x00\x01\x02")
    with pytest.raises(HistoryError, match="binary") as ei:
        list(iter_edn_history(p))
    assert ei.value.line == 2

    with pytest.raises(HistoryError, match="cannot open") as ei:
        list(iter_edn_history(tmp_path / "missing.edn"))
    assert ei.value.line == 0


def test_index_defaults_to_file_order(tmp_path: Path) -> None:
    p = tmp_path / "history.edn"
    p.write_text("{:type :invoke, :f :poll, :value [[:poll]], :time 5, :process 0}\n" * 3)
    assert [op.index for op in iter_edn_history(p)] == [0, 1, 2]


# ------------------------------------------------------------------------ round trip

gen_params = st.builds(
    GenParams,
    seed=st.integers(0, 2**32 - 1),
    keys=st.integers(1, 4),
    processes=st.integers(1, 4),
    ops=st.integers(1, 40),
    txn=st.booleans(),
    info_p=st.sampled_from([0.0, 0.2]),
    crash_p=st.sampled_from([0.0, 0.1]),
    sub_via=st.sampled_from(["assign", "subscribe"]),
    reassign_p=st.sampled_from([0.0, 0.2]),
    reseek=st.booleans(),
    rebalance_p=st.sampled_from([0.0, 0.3]),
    null_offset_p=st.sampled_from([0.0, 0.5]),
    omit_invokes=st.booleans(),
    truncate=st.booleans(),
    int_keys=st.booleans(),
    nemesis_p=st.sampled_from([0.0, 0.1]),
)


def _layout(lines: list[str], layout: str) -> str:
    """Write op maps the ways Jepsen does: prn per line, records, one vector, pretty."""
    if layout == "lines":
        return "".join(line + "\n" for line in lines)
    if layout == "records":
        return "".join("#jepsen.history.Op" + line + "\n" for line in lines)
    if layout == "vector":
        return "[" + "\n ".join(lines) + "]\n"
    # pretty: one field per line, commas gone, a comment between ops
    return "".join(line.replace(", :", "\n  :") + "\n;; next\n" for line in lines)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(params=gen_params, layout=st.sampled_from(["lines", "records", "vector", "pretty"]))
def test_round_trip_through_edn(tmp_path_factory: Any, params: GenParams, layout: str) -> None:
    ops = generate(params).to_ops()
    p = tmp_path_factory.mktemp("edn") / "history.edn"
    p.write_text(_layout([dump_edn_op(op) for op in ops], layout))
    back = list(iter_edn_history(p))
    assert back == ops
    a, b = check(ops), check(back)
    assert a["valid"] in (True, "unknown")  # "unknown": nothing was read
    assert (b["valid"], b["error_types"]) == (a["valid"], a["error_types"])


def test_dump_edn_writes_jepsen_shapes() -> None:
    op = Op(
        4,
        99,
        1,
        "ok",
        "txn",
        [Send("3", 5, 0), Poll({"3": [[0, 5]]})],
        None,
        {"rebalance_log": [{"type": "revoked", "keys": [3]}], "seek_to_beginning": True},
    )
    line = dump_edn_op(op)
    assert line == (
        '{:index 4, :time 99, :type :ok, :process 1, :f :txn, :value [[:send "3" [0 5]] '
        '[:poll {"3" [[0 5]]}]], :rebalance-log [{:type "revoked", :keys [3]}], '
        ":seek-to-beginning? true}"
    )
    assert list(loads_edn(line)) == [
        "index",
        "time",
        "type",
        "process",
        "f",
        "value",
        "rebalance-log",
        "seek-to-beginning?",
    ]
    assert dump_edn({"a b": [1.5, None, 'x"y'], "k": {1, 2}}) in (
        '{"a b" [1.5 nil "x\\"y"], :k #{1 2}}',
        '{"a b" [1.5 nil "x\\"y"], :k #{2 1}}',
    )


@pytest.mark.parametrize("layout", ["lines", "records", "vector", "pretty"])
def test_streaming_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """Forms cut by the reader's chunk boundaries are read again whole, lines stay right."""
    ops = generate(GenParams(seed=7, keys=3, processes=3, ops=40, nemesis_p=0.1)).to_ops()
    ops[3].extra["note"] = "a string\nover three\nlines"
    text = _layout([dump_edn_op(op) for op in ops], layout)
    p = tmp_path / "history.edn"
    p.write_text(text)
    whole = list(iter_edn_history(p))
    monkeypatch.setattr(edn, "_CHUNK", 16)  # a few lines per chunk
    assert list(iter_edn_history(p)) == whole == ops

    # An error near the end is located on the right line of the file.
    bad = text.rstrip("]\n") + "\n{:type :ok, :f :poll, :process 0, :value [[:poll {0 nil}]]}\n"
    p.write_text(bad + ("]\n" if layout == "vector" else ""))
    with pytest.raises(HistoryError, match="poll records of key") as ei:
        list(iter_edn_history(p))
    assert ei.value.line == bad.count("\n")


# ------------------------------------------------------------- as other tools write it


def edn_lines(ops: list[Line]) -> list[str]:
    return [dump_edn_op(op_from_json(o, i)) for i, o in enumerate(ops)]


EDN_LAYOUTS: dict[str, Callable[[list[str]], str]] = {
    "prn-lines": lambda ls: "\n".join(ls) + "\n",
    "op-records": lambda ls: "\n".join("#jepsen.history.Op" + ln for ln in ls) + "\n",
    "one-vector": lambda ls: "[" + "\n ".join(ls) + "]\n",
    "crlf": lambda ls: "\r\n".join(ls) + "\r\n",
    "spread-over-lines": lambda ls: "\n".join(ln.replace(", ", ",\n  ") for ln in ls) + "\n",
    "no-commas": lambda ls: "\n".join(ln.replace(", ", " ") for ln in ls) + "\n",
    "comments-and-discards": lambda ls: (
        ";; jepsen\n" + "\n".join(f"#_ {{:x 1}} {ln} ; c" for ln in ls) + "\n"
    ),
    "no-final-newline": lambda ls: "\n".join(ls),
}


@pytest.mark.parametrize("layout", sorted(EDN_LAYOUTS))
def test_edn_history_gives_the_jsonl_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    for hname, ops in corpus()[:5]:
        canon = tmp_path / "canon.jsonl"
        canon.write_bytes(dump_lines([json.dumps(o) for o in ops]))
        want = core(check_file(canon))
        run = tmp_path / f"{layout}-{hname}"
        run.mkdir()
        (run / "history.edn").write_text(EDN_LAYOUTS[layout](edn_lines(ops)), encoding="utf-8")
        assert core(check(iter_any_history(run))) == want, hname
    rc, out, err = run_main(["check", str(run), "--json"], capsys)  # a Jepsen run directory
    assert rc == {True: 0, False: 1, "unknown": 2}[want["valid"]], err
    assert core(json.loads(out)) == want


def test_edn_history_with_a_bom_is_read(tmp_path: Path) -> None:
    _hname, ops = corpus()[0]
    canon = tmp_path / "canon.jsonl"
    canon.write_bytes(dump_lines([json.dumps(o) for o in ops]))
    h = tmp_path / "history.edn"
    h.write_text("\ufeff" + "\n".join(edn_lines(ops)) + "\n", encoding="utf-8")
    assert core(check(iter_any_history(h))) == core(check_file(canon))


def test_jepsen_edn_as_jepsen_writes_it(tmp_path: Path) -> None:
    """Hand-written in Jepsen's own style (keywords, records, #object, ratios, N ints)."""
    h = tmp_path / "history.edn"
    h.write_text(
        "{:type :invoke, :f :send, :value [[:send 3 5]], :time 1234000, :process 0, :index 0}\n"
        "{:type :ok, :f :send, :value [[:send 3 [0 5]]], :time 2345000, :process 0, :index 1}\n"
        "{:type :info, :f :start-partition, :value :majority, :time 2400000,"
        " :process :nemesis, :index 2}\n"
        "#jepsen.history.Op{:index 3, :time 3000000, :type :invoke, :process 1, :f :poll,"
        " :value [[:poll]]}\n"
        "#jepsen.history.Op{:index 4, :time 3100000, :type :ok, :process 1, :f :poll,"
        " :value [[:poll {3 [[0 5]]}]], :rebalance-log [{:type :assigned, :keys [3]}],"
        " :poll-ms 100N}\n"
        "{:type :invoke, :f :send, :value [[:send 3 6]], :time 3200000, :process 2, :index 5}\n"
        "{:type :info, :f :send, :value [[:send 3 6]], :time 3300000, :process 2, :index 6,"
        ' :error [:timeout #object[java.net.SocketTimeoutException 0x1f "timed out"]]}\n'
        "{:type :info, :f :stop-partition, :value nil, :time 3400000, :process :nemesis,"
        " :index 7}\n"
    )
    res = check(iter_any_history(h))
    assert res["valid"] is True, res["error_types"]
    assert res["stats"]["nemesis_ops"] == 2
    assert res["stats"]["ops"] == 8
    assert res["metrics"]["counts"]  # info causes counted without choking on #object


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("{:type :ok, :f :poll, :process 0, :value []}\n{:type :ok :f}\n", 2, "even number"),
        ("{:type :ok, :f :poll, :process 0, :value []}\n\n[1 2]\n", 3, "EDN map"),
        (
            "{:type :ok, :f :poll, :process 0, :value []}\n{:type :done, :f :poll, :process 0}\n",
            2,
            "unknown op type",
        ),
        (
            "{:type :ok, :f :poll, :process 0, :value []}\n{:type :ok,\n :f :poll,\n :process",
            2,
            "ends inside",
        ),
        ("{:type :ok, :f :send, :process 0,\n :value [[:fetch 1]]}\n", 1, "unknown function"),
        (
            "{:type :ok, :f :send, :process 0, :value [[:send 1 [0 99999999999999999999N]]]}\n",
            1,
            "beyond 64 bits",
        ),
        ("{:type :ok, :f :poll, :process 0, :value []}\n{:type :ok, :type :fail}\n", 2, "twice"),
    ],
)
def test_malformed_edn_exit_254_names_file_line_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int, reason: str
) -> None:
    h = tmp_path / "history.edn"
    h.write_text(text)
    assert_refused(h, line, reason, capsys)
