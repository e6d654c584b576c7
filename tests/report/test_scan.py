"""report/scan.py reads a Jepsen history.edn through histories/edn.py and sees the same
history as in JSONL (the fast path), op for op."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from ktrial.histories import HistoryError
from ktrial.histories.edn import dump_edn_op, iter_edn_history
from ktrial.histories.jsonl import iter_history
from ktrial.report.scan import HistoryScan, scan_history
from ktrial.testing.sample import write_sample_run

JEPSEN = Path(__file__).parent.parent / "data" / "jepsen"


def _same(a: HistoryScan, b: HistoryScan) -> None:
    assert (a.ops, a.client_ops, a.nemesis_ops, a.in_flight, a.bad_lines) == (
        b.ops,
        b.client_ops,
        b.nemesis_ops,
        b.in_flight,
        b.bad_lines,
    )
    assert (a.start_s, a.end_s) == (b.start_s, b.end_s)
    assert a.counts == b.counts and a.throughput == b.throughput
    assert a.latency.keys() == b.latency.keys()
    for k in a.latency:
        assert list(a.latency[k].t_s) == list(b.latency[k].t_s)
        assert list(a.latency[k].latency_ms) == list(b.latency[k].latency_ms)
    assert [(w.family, w.start_s, w.end_s) for w in a.faults] == [
        (w.family, w.start_s, w.end_s) for w in b.faults
    ]
    assert [(t.process, t.start_s, t.end_s, t.type, t.f) for t in a.timeline] == [
        (t.process, t.start_s, t.end_s, t.type, t.f) for t in b.timeline
    ]
    assert a.processes == b.processes


@pytest.mark.parametrize("example", sorted(p.stem for p in JEPSEN.glob("*.edn")))
def test_edn_and_its_jsonl_scan_alike(tmp_path: Path, example: str) -> None:
    edn = JEPSEN / f"{example}.edn"
    jsonl = tmp_path / "history.jsonl"
    jsonl.write_bytes(
        b"".join(
            orjson.dumps(op.to_json(), option=orjson.OPT_NON_STR_KEYS) + b"\n"
            for op in iter_edn_history(edn)
        )
    )
    a = scan_history(edn, wanted=range(50), timeline=100)
    b = scan_history(jsonl, wanted=range(50), timeline=100)
    assert a.ops > 0
    _same(a, b)
    assert a.ops_by_index.keys() == b.ops_by_index.keys()


def test_a_ktrial_history_written_as_edn_scans_alike(tmp_path: Path) -> None:
    """The other way round: the sample run's JSONL (faults, drain, in-flight ops) dumped
    as Jepsen EDN."""
    run = write_sample_run(tmp_path / "t" / "r")
    edn = tmp_path / "history.edn"
    edn.write_text("".join(dump_edn_op(op) + "\n" for op in iter_history(run / "history.jsonl")))
    a = scan_history(edn, timeline=500)
    b = scan_history(run / "history.jsonl", timeline=500)
    assert a.faults and a.nemesis_ops > 0
    _same(a, b)


def test_jsonl_stays_lenient_and_edn_is_validated(tmp_path: Path) -> None:
    jsonl = tmp_path / "h.jsonl"
    jsonl.write_text(
        '{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "send", "value": []}\n'
        "not json\n\n[1, 2]\n"
    )
    scan = scan_history(jsonl)
    assert scan.ops == 1 and scan.bad_lines == 2  # the blank line is not counted
    edn = tmp_path / "h.edn"
    edn.write_text("{:type :invoke, :f :send, :value [], :time 1, :process 0}\n{:type")
    with pytest.raises(HistoryError) as e:
        scan_history(edn)
    assert e.value.line == 2
