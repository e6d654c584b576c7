"""The checker against a small independent model of read_committed Kafka with
transactional producers (KafkaModel, written here): its histories check clean, and an
aborted record returned or a committed record vanishing is found.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ktrial.checker import CheckOptions, check_file
from ktrial.tests.histlines import Line, examples, write


class KafkaModel:
    """Read_committed Kafka with transactional producers, our own small model.

    Each key is one partition: a list of entries ("rec", value, txn or None) and
    ("marker", None, txn). A txn's records are appended as it sends; its commit or
    abort appends a marker to each key it touched. Consumers read from their
    position up to the last stable offset (the first record of a still-open txn),
    skipping markers and aborted records. Ops: plain sends, polls, and txns of 1-4
    micro-ops whose sends and polls interleave with other processes' ops; a txn
    ends ok (commit), fail (abort) or info (commit or abort, possibly resolved only
    later). After fail/info the driver may rewind the consumer or not (`rewinds`: it
    always does, as ktrial's and Jepsen's drivers do); failed txns
    may be retried with the same values (in order). Txn sends may report a null
    offset (Queen). A final drain reads everything.

    Faults: `leak` (a consumer returns the first record of each
    fail txn: G1a) and `hide` (the first record of one committed txn is never
    returned: lost).
    """

    def __init__(
        self,
        rnd: random.Random,
        nkeys: int,
        nprocs: int,
        null_p: float,
        leak: bool = False,
        hide: bool = False,
        rewinds: bool = False,
    ) -> None:
        self.rnd = rnd
        self.rewinds = rewinds
        self.keys = [str(k) for k in range(1, nkeys + 1)]
        self.logs: dict[str, list[tuple[str, Any, int | None]]] = {k: [] for k in self.keys}
        self.status: dict[int, str] = {}
        self.lines: list[Line] = []
        self.pos: dict[Any, dict[str, int]] = {}
        self.next_value = 100
        self.next_txn = 0
        self.null_p = null_p
        self.nprocs = nprocs
        self.busy: dict[int, dict[str, Any]] = {}
        self.retry: dict[int, list[tuple[str, int]]] = {}
        self.later: list[tuple[int, bool, list[str]]] = []
        self.leak = leak
        self.hide = hide
        self.leaked: set[tuple[str, int]] = set()  # (key, offset) of aborted records returned
        self.hidden: set[tuple[str, int]] = set()  # (key, offset) of committed records dropped
        self.hidden_values: list[tuple[str, int, int, bool]] = []  # key, offset, value, known
        self.leaked_values: list[tuple[str, int]] = []

    def emit(self, process: Any, typ: str, f: str, value: Any, **extra: Any) -> None:
        n = len(self.lines)
        self.lines.append(
            {"index": n, "time": n * 1000, "process": process, "type": typ, "f": f, "value": value}
            | extra
        )

    def value(self) -> int:
        self.next_value += 1
        return self.next_value

    def lso(self, k: str) -> int:
        for o, (kind, _v, t) in enumerate(self.logs[k]):
            if kind == "rec" and t is not None and self.status[t] == "open":
                return o
        return len(self.logs[k])

    def read(self, proc: Any, limit: int) -> dict[str, list[list[int]]]:
        pos = self.pos.setdefault(proc, dict.fromkeys(self.keys, 0))
        out: dict[str, list[list[int]]] = {}
        for k in self.keys:
            end = self.lso(k)
            o = pos[k]
            recs: list[list[int]] = []
            while o < end and len(recs) < limit:
                kind, v, t = self.logs[k][o]
                visible = kind == "rec" and (t is None or self.status[t] == "commit")
                if (k, o) in self.hidden:
                    visible = False
                if (k, o) in self.leaked:
                    visible = True
                if visible:
                    recs.append([o, v])
                o += 1
            pos[k] = o
            if recs:
                out[k] = recs
        return out

    def append(self, k: str, v: int, t: int | None) -> int:
        self.logs[k].append(("rec", v, t))
        return len(self.logs[k]) - 1

    def start(self, proc: int) -> None:
        r = self.rnd.random()
        if r < 0.15:
            k = self.rnd.choice(self.keys)
            v = self.value()
            self.emit(proc, "invoke", "send", [["send", k, v]])
            o = self.append(k, v, None)
            self.emit(proc, "ok", "send", [["send", k, [o, v]]])
            return
        if r < 0.35:
            self.emit(proc, "invoke", "poll", [["poll"]])
            self.emit(proc, "ok", "poll", [["poll", self.read(proc, self.rnd.randint(1, 4))]])
            return
        plan: list[tuple[str, tuple[str, int] | None]] = []
        for _ in range(self.rnd.randint(1, 4)):
            if self.rnd.random() < 0.6:
                plan.append(("send", (self.rnd.choice(self.keys), self.value())))
            else:
                plan.append(("poll", None))
        self.rnd.shuffle(plan)
        plan = [("send", kv) for kv in self.retry.pop(proc, [])] + plan
        t = self.next_txn
        self.next_txn += 1
        self.status[t] = "open"
        invoke = [["send", x[0], x[1]] if x is not None else ["poll"] for _kind, x in plan]
        self.emit(proc, "invoke", "txn", invoke)
        self.busy[proc] = {
            "txn": t,
            "plan": plan,
            "done": [],
            "recs": [],
            "pos0": dict(self.pos.setdefault(proc, dict.fromkeys(self.keys, 0))),
        }

    def step(self, proc: int) -> None:
        b = self.busy[proc]
        if b["plan"]:
            _kind, x = b["plan"].pop(0)
            if x is not None:
                k, v = x
                o = self.append(k, v, b["txn"])
                known = self.rnd.random() >= self.null_p
                b["recs"].append((k, o, v, known))
                b["done"].append(["send", k, [o if known else None, v]])
            else:
                b["done"].append(["poll", self.read(proc, self.rnd.randint(1, 4))])
            return
        self.finish(proc)

    def resolve(self, t: int, commit: bool, keys: list[str]) -> None:
        self.status[t] = "commit" if commit else "abort"
        for k in keys:
            self.logs[k].append(("marker", None, t))

    def finish(self, proc: int) -> None:
        b = self.busy.pop(proc)
        t = b["txn"]
        r = self.rnd.random()
        outcome = "ok" if r < 0.6 else "fail" if r < 0.8 else "info"
        commit = outcome == "ok" or (outcome == "info" and self.rnd.random() < 0.5)
        keys = sorted({r[0] for r in b["recs"]})
        if b["recs"] and outcome == "fail" and self.leak:
            k, o, v, _known = b["recs"][0]
            self.leaked.add((k, o))
            self.leaked_values.append((k, v))
        if b["recs"] and outcome == "ok" and self.hide and not self.hidden:
            k, o, v, known = b["recs"][0]
            self.hidden.add((k, o))
            self.hidden_values.append((k, o, v, known))
        if outcome == "info" and self.rnd.random() < 0.5:
            self.later.append((t, commit, keys))  # the coordinator finishes it later
        else:
            self.resolve(t, commit, keys)
        truncated = False
        if outcome != "ok" and b["done"] and self.rnd.random() < 0.3:
            b["done"] = b["done"][: self.rnd.randrange(len(b["done"]))]  # partial completion
            truncated = True
        extra = {} if outcome == "ok" else {"error": "abort" if outcome == "fail" else "timeout"}
        self.emit(proc, outcome, "txn", b["done"], **extra)
        if outcome != "ok":
            # A driver that hides polls it made (truncated completion) must rewind.
            if truncated or self.rewinds or self.rnd.random() < 0.5:
                self.pos[proc] = b["pos0"]
            if outcome == "fail" and self.rnd.random() < 0.3:
                self.retry[proc] = [(r[0], r[2]) for r in b["recs"]]

    def run(self, steps: int) -> list[Line]:
        for _ in range(steps):
            if self.later and self.rnd.random() < 0.2:
                self.resolve(*self.later.pop(0))
            proc = self.rnd.randrange(self.nprocs)
            if proc in self.busy:
                self.step(proc)
            else:
                self.start(proc)
        while self.busy:
            self.step(next(iter(self.busy)))
        while self.later:
            self.resolve(*self.later.pop(0))
        drain = 1000
        self.emit(drain, "invoke", "poll", [["poll"]])
        self.emit(drain, "ok", "poll", [["poll", self.read(drain, 10**9)]])
        return self.lines


NOT_BAD = {"G0", "G1c", "G0-realtime", "G1c-realtime", "int-send-skip"}


def model_history(
    seed: int, rewinds: bool = False, **faults: bool
) -> tuple[KafkaModel, list[Line]]:
    rnd = random.Random(seed)
    m = KafkaModel(
        rnd,
        nkeys=rnd.randint(1, 3),
        nprocs=rnd.randint(2, 5),
        null_p=rnd.choice([0.0, 0.0, 0.5, 1.0]),
        rewinds=rewinds,
        **faults,
    )
    return m, m.run(rnd.randint(10, 80))


def check_lines(tmp: Path, lines: list[Line], consumer_rewinds: bool = False) -> dict[str, Any]:
    """Checked with the relaxed consumer-position rule unless the model's clients
    always rewind (model_history(rewinds=True)): Jepsen's rule."""
    tmp.mkdir(parents=True, exist_ok=True)
    opts = CheckOptions(max_examples=10_000, consumer_rewinds=consumer_rewinds)
    return check_file(write(tmp / "history.jsonl", lines), opts)


SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_model_histories_check_clean(tmp_path: Path, seed: int) -> None:
    """Clients that may not rewind, checked with the relaxed rule; clients that always
    rewind, with Jepsen's rule (odd seeds)."""
    rewinds = seed % 2 == 1
    _m, lines = model_history(seed, rewinds=rewinds)
    res = check_lines(tmp_path / str(seed), lines, consumer_rewinds=rewinds)
    assert res["bad_error_types"] == [], {
        t: [e.get("explanation") for e in a["examples"][:2]] for t, a in res["anomalies"].items()
    }
    assert set(res["error_types"]) <= NOT_BAD
    drained = any(r for ln in lines[-1:] for _p, r in ln["value"])
    assert res["valid"] is (True if drained else "unknown")


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_model_aborted_record_returned_is_g1a(tmp_path: Path, seed: int) -> None:
    m, lines = model_history(seed, leak=True)
    res = check_lines(tmp_path / str(seed), lines)
    drain = lines[-1]["value"][0][1]
    leaked_read = [
        (k, v)
        for k, v in m.leaked_values
        if any(rv == v for _o, rv in drain.get(k, []))
        # a retry sent the same value again: it may be credited to the retry, no G1a
        and sum(r[0] == "rec" and r[1] == v for r in m.logs[k]) == 1
    ]
    if not leaked_read:
        return
    assert "G1a" in res["bad_error_types"], res["error_types"]
    found = {(ex["key"], ex["value"]) for ex in examples(res, "G1a")}
    assert set(leaked_read) <= found


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_model_committed_record_vanishing_is_found(tmp_path: Path, seed: int) -> None:
    m, lines = model_history(seed, hide=True)
    if not m.hidden_values:
        return
    res = check_lines(tmp_path / str(seed), lines)
    ((k, o, v, known),) = m.hidden_values
    lost: set[tuple[str, Any]] = set()
    if "lost-write" in res["anomalies"]:
        lost = {(ex["key"], ex["value"]) for ex in examples(res, "lost-write")}
    unseen: set[tuple[str, Any]] = set()
    if "unseen" in res["anomalies"]:
        unseen = {(ex["key"], x) for ex in examples(res, "unseen") for x in ex["values"]}
    assert (k, v) in lost | unseen, res["error_types"]
    # with nothing read at all, unseen says the run never consumed: unknown, not invalid
    any_read = res["stats"]["reads"] > 0
    assert res["valid"] is (False if any_read else "unknown")
    # With its offset known, it is a lost-write iff the drain read a later record of k.
    later = any(ro > o for ro, _rv in lines[-1]["value"][0][1].get(k, []))
    if known:
        assert ((k, v) in lost) is later, (later, res["error_types"])
    else:
        assert (k, v) in lost or not later or (k, v) in unseen
