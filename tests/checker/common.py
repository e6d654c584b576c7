"""Helpers shared by the checker tests of several files (history lines are in histlines.py).

Running checks (on parsed ops, on files, through the real `ktrial check` entry point,
on a Jepsen history.edn), what a usage error looks like, the small cycle-shaped
histories that both the hand-written cycle tests and the full-graph reference use,
Jepsen's own test histories used by two files, the copy workload's test.json and the
liveness accessors.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check, check_file
from ktrial.cli import main
from ktrial.tests.histlines import POLL, Line, edn_op, fail, inv, isnd, ok, op, pl, snd, write


def check_ops_from(ops: list[Any], **opts: Any) -> dict[str, Any]:
    """check() on parsed ops (see histlines.parsed)."""
    return check(ops, CheckOptions(**opts))


def first_example(res: dict[str, Any], name: str) -> dict[str, Any]:
    assert name in res["error_types"], res["error_types"]
    ex = res["anomalies"][name]["examples"][0]
    assert isinstance(ex["explanation"], str) and ex["explanation"]
    return ex


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the real entry point in process: (exit code, stdout, stderr) of this call
    only (what was printed before it is dropped)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    code = e.value.code
    return (code if isinstance(code, int) else 0), out.out, out.err


def assert_refused(path: Path, line: int, reason: str, capsys: pytest.CaptureFixture[str]) -> str:
    """`ktrial check PATH` refuses the history: exit 254, `PATH:LINE: ` and the reason on
    stderr, no traceback. Returns stderr."""
    rc, _out, err = run_main(["check", str(path)], capsys)
    assert rc == 254, err
    assert f"{path}:{line}: " in err, err
    assert reason in err, err
    assert "Traceback" not in err, err
    return err


def usage_error(rc: int, out: str, err: str) -> bool:
    """254, nothing on stdout, an `Error:` line on stderr, no traceback."""
    return rc == 254 and out == "" and "Error:" in err and "Traceback" not in err


def examples_of(res: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The examples of anomaly `name`; none when it was not found (histlines.examples
    insists that it was)."""
    return list(res["anomalies"].get(name, {}).get("examples", []))


def pick(ex: dict[str, Any], *keys: str) -> tuple[Any, ...]:
    """The values of `keys` in an example (None where absent)."""
    return tuple(ex.get(k) for k in keys)


# A failed transaction's send read by an ok poll: G1a, `ktrial check` exits 1.
G1A: list[Line] = [
    fail(0, "txn", [snd(2, 0, 20)]),
    ok(1, "poll", [pl({"2": [[0, 20]]})]),
]


CYCLE_TYPES = ("G0", "G1c", "G0-realtime", "G1c-realtime")


def cycle_types(res: dict[str, Any]) -> set[str]:
    return {t for t in res["error_types"] if t in CYCLE_TYPES}


def explain(res: dict[str, Any]) -> dict[str, list[Any]]:
    return {t: [e.get("explanation") for e in a["examples"]] for t, a in res["anomalies"].items()}


def three_way_visibility() -> list[Line]:
    """A read z=3 before C was even invoked; B read A's x, C read B's y: the three
    wr edges alone close a cycle (circular visibility, G1c), and with A -rt-> C a
    shorter G1c-realtime too."""
    return [
        ok(0, "txn", [snd("x", 0, 1), pl({"z": [[0, 3]]})]),
        ok(1, "txn", [pl({"x": [[0, 1]]}), snd("y", 0, 2)]),
        ok(2, "txn", [pl({"y": [[0, 2]]}), snd("z", 0, 3)]),
    ]


def three_way_writes() -> list[Line]:
    """Sequential sends (each completes before the next is invoked): A's x precedes
    B's, B's y precedes C's, C's z precedes A's -- a G0 cycle of ww edges only."""
    return [
        ok(0, "send", [snd("x", 0, 1), snd("z", 1, 5)]),
        ok(1, "send", [snd("x", 1, 2), snd("y", 0, 3)]),
        ok(2, "send", [snd("y", 1, 4), snd("z", 0, 6)]),
        ok(3, "poll", [pl({"x": [[0, 1], [1, 2]], "y": [[0, 3], [1, 4]], "z": [[0, 6], [1, 5]]})]),
    ]


def one_edge_wr_and_rt() -> list[Line]:
    """A (x=1) completes before B is invoked; B read x=1 (wr and rt A->B), and B's y=3
    lands before A's y=4 (ww B->A). Typings of the one cycle A->B->A: (wr, ww) = G1c
    and (rt, ww) = G0-realtime. G1c-realtime needs a wr step *and* a realtime step:
    there is no such cycle."""
    return [
        ok(0, "txn", [snd("x", 0, 1), snd("y", 1, 4)]),
        ok(1, "txn", [pl({"x": [[0, 1]]}), snd("y", 0, 3)]),
        ok(2, "poll", [pl({"y": [[0, 3], [1, 4]]})]),
    ]


def glued_walk() -> list[Line]:
    """A and B run concurrently: A's y=4 lands before B's y=3 (ww A->B) and A read
    y=3 (wr B->A): G1c. C (x=1) is invoked after A completed (rt A->C) but lands
    before A's x=5 (ww C->A): G0-realtime. Every cycle through the one wr edge is
    A->B->A: no simple cycle has both a wr and a realtime step."""
    return [
        inv(0, "txn", [isnd("y", 4), isnd("x", 5), ["poll"]]),
        inv(1, "txn", [isnd("y", 3)]),
        ok(0, "txn", [snd("y", 0, 4), snd("x", 1, 5), pl({"y": [[1, 3]]})]),
        ok(1, "txn", [snd("y", 1, 3)]),
        ok(2, "send", [snd("x", 0, 1)]),
        ok(3, "poll", [pl({"x": [[0, 1], [1, 5]], "y": [[0, 4], [1, 3]]})]),
    ]


def forward_wr_in_a_realtime_cycle() -> list[Line]:
    """A (y=5 at offset 2) completes; B polls y=5 (wr A->B, forward), C is invoked
    after B completed (rt B->C) and its y=2 lands at offset 1, before A's y=5 (ww
    C->A). A->B->C->A is wr, rt, ww: a G1c-realtime that needs both its wr and its
    realtime step, besides the G0 / G0-realtime A<->C."""
    return [
        inv(0, "txn", [isnd("y", 5), isnd("x", 4)]),
        ok(0, "txn", [snd("y", 2, 5), snd("x", 0, 4)]),
        inv(1, "poll", POLL),
        ok(1, "poll", [pl({"y": [[2, 5]]})]),
        inv(2, "txn", [isnd("y", 2), isnd("x", 3)]),
        ok(2, "txn", [snd("y", 1, 2), snd("x", 1, 3)]),
        ok(3, "poll", [pl({"x": [[0, 4], [1, 3]], "y": [[1, 2], [2, 5]]})]),
    ]


def run_all_examples(lines: list[Line], **opts: Any) -> dict[str, Any]:
    opts.setdefault("max_examples", 1000)
    with tempfile.TemporaryDirectory(prefix="kt-cycles2-") as d:
        return check_file(write(Path(d) / "history.jsonl", lines), CheckOptions(**opts))


def bad_cycle(res: dict[str, Any]) -> bool:
    return bool({"G1c", "G1c-realtime"} & set(res["bad_error_types"]))


def split_walk_history() -> list[Line]:
    """The one wr edge is A -> B (B read A's x=1 while A ran). The only simple cycle
    with a wr and a realtime step is A -wr-> B -ww-> D1 -ww-> D2 -rt-> E -ww-> A
    (y: 11 then 12; w: 30 then 31; v: 40 then 41). A shorter closed walk
    A -wr-> B -rt-> C -ww-> B -ww-> A passes B twice: its simple parts are B-C-B
    (rt, ww) and A-B-A (wr, ww), neither a G1c-realtime."""
    a, b, c, d1, d2, e = 0, 1, 2, 3, 4, 5
    return [
        inv(a, "txn", [isnd("x", 1), isnd("z", 21), isnd("v", 41)]),
        inv(b, "txn", [["poll"], isnd("y", 11), isnd("z", 20)]),
        inv(d1, "txn", [isnd("y", 12), isnd("w", 30)]),
        inv(d2, "send", [isnd("w", 31)]),
        ok(d2, "send", [snd("w", 1, 31)]),
        inv(e, "send", [isnd("v", 40)]),
        ok(b, "txn", [pl({"x": [[0, 1]]}), snd("y", 1, 11), snd("z", 0, 20)]),
        inv(c, "send", [isnd("y", 10)]),
        ok(a, "txn", [snd("x", 0, 1), snd("z", 1, 21), snd("v", 1, 41)]),
        ok(d1, "txn", [snd("y", 2, 12), snd("w", 0, 30)]),
        ok(c, "send", [snd("y", 0, 10)]),
        ok(e, "send", [snd("v", 0, 40)]),
        ok(
            9,
            "poll",
            [
                pl(
                    {
                        "x": [[0, 1]],
                        "y": [[0, 10], [1, 11], [2, 12]],
                        "z": [[0, 20], [1, 21]],
                        "w": [[0, 30], [1, 31]],
                        "v": [[0, 40], [1, 41]],
                    }
                )
            ],
        ),
    ]


def long_visibility_chain(n: int) -> list[Line]:
    """A (ok, first) read z=1 that Z wrote; A wrote x0; then n sequential txns each
    read the previous one's value and wrote the next; Z read the last and wrote z=1.
    A -wr-> B1 -wr-> ... -wr-> Bn -wr-> Z -wr-> A: circular visibility of wr edges
    only (G1c, bad), n + 2 ops long; A -rt-> Z -wr-> A is the G1c-realtime shortcut."""
    lines = [
        inv(0, "txn", [["poll"], isnd("x", 100)]),
        ok(0, "txn", [pl({"z": [[0, 1]]}), snd("x", 0, 100)]),
    ]
    for i in range(1, n + 1):
        lines.append(inv(i, "txn", [["poll"], isnd("x", 100 + i)]))
        lines.append(ok(i, "txn", [pl({"x": [[i - 1, 99 + i]]}), snd("x", i, 100 + i)]))
    lines.append(inv(n + 1, "txn", [["poll"], isnd("z", 1)]))
    lines.append(ok(n + 1, "txn", [pl({"x": [[n, 100 + n]]}), snd("z", 0, 1)]))
    return lines


M = 1 << 32  # workloads/copy.py VALUE_MODULUS


COPY: dict[str, Any] = {
    "input_keys": [0, 1],
    "output_keys": [2, 3],
    "route": {"0": 2, "1": 3},
    "value_modulus": M,
}


META: dict[str, Any] = {"workload": "copy", "copy": COPY}


def write_as_is(path: Path, lines: list[Line]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return path


def run_check(
    tmp_path: Path, lines: list[Line], meta: dict[str, Any] | None = None, **opts: Any
) -> dict[str, Any]:
    return check_file(write_as_is(tmp_path / "history.jsonl", lines), CheckOptions(**opts), meta)


def poll_pair(p: Any, recs: dict[str, list[list[Any]]], typ: str = "ok") -> list[Line]:
    return [inv(p, "poll", [["poll"]]), op(p, typ, "poll", [pl(recs)])]


def send_pair(p: Any, k: Any, o: int | None, v: Any, typ: str = "ok") -> list[Line]:
    return [inv(p, "send", [["send", k, v]]), op(p, typ, "send", [snd(k, o, v)])]


def write_timed(path: Path, lines: list[Line]) -> Path:
    """A history.jsonl of lines that carry their own times (`t`); a line without one is
    at time 0."""
    path.write_text(
        "".join(json.dumps({"index": i, "time": 0, **o}) + "\n" for i, o in enumerate(lines))
    )
    return path


def run_timed(tmp_path: Path, lines: list[Line], **opts: Any) -> dict[str, Any]:
    """Check the lines from a file as written by write_timed; results must be finite JSON."""
    res = check_file(write_timed(tmp_path / "history.jsonl", lines), CheckOptions(**opts))
    json.dumps(res, allow_nan=False)  # results.json must be finite JSON
    return res


def live(res: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = res["metrics"]["liveness"]
    return out


def run_edn_check(tmp_path: Path, lines: list[str], *opts: str) -> tuple[int, dict[str, Any]]:
    """`ktrial check --json` on a history.edn of `lines`, in-process: (exit code, results)."""
    h = tmp_path / "history.edn"
    h.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results.json"
    with pytest.raises(SystemExit) as e:
        main(["check", "--json", "--out", str(out), *opts, str(h)])
    code = e.value.code if isinstance(e.value.code, int) else 0
    assert code in (0, 1, 2), f"exit {code}: valid Jepsen EDN must be checkable"
    return code, json.loads(out.read_text())


# Jepsen's kafka_test.clj "abort doesn't roll back": six values of key x sent, one
# consumer read 0, then a failed (aborted) txn read 1 and 2 (history.edn lines).
SEND6 = [
    edn_op(0, 0, "invoke", "send", "[" + " ".join(f"[:send :x {i}]" for i in range(6)) + "]"),
    edn_op(1, 0, "ok", "send", "[" + " ".join(f"[:send :x [{i} {i}]]" for i in range(6)) + "]"),
    edn_op(2, 1, "invoke", "txn", "[[:poll]]"),
    edn_op(3, 1, "ok", "txn", "[[:poll {:x [[0 0]]}]]"),
    edn_op(4, 1, "invoke", "txn", "[[:poll]]"),
    edn_op(5, 1, "fail", "txn", "[[:poll {:x [[1 1] [2 2]]}]]", error=":abort"),
]
