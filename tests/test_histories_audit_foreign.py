"""Audit: histories written by other tools, and bad input, through every reader.

DESIGN.md section 2 and docs/history-format.md let any tool write a history: fields
in any order, unknown fields, no `index` or `time`, invoke-less completions, keys as
ints or strings, Jepsen keyword spellings, Queen's -1 offsets, nemesis ops with any
value, Jepsen's history.edn. Each accepted shape must give the verdict of the same
history written the canonical way (a differential test: results.json minus timing),
and each malformed input must give exit 254 with `file:line: reason`, never a
traceback.

ktrial has two JSONL paths that must agree exactly (same ops, or the same error): the
block reader (histories/fastread.py, msgspec, many lines per call; what `ktrial check`
and `check_file` use) and the strict reader (histories/jsonl.py, one line at a time,
what runs where msgspec is absent). The strict-only configuration is obtained here by
switching the fast decoders off, exactly as a missing msgspec does.

Defects are `xfail(strict=True)`: they pass once fixed.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import json
import random
import warnings
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check, check_file
from ktrial.cli import main
from ktrial.histories import jsonl
from ktrial.histories.edn import dump_edn_op, iter_any_history
from ktrial.histories.jsonl import HistoryError, iter_flat, iter_history, op_from_json
from ktrial.histories.model import Flat, Op, flatten
from ktrial.testing.gen import GenParams, generate
from ktrial.testing.mutate import INJECTORS
from ktrial.tests.histlines import inv, ok, pl, snd, write

pytest.importorskip("msgspec")

Line = dict[str, Any]


# ===================================================================== helpers


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the real entry point in process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    code = e.value.code
    return (code if isinstance(code, int) else 0), out.out, out.err


@contextlib.contextmanager
def strict_only() -> Iterator[None]:
    """Read as ktrial does without msgspec: every line through the strict reader."""
    saved = jsonl.decode_block, jsonl.decode_line
    jsonl.decode_block = lambda buf: None  # type: ignore[assignment]
    jsonl.decode_line = lambda raw: None  # type: ignore[assignment]
    try:
        yield
    finally:
        jsonl.decode_block, jsonl.decode_line = saved


def norm(o: Op | Flat) -> tuple[Any, ...]:
    """A reader's op in a comparable form (data ops as their effects)."""
    if isinstance(o, Op):
        if not o.is_data:
            return ("op", json.dumps(o.to_json(), sort_keys=True, default=repr))
        o = flatten(o)
    reads = [(i, k, list(offs), list(vals)) for i, k, offs, vals in o.reads]
    return (
        "data",
        o.index,
        o.time,
        o.process,
        o.type,
        o.f,
        tuple(o.writes),
        reads,
        json.dumps(o.error, sort_keys=True, default=repr),
        json.dumps(o.extra or {}, sort_keys=True, default=repr),
    )


Outcome = tuple[str, Any, list[str]]


def read_with(reader: Callable[[Path], Iterator[Any]], path: Path) -> Outcome:
    """("ok", ops, warnings) or ("err", message, warnings); a crash is a test failure."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got: Any = [norm(o) for o in reader(path)]
            kind = "ok"
        except HistoryError as e:
            got, kind = str(e), "err"
    return kind, got, [str(w.message) for w in caught]


def all_readers(path: Path) -> dict[str, Outcome]:
    out = {"block": read_with(iter_history, path), "block-flat": read_with(iter_flat, path)}
    with strict_only():
        out["strict"] = read_with(iter_history, path)
        out["strict-flat"] = read_with(iter_flat, path)
    return out


def assert_readers_agree(path: Path) -> Outcome:
    got = all_readers(path)
    first = got["strict"]
    for name, res in got.items():
        assert res == first, f"{name} reader differs from the strict reader:\n{res}\n{first}"
    return first


def core(res: dict[str, Any]) -> dict[str, Any]:
    """results.json minus what depends on the machine (timing) and what only `ktrial
    check` writes (its "input" section: what reading let pass, with warnings)."""
    res = json.loads(json.dumps(res, default=repr))
    res["stats"].pop("check_time_s", None)
    res.pop("input", None)
    return res


def verdict(res: dict[str, Any]) -> tuple[Any, ...]:
    return (
        res["valid"],
        sorted(res["error_types"]),
        sorted(res["bad_error_types"]),
        {k: v["count"] for k, v in res["anomalies"].items()},
    )


def dump_lines(lines: list[str], sep: str = "\n") -> bytes:
    return "".join(ln + sep for ln in lines).encode()


# ============================================== corpus: generated histories, some faulty


@lru_cache(maxsize=1)
def corpus() -> list[tuple[str, list[Line]]]:
    """Correct-log histories (assign and subscribe, null offsets, info/crash, invoke-less,
    cut short) and a few with one injected fault each."""
    out: list[tuple[str, list[Line]]] = []
    for seed in range(4):
        g = generate(
            GenParams(
                seed=seed,
                ops=30,
                null_offset_p=0.2,
                info_p=0.1,
                crash_p=0.05,
                sub_via=("assign", "subscribe")[seed % 2],
                omit_invokes=seed == 2,
                truncate=seed == 3,
                tail_invokes=seed % 2,
                nemesis_p=0.03,
            )
        )
        out.append((f"clean-{seed}", g.ops))
        names = sorted(INJECTORS)
        for name in names[seed::4][:2]:
            fault = INJECTORS[name](g, random.Random(seed))
            if fault is not None:
                out.append((f"{name.replace('/', '-')}-{seed}", fault.ops))
    return out


def _data(o: Line) -> bool:
    return o.get("process") != "nemesis" and o["f"] in ("send", "poll", "txn")


def t_shuffled(ops: list[Line], rng: random.Random) -> list[str]:
    out = []
    for o in ops:
        items = list(o.items())
        rng.shuffle(items)
        out.append(json.dumps(dict(items)))
    return out


def t_flip_keys(ops: list[Line], rng: random.Random) -> list[str]:
    """Keys as ints in some ops and as strings in others ("1" and 1 are one key)."""
    out = []
    for o in copy.deepcopy(ops):
        if _data(o) and isinstance(o.get("value"), list):
            for m in o["value"]:
                if m[0] == "send" and rng.random() < 0.5:
                    m[1] = str(m[1]) if isinstance(m[1], int) else int(m[1])
        if o["f"] in ("assign", "subscribe") and isinstance(o.get("value"), list):
            o["value"] = [str(k) if rng.random() < 0.5 else int(k) for k in o["value"]]
        out.append(json.dumps(o))
    return out


def t_unknown_fields(ops: list[Line], rng: random.Random) -> list[str]:
    return [
        json.dumps(
            {
                "zz_tool": {"a": [1, 2, {"b": None}]},
                **o,
                "wall": "2024-01-01T00:00:00Z",
                "debug": rng.random(),
                "trace_id": [rng.randrange(1 << 62), None, True],
            }
        )
        for o in ops
    ]


def t_no_index(ops: list[Line], rng: random.Random) -> list[str]:
    return [json.dumps({k: v for k, v in o.items() if k != "index"}) for o in ops]


def t_error_shapes(ops: list[Line], rng: random.Random) -> list[str]:
    out = []
    for o in ops:
        if o.get("error") is not None:
            e = o["error"]
            o = {**o, "error": rng.choice([e, {"type": str(e), "message": "x"}, [str(e), 1]])}
        out.append(json.dumps(o))
    return out


def t_jepsen_keywords(ops: list[Line], rng: random.Random) -> list[str]:
    out = []
    for o in copy.deepcopy(ops):
        if _data(o) and isinstance(o.get("value"), list):
            for m in o["value"]:
                m[0] = ":" + m[0]
        o["type"] = ":" + o["type"]
        o["f"] = ":" + o["f"]
        if o["process"] == "nemesis":
            o["process"] = ":nemesis"
        out.append(json.dumps(o))
    return out


def t_compact(ops: list[Line], rng: random.Random) -> list[str]:
    return [json.dumps(o, separators=(",", ":")) for o in ops]


def t_unicode_escaped(ops: list[Line], rng: random.Random) -> list[str]:
    """What a JS/Java serialiser writes: every string ASCII-escaped, e.g. "\\u006f\\u006b"."""
    return [
        json.dumps(o).replace('"ok"', '"\\u006fk"').replace('"send"', '"s\\u0065nd"') for o in ops
    ]


# Transforms after which results.json must be identical (minus timing).
SAME: dict[str, Callable[[list[Line], random.Random], list[str]]] = {
    "fields-in-any-order": t_shuffled,
    "keys-int-or-string": t_flip_keys,
    "unknown-fields": t_unknown_fields,
    "index-missing": t_no_index,
    "error-as-string-object-list": t_error_shapes,
    "jepsen-keyword-spellings": t_jepsen_keywords,
    "compact-separators": t_compact,
    "unicode-escapes": t_unicode_escaped,
}

# Byte-level layouts after which results.json must be identical.
LAYOUTS: dict[str, Callable[[list[str]], bytes]] = {
    "crlf": lambda ls: dump_lines(ls, "\r\n"),
    "trailing-spaces": lambda ls: dump_lines(ls, " \t \n"),
    "leading-spaces": lambda ls: dump_lines(["  " + ln for ln in ls]),
    "blank-lines": lambda ls: b"\n" + dump_lines(ls, "\n\n \n"),
    "no-final-newline": lambda ls: dump_lines(ls).rstrip(b"\n"),
    "crlf-no-final-newline": lambda ls: dump_lines(ls, "\r\n").rstrip(b"\r\n"),
}


def t_sparse_index(o: Line, i: int, rng: random.Random) -> Line:
    return {**o, "index": 100 + 7 * o["index"]}


def t_no_time(o: Line, i: int, rng: random.Random) -> Line:
    return {k: v for k, v in o.items() if k != "time"}


def t_float_time(o: Line, i: int, rng: random.Random) -> Line:
    return {**o, "time": o["time"] + 0.75}


def t_epoch_time(o: Line, i: int, rng: random.Random) -> Line:
    return {**o, "time": 1_700_000_000_000_000_000 + o["time"]}


def t_shuffled_time(o: Line, i: int, rng: random.Random) -> Line:
    return {**o, "time": rng.randrange(10**9)}


def t_negative_time(o: Line, i: int, rng: random.Random) -> Line:
    return {**o, "time": o["time"] - 10**12}


def t_ms_time(o: Line, i: int, rng: random.Random) -> Line:
    return {**o, "time": o["time"] // 1_000_000}


def t_named_processes(o: Line, i: int, rng: random.Random) -> Line:
    p = o["process"]
    return {**o, "process": p if p == "nemesis" else 10**12 + p}


# Transforms that may move op numbers, times, latencies or liveness windows, but never
# the verdict, the anomaly types or their counts.
SAME_VERDICT: dict[str, Callable[[Line, int, random.Random], Line]] = {
    "index-not-dense": t_sparse_index,
    "time-missing": t_no_time,
    "time-float": t_float_time,
    "time-epoch-ns": t_epoch_time,
    "time-out-of-order": t_shuffled_time,
    "time-negative": t_negative_time,
    "time-coarse-ms": t_ms_time,
    "processes-renumbered": t_named_processes,
}

NEMESIS_VALUES: list[Any] = [
    None,
    1,
    "majority",
    [1, [2, {"a": 3}]],
    {"isolate": {"n1": ["n2", "n3"]}},
    True,
    1.5,
    [["send", 1, 2]],
    {"1": [[0, 1]]},
    [["poll"]],
    [],
    {},
]


def t_nemesis_interleaved(ops: list[Line], rng: random.Random) -> list[str]:
    out = []
    for o in ops:
        out.append(json.dumps(o))
        if rng.random() < 0.3:
            n = {
                "process": rng.choice(["nemesis", ":nemesis"]),
                "type": rng.choice(["info", "invoke"]),
                "f": rng.choice(["start-partition", "bump-clock", "txn", "poll", "send", "kill"]),
                "value": rng.choice(NEMESIS_VALUES),
                "time": o["time"],
            }
            out.append(json.dumps(n))
    return out


@pytest.mark.parametrize("name", sorted(SAME))
def test_foreign_spelling_gives_the_canonical_results(tmp_path: Path, name: str) -> None:
    for hname, ops in corpus():
        canon = tmp_path / "canon.jsonl"
        canon.write_bytes(dump_lines([json.dumps(o) for o in ops]))
        want = core(check_file(canon))
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_bytes(dump_lines(SAME[name](ops, random.Random(hname))))
        assert core(check_file(foreign)) == want, hname
        # through the strict reader too (msgspec absent)
        with strict_only():
            assert core(check_file(foreign)) == want, hname


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_foreign_layout_gives_the_canonical_results(tmp_path: Path, layout: str) -> None:
    for hname, ops in corpus()[:4]:
        lines = [json.dumps(o) for o in ops]
        canon = tmp_path / "canon.jsonl"
        canon.write_bytes(dump_lines(lines))
        want = core(check_file(canon))
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_bytes(LAYOUTS[layout](lines))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no torn-line warning for any of these
            assert core(check_file(foreign)) == want, hname
        assert_readers_agree(foreign)


@pytest.mark.parametrize("name", sorted(SAME_VERDICT))
def test_foreign_numbering_and_clocks_keep_the_verdict(tmp_path: Path, name: str) -> None:
    for hname, ops in corpus():
        canon = tmp_path / "canon.jsonl"
        canon.write_bytes(dump_lines([json.dumps(o) for o in ops]))
        want = verdict(check_file(canon))
        rng = random.Random(hname)
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_bytes(
            dump_lines([json.dumps(SAME_VERDICT[name](o, i, rng)) for i, o in enumerate(ops)])
        )
        assert verdict(check_file(foreign)) == want, hname


def test_nemesis_ops_with_any_value_interleaved_keep_the_verdict(tmp_path: Path) -> None:
    for hname, ops in corpus():
        canon = tmp_path / "canon.jsonl"
        canon.write_bytes(dump_lines([json.dumps(o) for o in ops]))
        want = verdict(check_file(canon))
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_bytes(dump_lines(t_nemesis_interleaved(ops, random.Random(hname))))
        res = check_file(foreign)
        assert verdict(res) == want, hname
        assert res["stats"]["nemesis_ops"] >= check_file(canon)["stats"]["nemesis_ops"]


def test_duplicate_indices_are_an_error_naming_both_lines(tmp_path: Path) -> None:
    """Every op numbered 0 (a tool that does not number ops): explanations name ops by
    index, so an index used twice is an error naming both lines (issue 13; this test
    asserted the old leniency); without "index" fields the ops are numbered by position."""
    for hname, ops in corpus():
        canon = tmp_path / "canon.jsonl"
        canon.write_bytes(dump_lines([json.dumps(o) for o in ops]))
        want = check_file(canon)
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_bytes(dump_lines([json.dumps({**o, "index": 0}) for o in ops]))
        with pytest.raises(
            HistoryError, match=r"index 0 is used again \(line 1 has it too\)"
        ) as ei:
            check_file(foreign)
        assert ei.value.line == 2, hname
        unnumbered = tmp_path / "unnumbered.jsonl"
        unnumbered.write_bytes(
            dump_lines([json.dumps({k: v for k, v in o.items() if k != "index"}) for o in ops])
        )
        got = check_file(unnumbered)
        assert got["valid"] == want["valid"], hname
        assert got["error_types"] == want["error_types"], hname


def test_run_directory_file_path_and_check_file_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for hname, ops in corpus()[:3]:
        run = tmp_path / hname
        run.mkdir()
        h = run / "history.jsonl"
        h.write_bytes(dump_lines(t_shuffled(ops, random.Random(1))))
        want = core(check_file(h))
        rc_dir, out_dir, _ = cli(["check", str(run), "--json"], capsys)
        rc_file, out_file, _ = cli(["check", str(h), "--json"], capsys)
        assert rc_dir == rc_file == {True: 0, False: 1, "unknown": 2}[want["valid"]]
        assert core(json.loads(out_dir)) == want
        assert core(json.loads(out_file)) == want
        assert core(json.loads((run / "results.json").read_text())) == want


# ================================================================ Jepsen history.edn


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
    rc, out, err = cli(["check", str(run), "--json"], capsys)  # a Jepsen run directory
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
    rc, _out, err = cli(["check", str(h)], capsys)
    assert rc == 254, err
    assert f"{h}:{line}:" in err
    assert reason in err
    assert "Traceback" not in err


# ============================================ the two JSONL readers must agree exactly

S0 = '{"index":0,"time":0,"process":0,"type":"ok","f":"send","value":[["send",1,[0,1]]]}'
P1 = '{"index":1,"time":1,"process":1,"type":"ok","f":"poll","value":[["poll",{"1":[[0,1]]}]]}'
KW = '{"index":2,"time":2,"process":":nemesis","type":":info","f":":kill","value":null}'


def _l(**kw: Any) -> str:
    return json.dumps({"process": 0, "type": "ok", "f": "send", **kw})


AGREE: dict[str, str] = {
    "dup-field-last-wins": S0.replace('"type":"ok"', '"type":"fail","type":"ok"'),
    "dup-value-last-wins": S0[:-1] + ',"value":[["send",1,[0,2]]]}',
    "dup-poll-key": P1.replace('"index":1', '"index":9').replace(
        '{"1":[[0,1]]}', '{"1":[[0,1]],"1":[[0,2]]}'
    ),
    "poll-key-escaped": P1.replace('"index":1', '"index":9').replace(
        '{"1":[[0,1]]}', '{"1":[[0,1]],"\\u0031":[[1,2]]}'
    ),
    "dup-unknown-field": _l(value=[], zz=1)[:-1] + ', "zz": 2}',
    "key-2^63": _l(value=[["send", 2**63, [0, 1]]]),
    "key-2^64": _l(value=[["send", 2**64, [0, 1]]]),
    "value-u64": _l(value=[["send", 1, [0, 2**64 - 1]]]),
    "int64-extremes": _l(value=[["send", -(2**63), [2**63 - 1, -(2**63)]]]),
    "offset-2^63": _l(value=[["send", 1, [2**63, 1]]]),
    "process-2^63": _l(process=2**63, value=[]),
    "index-2^63": _l(index=2**63, value=[]),
    "time-2^63": _l(time=2**63, value=[]),
    "time-1e300": _l(time=1e300, value=[]),
    "time-negative": _l(time=-5, value=[]),
    "time-null": _l(time=None, value=[]),
    "index-null": _l(index=None, value=[]),
    "offset-1e2": '{"process":0,"type":"ok","f":"send","value":[["send",1,[1e2,1]]]}',
    "lone-surrogate": '{"process":0,"type":"ok","f":"send","value":[["send","\\ud800",[0,1]]]}',
    "unicode-key": _l(value=[["send", "ключ🔑", [0, 1]]]),
    "nul-escaped-in-key": _l(value=[["send", "a\u0000b", [0, 1]]]),
    "raw-tab-in-string": '{"process":0,"type":"ok","f":"send","value":[["send","a\tb",[0,1]]]}',
    "bool-key": _l(value=[["send", True, [0, 1]]]),
    "float-key": _l(value=[["send", 1.0, [0, 1]]]),
    "negative-key": _l(value=[["send", -1, [0, 1]]]),
    "negative-offsets-in-poll": _l(f="poll", value=[["poll", {"1": [[-1, 1], [-5, 2]]}]]),
    "queen-minus-1-send": _l(value=[["send", 1, [-1, 7]]]),
    "zero-and-minus-zero-offsets": '{"process":0,"type":"ok","f":"send",'
    '"value":[["send",1,[0,1]],["send",1,[-0,2]]]}',
    "poll-invoke-null": '{"process":0,"type":"invoke","f":"poll","value":null}',
    "fail-poll-without-records": _l(type="fail", f="poll", value=[["poll"]], error=["x", {}]),
    "poll-null-records": _l(f="poll", value=[["poll", None]]),
    "optional-fields-null": _l(
        f="poll",
        value=[["poll", {}]],
        node=None,
        poll_ms=1.5,
        rebalance_log=None,
        seek_to_beginning=None,
    ),
    "assign-big-key": _l(f="assign", value=[2**64]),
    "assign-nested": _l(f="assign", value=[[1]]),
    "assign-map": _l(f="assign", value={"keys": [1]}),
    "assign-string": _l(f="assign", value="1"),
    "crash-with-value": _l(type="info", f="crash", value=[["send", 1, 2]]),
    "string-values": _l(value=[["send", "1", [0, "1"]]]),
    "poll-records-null": _l(f="poll", value=[["poll", {"1": None}]]),
    "process-string": _l(process="worker-1", f="poll", value=[["poll", {"1": [[0, 1]]}]]),
    "process-float": _l(process=1.0, value=[]),
    "process-bool": _l(process=True, value=[]),
    "type-uppercase": _l(type="OK", value=[]),
    "mop-uppercase": _l(value=[["SEND", 1, 2]]),
    "array-line": "[" + S0 + "]",
    "deep-nesting": _l(process="nemesis", f="x", value=[])[:-3] + "[" * 3000 + "]" * 3000 + "}",
    "float-polled-value": _l(f="poll", value=[["poll", {"1": [[0, 1.0]]}]]),
    "nemesis-big-int-in-list": _l(process="nemesis", f="kill", value=[2**64]),
    "jepsen-seek-spelling": _l(f="assign", value=[1], **{"seek-to-beginning?": True}),
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
    rc_beside, _, err_beside = cli(["check", str(beside)], capsys)
    assert rc_beside == 254 and f"{beside}:1:" in err_beside  # rejected, as the strict reader
    rc_alone, _, err_alone = cli(["check", str(alone)], capsys)
    assert rc_alone == 254, "accepted when no unusual line shares its block"
    assert f"{alone}:1:" in err_alone


def test_pretty_printed_history_is_rejected_at_line_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ops = [json.loads(S0), json.loads(P1)]
    h = tmp_path / "history.jsonl"
    h.write_text("".join(json.dumps(o, indent=2) + "\n" for o in ops))
    rc, _out, err = cli(["check", str(h)], capsys)
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


# =================================================== bad input: exit 254, file:line: reason

GOOD = S0 + "\n" + P1 + "\n"

REJECTED: list[tuple[str, bytes, int, str]] = [
    ("torn-middle-line", (S0[:40] + "\n" + P1 + "\n").encode(), 1, "invalid JSON"),
    ("binary-nul", GOOD.encode() + b"\x00\x01\x02\n", 3, "binary data"),
    (
        "latin-1",
        GOOD.encode()
        + '{"process":0,"type":"ok","f":"send","value":[["send","é",[1,2]]]}\n'.encode("latin-1"),
        3,
        "not JSON text",
    ),
    ("unknown-type", (GOOD + _l(type="done", value=[]) + "\n").encode(), 3, "unknown op type"),
    ("no-f", (GOOD + '{"process":0,"type":"ok"}\n').encode(), 3, 'field "f"'),
    ("bad-micro-op", (GOOD + _l(value=[["fetch", 1]]) + "\n").encode(), 3, "unknown function"),
    (
        "float-offset",
        (GOOD + _l(value=[["send", 1, [1.5, 2]]]) + "\n").encode(),
        3,
        "must be an integer or null",
    ),
    (
        "value-beyond-64-bits",
        (GOOD + _l(value=[["send", 1, [1, 2**70]]]) + "\n").encode(),
        3,
        "beyond 64 bits",
    ),
    (
        "bool-polled-value",
        (GOOD + _l(f="poll", value=[["poll", {"1": [[1, True]]}]]) + "\n").encode(),
        3,
        "must be an integer or a string",
    ),
    ("data-value-not-a-list", (GOOD + _l(value="x") + "\n").encode(), 3, "list of micro-ops"),
    ("line-is-a-list", (GOOD + "[1, 2]\n").encode(), 3, "JSON object"),
    (
        "nested-too-deep",
        (GOOD + _l(value=[]).replace("[]", "[" * 3000 + "]" * 3000) + "\n").encode(),
        3,
        "depth",
    ),
    (
        "blank-lines-count",
        ("\n\n" + S0 + "\r\n\r\n" + _l(type="x") + "\n").encode(),
        5,
        "unknown op type",
    ),
]


@pytest.mark.parametrize(
    ("content", "line", "reason"), [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED]
)
def test_malformed_jsonl_exit_254_names_file_line_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, line: int, reason: str
) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes(content)
    rc, _out, err = cli(["check", str(h)], capsys)
    assert rc == 254, err
    assert f"{h}:{line}: " in err
    assert reason in err
    assert "Traceback" not in err
    with strict_only(), pytest.raises(HistoryError) as e:  # the same message without msgspec
        list(iter_flat(h))
    assert str(e.value) in err


def test_torn_last_line_is_skipped_with_a_warning_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hname, ops = corpus()[0]
    lines = [json.dumps(o) for o in ops]
    canon = tmp_path / "canon" / "history.jsonl"
    canon.parent.mkdir()
    canon.write_bytes(dump_lines(lines))
    torn = tmp_path / "torn" / "history.jsonl"
    torn.parent.mkdir()
    torn.write_bytes(dump_lines(lines) + b'{"index": 99999, "time": 1, "process": 0, "ty')
    rc, out, err = cli(["check", str(torn), "--json"], capsys)
    assert f"warning: {torn}:{len(lines) + 1}: last line is torn" in err
    want = core(check_file(canon))
    assert core(json.loads(out)) == want
    assert rc == {True: 0, False: 1, "unknown": 2}[want["valid"]]


@pytest.mark.parametrize(
    "content",
    [b"", b"\n\n  \n", b"\r\n"],
    ids=["empty", "blank-lines", "one-crlf"],
)
def test_empty_history_is_unknown_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes(content)
    rc, out, err = cli(["check", str(h), "--json"], capsys)
    assert rc == 2, err
    res = json.loads(out)
    assert res["valid"] == "unknown" and res["stats"]["ops"] == 0


def test_only_nemesis_ops_is_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes(
        dump_lines(
            [
                json.dumps({"process": "nemesis", "type": t, "f": f, "value": v})
                for t, f, v in [
                    ("info", "start-partition", {"isolate": ["n1"]}),
                    ("invoke", "kill", None),
                    ("info", "stop-partition", [[1, 2], "x"]),
                ]
            ]
        )
    )
    rc, out, err = cli(["check", str(h), "--json"], capsys)
    assert rc == 2, err
    res = json.loads(out)
    assert res["valid"] == "unknown"
    assert res["stats"]["nemesis_ops"] == 3 and res["stats"]["client_ops"] == 0


def test_gzip_history_is_a_clear_error_whatever_its_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = b"".join(
        (
            json.dumps(
                {
                    "index": j,
                    "time": j,
                    "process": 0,
                    "type": "ok",
                    "f": "send",
                    "value": [["send", 1, [j, j]]],
                }
            )
            + "\n"
        ).encode()
        for j in range(3)
    )
    gz = gzip.compress(raw, mtime=0)
    assert b"\n" not in gz  # as most small compressed files
    h = tmp_path / "history.jsonl.gz"
    h.write_bytes(gz)
    rc, _out, err = cli(["check", str(h)], capsys)
    assert rc == 254, err
    assert f"{h}:1: " in err and "binary" in err


def test_large_gzip_history_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(3)
    raw = b"".join(
        (
            _l(index=i, value=[["send", rng.randrange(99), [i, rng.randrange(1 << 40)]]]) + "\n"
        ).encode()
        for i in range(300)
    )
    gz = gzip.compress(raw, mtime=0)
    assert b"\n" in gz
    h = tmp_path / "history.jsonl.gz"
    h.write_bytes(gz)
    rc, _out, err = cli(["check", str(h)], capsys)
    assert rc == 254, err
    assert f"{h}:1: " in err and "binary" in err and "Traceback" not in err


def test_classic_mac_line_endings_never_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CR-only line ends (ambiguity: today the whole file is one 'torn last line')."""
    h = tmp_path / "history.jsonl"
    h.write_bytes(GOOD.replace("\n", "\r").encode())
    rc, _out, err = cli(["check", str(h)], capsys)
    assert rc in (2, 254) and "Traceback" not in err


# ===================================================== Jepsen spellings in a JSON history


def _rebalanced_skip(field: str) -> list[Line]:
    """Within one op a consumer jumps from offset 0 to 2 of key 1, but key 1 was
    rebalanced during the op: no int-poll-skip (DESIGN.md: keys in its rebalance_log
    excepted)."""
    return [
        ok(0, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(1, 2, 12)]),
        ok(1, "subscribe", [1]),
        inv(1, "txn", [["poll"], ["poll"]]),
        ok(1, "txn", [pl({"1": [[0, 10]]}), pl({"1": [[2, 12]]})], **{field: [{"keys": [1]}]}),
        ok(2, "poll", [pl({"1": [[0, 10], [1, 11], [2, 12]]})]),
    ]


def test_rebalance_log_excuses_an_internal_skip(tmp_path: Path) -> None:
    res = check_file(write(tmp_path / "h.jsonl", _rebalanced_skip("rebalance_log")))
    assert res["valid"] is True, res["error_types"]
    res = check_file(write(tmp_path / "h.jsonl", _rebalanced_skip("nothing")))
    assert "int-poll-skip" in res["bad_error_types"]  # the near-miss does fire


def test_jepsen_rebalance_log_spelling_in_json(tmp_path: Path) -> None:
    res = check_file(write(tmp_path / "h.jsonl", _rebalanced_skip("rebalance-log")))
    assert res["valid"] is True, res["error_types"]


def test_jepsen_seek_spelling_in_json(tmp_path: Path) -> None:
    hist = [
        ok(0, "send", [snd(1, 0, 10), snd(1, 1, 11)]),
        ok(1, "assign", [1]),
        ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
        ok(1, "assign", ["1"], **{"seek-to-beginning?": True}),
        ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
    ]
    res = check_file(write(tmp_path / "h.jsonl", hist))
    assert res["valid"] is True and res["error_types"] == [], res["error_types"]


# ======================================================== key and offset spellings


def test_int_and_string_keys_are_one_key_everywhere(tmp_path: Path) -> None:
    """Sent to 1, assigned "1", read under "1": a correct log; and a loss on key "1"
    sent as int 1 is still found and named."""
    hist = [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(0, "send", [snd("1", 1, 11)]),
        ok(1, "assign", ["1"]),
        ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
    ]
    res = check_file(write(tmp_path / "h.jsonl", hist))
    assert res["valid"] is True and res["error_types"] == [], res["error_types"]
    lost = [
        *hist[:3],
        ok(0, "send", [snd(1, 2, 12)]),
        ok(0, "send", [snd("1", 3, 13)]),
        ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]),
        ok(2, "poll", [pl({1: [[3, 13]]})]),  # type: ignore[dict-item]
    ]
    res = check_file(write(tmp_path / "h.jsonl", lost))
    assert "lost-write" in res["bad_error_types"], res["error_types"]
    assert set(res["bad_error_types"]) <= {"lost-write", "unseen"}, res["error_types"]
    ex = res["anomalies"]["lost-write"]["examples"][0]
    assert ex["key"] == "1" and ex["value"] == 12
    assert "value 12 to key 1" in ex["explanation"] and "offset 2" in ex["explanation"]


def test_queen_minus_one_and_null_offsets_are_unknown_not_anomalies(tmp_path: Path) -> None:
    hist = [
        inv(0, "txn", [["send", 1, 10], ["send", 2, 20]]),
        ok(0, "txn", [snd(1, -1, 10), snd(2, None, 20)]),
        ok(1, "send", [snd(1, 0, 11)]),
        ok(2, "poll", [pl({"1": [[0, 11], [2, 10]], "2": [[0, 20]]})]),
    ]
    res = check_file(write(tmp_path / "h.jsonl", hist))
    assert res["valid"] is True, res["error_types"]


def test_int64_extremes_are_ordinary_values(tmp_path: Path) -> None:
    top, bottom = 2**63 - 1, -(2**63)
    hist = [
        ok(0, "send", [snd(1, top - 1, bottom), snd(1, top, top)]),
        ok(1, "poll", [pl({"1": [[top - 1, bottom], [top, top]]})]),
    ]
    res = check_file(write(tmp_path / "h.jsonl", hist))
    assert res["valid"] is True and res["error_types"] == [], res["error_types"]


# ============================================================== test.json next to a history


def _invalid_unless_subscribe() -> list[Line]:
    """A consumer re-reads offset 0: nonmonotonic-poll, bad only with assign."""
    return [
        ok(0, "send", [snd(1, 0, 10)]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
        ok(1, "poll", [pl({"1": [[0, 10]]})]),
    ]


@pytest.mark.parametrize(
    ("test_json", "rc"),
    [
        (None, 1),
        ('{"sub_via": "subscribe"}', 0),
        ('{"workload": {"sub_via": [":assign", ":subscribe"]}}', 0),
        ('{"checker": {"sub-via": "assign"}}', 1),
        ('{"workload": "queue", "options": null, "checker": [1]}', 1),
    ],
)
def test_test_json_beside_the_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test_json: str | None, rc: int
) -> None:
    h = write(tmp_path / "history.jsonl", _invalid_unless_subscribe())
    if test_json is not None:
        (tmp_path / "test.json").write_text(test_json)
    assert cli(["check", str(tmp_path)], capsys)[0] == rc
    assert cli(["check", str(h)], capsys)[0] == rc
    # the command-line override wins over test.json
    assert cli(["check", str(h), "--sub-via", "subscribe"], capsys)[0] == 0


@pytest.mark.parametrize(
    ("test_json", "reason"),
    [
        ("", "cannot read test metadata"),
        ("{", "cannot read test metadata"),
        ("\ufeff{", "cannot read test metadata"),  # a BOM is skipped; the rest is bad
        ("[1]", "must hold a JSON object"),
        ('{"sub_via": "subscibe"}', "sub_via"),
        ('{"ww_deps": "no"}', "ww_deps"),
        (None, "cannot read test metadata"),  # a directory named test.json
    ],
)
def test_malformed_test_json_exit_254_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test_json: str | None, reason: str
) -> None:
    write(tmp_path / "history.jsonl", _invalid_unless_subscribe())
    tj = tmp_path / "test.json"
    if test_json is None:
        tj.mkdir()
    else:
        tj.write_text(test_json, encoding="utf-8")
    rc, _out, err = cli(["check", str(tmp_path)], capsys)
    assert rc == 254, err
    assert str(tj) in err and reason in err and "Traceback" not in err


def test_directory_without_history_and_missing_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _out, err = cli(["check", str(tmp_path)], capsys)
    assert rc == 254 and str(tmp_path) in err and "history.jsonl" in err
    rc, _out, err = cli(["check", str(tmp_path / "nope.jsonl")], capsys)
    assert rc == 254 and "no such file" in err


def test_run_directory_prefers_jsonl_over_edn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "history.jsonl", _invalid_unless_subscribe()[:2])  # valid
    (tmp_path / "history.edn").write_text("this is not EDN {\n")
    rc, _out, err = cli(["check", str(tmp_path)], capsys)
    assert rc == 0, err


def test_check_options_object_is_honoured_by_check_file(tmp_path: Path) -> None:
    h = write(tmp_path / "history.jsonl", _invalid_unless_subscribe())
    assert check_file(h)["valid"] is False
    assert check_file(h, CheckOptions(sub_via="subscribe"))["valid"] is True
