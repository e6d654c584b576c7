"""Fuzzing the JSONL and EDN readers through `ktrial check` (issue 13.4).

A valid history is damaged at random -- fields replaced by arbitrary values (deeply
nested, huge, non-finite, odd text), lines dropped, cut, doubled or replaced, text
and EDN oddities spliced in anywhere -- and `ktrial check` must answer with a verdict
(exit 0, 1 or 2) or a clear input error (exit 254), never a traceback, each within a
few seconds. Both tests together run in well under a minute.
"""

from __future__ import annotations

import json
import time
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial.cli import cli
from ktrial.histories.edn import dump_edn_op, iter_any_history
from ktrial.histories.jsonl import HistoryError, op_from_json
from ktrial.testing.gen import GenParams, iter_ops

PER_EXAMPLE_S = 5.0
FIELDS = ["index", "time", "process", "type", "f", "value", "error", "rebalance_log", "zz"]


@lru_cache(maxsize=1)
def base_ops() -> list[dict[str, Any]]:
    """A small valid history: sends, polls, txns, a crash, nemesis ops."""
    return list(iter_ops(GenParams(seed=11, keys=2, processes=3, ops=14, txn=True, nemesis_p=0.2)))


def deep(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


# JSON text of odd values, spliced in as a field's value
odd_json = st.one_of(
    st.sampled_from(
        [
            "null",
            "true",
            "-0",
            "1e308",
            "1.5",
            "-1",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775809",
            "1" * 400,
            "1e400",
            '"\\ud800"',
            '"a\\u0000b"',
            '"🔑"',
            "{}",
            "[]",
            '[["poll"]]',
            '[["send"]]',
            '[["send", 1, [-1, 2]]]',
            '[["poll", {"1": [[0, 1], [0, 2]]}]]',
            '[["poll", {"1": null}]]',
            '{"nodes": ' * 300 + "1" + "}" * 300,
            deep(300),
            deep(1000),
            deep(5000),
            '"Poll"',
            '"produce"',
            '":ok"',
            '":nemesis"',
        ]
    ),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
        max_leaves=8,
    ).map(json.dumps),
)

# EDN text spliced in anywhere
odd_edn = st.sampled_from(
    [
        "##Inf", "##NaN", "##-Inf", "1e99999", "[0 123456789012345678901234567890N]",
        "7" * 5000, "7" * 5000 + "N", "1/0", "0x", "36rZZ", "#_", "#_ 1", "^:m", "#{1 1}",
        "#:ns{:a 1}", '#inst "x"', "#object[a 0x1f]", "\\u00e9", "\\uD800", '"\\ud800"',
        '"unterminated', "#\"re", "{", "}", "[", "]", "(", ")", "{:a}", ";", ",", "\\",
        ":", "::", "nil", ":process nil", ":f :Poll", ":index 0", ":time ##NaN",
        deep(300), deep(1200), "{" * 50, "#", "##", "\x00", "é",
    ]
)  # fmt: skip


def _obj(line: str) -> dict[str, Any] | None:
    """The line's JSON object, or None when an earlier damage left none."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _set_field(obj: dict[str, Any], field: str, value: str) -> str:
    obj[field] = "\x00SPLICE\x00"
    return json.dumps(obj).replace('"\\u0000SPLICE\\u0000"', value)


@st.composite
def damaged_jsonl(draw: st.DrawFn) -> bytes:
    lines = [json.dumps(o) for o in base_ops()]
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["field", "drop-field", "line", "cut", "double", "splice"]))
        obj = _obj(lines[i])
        if how == "field" and obj is not None:
            lines[i] = _set_field(obj, draw(st.sampled_from(FIELDS)), draw(odd_json))
        elif how == "drop-field" and obj is not None:
            obj.pop(draw(st.sampled_from(FIELDS)), None)
            lines[i] = json.dumps(obj)
        elif how == "line":
            lines[i] = draw(odd_json)
        elif how == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif how == "double":
            lines.insert(i, lines[i])
        else:
            at = draw(st.integers(0, len(lines[i])))
            lines[i] = (
                lines[i][:at] + draw(odd_json | odd_edn | st.text(max_size=5)) + lines[i][at:]
            )
    end = draw(st.sampled_from(["\n", "", "\r\n"]))
    return ("\n".join(lines) + end).encode("utf-8", "surrogatepass")


@st.composite
def damaged_edn(draw: st.DrawFn) -> bytes:
    ops = [dump_edn_op(op_from_json(o, i)) for i, o in enumerate(base_ops())]
    text = draw(st.sampled_from(["lines", "vector"]))
    body = "\n".join(ops) + "\n" if text == "lines" else "[" + "\n ".join(ops) + "]\n"
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body)))
        how = draw(st.sampled_from(["splice", "replace", "cut"]))
        if how == "splice":
            body = body[:at] + draw(odd_edn) + " " + body[at:]
        elif how == "replace":
            n = draw(st.integers(1, 12))
            body = body[:at] + draw(odd_edn | st.text(max_size=4)) + body[at + n :]
        else:
            body = body[:at]
    return body.encode("utf-8", "surrogatepass")


def _check(path: Path, ignore_unknown_f: bool) -> None:
    """`ktrial check` in process: a verdict or exit 254, no traceback, in bounded time;
    the reader alone: ops or a HistoryError, nothing else."""
    started = time.monotonic()
    argv = ["check", str(path), "--out", str(path.with_suffix(".results.json"))]
    if ignore_unknown_f:
        argv.append("--ignore-unknown-f")
    res = CliRunner().invoke(cli, argv)
    assert res.exception is None or isinstance(res.exception, SystemExit), (
        f"{type(res.exception).__name__}: {res.exception}\n{res.output[-2000:]}"
    )
    assert res.exit_code in (0, 1, 2, 254), res.output[-2000:]
    if res.exit_code == 254:
        assert f"{path}" in res.output and len(res.output) < 5000, res.output[-2000:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what check printed already
        try:
            for _op in iter_any_history(path, flat=True, ignore_unknown_f=ignore_unknown_f):
                pass
        except HistoryError as e:
            assert len(e.reason) < 1000
    assert time.monotonic() - started < PER_EXAMPLE_S


_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,  # the same examples in CI every time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.timeout(60)
@_SETTINGS
@given(data=damaged_jsonl(), ignore=st.booleans())
def test_check_on_damaged_jsonl_never_crashes(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, ignore: bool
) -> None:
    p = tmp_path_factory.mktemp("fuzz") / "history.jsonl"
    p.write_bytes(data)
    _check(p, ignore)


@pytest.mark.timeout(60)
@_SETTINGS
@given(data=damaged_edn(), ignore=st.booleans())
def test_check_on_damaged_edn_never_crashes(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, ignore: bool
) -> None:
    p = tmp_path_factory.mktemp("fuzz") / "history.edn"
    p.write_bytes(data)
    _check(p, ignore)
