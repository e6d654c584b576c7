"""`ktrial trace`: a run directory whose test.json is unusable is a usage error, not a
crash; the brokers' logs of a real run tell its torn transaction's story."""

from __future__ import annotations

import json
import shutil
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ktrial.cli import main


@pytest.mark.parametrize(
    ("text", "why"),
    [("[1]", "it must hold a JSON object, not list"), ("{oops", "unreadable test.json")],
)
def test_an_unusable_test_json_is_a_usage_error(
    tmp_path: Path, text: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "history.jsonl").write_text("")
    (tmp_path / "test.json").write_text(text)
    with pytest.raises(SystemExit) as e:
        main(["trace", str(tmp_path), "--key", "0", "--offset", "1"])
    err = capsys.readouterr().err
    assert e.value.code == 254, err
    assert f"{tmp_path / 'test.json'}: unreadable test.json" in err and why in err
    assert "Traceback" not in err


FINDING = Path(__file__).resolve().parents[2] / "bench/findings/2026-12-02-ssh-torn-txn"


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The finding's brokers logged UTC times without a zone: read them as this machine's
    local time, which the test makes UTC wherever it runs."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def trace_ok(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0


def finding_run(tmp_path: Path, txn_id: bool = True) -> Path:
    """The torn-transaction run of bench/findings (a real CI run: history, results,
    test.json and the three brokers' server.log), without kept data. Its history predates
    `txn_id` on txn invokes: op 189's is added as the workload now writes it."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    for name in ("results.json", "test.json"):
        shutil.copy(FINDING / name, run / name)
    out = []
    for raw in (FINDING / "history.jsonl").read_text().splitlines():
        op = json.loads(raw)
        if txn_id and op["process"] == 6 and op["type"] == "invoke" and op["f"] == "txn":
            op["txn_id"] = "ktrial-4312b318-w6"
        out.append(json.dumps(op))
    (run / "history.jsonl").write_text("\n".join(out) + "\n")
    with tarfile.open(FINDING / "logs.tar.xz") as tar:
        for m in tar.getmembers():
            if m.name.endswith("-server.log"):
                f = tar.extractfile(m)
                assert f is not None
                (run / "logs" / Path(m.name).name).write_bytes(f.read())
    return run


def test_the_brokers_logs_tell_the_torn_transactions_story_without_kept_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], utc: None
) -> None:
    """The story traced by hand (the finding's README), in order, from `ktrial trace`."""
    run = finding_run(tmp_path)
    trace_ok(["trace", str(run)])
    out = capsys.readouterr().out
    assert "no broker data" in out
    assert out.index("torn transaction of op 189") < out.index("lost write of value 76")
    assert (
        "transactional id ktrial-4312b318-w6 (coordinator partition __transaction_state-0)" in out
    )
    story = [
        "n2   INFO  [Broker id=2] Leader __transaction_state-0 with topic id Some(xqOSP9E4SF"
        "mrn-5VcWtNgA) starts at leader epoch 0 from offset 77",
        "Sending txn markers for TransactionalIdCoordinatorEpochAndTransitMetadata("
        "ktrial-4312b318-w6,0,COMMIT",
        "n1   INFO  [QuorumController id=1] Fencing broker 2 at epoch 8 because its session",
        "I am no longer the coordinator for ktrial-4312b318-w6",
        "n3   INFO  [Broker id=3] Leader __transaction_state-0 with topic id Some(xqOSP9E4SF"
        "mrn-5VcWtNgA) starts at leader epoch 1 from offset 74",
        "n2   INFO  [UnifiedLog partition=__transaction_state-0, dir=/var/tmp/ktrial/runs/"
        "56c56f/n2/data] Truncating to offset 74",
        "Initialized transactionalId ktrial-4312b318-w6 with producerId 1003 and producer epoch 2",
    ]
    where = [out.find(s) for s in story]
    assert -1 not in where and where == sorted(where), list(zip(story, where, strict=True))
    # and the path named: a decision from a tail above the high watermark, then truncated
    assert (
        "-- n2 led __transaction_state-0 from offset 77, above its high watermark 26 "
        "(21.640 s), sent COMMIT markers for ktrial-4312b318-w6 (22.774 s), then truncated "
        "__transaction_state-0 to 74 (29.862 s)"
    ) in out
    # the three lost writes are the same op's: one time line, not four
    assert out.count("-- the brokers' logs: as above (op 189)") == 3
    # other transactions' markers on these partitions are left out; w6's are folded
    assert "ktrial-4312b318-w15" not in out and "Skipped the become" not in out


def test_without_a_txn_id_only_the_partitions_are_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], utc: None
) -> None:
    run = finding_run(tmp_path, txn_id=False)
    trace_ok(["trace", str(run), "--key", "2", "--offset", "23"])
    out = capsys.readouterr().out
    assert "the history names no txn_id for this op" in out
    assert "Truncating to offset 27" in out  # q-0-2's own truncation
    assert "ktrial-4312b318-w6" not in out and "__transaction_state" not in out
