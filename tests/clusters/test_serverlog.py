"""Reading brokers' server.log back (clusters/serverlog.py): timestamps in their forms,
continuation lines dropped, which lines a trace keeps — whole-token names, state
changes only, cluster events, the window, repeats folded — and a coordinator's decision
taken from a transaction-state tail that was then truncated."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st
from ktrial.clusters.serverlog import LogLine, StaleDecision, parse, stale_decisions, story


def at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_timestamps_in_each_form_and_continuations_dropped() -> None:
    raw = [
        "[2026-12-02T15:29:34,482] INFO Registered `kafka:type=kafka.Log4jController` MBean",
        "[2026-12-02T15:29:34,618] INFO KafkaConfig values: ",
        "\tadd.partitions.to.txn.retry.backoff.max.ms = 100",
        "[2026-12-02 15:29:35.001] WARN a space and a dot",
        "[2026-12-02T15:29:36,000+01:00] ERROR an offset",
        "[2026-12-02T15:29:37,000Z] DEBUG zulu",
        "java.io.IOException: Connection to 10.0.0.2:9093 failed.",
        "[2026-13-45T99:99:99,000] INFO not a time",
        "[2026-12-02T15:29:38,000] NOTICE not a level",
    ]
    got = list(parse("n1", raw, local=UTC))
    assert [(x.level, x.text) for x in got] == [
        ("INFO", "Registered `kafka:type=kafka.Log4jController` MBean"),
        ("INFO", "KafkaConfig values:"),
        ("WARN", "a space and a dot"),
        ("ERROR", "an offset"),
        ("DEBUG", "zulu"),
    ]
    assert got[0].at == at("2026-12-02T15:29:34.482+00:00")
    assert got[2].at == at("2026-12-02T15:29:35.001+00:00")
    assert got[3].at == at("2026-12-02T14:29:36+00:00")  # +01:00 is an hour ahead of UTC
    assert got[4].at == at("2026-12-02T15:29:37+00:00")
    # a naive time is in the zone given (the machine's own when none is)
    east = timezone(timedelta(hours=2))
    (x,) = parse("n1", ["[2026-12-02T15:00:00,000] INFO x"], local=east)
    assert x.at == at("2026-12-02T13:00:00+00:00") and x.node == "n1"


T = at("2026-12-02T15:30:00+00:00")


def line(dt: float, text: str, node: str = "n1") -> LogLine:
    return LogLine(node, T + dt, "INFO", text)


LINES = [
    line(1, "Sending txn markers for (t-w6,0,COMMIT, partitions=[q-0-2])"),  # the id
    line(2, "Sending txn markers for (t-w60,0,COMMIT, partitions=[q-0-2])"),  # another id
    line(3, "[Broker id=2] Leader q-0-2 starts at leader epoch 1 from offset 27", "n2"),
    line(4, "[Broker id=2] Leader q-0-20 starts at leader epoch 1 from offset 5", "n2"),
    line(5, "Added fetcher for partitions q-0-2 -> InitialFetchState(...)"),  # no change
    line(6, "Skipped the become-leader state change for q-0-2 ... high watermark 27"),
    line(7, "Fencing broker 2 at epoch 8 because its session has timed out."),
    line(8, "[UnifiedLog partition=__transaction_state-0] Truncating to offset 74", "n3"),
    line(9, "Sending t-w6's transaction marker for partition q-0-2 has failed"),
    line(9.5, "Sending t-w6's transaction marker for partition q-0-2 has failed"),
    line(9.9, "Sending t-w6's transaction marker for partition q-0-2 has failed"),
    line(60, "Initialized transactionalId t-w6 with producerId 1003"),  # out of the window
]


def test_a_story_keeps_the_id_the_partitions_changes_and_cluster_events() -> None:
    got = story(LINES, ["t-w6"], ["q-0-2", "__transaction_state-0"], T, T + 30)
    assert [(x.at - T, x.node, x.repeats) for x in got] == [
        (1, "n1", 1),
        (3, "n2", 1),
        (7, "n1", 1),
        (8, "n3", 1),
        (9, "n1", 3),
    ]
    assert got[-1].last_at == T + 9.9
    # with no transactional id: the partitions and the cluster only
    got = story(LINES, [], ["q-0-2"], T, T + 30)
    assert [x.at - T for x in got] == [3, 7]


def test_long_lines_are_cut() -> None:
    (x,) = story([line(1, "t-w6 " + "x" * 5000)], ["t-w6"], [], T, T + 2)
    assert len(x.text) == 400 and x.text.endswith("…")


@given(
    st.lists(
        st.tuples(
            st.floats(-50, 50, allow_nan=False),
            st.sampled_from(["n1", "n2", "n3"]),
            st.sampled_from(
                [
                    "Leader q-0-2 starts at leader epoch 1",
                    "Truncating q-0-3 to offset 4",
                    "t-w6 marker",
                    "noise about q-0-2",
                    "In the new epoch 3, the leader is 1.",
                ]
            ),
        ),
        max_size=40,
    ),
    st.floats(-60, 60, allow_nan=False),
    st.floats(0, 60, allow_nan=False),
)
def test_a_story_is_in_order_in_its_window_and_loses_no_kind_of_line(
    raw: list[tuple[float, str, str]], lo: float, span: float
) -> None:
    lines = [line(dt, text, node) for dt, node, text in raw]
    got = story(lines, ["t-w6"], ["q-0-2", "q-0-3"], T + lo, T + lo + span)
    assert [(x.at, x.node) for x in got] == sorted((x.at, x.node) for x in got)
    assert all(T + lo <= x.at <= T + lo + span for x in got)
    assert sum(x.repeats for x in got) == sum(
        1 for x in lines if T + lo <= x.at <= T + lo + span and not x.text.startswith("noise")
    )


LEAD = (
    "[Broker id=2] Leader __transaction_state-0 with topic id Some(xq) starts at leader epoch 0 "
    "from offset {start} with partition epoch 0, high watermark {hw}, ISR [2,3,1]"
)
MARK = (
    "[Transaction State Manager 2]: Sending txn markers for "
    "TransactionalIdCoordinatorEpochAndTransitMetadata({tid},0,COMMIT,TransactionMetadata(...))"
)
TRUNC = "[UnifiedLog partition=__transaction_state-0, dir=/d/n2/data] Truncating to offset {to}"


def stale(start: int, hw: int, tid: str, to: int, marker_node: str = "n2") -> list[StaleDecision]:
    lines = [
        line(1, LEAD.format(start=start, hw=hw), "n2"),
        line(2, MARK.format(tid=tid), marker_node),
        line(3, TRUNC.format(to=to), "n2"),
    ]
    return stale_decisions(lines, ["t-w6"])


def test_a_decision_from_a_tail_that_was_then_truncated_is_found() -> None:
    (d,) = stale(77, 26, "t-w6", 74)
    assert (d.node, d.partition, d.from_offset, d.high_watermark) == (
        "n2",
        "__transaction_state-0",
        77,
        26,
    )
    assert (d.txn_id, d.result, d.truncated_to) == ("t-w6", "COMMIT", 74)
    assert (d.led_at, d.decided_at, d.truncated_at) == (T + 1, T + 2, T + 3)


def test_no_stale_decision_without_each_of_its_three_steps() -> None:
    assert stale(26, 26, "t-w6", 20) == []  # led from its high watermark: nothing above it
    assert stale(77, 26, "t-w6", 77) == []  # truncated, but not below where it led from
    assert stale(77, 26, "t-w60", 74) == []  # markers for another transactional id
    assert stale(77, 26, "t-w6", 74, marker_node="n3") == []  # another node's markers
