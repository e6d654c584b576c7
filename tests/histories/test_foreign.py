"""Histories written by other tools: any spelling the format allows gives the same results.

docs/history-format.md lets any tool write a history: fields
in any order, unknown fields, no `index` or `time`, invoke-less completions, keys as
ints or strings, Jepsen keyword spellings, Queen's -1 offsets, nemesis ops with any
value, Jepsen's history.edn. Each accepted shape must give the verdict of the same
history written the canonical way (a differential test: results.json minus timing),
and each malformed input must give exit 254 with `file:line: reason`, never a
traceback.

Each spelling is also read through the strict reader (msgspec absent: see
tests/histories/common.py's strict_only). Jepsen's history.edn is tested in
test_edn.py, the agreement of the JSONL readers in test_fastread.py, malformed JSONL
in test_jsonl.py, test.json beside a history in tests/commands/test_check_inputs.py.

Defects are `xfail(strict=True)`: they pass once fixed.
"""

from __future__ import annotations

import copy
import json
import random
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import check_file
from ktrial.histories.jsonl import HistoryError
from ktrial.tests.checker.common import run_main
from ktrial.tests.histlines import Line, inv, ok, pl, snd, write
from ktrial.tests.histories.common import (
    assert_readers_agree,
    core,
    corpus,
    dump_lines,
    strict_only,
    verdict,
)

pytest.importorskip("msgspec")


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
        rc_dir, out_dir, _ = run_main(["check", str(run), "--json"], capsys)
        rc_file, out_file, _ = run_main(["check", str(h), "--json"], capsys)
        assert rc_dir == rc_file == {True: 0, False: 1, "unknown": 2}[want["valid"]]
        assert core(json.loads(out_dir)) == want
        assert core(json.loads(out_file)) == want
        assert core(json.loads((run / "results.json").read_text())) == want


# ===================================================== Jepsen spellings in a JSON history


def _rebalanced_skip(field: str) -> list[Line]:
    """Within one op a consumer jumps from offset 0 to 2 of key 1, but key 1 was
    rebalanced during the op: no int-poll-skip (docs/anomalies.md: keys in its
    rebalance_log excepted)."""
    extra: dict[str, Any] = {field: [{"keys": [1]}]}
    return [
        ok(0, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(1, 2, 12)]),
        ok(1, "subscribe", [1]),
        inv(1, "txn", [["poll"], ["poll"]]),
        ok(1, "txn", [pl({"1": [[0, 10]]}), pl({"1": [[2, 12]]})], **extra),
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
