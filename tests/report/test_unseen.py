"""UnseenCounter: the live view's unseen count, tailing a growing history."""

from pathlib import Path

from ktrial.histories import HistoryWriter, Recorder
from ktrial.report.unseen import UnseenCounter


def test_counts_acknowledged_values_not_yet_read(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path / "history.jsonl")
    rec = Recorder(w)
    unseen = UnseenCounter(w.path)
    assert unseen() == 0
    for v in (1, 2, 3):
        inv = rec.invoke(0, "send", [["send", 7, v]])
        rec.complete(inv, "ok", [["send", 7, [v - 1, v]]])
    inv = rec.invoke(0, "send", [["send", 7, 4]])
    rec.complete(inv, "info", [["send", 7, 4]])  # unknown outcome: not acknowledged
    assert unseen() == 3
    inv = rec.invoke(1, "poll", [["poll"]])
    rec.complete(inv, "ok", [["poll", {"7": [[0, 1], [1, 2]]}]])  # key as a string
    assert unseen() == 1
    # a failed poll reads nothing that counts; a txn both sends and reads
    inv = rec.invoke(1, "poll", [["poll"]])
    rec.complete(inv, "fail", [["poll", {"7": [[2, 3]]}]])
    inv = rec.invoke(2, "txn", [["send", 8, 9], ["poll"]])
    rec.complete(inv, "ok", [["send", 8, [0, 9]], ["poll", {"7": [[2, 3]]}]])
    assert unseen() == 1  # 9 of key 8
    rec.nemesis("kill", ["n1"])
    assert unseen() == 1
    w.close()


def test_read_before_acknowledged_and_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(
        b'{"index":0,"time":1,"process":1,"type":"ok","f":"poll",'
        b'"value":[["poll",{"1":[[0,5]]}]]}\n'
        b'{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send",1,[0,5]]]}\n'
        b'{"index":2,"time":3,"process":0,"type":"ok","f":"send","val'
    )
    unseen = UnseenCounter(path)
    assert unseen() == 0  # read before its ack arrived in the history: seen
    with path.open("ab") as fh:  # the writer finishes the torn line
        fh.write(b'ue":[["send",1,[1,6]]]}\n')
    assert unseen() == 1
