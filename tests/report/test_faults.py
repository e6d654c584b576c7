"""Fault windows: nemesis start/end ops paired by family, as the plots shade them."""

from ktrial.report.faults import FaultWindow, family_colour, fault_windows


def spans(ws: list[FaultWindow]) -> list[tuple[str, float, float, str | None]]:
    return [(w.family, w.start_s, w.end_s, w.end_f) for w in ws]


def test_pairs_each_family_with_its_end() -> None:
    ops = [
        ("start-partition", 1.0, {"nodes": ["n1"]}),
        ("pause", 2.0, ["n2"]),
        ("stop-partition", 3.0, None),
        ("resume", 4.0, ["n2"]),
        ("memory-squeeze", 5.0, "n3"),
        ("memory-release", 6.0, "n3"),
        ("toxic-on", 7.0, {"toxic": "latency"}),
        ("toxic-off", 8.0, None),
        ("start-loss", 9.0, None),
        ("stop-loss", 9.5, None),
    ]
    assert spans(fault_windows(ops, end_s=20.0)) == [
        ("partition", 1.0, 3.0, "stop-partition"),
        ("pause", 2.0, 4.0, "resume"),
        ("memory", 5.0, 6.0, "memory-release"),
        ("toxic", 7.0, 8.0, "toxic-off"),
        ("loss", 9.0, 9.5, "stop-loss"),
    ]


def test_start_ends_kill_and_stop_matching_targets() -> None:
    ops = [
        ("kill", 1.0, ["n1"]),
        ("kill", 2.0, ["n2"]),
        ("stop", 2.5, ["n3"]),
        ("start", 3.0, ["n2"]),
        ("start", 4.0, ["n1"]),
        ("start", 5.0, ["n3"]),
    ]
    assert spans(fault_windows(ops, end_s=10.0)) == [
        ("kill", 1.0, 4.0, "start"),
        ("kill", 2.0, 3.0, "start"),
        ("stop", 2.5, 5.0, "start"),
    ]


def test_unpaired_start_lasts_to_end_and_heal_closes_all() -> None:
    ws = fault_windows([("pause", 50.0, ["n3"])], end_s=60.0)
    assert spans(ws) == [("pause", 50.0, 60.0, None)]
    assert not ws[0].instant
    ws = fault_windows(
        [("kill", 1.0, ["n1"]), ("start-partition", 2.0, None), ("heal", 5.0, None)], end_s=60.0
    )
    assert spans(ws) == [("kill", 1.0, 5.0, "heal"), ("partition", 2.0, 5.0, "heal")]


def test_unknown_nemesis_op_is_an_instant_and_generic_pairs_work() -> None:
    ws = fault_windows(
        [
            ("leader-transfer", 3.0, None),
            ("start-clock-skew", 4.0, None),
            ("stop-clock-skew", 6.0, None),
        ],
        end_s=10.0,
    )
    assert spans(ws) == [
        ("leader-transfer", 3.0, 3.0, None),
        ("clock-skew", 4.0, 6.0, "stop-clock-skew"),
    ]
    assert ws[0].instant


def test_each_family_has_its_own_colour() -> None:
    fams = ["partition", "kill", "stop", "pause", "memory", "toxic", "loss"]
    assert len({family_colour(f) for f in fams}) == len(fams)
    assert family_colour("something-new") == family_colour("something-new")
