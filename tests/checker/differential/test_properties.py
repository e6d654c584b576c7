"""Property tests: the checker against ktrial's generator of correct histories and its
fault injectors (ktrial.testing): correct histories are valid, each injected fault is
reported exactly, and the verdict rules hold whatever the generator's parameters.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ktrial.checker import CheckOptions, check, check_file
from ktrial.testing.gen import Generated, GenParams, generate, to_jsonl, to_ops
from ktrial.testing.mutate import INJECTORS, Fault

SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# Shapes of correct histories: small enough that one check takes milliseconds.
correct_params = st.builds(
    GenParams,
    seed=st.integers(0, 2**32 - 1),
    keys=st.integers(1, 4),
    processes=st.integers(1, 5),
    ops=st.integers(1, 60),
    txn=st.booleans(),
    max_mops=st.integers(1, 4),
    abort_p=st.sampled_from([0.0, 0.15, 0.5]),
    fail_p=st.sampled_from([0.0, 0.1, 0.3]),
    info_p=st.sampled_from([0.0, 0.1, 0.3]),
    crash_p=st.sampled_from([0.0, 0.05, 0.2]),
    sub_via=st.sampled_from(["assign", "subscribe"]),
    reassign_p=st.sampled_from([0.0, 0.1]),
    reseek=st.booleans(),
    rebalance_p=st.sampled_from([0.0, 0.2]),
    null_offset_p=st.sampled_from([0.0, 0.3, 1.0]),
    omit_invokes=st.booleans(),
    truncate=st.booleans(),
    tail_invokes=st.integers(0, 2),
    int_keys=st.booleans(),
    drain_consumers=st.integers(1, 2),
    nemesis_p=st.sampled_from([0.0, 0.05]),
)


def _has_ok_read(ops: list[dict[str, Any]]) -> bool:
    return any(
        d["type"] == "ok"
        and d["f"] in ("poll", "txn")
        and any(m[0] == "poll" and len(m) > 1 and m[1] for m in d["value"])
        for d in ops
    )


def _assert_valid(res: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    assert res["bad_error_types"] == [], _why(res)
    if _has_ok_read(ops):
        assert res["valid"] is True, _why(res)
    else:  # nothing could be checked: "unknown" is the honest verdict
        assert res["valid"] in (True, "unknown"), _why(res)


def _why(res: dict[str, Any]) -> str:
    lines = [f"valid={res['valid']} bad={res['bad_error_types']}"]
    for t in res["bad_error_types"]:
        for ex in res["anomalies"].get(t, {}).get("examples", [])[:2]:
            lines.append(f"  {t}: {ex.get('explanation', ex)}")
    return "\n".join(lines)


@settings(SETTINGS, max_examples=120)
@given(correct_params, st.booleans(), st.booleans())
def test_correct_generated_histories_are_valid(p: GenParams, ww_deps: bool, infer: bool) -> None:
    g = generate(p)
    # sub_via inferred from the history (a subscribe op means subscribe) or given.
    opts = CheckOptions(sub_via=None if infer else p.sub_via, ww_deps=ww_deps)
    _assert_valid(check(to_ops(g.ops), opts), g.ops)


# Shapes rich enough that every injector usually finds a place for its fault.
fault_params = st.builds(
    GenParams,
    seed=st.integers(0, 2**32 - 1),
    keys=st.integers(2, 4),
    processes=st.integers(2, 4),
    ops=st.integers(25, 70),
    txn=st.just(True),
    txn_poll_p=st.sampled_from([0.2, 0.35]),
    abort_p=st.sampled_from([0.15, 0.3]),
    fail_p=st.sampled_from([0.05, 0.15]),
    info_p=st.sampled_from([0.0, 0.1]),
    crash_p=st.sampled_from([0.0, 0.05]),
    sub_via=st.sampled_from(["assign", "assign", "subscribe"]),
    reassign_p=st.sampled_from([0.0, 0.1]),
    rebalance_p=st.sampled_from([0.0, 0.2]),
    null_offset_p=st.sampled_from([0.0, 0.2]),
    omit_invokes=st.sampled_from([False, False, True]),
    truncate=st.booleans(),
    int_keys=st.booleans(),
    max_batch=st.integers(3, 6),
    drain_consumers=st.integers(1, 2),
)


# With subscribe, consumers are rebalanced between ops: skips and re-reads across
# ops are legal (docs/anomalies.md), so those faults must leave the history valid.
NOT_BAD_WITH_SUBSCRIBE = {"poll-skip", "nonmonotonic-poll"}


def _mentions(text: str, token: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(token)}(?![\w])", text) is not None


def _explained(res: dict[str, Any], typ: str, f: Fault) -> bool:
    for ex in res["anomalies"][typ]["examples"]:
        text = str(ex.get("explanation", ""))
        if _mentions(text, f.key) and any(_mentions(text, str(v)) for v in f.values):
            return True
    return False


def _run_fault(name: str, p: GenParams, choice: int, ww_deps: bool) -> None:
    g: Generated = generate(p)
    f = INJECTORS[name](g, random.Random(choice))
    assume(f is not None)
    assert f is not None
    res = check(to_ops(f.ops), CheckOptions(sub_via=p.sub_via, ww_deps=ww_deps))
    expect, allowed = set(f.expect), set(f.allowed)
    if p.sub_via == "subscribe":
        expect -= NOT_BAD_WITH_SUBSCRIBE
        allowed -= NOT_BAD_WITH_SUBSCRIBE
    bad = set(res["bad_error_types"])
    ctx = f"{f.why}\n{_why(res)}"
    assert expect <= bad, ctx
    assert bad <= expect | allowed, ctx
    if not expect:
        _assert_valid(res, f.ops)
        return
    assert res["valid"] is False, ctx
    for typ in expect:
        assert _explained(res, typ, f), (
            f"no {typ} example names key {f.key} and one of {f.values}:\n"
            + "\n".join(str(ex.get("explanation")) for ex in res["anomalies"][typ]["examples"])
        )


@pytest.mark.parametrize("name", sorted(INJECTORS))
@settings(SETTINGS, max_examples=20)
@given(p=fault_params, choice=st.integers(0, 2**16), ww_deps=st.booleans())
def test_injected_fault_is_reported_exactly(
    name: str, p: GenParams, choice: int, ww_deps: bool
) -> None:
    _run_fault(name, p, choice, ww_deps)


def test_circular_visibility_is_bad_even_with_ww_deps() -> None:
    """A wr-only cycle is bad whatever ww_deps says (docs/anomalies.md)."""
    g = generate(GenParams(seed=11, ops=40, keys=2))
    f = INJECTORS["G1c"](g, random.Random(0))
    assert f is not None
    for ww in (True, False):
        res = check(to_ops(f.ops), CheckOptions(sub_via="assign", ww_deps=ww))
        assert res["bad_error_types"] == ["G1c"], _why(res)


def test_poll_skip_is_not_bad_with_subscribe() -> None:
    for seed in range(20):
        g = generate(GenParams(seed=seed, ops=60, keys=2, processes=3))
        f = INJECTORS["poll-skip"](g, random.Random(seed))
        if f is None:
            continue
        assign = check(to_ops(f.ops), CheckOptions(sub_via="assign"))
        assert assign["bad_error_types"] == ["poll-skip"], _why(assign)
        sub = check(to_ops(f.ops), CheckOptions(sub_via="subscribe"))
        assert sub["valid"] is True and "poll-skip" in sub["error_types"], _why(sub)
        return
    pytest.fail("no generated history offered a poll-skip")


def _send_offsets(d: dict[str, Any]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    if d["f"] in ("send", "txn"):
        for m in d["value"]:
            if m[0] == "send" and isinstance(m[2], list) and m[2][0] is not None:
                out[str(m[1])].append(m[2][0])
    return out


def _expect_int_send_skip(g: Generated) -> bool:
    """Does some ok op's pair of sends to a key have another committed record between?"""
    committed = {k: {o for o, _ in recs} for k, recs in g.truth.log.items()}
    for d in g.ops:
        if d["type"] != "ok":
            continue
        for k, offs in _send_offsets(d).items():
            mine = set(offs)
            for a, b in itertools.pairwise(offs):
                if any(o in committed.get(k, ()) and o not in mine for o in range(a + 1, b)):
                    return True
    return False


@settings(SETTINGS, max_examples=25)
@given(seed=st.integers(0, 2**32 - 1))
def test_int_send_skip_is_reported_but_not_bad(seed: int) -> None:
    g = generate(GenParams(seed=seed, ops=60, keys=2, processes=4, max_sends=4, txn=True))
    assume(_expect_int_send_skip(g))
    res = check(to_ops(g.ops), CheckOptions(sub_via="assign"))
    assert "int-send-skip" in res["error_types"], _why(res)
    _assert_valid(res, g.ops)


def test_marker_and_abort_gaps_are_not_skips() -> None:
    g = generate(GenParams(seed=21, ops=200, keys=2, processes=3, abort_p=0.5, txn_weight=4))
    holes = sum(recs[-1][0] + 1 - len(recs) for recs in g.truth.log.values())
    assert g.truth.markers > 20 and holes > 40
    res = check(to_ops(g.ops), CheckOptions(sub_via="assign"))
    _assert_valid(res, g.ops)
    for t in ("poll-skip", "int-poll-skip", "lost-write", "G1a"):
        assert t not in res["error_types"], _why(res)


def test_rereads_after_failed_ops_are_legal() -> None:
    g = generate(
        GenParams(
            seed=4, ops=200, keys=2, processes=3, fail_p=0.3, abort_p=0.3, info_p=0.2, poll_weight=3
        )
    )
    assert g.truth.rewinds > 10
    res = check(to_ops(g.ops), CheckOptions(sub_via="assign"))
    _assert_valid(res, g.ops)
    assert "nonmonotonic-poll" not in res["error_types"], _why(res)


def test_omitted_invokes_and_cut_short_histories_are_valid() -> None:
    for seed in range(5):
        p = GenParams(seed=seed, ops=80, omit_invokes=True, truncate=True, tail_invokes=2)
        g = generate(p)
        assert g.truth.in_flight >= 2
        # Only the ops that never complete show an invoke.
        assert sum(d["type"] == "invoke" for d in g.ops) == g.truth.in_flight
        _assert_valid(check(to_ops(g.ops)), g.ops)
        g = generate(GenParams(seed=seed, ops=80, truncate=True, tail_invokes=1, info_p=0.2))
        _assert_valid(check(to_ops(g.ops)), g.ops)


def test_fault_found_through_jsonl_and_cli(tmp_path: Path) -> None:
    """The same verdicts hold when the history goes through history.jsonl and `ktrial check`."""
    g = generate(GenParams(seed=9, ops=40, keys=2, abort_p=0.3))
    f = INJECTORS["G1a"](g, random.Random(1))
    assert f is not None
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    to_jsonl(g.ops, good)
    to_jsonl(f.ops, bad)
    _assert_valid(check_file(good, CheckOptions(sub_via="assign")), g.ops)
    assert check_file(bad, CheckOptions(sub_via="assign"))["bad_error_types"] == ["G1a"]
    for path, code in ((good, 0), (bad, 1)):
        out = tmp_path / f"{path.stem}-results.json"
        proc = subprocess.run(
            [sys.executable, "-m", "ktrial", "check", str(path), "--out", str(out)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == code, proc.stdout + proc.stderr
        assert json.loads(out.read_text())["valid"] is (code == 0)
