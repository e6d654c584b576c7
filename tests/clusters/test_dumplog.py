"""Parsing Kafka's DumpLogSegments output (real output of Kafka 4.1.1, tests/data)."""

from __future__ import annotations

from pathlib import Path

from ktrial.clusters import dumplog

DATA = Path(__file__).resolve().parents[1] / "data"


def test_segment_dump_gives_values_producers_and_markers() -> None:
    recs = dumplog.parse_segment_dump((DATA / "dumplog-segment.txt").read_text())
    assert [r.offset for r in recs] == [0, 1, 2, 3, 4]
    assert (recs[0].value, recs[0].producer_id, recs[0].producer_epoch) == ("7", 4, 0)
    assert recs[0].transactional and not recs[0].control and recs[0].marker is None
    assert (recs[2].value, recs[2].producer_id, recs[2].producer_epoch) == ("10", 1000, 1)
    abort = recs[3]
    assert abort.control and abort.marker == "ABORT" and abort.value is None
    assert (abort.producer_id, abort.coordinator_epoch) == (1000, 0)
    assert recs[4].marker == "COMMIT" and recs[4].coordinator_epoch == 1
    assert "ABORT marker (coordinator epoch 0), pid 1000 epoch 1" in abort.describe()
    assert [r.offset for r in dumplog.window(recs, 3, 1)] == [2, 3, 4]


def test_multi_file_dump_is_split_by_file() -> None:
    text = (DATA / "dumplog-segment.txt").read_text()
    other = text.replace("Dumping n1/", "Dumping n2/")
    by_file = dumplog.parse_segment_dumps(text + "\n" + other)
    assert len(by_file) == 2
    assert all(len(rs) == 5 for rs in by_file.values())


def test_transaction_log_dump_gives_state_transitions() -> None:
    ts = dumplog.parse_txn_log_dump((DATA / "dumplog-txnstate.txt").read_text())
    assert [(t.offset, t.transactional_id, t.producer_id, t.status) for t in ts] == [
        (5, "ktrial-cc7bfc84-w13", 3, "Ongoing"),
        (6, "ktrial-cc7bfc84-w10", 0, "Ongoing"),
    ]  # the <DELETE> tombstone is skipped
    assert ts[0].partitions == ("ktrial-cc7bfc84-q-0-2", "ktrial-cc7bfc84-q-0-3")
    assert ts[0].partition == "__transaction_state-2"
    assert ts[1].update_ms == 1796008136317


def test_trace_without_kept_data_says_how_to_get_it(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from ktrial.cli import cli

    run = tmp_path / "run"
    run.mkdir()
    (run / "test.json").write_text("{}")
    res = CliRunner().invoke(cli, ["trace", str(run)])
    assert res.exit_code == 2, res.output  # a usage error (the ktrial entry point exits 254)
    assert "neither broker data" in res.output and "--keep-data" in res.output
    assert "logs/*-server.log" in res.output  # what else it could have traced


def test_trace_needs_both_key_and_offset(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from ktrial.cli import cli

    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "test.json").write_text('{"keys": {"0": {"topic": "t", "partition": 0}}}')
    res = CliRunner().invoke(cli, ["trace", str(run), "--key", "0"])
    assert res.exit_code == 2 and "give both --key and --offset" in res.output


def test_trace_verdict_names_a_record_taken_for_a_duplicate() -> None:
    from ktrial.commands.trace import Target, _verdict

    recs = dumplog.parse_segment_dump((DATA / "dumplog-segment.txt").read_text())
    at2 = [r for r in recs if r.offset == 2] * 3  # three replicas agree: value 10, pid 1000
    text = _verdict(Target("1", 2, "lost", "117"), at2)
    assert "holds value 10 (pid 1000 epoch 1), not the lost value 117" in text
    assert "same sequence number" in text
    assert "holds value 10 on every replica" in _verdict(Target("1", 2, "lost", "10"), at2)
    assert "ABORT marker, not value" in _verdict(Target("1", 3, "lost", "9"), [recs[3]])
    assert "disagree" in _verdict(Target("1", 2, "lost", "10"), [recs[1], recs[2]])
