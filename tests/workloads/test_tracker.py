"""The copier's offset tracker (workloads/tracker.py): the offsets to read up to, and
the keys not yet read that far."""

from __future__ import annotations

from ktrial.workloads.tracker import OffsetTracker


def test_tracker_targets_and_unread() -> None:
    t = OffsetTracker()
    t.observe([["send", 0, [5, 1]], ["send", 1, 2], ["poll", {"0": [[2, 9]], "3": [[7, 8]]}]])
    assert t.targets([0, 1, 3]) == {0: 6, 1: 0, 3: 8}
    assert t.unread(5) == [0]
    t.observe([["poll", {"0": [[5, 1]]}]])
    assert t.unread(5) == []
