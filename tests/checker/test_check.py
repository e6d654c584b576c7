"""check() and check_file() as a whole (checker/check.py, results.py, options.py).

The boundary tables of every anomaly type (exact error types and bad types), valid and
unknown verdicts, the caps on examples, options read from test.json, and input lines
the reader must refuse rather than skip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import check_file
from ktrial.checker.options import options_from_test_json
from ktrial.histories.jsonl import HistoryError, iter_history
from ktrial.tests.checker.boundary_cases import CASES, TXN_CASES
from ktrial.tests.checker.common import check_ops_from
from ktrial.tests.histlines import (
    Line,
    examples,
    inv,
    ok,
    parsed,
    pl,
    poll_op,
    run,
    send_op,
    snd,
    types,
    write,
)


def test_a_correct_history_is_valid_with_metrics() -> None:
    res = check_ops_from(
        parsed(
            inv(0, "send", [["send", 1, 10]]),
            send_op(0, 1, 10, 0),
            send_op(0, 1, 11, 1),
            inv(1, "poll", [["poll"]]),
            poll_op(1, {"1": [[0, 10], [1, 11]]}),
        )
    )
    assert res["valid"] is True
    assert res["error_types"] == [] and res["bad_error_types"] == []
    m = res["metrics"]
    assert m["counts"]["send"]["ok"] == 2 and m["counts"]["poll"]["ok"] == 1
    # the second send has no invoke: its latency is unknown, so it is left out
    assert m["latency_ms"]["send"]["ok"]["count"] == 1
    assert m["latency_ms"]["poll"]["ok"]["max"] == 1.0  # invoked at 3 ms, done at 4 ms
    assert m["unseen"]["final"] == 0
    assert set(m["realtime_lag"]) == {"worst", "per_key", "per_consumer", "over_time"}
    assert res["stats"]["keys"] == 1 and res["stats"]["reads"] == 2


def test_nothing_read_is_unknown() -> None:
    res = check_ops_from(parsed(send_op(0, 1, 10, 0, typ="fail")))
    assert res["valid"] == "unknown"


def test_nothing_read_by_an_ok_op_is_unknown() -> None:
    """Only indeterminate and failed polls read (the cluster never answered a consumer
    in full): losses cannot be judged, so the verdict is unknown, not valid."""
    res = check_ops_from(
        parsed(
            send_op(0, 1, 10, 0, typ="info"),
            poll_op(1, {"1": [[0, 10]]}, typ="info"),
            poll_op(2, {"1": [[0, 10]]}, typ="fail"),
        )
    )
    assert res["valid"] == "unknown" and res["bad_error_types"] == []
    # ... but what those polls show is still judged: two values at one offset
    res = check_ops_from(
        parsed(
            send_op(0, 1, 10, 0, typ="info"),
            poll_op(1, {"1": [[0, 10]]}, typ="info"),
            poll_op(2, {"1": [[0, 11]]}, typ="fail"),
        )
    )
    assert res["valid"] is False and "inconsistent-offsets" in res["bad_error_types"]


@pytest.mark.parametrize(
    ("lines", "opts", "want", "want_bad"),
    [pytest.param(c[1], c[2], c[3], c[4], id=c[0]) for c in CASES],
)
def test_each_type_at_its_boundary(
    tmp_path: Path, lines: list[Line], opts: dict[str, Any], want: set[str], want_bad: set[str]
) -> None:
    res = run(tmp_path, lines, **opts)
    assert types(res) == (want, want_bad), {
        t: [e.get("explanation") for e in a["examples"]] for t, a in res["anomalies"].items()
    }
    assert res["valid"] is (not want_bad)
    for name in want:  # every reported type carries an explanation naming an op
        ex = examples(res, name)[0]
        assert "op " in ex["explanation"] and ex["ops"], (name, ex)


@pytest.mark.parametrize(
    ("history", "opts", "want", "want_bad"),
    [pytest.param(h, o, w, b, id=i) for i, h, o, w, b in TXN_CASES],
)
def test_txn_case(
    tmp_path: Path,
    history: list[Line],
    opts: dict[str, Any],
    want: set[str],
    want_bad: set[str],
) -> None:
    res = run(tmp_path, history, **opts)
    assert types(res) == (want, want_bad), {
        t: [e.get("explanation") for e in a["examples"]] for t, a in res["anomalies"].items()
    }
    assert res["valid"] is (not want_bad)
    for name in want:
        for ex in examples(res, name):
            assert ex.get("explanation"), (name, ex)
            assert ex.get("ops"), (name, ex)


def test_legal_ww_wr_cycle_not_found_without_ww_deps(tmp_path: Path) -> None:
    """Without ww inference the Kafka-legal interleaving has no cycle at all."""
    hist = next(h for i, h, *_ in TXN_CASES if i.startswith("legal Kafka interleaving"))
    res = run(tmp_path, hist, ww_deps=False)
    assert types(res) == (set(), set())
    assert res["valid"] is True


@pytest.mark.parametrize(
    "given",
    [["assign", "subscribe"], ["subscribe", "assign"], [":assign", ":subscribe"], "subscribe"],
)
def test_jepsen_sub_via_set_with_subscribe_means_subscribe(given: Any) -> None:
    """Mutant: _norm_sub_via lets "assign" win over "subscribe" in Jepsen's set.

    Jepsen's :sub-via #{:assign :subscribe} runs both: consumers do subscribe and are
    rebalanced, so poll-skip and nonmonotonic-poll are expected (docs/anomalies.md: "not with
    subscribe")."""
    assert options_from_test_json({"sub_via": given}).sub_via == "subscribe"
    assert options_from_test_json({"workload": {"sub-via": given}}).sub_via == "subscribe"
    assert options_from_test_json({"sub_via": ["assign"]}).sub_via == "assign"


def test_jepsen_sub_via_set_makes_poll_skip_expected(tmp_path: Path) -> None:
    """Mutant: _norm_sub_via lets "assign" win over "subscribe" in Jepsen's set; end to
    end, the option from test.json decides poll-skip's badness."""
    lines = [
        ok(3, "send", [snd(1, 0, 10), snd(1, 1, 11), snd(1, 2, 12)]),
        ok(2, "assign", [1]),
        poll_op(2, {"1": [[0, 10]]}),
        poll_op(2, {"1": [[2, 12]]}),
        poll_op(4, {"1": [[0, 10], [1, 11], [2, 12]]}),
    ]
    path = write(tmp_path / "history.jsonl", lines)
    res = check_file(path, options_from_test_json({"sub_via": [":assign", ":subscribe"]}))
    assert types(res) == ({"poll-skip"}, set())
    res = check_file(path, options_from_test_json({"sub_via": ["assign"]}))
    assert types(res) == ({"poll-skip"}, {"poll-skip"})
    (ex,) = examples(res, "poll-skip")
    assert (ex["key"], ex["values"], ex["offsets"], ex["skipped"]) == ("1", [10, 12], [0, 2], [11])


@pytest.mark.parametrize(
    ("last", "reason"),
    [
        (b'{"index": 1, "process": 1, "type": "okay", "f": "poll", "value": []}', "okay"),
        (b'{"index": 1, "process": 1, "type": "ok", "f": "poll", "value": [["nope"]]}', "nope"),
        (b"[1, 2, 3]", "JSON object"),
    ],
    ids=["unknown-type", "bad-micro-op", "not-an-object"],
)
def test_a_complete_but_malformed_last_line_is_an_error_not_a_torn_line(
    tmp_path: Path, last: bytes, reason: str
) -> None:
    """Mutant: the reader skips any bad last line without a newline as torn.

    history-format.md: a torn last line is one with no trailing newline that is *not
    valid JSON*; any other malformed line is an error naming file:line and reason."""
    path = tmp_path / "history.jsonl"
    first = {"index": 0, "time": 0, "process": 0, "type": "ok", "f": "send"}
    path.write_bytes(json.dumps({**first, "value": [snd(1, 0, 10)]}).encode() + b"\n" + last)
    with pytest.raises(HistoryError) as e:
        list(iter_history(path))
    assert e.value.line == 2 and reason in e.value.reason
    with pytest.raises(HistoryError) as e:
        check_file(path)
    assert str(e.value).startswith(f"{path}:2: ")


@pytest.mark.parametrize("max_examples", [3, 8])
def test_max_examples_caps_examples_not_the_count(tmp_path: Path, max_examples: int) -> None:
    """Mutant: combine() keeps every example.

    anomalies.md: at most --max-examples are kept per type; count still says how many
    there are."""
    n = 10
    lines = [ok(1, "send", [snd(1, i, 100 + i) for i in range(n)])]
    lines.append(poll_op(2, {"1": [[i, 100 + i] for i in range(n)]}))
    lines.append(poll_op(3, {"1": [[n + i, 100 + i] for i in range(n)]}))  # each again, later
    res = run(tmp_path, lines, max_examples=max_examples)
    assert types(res)[1] == {"duplicate"}
    dup = res["anomalies"]["duplicate"]
    assert dup["count"] == n
    assert len(dup["examples"]) == max_examples
    for ex in dup["examples"]:
        assert ex["offsets"] == [ex["value"] - 100, ex["value"] - 100 + n]
        assert "explanation" in ex


def _line(i: int, o: Line) -> str:
    return json.dumps({"index": i, "time": i, **o})


def test_two_ops_on_one_line_are_an_error_beside_a_two_line_op(tmp_path: Path) -> None:
    """docs/history-format.md: two ops on one line, or an op spread over several lines,
    are errors at their line. In one block the two cancel out in decode_block's count
    of values per line; only the `} {` check sends the block to the strict reader.

    Kills fastread.py:decode_block dropping `_ADJACENT`."""
    from ktrial.histories.jsonl import HistoryError, iter_history

    a = _line(0, ok(0, "send", [snd(1, 0, 10)]))
    b = _line(1, ok(0, "send", [snd(1, 1, 11)]))
    c = _line(2, ok(1, "poll", [pl({"1": [[0, 10], [1, 11]]})]))
    spread = c.replace(', "f"', ',\n "f"')
    path = tmp_path / "history.jsonl"
    path.write_text(f"{a} {b}\n{spread}\n")
    with pytest.raises(HistoryError) as e:
        list(iter_history(path))
    assert e.value.line == 1


def test_a_last_line_with_a_bare_cr_is_an_error_not_a_torn_line(tmp_path: Path) -> None:
    """docs/history-format.md: ops separated by a bare CR are an error at their line, and
    only the start of one op's JSON is a torn last line. `{op}\\r{"ind` is two ops
    split by a CR, the second cut short: an error, not skipped with a warning.

    Kills jsonl.py:_is_torn accepting a CR inside the line."""
    from ktrial.histories.jsonl import HistoryError, iter_history

    a = _line(0, ok(0, "send", [snd(1, 0, 10)]))
    b = _line(1, ok(0, "send", [snd(1, 1, 11)]))
    path = tmp_path / "history.jsonl"
    path.write_bytes(f'{a}\n{b}\r{{"index": 2, "ti'.encode())
    with pytest.raises(HistoryError) as e:
        list(iter_history(path))
    assert e.value.line == 2
