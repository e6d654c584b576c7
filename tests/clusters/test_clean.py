"""What `cluster clean` recognises as ktrial's (clusters/clean.py): name patterns, leftovers."""

from __future__ import annotations

from ktrial.clusters import clean


def test_clean_patterns_match_only_ktrial_names() -> None:
    assert clean.NETNS_RE.match("kt-a1b2c3-n1").group(1) == "a1b2c3"  # type: ignore[union-attr]
    assert clean.LINK_RE.match("kt-a1b2c3").group(1) == "a1b2c3"  # type: ignore[union-attr]
    assert clean.LINK_RE.match("kt-a1b2c3-v12")
    assert not clean.LINK_RE.match("kt-a1b2c3-other")
    assert not clean.LINK_RE.match("docker0")
    assert clean.CGROUP_RE.match("ktrial-a1b2c3-n2")
    assert not clean.CGROUP_RE.match("ktrialx-a1b2c3-n2")
    m = clean.ENVIRON_RE.search(b"A=1\x00KTRIAL_RUN=a1b2c3\x00B=2")
    assert m is not None and m.group(1) == b"a1b2c3"
    assert not clean.ENVIRON_RE.search(b"NOT_KTRIAL_RUN=a1b2c3")


def test_leftovers_only_selects_runs() -> None:
    lo = clean.Leftovers(
        processes={10: "aaaaaa", 11: "bbbbbb"},
        netns={"kt-aaaaaa-n1": "aaaaaa"},
        rules=[(["FORWARD"], "bbbbbb")],
    )
    assert lo.run_ids() == {"aaaaaa", "bbbbbb"}
    only_a = lo.only(["aaaaaa"])
    assert only_a.processes == {10: "aaaaaa"} and only_a.rules == []
    assert not only_a.empty() and clean.Leftovers().empty()
