"""Ops the readers once refused or silently dropped (issue 13.2 and 13.3).

* no `process` (or null): one anonymous process, as Jepsen reads them, with a warning;
* a client op with an f ktrial does not know: an error naming file:line, or, with
  --ignore-unknown-f, skipped with a warning counted in results.json -- never dropped
  silently (a G1a read through `"f": "Poll"` was called VALID);
* an `index` used twice: an error naming both lines.

Both JSONL readers (the block reader and the strict one) and the EDN reader must agree.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import check_file
from ktrial.histories.edn import dump_edn_op, iter_any_history, iter_edn_history
from ktrial.histories.jsonl import (
    AnonymousProcessWarning,
    HistoryError,
    Indexes,
    UnknownFWarning,
    iter_flat,
    iter_history,
    op_from_json,
)
from ktrial.histories.model import ANONYMOUS, CLIENT_FS, Flat, flatten
from ktrial.tests.checker.common import run_main, write_as_is
from ktrial.tests.histories.common import strict_only

Line = dict[str, Any]


def write_edn(path: Path, lines: list[Line], nil: bool = False) -> Path:
    """The same ops as Jepsen writes them: a missing process stays missing (`nil`:
    written `:process nil`), an unknown f is kept (dumped as a nemesis op's f)."""
    out = []
    for i, o in enumerate(lines):
        proc = o.get("process")
        text = dump_edn_op(op_from_json({**o, "process": "nemesis"}, i))
        if proc == "nemesis":
            pass
        elif proc is None:
            text = text.replace(":process :nemesis", ":process nil" if nil else "")
            text = text.replace(", ,", ",")
        else:
            text = text.replace(":process :nemesis", f":process {proc}")
        out.append(text + "\n")
    path.write_text("".join(out))
    return path


def read_all(path: Path, **kw: Any) -> tuple[list[Any], list[warnings.WarningMessage]]:
    """The ops every reader gives (they must agree) and the first reader's warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if path.suffix == ".edn":
            ops = list(iter_edn_history(path, **kw))
        else:
            ops = list(iter_history(path, **kw))
    if path.suffix != ".edn":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            flat = list(iter_flat(path, **kw))
            assert [x if isinstance(x, Flat) else flatten(x) if x.is_data else x for x in flat] == [
                flatten(o) if o.is_data else o for o in ops
            ]
            with strict_only():
                assert list(iter_history(path, **kw)) == ops
    return ops, list(caught)


# A Jepsen-style hand-written history: no process anywhere, no index, no time.
NO_PROCESS: list[Line] = [
    {"type": "invoke", "f": "send", "value": [["send", 1, 10]]},
    {"type": "ok", "f": "send", "value": [["send", 1, [0, 10]]]},
    {"type": "invoke", "f": "poll", "value": [["poll"]]},
    {"type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 10]]}]]},
]


@pytest.mark.parametrize("fmt", ["jsonl", "edn"])
@pytest.mark.parametrize("spelling", ["missing", "null"])
def test_ops_without_a_process_are_one_anonymous_process(
    tmp_path: Path, fmt: str, spelling: str
) -> None:
    lines = [o if spelling == "missing" else {**o, "process": None} for o in NO_PROCESS]
    lines.insert(2, {"process": "nemesis", "type": "info", "f": "kill", "value": None})
    p = tmp_path / f"history.{fmt}"
    if fmt == "edn":
        write_edn(p, lines, nil=spelling == "null")
        assert (":process nil" in p.read_text()) == (spelling == "null")
    else:
        write_as_is(p, lines)
    ops, caught = read_all(p)
    assert [o.process for o in ops] == [ANONYMOUS] * 2 + ["nemesis"] + [ANONYMOUS] * 2
    anon = [w.message for w in caught if isinstance(w.message, AnonymousProcessWarning)]
    assert len(anon) == 1 and anon[0].count == 4
    text = str(anon[0])
    assert text.startswith(f"{p}:1: 4 ops have no process")
    assert "one process" in text and "treat them as one client" in text
    # invokes pair with their completions: nothing is left in flight, the read is checked
    if fmt == "jsonl":
        with pytest.warns(AnonymousProcessWarning):
            res = check_file(p)
        assert res["valid"] is True, res["error_types"]
        assert res["stats"]["client_ops"] == 2


def test_check_prints_the_warning_and_counts_anonymous_ops_in_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = write_as_is(tmp_path / "history.jsonl", NO_PROCESS)
    rc, _out, err = run_main(["check", str(p)], capsys)
    assert rc == 0, err
    assert "warning:" in err and "4 ops have no process" in err
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["input"]["anonymous_process_ops"] == 4
    assert res["input"]["skipped_unknown_f"] == {}
    assert any("no process" in w for w in res["input"]["warnings"])
    # a history with processes: an empty input section, no warning
    write_as_is(p, [{**o, "process": 0} for o in NO_PROCESS])
    rc, _out, err = run_main(["check", str(p)], capsys)
    assert rc == 0 and "warning" not in err
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["input"] == {"warnings": [], "skipped_unknown_f": {}, "anonymous_process_ops": 0}


def test_a_process_named_anonymous_is_the_same_process(tmp_path: Path) -> None:
    """The anonymous process has a name; a history's own process of that name joins it
    (documented), but only the ops with no process are counted in the warning."""
    lines = [NO_PROCESS[0], {**NO_PROCESS[1], "process": ANONYMOUS}]
    ops, caught = read_all(write_as_is(tmp_path / "h.jsonl", lines))
    assert [o.process for o in ops] == [ANONYMOUS, ANONYMOUS]
    (w,) = [w.message for w in caught if isinstance(w.message, AnonymousProcessWarning)]
    assert w.count == 1


# -------------------------------------------------------------------------- unknown f

# Process 1 reads value 2 of key 1 through an op spelt "Poll": process 0's send of it
# failed, so that read is a G1a (aborted read) -- once silently dropped: VALID.
G1A_THROUGH_UNKNOWN_F: list[Line] = [
    {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "send", "value": [["send", 1, 1]]},
    {
        "index": 1,
        "time": 1,
        "process": 0,
        "type": "ok",
        "f": "send",
        "value": [["send", 1, [0, 1]]],
    },
    {"index": 2, "time": 2, "process": 0, "type": "invoke", "f": "send", "value": [["send", 1, 2]]},
    {"index": 3, "time": 3, "process": 0, "type": "fail", "f": "send", "value": [["send", 1, 2]]},
    {"index": 4, "time": 4, "process": 1, "type": "invoke", "f": "Poll", "value": [["poll"]]},
    {
        "index": 5,
        "time": 5,
        "process": 1,
        "type": "ok",
        "f": "Poll",
        "value": [["poll", {"1": [[0, 1], [1, 2]]}]],
    },
    {"index": 6, "time": 6, "process": 2, "type": "invoke", "f": "poll", "value": [["poll"]]},
    {
        "index": 7,
        "time": 7,
        "process": 2,
        "type": "ok",
        "f": "poll",
        "value": [["poll", {"1": [[0, 1]]}]],
    },
]


@pytest.mark.parametrize("fmt", ["jsonl", "edn"])
def test_an_unknown_client_f_is_an_error_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    p = tmp_path / f"history.{fmt}"
    (write_edn if fmt == "edn" else write_as_is)(p, G1A_THROUGH_UNKNOWN_F)
    rc, out, err = run_main(["check", str(p)], capsys)
    assert rc == 254, (out, err)
    assert f"{p}:5: client op with unknown f 'Poll'" in err, err
    assert all(f in err for f in CLIENT_FS)  # what ktrial knows
    assert "--ignore-unknown-f" in err and "Traceback" not in err
    assert not (tmp_path / "results.json").exists()
    for reader in (iter_history, iter_flat) if fmt == "jsonl" else (iter_edn_history,):
        with pytest.raises(HistoryError) as ei:
            list(reader(p))
        assert ei.value.line == 5


@pytest.mark.parametrize("fmt", ["jsonl", "edn"])
def test_ignore_unknown_f_skips_with_a_warning_counted_in_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    lines = [*G1A_THROUGH_UNKNOWN_F]
    lines.append({"index": 8, "time": 8, "process": 3, "type": "info", "f": "produce", "value": 1})
    p = tmp_path / f"history.{fmt}"
    (write_edn if fmt == "edn" else write_as_is)(p, lines)
    ops, caught = read_all(p, ignore_unknown_f=True)
    assert [o.index for o in ops] == [0, 1, 2, 3, 6, 7]  # indices kept as written
    (w,) = [w.message for w in caught if isinstance(w.message, UnknownFWarning)]
    assert w.counts == {"Poll": 2, "produce": 1}
    assert "'Poll' x2 (first at line 5)" in str(w) and "not checked" in str(w)

    rc, _out, err = run_main(["check", str(p), "--ignore-unknown-f"], capsys)
    assert rc == 0, err  # the G1a read went with the skipped ops: said loudly
    assert "warning:" in err and "skipped 3 client ops" in err
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["input"]["skipped_unknown_f"] == {"Poll": 2, "produce": 1}
    assert any("skipped 3 client ops" in x for x in res["input"]["warnings"])


def test_the_g1a_read_is_found_once_its_f_is_spelt_right(tmp_path: Path) -> None:
    lines = [{**o, "f": "poll"} if o["f"] == "Poll" else o for o in G1A_THROUGH_UNKNOWN_F]
    res = check_file(write_as_is(tmp_path / "history.jsonl", lines))
    assert res["valid"] is False and "G1a" in res["bad_error_types"]


def test_nemesis_ops_and_jepsen_client_fs_are_known(tmp_path: Path) -> None:
    lines: list[Line] = [
        {"process": "nemesis", "type": "info", "f": "anything-at-all", "value": [1]},
        {"process": ":nemesis", "type": "info", "f": ":Poll", "value": None},
        {"process": 0, "type": "invoke", "f": ":debug-topic-partitions", "value": [0]},
        {"process": 0, "type": "info", "f": "debug-topic-partitions", "value": {"0": 1}},
        {"process": 1, "type": "info", "f": "crash", "value": None},
        {"process": 2, "type": "ok", "f": "subscribe", "value": [1]},
    ]
    ops, caught = read_all(write_as_is(tmp_path / "h.jsonl", lines))
    assert len(ops) == 6 and not caught


# -------------------------------------------------------------------- duplicate index


def _numbered(n: int) -> list[Line]:
    return [
        {"index": i, "time": i, "process": i % 3, "type": "ok", "f": "send",
         "value": [["send", 1, [i, i]]]}
        for i in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("first", "again"),
    [(3, 4), (0, 1), (10, 3999), (2999, 3000), (3999, 0)],
    ids=["adjacent", "first-two", "far-apart", "last-two", "backwards"],
)
def test_an_index_used_twice_is_an_error_naming_both_lines(
    tmp_path: Path, first: int, again: int
) -> None:
    """In one block or across blocks (4,000 lines make several 64 KiB blocks), by the
    block reader, line by line, and by the strict reader."""
    lines = _numbered(4000)
    a, b = sorted((first, again))
    lines[b] = {**lines[b], "index": lines[a]["index"]}
    p = write_as_is(tmp_path / "history.jsonl", lines)
    want = f"{p}:{b + 1}: index {a} is used again (line {a + 1} has it too)"
    for reader in (iter_history, iter_flat):
        with pytest.raises(HistoryError) as ei:
            list(reader(p))
        assert str(ei.value).startswith(want), str(ei.value)
        assert "renumber the ops" in str(ei.value)
        with strict_only(), pytest.raises(HistoryError) as ei:
            list(reader(p))
        assert str(ei.value).startswith(want)


def test_an_index_used_twice_in_edn_and_by_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _numbered(20)
    lines[7]["index"] = 2
    p = write_edn(tmp_path / "history.edn", lines)
    with pytest.raises(HistoryError, match=r"index 2 is used again \(line 3 has it too\)") as ei:
        list(iter_any_history(p))
    assert ei.value.line == 8
    rc, _out, err = run_main(["check", str(p)], capsys)
    assert rc == 254 and f"{p}:8: index 2 is used again" in err


def test_indices_in_any_order_or_missing_are_fine(tmp_path: Path) -> None:
    lines = _numbered(3000)
    lines.reverse()  # descending: every index off the run
    for o in lines[::7]:
        del o["index"]  # no index: the op's ordinal, which is no index the file gave
    ops, _caught = read_all(write_as_is(tmp_path / "h.jsonl", lines))
    assert len(ops) == 3000


def test_indexes_keep_a_numbered_history_in_a_few_marks() -> None:
    ix = Indexes()
    for i in range(100_000):
        assert ix.add(i, i + 1) is None
    assert (ix.lo, ix.hi, ix.marks, ix.others) == (0, 99_999, [0], {})
    assert ix.add(123, 5) == 124  # its line, from the run's mark
    assert ix.add(100_001, 9) is None and ix.others == {100_001: 9}  # a gap: off the run
    assert ix.add(100_000, 10) is None  # the run goes on
    assert ix.add(100_001, 11) == 9  # and meets the one off the run
    blank = Indexes()  # a blank line shifts line - index: a second mark
    blank.add(0, 1)
    blank.add(1, 3)
    assert blank.marks == [0, 1] and blank.add(1, 7) == 3 and blank.add(0, 8) == 1
