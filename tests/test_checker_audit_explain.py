"""Audit of the checker's explanations: is every claim an example makes true of the history?

For every example of every anomaly type in results.json, `fact_check` re-derives
each claim from the raw history lines (never from the checker's own indexes):

* every op index named (structured "ops", "writer", "reader", "max_reader",
  "cycle", "visible_at"/"lost_at" readers, "writers", "evidence_op" ...) is a line of
  the history, and each "op N (process P, T F, ...)" in the text has that
  process, type and f;
* "op N sent value V to key K ... at offset O" is true of op N's completion (or of
  its invoke, for sends a partial completion does not list), and the offset is the
  acknowledged one, or where some poll read that value;
* "op N read value V of key K at offset O (micro-op i)" is true of op N's polls;
* counts in the text equal the structured counts; skipped values lie strictly
  between the two offsets; keys exist; numbers in the text match the fields.

Histories come from testing/gen.py + every injector of testing/mutate.py, and
from hand-written ones for what mutate.py does not produce (G0/G1c and -realtime
cycles, int-send-skip, torn transactions, null offsets, eos-*, liveness).

Problems found are `xfail(strict=True)`: they pass once fixed.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from ktrial.checker import CheckOptions, check_file
from ktrial.cli import main
from ktrial.testing import mutate
from ktrial.testing.gen import GenParams, generate
from ktrial.tests.histlines import fail, info, inv, ok, op, pl, snd

Line = dict[str, Any]


# ================================================================ small history helpers


def number(lines: list[Line]) -> list[Line]:
    """Give hand-written lines an index and a time (1 ms apart) unless they have them."""
    return [{"index": i, "time": i * 1_000_000, **o} for i, o in enumerate(lines)]


def write(path: Path, lines: list[Line]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return path


def run_check(
    tmp_path: Path, lines: list[Line], meta: dict[str, Any] | None = None, **opts: Any
) -> dict[str, Any]:
    return check_file(write(tmp_path / "history.jsonl", lines), CheckOptions(**opts), meta)


# ================================================================ the fact checker


def _s(v: Any) -> str:
    """A value or key as the explanations print it (str() for ints, repr for strings)."""
    return str(v).strip("'\"")


class History:
    """The raw history, indexed by op `index`, and what each op sent and read."""

    def __init__(self, lines: list[Line]) -> None:
        self.lines = lines
        self.by_index: dict[int, Line] = {}
        self.pos: dict[int, int] = {}
        self.invoke_of: dict[int, Line | None] = {}
        pending: dict[Any, Line] = {}
        for n, d in enumerate(lines):
            self.by_index.setdefault(d["index"], d)
            self.pos.setdefault(d["index"], n)
            if d.get("process") == "nemesis":
                continue
            if d["type"] == "invoke":
                pending[d["process"]] = d
            else:
                iv = pending.pop(d["process"], None)
                self.invoke_of[d["index"]] = iv if iv is not None and iv["f"] == d["f"] else None
        # ground truth per key: offset -> values (all polls, all acknowledged sends)
        self.log: dict[str, dict[int, set[str]]] = {}
        self.keys: set[str] = set()
        # (sends count only of ops that must have committed: DESIGN.md section 3)
        done = [d for d in lines if d.get("type") != "invoke" and d.get("process") != "nemesis"]
        self.ok_reads: set[tuple[str, str]] = set()
        for d in done:
            for _i, k, o, v in self.polls(d["index"]):
                self.keys.add(k)
                if d["type"] == "ok":
                    self.ok_reads.add((k, v))
                if o is not None:
                    self.log.setdefault(k, {}).setdefault(o, set()).add(v)
        for d in done:
            sends = self.sends(d["index"])
            committed = d["type"] == "ok" or (
                d["type"] == "info" and any((k, v) in self.ok_reads for _i, k, _o, v in sends)
            )
            for _i, k, o, v in sends:
                self.keys.add(k)
                if o is not None and committed:
                    self.log.setdefault(k, {}).setdefault(o, set()).add(v)

    @staticmethod
    def _mops(d: Line | None) -> list[Any]:
        if d is None or d.get("f") not in ("send", "poll", "txn"):
            return []
        v = d.get("value")
        return v if isinstance(v, list) else []

    def sends(self, index: int) -> list[tuple[int, str, int | None, str]]:
        """(micro-op, key, offset, value) of op `index`'s sends (completion, else invoke)."""
        d = self.by_index.get(index)
        out: list[tuple[int, str, int | None, str]] = []
        for i, m in enumerate(self._mops(d)):
            if m[0] != "send":
                continue
            if isinstance(m[2], list):
                o = m[2][0]
                out.append((i, str(m[1]), None if o is None or o < 0 else o, _s(m[2][1])))
            else:
                out.append((i, str(m[1]), None, _s(m[2])))
        if d is not None and d["type"] != "invoke":
            seen = {(k, v) for _i, k, _o, v in out}
            for i, m in enumerate(self._mops(self.invoke_of.get(index))):
                if m[0] == "send" and (str(m[1]), _s(m[2])) not in seen:
                    out.append((i, str(m[1]), None, _s(m[2])))
        return out

    def polls(self, index: int) -> list[tuple[int, str, int | None, str]]:
        """(micro-op, key, offset, value) of every record op `index`'s polls returned."""
        out: list[tuple[int, str, int | None, str]] = []
        d = self.by_index.get(index)
        if d is None or d["type"] == "invoke":
            return out
        for i, m in enumerate(self._mops(d)):
            if m[0] == "poll" and len(m) > 1 and isinstance(m[1], dict):
                for k, recs in m[1].items():
                    for o, v in recs:
                        out.append((i, str(k), None if o is None or o < 0 else o, _s(v)))
        return out

    def ok_read(self, k: str, v: str) -> bool:
        return (k, v) in self.ok_reads

    def offsets_of(self, k: str, v: str) -> set[int]:
        return {o for o, vs in self.log.get(k, {}).items() if v in vs}

    def between(self, k: str, lo: int, hi: int) -> list[str]:
        """Values at offsets strictly between lo and hi of key k (log order)."""
        return [v for o in sorted(self.log.get(k, {})) if lo < o < hi for v in self.log[k][o]]


OP_RE = re.compile(
    r"(?<![-\w])op (\d+) \(process (\S+?), (ok|fail|info) (\w+), ([^()]*?)\)"
)  # op_name() of checker/explain.py


class Facts:
    """Collects the false claims of one results dict against one history."""

    def __init__(self, h: History, res: dict[str, Any]) -> None:
        self.h = h
        self.res = res
        self.problems: list[str] = []
        self.where = ""

    def bad(self, msg: str) -> None:
        self.problems.append(f"{self.where}: {msg}")

    # ---- generic claims
    def op_exists(self, ix: Any, what: str = "op") -> Line | None:
        if not isinstance(ix, int) or isinstance(ix, bool):
            self.bad(f"{what} {ix!r} is not an op index")
            return None
        d = self.h.by_index.get(ix)
        if d is None:
            self.bad(f"{what} {ix} is no line of the history")
        return d

    def op_names(self, text: str) -> None:
        """Each "op N (process P, T F, ...)" names a line with that process, type, f."""
        for m in OP_RE.finditer(text):
            n, proc, typ, f, when = int(m[1]), m[2], m[3], m[4], m[5]
            d = self.op_exists(n, "named op")
            if d is None:
                continue
            never = "never completed" in when
            want_type = "invoke" if never else typ
            if str(d["process"]) != proc or d["f"] != f or d["type"] != want_type:
                self.bad(
                    f"text says op {n} is (process {proc}, {typ} {f}) but the history has "
                    f"process {d['process']}, {d['type']} {d['f']}"
                )

    def sent(self, ix: int, k: str, v: str, off: str | None = None, mop: str | None = None) -> None:
        """Op ix sent v to k (at micro-op mop, landing at offset off)."""
        v = _s(v)
        hits = [s for s in self.h.sends(ix) if s[1] == k and s[3] == v]
        if not hits:
            self.bad(f"op {ix} did not send value {v} to key {k}")
            return
        if mop is not None and mop != "?" and not any(str(i) == mop for i, *_ in hits):
            self.bad(f"op {ix} sent {v} to key {k} at micro-op {[i for i, *_ in hits]}, not {mop}")
        if off is not None:
            acked = {o for _i, _k, o, _v in hits if o is not None}
            where = acked or self.h.offsets_of(k, v)
            if int(off) not in where:
                self.bad(f"value {v} of key {k} (sent by op {ix}) is at {sorted(where)}, not {off}")

    def read(self, ix: int, k: str, v: str, off: str | None = None, mop: str | None = None) -> None:
        v = _s(v)
        hits = [r for r in self.h.polls(ix) if r[1] == k and r[3] == v]
        if not hits:
            self.bad(f"op {ix} did not read value {v} of key {k}")
            return
        if off is not None and not any(str(o) == off for _i, _k, o, _v in hits):
            self.bad(f"op {ix} read {v} of key {k} at {[o for *_x, o, _v in hits]}, not {off}")
        if mop is not None and not any(str(i) == mop for i, *_ in hits):
            self.bad(f"op {ix} read {v} of key {k} in micro-op {[i for i, *_ in hits]}, not {mop}")

    def is_type(self, ix: int, *types: str) -> None:
        d = self.h.by_index.get(ix)
        if d is not None and d["type"] not in types:
            self.bad(f"op {ix} is {d['type']}, expected one of {types}")

    def key(self, k: Any) -> None:
        if str(k) not in self.h.keys:
            self.bad(f"key {k!r} is not a key of the history")

    def ops_field(self, ex: dict[str, Any], text: str) -> None:
        ops = ex.get("ops")
        if not isinstance(ops, list) or not ops:
            self.bad("no structured 'ops' list")
            return
        for ix in ops:
            self.op_exists(ix)
        named = {int(m[1]) for m in OP_RE.finditer(text)} | {
            int(x) for x in re.findall(r"(?<![-\w])op (\d+)\b", text)
        }
        for ix in named - set(ops):
            self.bad(f"text names op {ix}, missing from 'ops' {ops}")

    # ---- per type
    def check(self, max_examples: int | None = None) -> list[str]:
        for name, a in self.res.get("anomalies", {}).items():
            exs = a["examples"]
            self.where = name
            if max_examples is not None and len(exs) > max(max_examples, 0):
                self.bad(f"{len(exs)} examples kept, more than max_examples={max_examples}")
            if a["count"] < len(exs):
                self.bad(f"count {a['count']} < {len(exs)} examples")
            for n, ex in enumerate(exs):
                self.where = f"{name}[{n}]"
                text = ex.get("explanation")
                if not isinstance(text, str) or not text:
                    self.bad("no explanation")
                    continue
                self.op_names(text)
                meth = getattr(self, "t_" + re.sub(r"\W", "_", name), None)
                if meth is not None:
                    meth(ex, text)
                else:
                    self.bad(f"no fact-checker for type {name}")
        return self.problems

    def t_inconsistent_offsets(self, ex: dict[str, Any], text: str) -> None:
        k, o = str(ex["key"]), ex["offset"]
        self.key(k)
        self.ops_field(ex, text)
        vals = {_s(v) for v in ex["values"]}
        if vals != self.h.log.get(k, {}).get(o, set()):
            self.bad(f"values {vals} vs log {self.h.log.get(k, {}).get(o)} at {k}/{o}")
        m = re.match(r"Key (\S+) holds (\d+) different values at offset (\d+)", text)
        if not m or (m[1], int(m[2]), int(m[3])) != (k, len(vals), o):
            self.bad("headline disagrees with key/values/offset fields")
        for m in re.finditer(OP_RE.pattern + r" (sent|read) (\S+?)(?:;|\.$)", text):
            ix, verb, v = int(m[1]), m[6], m[7]
            (self.sent if verb == "sent" else self.read)(ix, k, v, str(o))

    def t_duplicate(self, ex: dict[str, Any], text: str) -> None:
        k, v = str(ex["key"]), _s(ex["value"])
        self.key(k)
        self.ops_field(ex, text)
        if set(ex["offsets"]) != self.h.offsets_of(k, v):
            self.bad(f"offsets {ex['offsets']} vs log {sorted(self.h.offsets_of(k, v))}")
        if ex.get("count") != len(ex["offsets"]):
            self.bad("count != len(offsets)")
        m = re.match(r"Value (\S+) of key (\S+) sits at (\d+) offsets \(([\d, ]+)\)", text)
        if not m or (m[1], m[2], int(m[3])) != (v, k, len(ex["offsets"])):
            self.bad("headline disagrees with fields")
        for m in re.finditer(OP_RE.pattern + r" (sent|read) it at offset (\d+)", text):
            (self.sent if m[6] == "sent" else self.read)(int(m[1]), k, v, m[7])
        m = re.search(r"It was sent by op (\d+)", text)
        if m:
            self.sent(int(m[1]), k, v)

    def t_lost_write(self, ex: dict[str, Any], text: str) -> None:
        k, v = str(ex["key"]), _s(ex["value"])
        self.key(k)
        self.ops_field(ex, text)
        w: Any = ex.get("writer")
        if self.op_exists(w, "writer") is None:
            return
        self.sent(w, k, v, None if ex.get("offset") is None else str(ex["offset"]))
        if w not in ex["ops"]:
            self.bad("writer not in ops")
        if self.h.ok_read(k, v):
            self.bad(f"value {v} of key {k} WAS read by an ok op")
        m = re.match(OP_RE.pattern + r" sent value (\S+) to key (\S+?)[, ]", text)
        if not m or (int(m[1]), _s(m[6]), m[7]) != (w, v, k):
            self.bad("headline disagrees with writer/value/key")
        m = re.search(r"which landed at offset (\d+)", text)
        if m and str(ex.get("offset")) != m[1]:
            self.bad(f"text offset {m[1]} != field {ex.get('offset')}")
        mr = ex.get("max_reader")
        if "max_read_offset" in ex:
            mv, mo = _s(ex["max_read_value"]), ex["max_read_offset"]
            if ex.get("offset") is not None and not mo > ex["offset"]:
                self.bad(f"max_read_offset {mo} not past offset {ex['offset']}")
            if mr is not None and self.op_exists(mr, "max_reader") is not None:
                self.read(mr, k, mv, str(mo))
                self.is_type(mr, "ok")
            m = re.search(r"read value (\S+) at the later offset (\d+)", text)
            if not m or (_s(m[1]), int(m[2])) != (mv, mo):
                self.bad("text's later read disagrees with max_read_value/offset")
        else:  # by real time
            m = re.search(r"was invoked to send value (\S+) to the same key", text)
            later = [int(x[1]) for x in OP_RE.finditer(text)]
            if not m or len(later) < 2:
                self.bad("real-time lost-write without the later writer")
                return
            lw = later[1]
            self.sent(lw, k, m[1])
            if not self.h.ok_read(k, m[1]):
                self.bad(f"'ok ops read {m[1]}' is false")
            if not self.h.pos[w] < self.h.pos.get(self._inv_index(lw), 10**12):
                self.bad(f"op {w} was not acknowledged before op {lw} was invoked")

    def _inv_index(self, ix: int) -> int:
        iv = self.h.invoke_of.get(ix)
        return ix if iv is None else int(iv["index"])

    def t_unseen(self, ex: dict[str, Any], text: str) -> None:
        k = str(ex["key"])
        self.key(k)
        self.ops_field(ex, text)
        vals = [_s(v) for v in ex["values"]]
        m = re.match(r"(\d+) value\(s\) sent to key (\S+) by ok ops", text)
        if not m or (int(m[1]), m[2]) != (ex["count"], k):
            self.bad("headline disagrees with count/key")
        if ex["count"] < len(vals):
            self.bad("count < values listed")
        for v, o in zip(vals, ex["offsets"], strict=True):
            if self.h.ok_read(k, v):
                self.bad(f"unseen value {v} of key {k} WAS read by an ok op")
            writers = [
                ix
                for ix in ex["ops"]
                if any(s[1] == k and s[3] == v for s in self.h.sends(ix))
                and self.h.by_index[ix]["type"] == "ok"
            ]
            if not writers:
                self.bad(f"no ok op in 'ops' sent unseen value {v}")
            elif o is not None and not any(
                s[2] == o for ix in writers for s in self.h.sends(ix) if s[1] == k and s[3] == v
            ):
                self.bad(f"value {v} was not acknowledged at offset {o}")
        m = re.search(
            OP_RE.pattern + r" sent (\S+), acknowledged at (?:offset (\d+)|an unknown)", text
        )
        if not m:
            self.bad("no 'for example' op")
        else:
            self.sent(int(m[1]), k, m[6], m[7])

    def t_G1a(self, ex: dict[str, Any], text: str) -> None:
        k, v = str(ex["key"]), _s(ex["value"])
        self.key(k)
        self.ops_field(ex, text)
        w: Any = ex.get("writer")
        r: Any = ex.get("reader")
        if self.op_exists(w, "writer") is None or self.op_exists(r, "reader") is None:
            return
        self.is_type(w, "fail")
        self.is_type(r, "ok")
        self.sent(w, k, v)
        m = re.search(r"at (?:offset (\d+)|an unknown offset) \(micro-op (\d+)\)", text)
        self.read(r, k, v, None if not m else m[1], None if not m else m[2])
        others = [
            ix
            for ix, d in self.h.by_index.items()
            if d["type"] in ("ok", "info")
            and any(s[1] == k and s[3] == v for s in self.h.sends(ix))
        ]
        if others:
            self.bad(f"'the only op that sent it' is false: ops {others} sent {v} too")

    def t_precommitted_read(self, ex: dict[str, Any], text: str) -> None:
        k, v = str(ex["key"]), _s(ex["value"])
        self.key(k)
        self.ops_field(ex, text)
        m = re.search(
            r"sent value (\S+) to key (\S+) \(micro-op (\d+)\) and its own poll \(micro-op "
            r"(\d+)\) returned that value at (?:offset (\d+)|an unknown offset)",
            text,
        )
        if not m or (m[1], m[2]) != (v, k):
            self.bad("text disagrees with key/value")
            return
        ix = ex["ops"][0]
        self.sent(ix, k, v, mop=m[3])
        self.read(ix, k, v, m[5], m[4])

    def _pair(self, ex: dict[str, Any], text: str, kind: str) -> None:
        """int-* types: op N read/sent V1 at O1 (micro-op i1) then V2 at O2 (micro-op i2)."""
        k = str(ex["key"])
        self.key(k)
        self.ops_field(ex, text)
        verb = "read" if kind == "poll" else "sent"
        m = re.search(
            rf"{verb} value (\S+) of key (\S+) at offset (\d+) \(micro-op (\d+)\) (?:and )?then "
            r"(\S+) at offset (\d+) \(micro-op (\d+)\)",
            text,
        )
        if not m:
            self.bad("text does not say which records")
            return
        v1, kk, o1, i1, v2, o2, i2 = m.groups()
        if kk != k or [v1, v2] != [_s(x) for x in ex["values"]]:
            self.bad("text disagrees with key/values")
        if [int(o1), int(o2)] != ex["offsets"]:
            self.bad(f"text offsets {[o1, o2]} != field {ex['offsets']}")
        ix = ex["ops"][0]
        claim = self.read if kind == "poll" else self.sent
        claim(ix, k, v1, o1, i1)
        claim(ix, k, v2, o2, i2)
        if "skipped" in ex:
            sk = [_s(x) for x in ex["skipped"]]
            between = self.h.between(k, int(o1), int(o2))
            if sorted(sk) != sorted(between)[: len(sk)] and not set(sk) <= set(between):
                self.bad(f"skipped {sk} are not the values between {o1} and {o2}: {between}")
            m2 = re.search(r"(\d+) record\(s\)", text)
            if not m2 or int(m2[1]) != len(between):
                self.bad(f"text count {m2 and m2[1]} != {len(between)} records between")
            if not int(o2) > int(o1):
                self.bad("a skip that does not go forward")
        elif not int(o2) <= int(o1):
            self.bad(f"nonmonotonic but {o2} > {o1}")

    def t_int_poll_skip(self, ex: dict[str, Any], text: str) -> None:
        self._pair(ex, text, "poll")

    def t_int_nonmonotonic_poll(self, ex: dict[str, Any], text: str) -> None:
        self._pair(ex, text, "poll")

    def t_int_send_skip(self, ex: dict[str, Any], text: str) -> None:
        self._pair(ex, text, "send")

    def t_int_nonmonotonic_send(self, ex: dict[str, Any], text: str) -> None:
        self._pair(ex, text, "send")

    def _consumer(self, ex: dict[str, Any], text: str) -> None:
        """poll-skip / nonmonotonic-poll, under either consumer-position rule: ops are
        [the last ok read, the read judged] and, when another op read the key in between
        (a failed or indeterminate one), that op third."""
        k = str(ex["key"])
        self.key(k)
        self.ops_field(ex, text)
        a, b, *mid = ex["ops"]
        if len(mid) > 1:
            self.bad(f"ops {ex['ops']}: at most one op in between is named")
        pv, v1 = (_s(x) for x in ex["values"])
        po, o1 = ex["offsets"]
        for ix in (a, b, *mid):
            d = self.h.by_index.get(ix)
            if d is not None and d["process"] != ex["process"]:
                self.bad(f"op {ix} is not process {ex['process']}'s")
        self.is_type(a, "ok")
        if not self.h.pos[a] < self.h.pos[b]:
            self.bad(f"op {a} is not before op {b}")
        last = [r for r in self.h.polls(a) if r[1] == k]
        if not last or (last[-1][3], last[-1][2]) != (pv, po):
            self.bad(f"op {a}'s last read of key {k} is {last[-1:]} not {pv}@{po}")
        first = [r for r in self.h.polls(b) if r[1] == k and r[2] is not None]
        if not first or (first[0][3], first[0][2]) != (v1, o1):
            self.bad(f"op {b}'s first read of key {k} is {first[:1]} not {v1}@{o1}")
        m = re.search(
            r"last read value (\S+) of key (\S+) at offset (\d+); its (next ok read|next read "
            r"of the key|later read of the key), "
            + OP_RE.pattern
            + r",(?: which (failed|ended indeterminate),)? began at value (\S+), offset (\d+) "
            r"\(micro-op (\d+)\)",
            text,
        )
        got = m and (_s(m[1]), m[2], int(m[3]), int(m[5]), _s(m[11]), int(m[12]))
        if not m or got != (pv, k, po, b, v1, o1):
            self.bad("text disagrees with fields")
            return
        if first and str(first[0][0]) != m[13]:
            self.bad(f"micro-op {m[13]} but op {b} read it at micro-op {first[0][0]}")
        which = m[4]
        if which == "next ok read":
            self.is_type(b, "ok")
        else:
            self.is_type(b, {"failed": "fail", "ended indeterminate": "info"}.get(m[10], "?"))

        def readers(types: tuple[str, ...]) -> list[int]:
            """Ops of the process of these types that read key k between a and b."""
            return [
                ix
                for ix, d in self.h.by_index.items()
                if d["type"] in types
                and d["process"] == ex["process"]
                and self.h.pos[a] < self.h.pos[ix] < self.h.pos[b]
                and any(r[1] == k for r in self.h.polls(ix))
            ]

        # "next ok read" / "later read": no ok op of the process read key k in between;
        # "next read of the key": no op at all
        for ix in readers(("ok",) if which != "next read of the key" else ("ok", "fail", "info")):
            self.bad(f"op {ix} of the same process read key {k} between ops {a} and {b}")
        lo_off = po
        m3 = re.search(r"\(In between, " + OP_RE.pattern + r" read up to offset (\d+) and", text)
        if m3:  # the relaxed rule: a failed or indeterminate op of the process read further
            f_ix, upto = int(m3[1]), int(m3[6])
            self.is_type(f_ix, "fail", "info", "invoke")
            offs = [o for _i, kk, o, _v in self.h.polls(f_ix) if kk == k and o is not None]
            if not offs or max(offs) != upto:
                self.bad(
                    f"op {f_ix} read key {k} up to offset {max(offs, default=None)}, not {upto}"
                )
            lo_off = upto
        m4 = re.search(
            r"In between, "
            + OP_RE.pattern
            + r" read offsets? (\d+)(?:-(\d+))? of key (\S+) and (failed|ended indeterminate); "
            r"such an op does not move the consumer[^.]*?(?:, so the next read had to begin at "
            r"offset (\d+), right after the last ok read)?\.",
            text,
        )
        if m4:  # Jepsen's rule: the op in between did not move the consumer
            f_ix = int(m4[1])
            if [f_ix] != mid:
                self.bad(f"op {f_ix} named in between, but 'ops' says {mid}")
            self.is_type(f_ix, {"failed": "fail", "ended indeterminate": "info"}[m4[9]])
            if not self.h.pos[a] < self.h.pos[f_ix] < self.h.pos[b]:
                self.bad(f"op {f_ix} is not between ops {a} and {b}")
            if f_ix not in readers(("fail", "info")) or readers(("fail", "info"))[-1:] != [f_ix]:
                self.bad(f"op {f_ix} is not the last unfinished read of key {k} before op {b}")
            offs = [o for _i, kk, o, _v in self.h.polls(f_ix) if kk == k and o is not None]
            lo, hi = int(m4[6]), int(m4[7] if m4[7] is not None else m4[6])
            if m4[8] != k or not offs or (offs[0], offs[-1]) != (lo, hi):
                self.bad(f"op {f_ix} read key {k} at offsets {offs}, not {lo}-{hi}")
            after_po = [o for o in sorted(self.h.log.get(k, {})) if o > po]
            if m4[10] is not None and (not after_po or after_po[0] != int(m4[10])):
                self.bad(
                    f"the record after offset {po} of key {k} is at {after_po[:1]}, not {m4[10]}"
                )
            m5 = re.search(
                r"began right after that op's, at offset (\d+): the client did not rewind", text
            )
            if m5:
                after_hi = [o for o in sorted(self.h.log.get(k, {})) if o > hi]
                if int(m5[1]) != o1 or not after_hi or after_hi[0] != o1:
                    self.bad(f"offset {o1} is not the record right after offset {hi} of key {k}")
        elif mid and not m3:
            self.bad(f"'ops' names op {mid} in between, the text does not explain it")
        if "skipped" in ex:
            sk = [_s(x) for x in ex["skipped"]]
            between = self.h.between(k, lo_off, o1)
            if not set(sk) <= set(between):
                self.bad(f"skipped {sk} not between offsets {po} and {o1}: {between}")
            m2 = re.search(
                r"jumping over (\d+) record\(s\) (?:it never read|no ok read of this consumer "
                r"returned): ([^.]*)",
                text,
            )
            if (
                not m2
                or int(m2[1]) != len(sk)
                or [_s(x) for x in m2[2].split(", ")][: len(sk)] != sk[:12]
            ):
                self.bad("text's skipped list disagrees with the field")
            if len(sk) != len(between):
                self.bad(
                    f"says {len(sk)} skipped records ({sk}) but {len(between)} lie between "
                    f"offsets {po} and {o1}: {between}"
                )

    def t_poll_skip(self, ex: dict[str, Any], text: str) -> None:
        self._consumer(ex, text)

    def t_nonmonotonic_poll(self, ex: dict[str, Any], text: str) -> None:
        self._consumer(ex, text)

    def t_nonmonotonic_send(self, ex: dict[str, Any], text: str) -> None:
        k = str(ex["key"])
        self.key(k)
        self.ops_field(ex, text)
        a, b = ex["ops"]
        v0, v1 = (_s(x) for x in ex["values"])
        o0, o1 = ex["offsets"]
        for ix in (a, b):
            d = self.h.by_index.get(ix)
            if d is not None and d["process"] != ex["process"]:
                self.bad(f"op {ix} is not process {ex['process']}'s")
        m = re.search(
            r"sent value (\S+) to key (\S+), which landed at offset (\d+); its next send to that "
            r"key, value (\S+) in "
            + OP_RE.pattern
            + r" \(micro-op (\d+)\), landed at offset (\d+)",
            text,
        )
        if not m or (m[1], m[2], int(m[3]), m[4], int(m[5]), int(m[11])) != (v0, k, o0, v1, b, o1):
            self.bad("text disagrees with fields")
            return
        self.sent(a, k, v0, str(o0))
        self.sent(b, k, v1, str(o1), m[10])
        for ix, d in self.h.by_index.items():  # "its next send to that key"
            if (
                d["type"] == "ok"
                and d["process"] == ex["process"]
                and self.h.pos[a] < self.h.pos[ix] < self.h.pos[b]
                and any(s[1] == k for s in self.h.sends(ix))
            ):
                self.bad(
                    f"op {ix} of process {ex['process']} sent to key {k} between ops {a} and {b}"
                )
        if not o1 <= o0:
            self.bad("not before it")

    def t_torn_transaction(self, ex: dict[str, Any], text: str) -> None:
        self.ops_field(ex, text)
        w = ex["ops"][0]
        d = self.op_exists(w, "txn")
        if d is None:
            return
        if d["f"] != "txn":
            self.bad(f"op {w} is not a txn")
        for k, v in ex["visible"]:
            self.sent(w, str(k), _s(v))
            if not self.h.ok_read(str(k), _s(v)):
                self.bad(f"'visible' {v} on key {k} was never read by an ok op")
        for k, v in ex["lost"]:
            self.sent(w, str(k), _s(v))
            if self.h.ok_read(str(k), _s(v)):
                self.bad(f"'lost' {v} on key {k} WAS read by an ok op")
        for a in ex.get("visible_at", []):
            if a["reader"] is not None:
                self.read(a["reader"], str(a["key"]), _s(a["value"]), str(a["offset"]))
                self.is_type(a["reader"], "ok")
        for b in ex.get("lost_at", []):
            if b.get("max_reader") is not None:
                self.read(
                    b["max_reader"],
                    str(b["key"]),
                    _s(b["max_read_value"]),
                    str(b["max_read_offset"]),
                )
        for m in re.finditer(r"(\S+) on key (\S+) at offset (\d+) \(read by op (\d+)\)", text):
            self.read(int(m[4]), m[2], m[1], m[3])
            self.sent(w, m[2], m[1], m[3])
        for m in re.finditer(
            r"(\S+) on key (\S+?)(?: at offset (\d+))?, though op (\d+) read value (\S+) at "
            r"offset (\d+) past it",
            text,
        ):
            self.sent(w, m[2], m[1], m[3])
            self.read(int(m[4]), m[2], m[5], m[6])
            if m[3] is not None and not int(m[6]) > int(m[3]):
                self.bad(f"{m[5]}@{m[6]} is not past {m[1]}@{m[3]}")

    def _cycle(self, ex: dict[str, Any], text: str) -> None:
        self.ops_field(ex, text)
        cyc = ex["cycle"]
        if ex["ops"] != cyc or len(ex["steps"]) != len(cyc) or len(ex["edges"]) != len(cyc):
            self.bad("cycle/ops/steps/edges lengths disagree")
        m = re.match(r"A (\S+) cycle of (\d+) ops", text)
        if not m or m[1] != ex["type"] or int(m[2]) != len(cyc):
            self.bad("headline disagrees with type/length")
        if ex["type"] != self.where.split("[")[0]:
            self.bad(f"example type {ex['type']} filed under {self.where}")
        step_re = {
            "wr": OP_RE.pattern
            + r" sent value (\S+) to key (\S+) \(micro-op (\S+?)\), and "
            + OP_RE.pattern
            + r" read it(?: at offset (\d+))? \(micro-op (\d+)\)",
            "ww": OP_RE.pattern + r" sent value (\S+) to key (\S+) \(micro-op (\d+), offset (\d+)"
            r"\), and the next committed record of key (\S+) is value (\S+) at offset (\d+), sent "
            r"by " + OP_RE.pattern + r" \(micro-op (\S+?)\)",
            "rt": OP_RE.pattern
            + r" completed at ([\d.]+) s, before "
            + OP_RE.pattern
            + r" was invoked at ([\d.]+) s",
        }
        for n, (step, kind) in enumerate(zip(ex["steps"], ex["edges"], strict=False)):
            u, v = cyc[n], cyc[(n + 1) % len(cyc)]
            m = re.match(step_re.get(kind, "$^"), step)
            if not m:
                self.bad(f"step {n + 1} ({kind}) not understood: {step}")
                continue
            if kind == "wr":
                a, val_, k, j, b, off, i = (int(m[1]), m[6], m[7], m[8], int(m[9]), m[14], m[15])
                self.sent(a, k, val_, mop=j)
                self.read(b, k, val_, off, i)
            elif kind == "ww":
                a, val_, k, i, off, k2, v2, o2, b, j = (
                    int(m[1]), m[6], m[7], m[8], m[9], m[10], m[11], m[12], int(m[13]), m[18],
                )  # fmt: skip
                self.sent(a, k, val_, off, i)
                self.sent(b, k, v2, o2, j)
                if k2 != k or not int(o2) > int(off):
                    self.bad(f"ww step {n + 1}: {v2}@{o2} is not a later record of key {k}")
                for o in sorted(self.h.log.get(k, {})):
                    if int(off) < o < int(o2):
                        for vv in self.h.log[k][o]:
                            if any(
                                self.h.by_index[ix]["type"] == "ok"
                                and any(s[1] == k and s[3] == vv for s in self.h.sends(ix))
                                for ix in self.h.by_index
                            ):
                                self.bad(f"ww step {n + 1}: committed {vv}@{o} lies between")
            else:
                a, b = int(m[1]), int(m[7])
                self.is_type(a, "ok")
                inv_b = self._inv_index(b)
                if not self.h.pos[a] < self.h.pos[inv_b]:
                    self.bad(f"rt step {n + 1}: op {a} did not complete before op {b} was invoked")
            if (a, b) != (u, v):
                self.bad(f"step {n + 1} links ops {a}->{b}, the cycle says {u}->{v}")
        m = re.search(r"That leads back to op (\d+)", text)
        if not m or int(m[1]) != cyc[0]:
            self.bad("does not lead back to the first op")
        if ex["type"].endswith("-realtime") and "rt" not in ex["edges"]:
            self.bad("a -realtime cycle whose steps show no realtime edge")
        if not ex["type"].endswith("-realtime") and "rt" in ex["edges"]:
            self.bad("a non-realtime cycle with a realtime step")
        if ex["type"].startswith("G1c") and "wr" not in ex["edges"]:
            self.bad("a G1c cycle without a wr step")
        if ex["type"].startswith("G0") and "wr" in ex["edges"]:
            self.bad("a G0 cycle with a wr step")

    t_G0 = t_G1c = t_G0_realtime = t_G1c_realtime = _cycle

    def t_cycle_search_timeout(self, ex: dict[str, Any], text: str) -> None:
        self.ops_field(ex, text)

    def t_eos_loss(self, ex: dict[str, Any], text: str) -> None:
        self.key(ex["key"])
        self.key(ex["output_key"])
        self.ops_field(ex, text)
        ev: Any = ex.get("evidence_op")
        if self.op_exists(ev, "evidence_op") is not None:
            k, v = str(ex["key"]), _s(ex["value"])
            self.is_type(ev, "ok")
            if not any(s[1] == k and s[3] == v for s in self.h.sends(ev)) and not any(
                r[1] == k and r[3] == v for r in self.h.polls(ev)
            ):
                self.bad(f"evidence op {ev} neither sent nor read {v} on key {k}")

    def t_eos_duplicate(self, ex: dict[str, Any], text: str) -> None:
        self.key(ex["key"])
        self.key(ex["output_key"])
        self.ops_field(ex, text)
        ok_ = str(ex["output_key"])
        m = re.search(r"was copied (\d+) times into output key (\S+):", text)
        if not m or int(m[1]) != len(ex["output_values"]) or m[2] != ok_:
            self.bad("count/output key in text disagree with output_values")
        for m in re.finditer(r"(\S+) at offset (\d+)", text.split(":", 1)[-1].split(";")[0]):
            v, o = m[1].lstrip(":").strip(","), int(m[2])
            if v not in self.h.log.get(ok_, {}).get(o, set()):
                self.bad(f"output key {ok_} does not hold {v} at offset {o}")
        for w in ex.get("writers", []):
            if self.op_exists(w, "writer") is not None and not any(
                s[1] == ok_ for s in self.h.sends(w)
            ):
                self.bad(f"writer op {w} sent nothing to output key {ok_}")

    def _liveness(self, ex: dict[str, Any], text: str) -> None:
        if "key" in ex:
            self.key(ex["key"])
        if ex.get("type") != self.where.split("[")[0]:
            self.bad(f"violation type {ex.get('type')} filed under {self.where}")

    t_starvation = t_stuck_partition = t_slow_recovery = t_memory_growth = _liveness


def fact_check(lines: list[Line], res: dict[str, Any], max_examples: int | None = 8) -> list[str]:
    return Facts(History(lines), res).check(max_examples)


def all_types(res: dict[str, Any]) -> set[str]:
    return set(res["anomalies"])


def poll_pair(p: Any, recs: dict[str, list[list[Any]]], typ: str = "ok") -> list[Line]:
    return [inv(p, "poll", [["poll"]]), op(p, typ, "poll", [pl(recs)])]


def send_pair(p: Any, k: Any, o: int | None, v: Any, typ: str = "ok") -> list[Line]:
    return [inv(p, "send", [["send", k, v]]), op(p, typ, "send", [snd(k, o, v)])]


def checked(
    tmp_path: Path, lines: list[Line], meta: dict[str, Any] | None = None, **opts: Any
) -> tuple[list[Line], dict[str, Any]]:
    lines = number(lines)
    res = run_check(tmp_path, lines, meta, **opts)
    return lines, res


# ================================================================ 1. generated faulty histories


def _params(seed: int) -> GenParams:
    return GenParams(
        seed=seed,
        ops=40 + 10 * seed,
        null_offset_p=0.2 if seed % 3 == 1 else 0.0,
        sub_via="subscribe" if seed % 4 == 3 else "assign",
        omit_invokes=seed % 5 == 2,
        int_keys=seed % 2 == 0,
    )


CASES = [
    pytest.param(name, seed, id=f"{name}-{seed}") for name in mutate.INJECTORS for seed in (0, 1, 3)
]


@pytest.mark.parametrize(("name", "seed"), CASES)
def test_every_claim_of_every_example_is_true_on_injected_faults(name: str, seed: int) -> None:
    g = generate(_params(seed))
    fault = mutate.INJECTORS[name](g, random.Random(seed))
    assert fault is not None
    from ktrial.checker import check
    from ktrial.testing.gen import to_ops

    res = check(to_ops(fault.ops), CheckOptions())
    assert fault.expect <= set(res["error_types"])
    # the explanation of an expected type names the fault's key and one of its values
    for t in fault.expect:
        text = " ".join(e.get("explanation", "") for e in res["anomalies"][t]["examples"])
        assert re.search(rf"\b[Kk]ey {re.escape(fault.key)}\b", text), (t, text)
        assert any(re.search(rf"\b{v}\b", text) for v in fault.values), (t, text)
    assert fact_check(fault.ops, res) == []


@pytest.mark.parametrize("seed", range(4))
def test_informational_examples_of_valid_generated_histories_are_true(seed: int) -> None:
    """Correct histories: G0, G1c(+ww), int-send-skip ... are reported as normal, truthfully."""
    params = GenParams(
        seed=100 + seed,
        ops=120,
        keys=2,
        null_offset_p=0.3 if seed == 1 else 0.0,
        sub_via="subscribe" if seed == 2 else "assign",
        truncate=seed == 3,
    )
    g = generate(params)
    from ktrial.checker import check
    from ktrial.testing.gen import to_ops

    res = check(to_ops(g.ops), CheckOptions())
    assert res["valid"] is True, res["bad_error_types"]
    assert fact_check(g.ops, res) == []


# ================================================================ 2. hand-written types


def test_g0_cycle_steps_are_true(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "txn", [["send", "x", 1], ["send", "y", 2]]),
            inv(2, "txn", [["send", "x", 3], ["send", "y", 4]]),
            ok(1, "txn", [snd("x", 0, 1), snd("y", 1, 2)]),
            ok(2, "txn", [snd("x", 1, 3), snd("y", 0, 4)]),
            *poll_pair(3, {"x": [[0, 1], [1, 3]], "y": [[0, 4], [1, 2]]}),
        ],
    )
    assert set(res["anomalies"]) == {"G0"} and res["valid"] is True
    ex = res["anomalies"]["G0"]["examples"][0]
    assert ex["edges"] == ["ww", "ww"] and sorted(ex["cycle"]) == [2, 3]
    assert fact_check(lines, res) == []


def test_g1c_with_ww_and_wr_steps_is_true_and_not_bad(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "txn", [["send", "x", 1], ["send", "y", 2]]),
            inv(2, "txn", [["poll"], ["send", "y", 4]]),
            ok(2, "txn", [pl({"x": [[0, 1]]}), snd("y", 0, 4)]),
            ok(1, "txn", [snd("x", 0, 1), snd("y", 1, 2)]),
            *poll_pair(3, {"x": [[0, 1]], "y": [[0, 4], [1, 2]]}),
        ],
    )
    assert set(res["anomalies"]) == {"G1c"} and res["valid"] is True
    assert sorted(res["anomalies"]["G1c"]["examples"][0]["edges"]) == ["wr", "ww"]
    assert fact_check(lines, res) == []
    lines, res = checked(tmp_path, lines, ww_deps=False)
    assert "G1c" not in res["anomalies"]  # without ww edges there is no such cycle
    assert fact_check(lines, res) == []


def test_g1c_realtime_read_from_the_future_is_explained_truthfully(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [*poll_pair(1, {"x": [[0, 5]]}), *send_pair(2, "x", 0, 5)],
    )
    assert set(res["bad_error_types"]) == {"G1c-realtime"}
    ex = res["anomalies"]["G1c-realtime"]["examples"][0]
    assert sorted(ex["edges"]) == ["rt", "wr"] and ex["wr_only"] is True
    assert fact_check(lines, res) == []


def test_g0_realtime_is_explained_truthfully(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            *send_pair(1, "x", 1, 1),
            *send_pair(2, "x", 0, 2),
            *poll_pair(3, {"x": [[0, 2], [1, 1]]}),
        ],
    )
    assert set(res["anomalies"]) == {"G0-realtime"} and res["valid"] is True
    assert fact_check(lines, res) == []


def test_int_send_skip_names_the_interleaved_record(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "send", [["send", "x", 1], ["send", "x", 2]]),
            *send_pair(2, "x", 1, 3),
            ok(1, "send", [snd("x", 0, 1), snd("x", 2, 2)]),
            *poll_pair(3, {"x": [[0, 1], [1, 3], [2, 2]]}),
        ],
    )
    assert "int-send-skip" in res["anomalies"] and res["valid"] is True
    assert res["anomalies"]["int-send-skip"]["examples"][0]["skipped"] == [3]
    assert fact_check(lines, res) == []


def test_lost_write_by_real_time_with_null_offsets_is_true(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "txn", [["send", "x", 1]]),
            ok(1, "txn", [snd("x", None, 1)]),
            inv(2, "txn", [["send", "x", 2]]),
            ok(2, "txn", [snd("x", -1, 2)]),
            *poll_pair(3, {"x": [[5, 2]]}),
        ],
    )
    assert set(res["bad_error_types"]) == {"lost-write", "unseen"}
    assert res["anomalies"]["lost-write"]["examples"][0]["ops"] == [1, 3]
    assert fact_check(lines, res) == []


def test_lost_write_of_an_info_writer_and_torn_transaction_are_true(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "txn", [["send", "x", 1], ["send", "y", 2]]),
            info(1, "txn", [snd("x", 0, 1), snd("y", 0, 2)], error="commit timed out"),
            *send_pair(2, "y", 1, 3),
            *poll_pair(3, {"x": [[0, 1]], "y": [[1, 3]]}),
        ],
    )
    assert set(res["bad_error_types"]) == {"lost-write", "torn-transaction"}
    lw = res["anomalies"]["lost-write"]["examples"][0]
    assert "must have committed" in lw["explanation"]
    assert fact_check(lines, res) == []


def test_g1a_int_nonmonotonic_send_and_precommitted_read_are_true(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "send", [["send", "x", 1]]),
            fail(1, "send", [["send", "x", 1]], error="refused"),
            inv(2, "send", [["send", "y", 5], ["send", "y", 6]]),
            ok(2, "send", [snd("y", 1, 5), snd("y", 0, 6)]),
            inv(3, "txn", [["send", "z", 7], ["poll"]]),
            ok(3, "txn", [snd("z", 0, 7), pl({"z": [[0, 7]]})]),
            *poll_pair(4, {"x": [[0, 1]], "y": [[0, 6], [1, 5]], "z": [[0, 7]]}),
        ],
    )
    assert {"G1a", "int-nonmonotonic-send", "precommitted-read"} <= set(res["bad_error_types"])
    assert fact_check(lines, res) == []


def test_consumer_order_examples_are_true(tmp_path: Path) -> None:
    writes = [inv(9, "send", [["send", "x", v] for v in range(10, 15)])]
    writes.append(ok(9, "send", [snd("x", i, 10 + i) for i in range(5)]))
    lines, res = checked(
        tmp_path,
        [
            ok(1, "assign", ["x"]),
            *writes,
            *poll_pair(1, {"x": [[0, 10], [1, 11]]}),
            *poll_pair(1, {"x": [[3, 13]]}),  # skips 12
            *poll_pair(1, {"x": [[2, 12]]}),  # goes back
            *poll_pair(2, {"x": [[i, 10 + i] for i in range(5)]}),
        ],
    )
    assert {"poll-skip", "nonmonotonic-poll"} <= set(res["bad_error_types"])
    assert res["anomalies"]["poll-skip"]["examples"][0]["skipped"] == [12]
    assert fact_check(lines, res) == []


def test_inconsistent_offsets_and_duplicate_name_who_saw_what(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            *send_pair(1, "x", 0, 1),
            *send_pair(1, "x", 1, 2),
            *poll_pair(2, {"x": [[0, 1], [1, 2]]}),
            *poll_pair(3, {"x": [[0, 9], [2, 2]]}),
        ],
    )
    assert {"inconsistent-offsets", "duplicate"} <= set(res["bad_error_types"])
    ex = res["anomalies"]["inconsistent-offsets"]["examples"][0]
    assert ex["values"] == [1, 9] and ex["ops"] == [1, 5, 7]
    assert fact_check(lines, res) == []


def test_string_values_and_keys_are_quoted_consistently(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [*send_pair(1, "k", 0, "a"), *send_pair(1, "k", 1, "b"), *poll_pair(2, {"k": [[1, "b"]]})],
    )
    ex = res["anomalies"]["lost-write"]["examples"][0]
    assert "value 'a' to key k" in ex["explanation"]
    assert fact_check(lines, res) == []


def test_never_completed_writer_is_named_as_such(tmp_path: Path) -> None:
    lines, res = checked(
        tmp_path,
        [
            inv(1, "send", [["send", "x", 1], ["send", "x", 2]]),
            *send_pair(2, "x", 3, 3),
            *poll_pair(3, {"x": [[0, 1], [3, 3]]}),
            *poll_pair(4, {"x": [[0, 1], [1, 2]]}, typ="fail"),
        ],
    )
    # 2 (at offset 1, seen only by a failed poll) was committed with 1: lost
    ex = res["anomalies"]["lost-write"]["examples"][0]
    assert ex["writer"] == 0 and "never completed" in ex["explanation"]
    assert fact_check(lines, res) == []


def test_the_fact_checker_catches_false_claims(tmp_path: Path) -> None:
    """The fact checker itself can fail: falsified explanations and fields are caught."""
    lines, res = checked(
        tmp_path,
        [*send_pair(1, "x", 0, 1), *send_pair(1, "x", 1, 2), *poll_pair(2, {"x": [[1, 2]]})],
    )
    assert fact_check(lines, res) == []
    ex = res["anomalies"]["lost-write"]["examples"][0]
    good = ex["explanation"]
    for bad_text in (
        good.replace("landed at offset 0", "landed at offset 7"),
        good.replace("op 1 (process 1, ok send", "op 1 (process 2, ok send"),
        good.replace("read value 2 at the later offset 1", "read value 2 at the later offset 3"),
        good.replace("op 5 (process 2", "op 3 (process 1"),
    ):
        assert bad_text != good
        ex["explanation"] = bad_text
        assert fact_check(lines, res), bad_text
    ex["explanation"] = good
    ex["writer"] = 3
    assert fact_check(lines, res)


# ================================================================ 3. defects found


def test_nonmonotonic_send_compares_each_send_with_the_previous_one(tmp_path: Path) -> None:
    # process 1 sends 1 (lands at 5), then 2 (lands at 3: back), then 3 (lands at 4: forward)
    lines, res = checked(
        tmp_path,
        [
            *send_pair(1, "x", 5, 1),
            *send_pair(1, "x", 3, 2),
            *send_pair(1, "x", 4, 3),
            *poll_pair(2, {"x": [[3, 2], [4, 3], [5, 1]]}),
        ],
    )
    assert res["anomalies"]["nonmonotonic-send"]["count"] == 1
    assert fact_check(lines, res) == []


def _skip_after_failed_polls(tmp_path: Path) -> tuple[list[Line], dict[str, Any]]:
    writes = [inv(9, "send", [["send", "x", v] for v in range(10, 15)])]
    writes.append(ok(9, "send", [snd("x", i, 10 + i) for i in range(5)]))
    return checked(
        tmp_path,
        [
            ok(1, "assign", ["x"]),
            *writes,
            *poll_pair(1, {"x": [[0, 10]]}),
            *poll_pair(1, {"x": [[1, 11], [2, 12]]}, typ="fail"),  # read up to offset 2
            *poll_pair(1, {"x": [[1, 11]]}, typ="info"),  # read up to offset 1 only
            *poll_pair(1, {"x": [[4, 14]]}),  # skips 13 (at offset 3)
            *poll_pair(2, {"x": [[i, 10 + i] for i in range(5)]}),
        ],
        consumer_rewinds=False,  # relaxed (Jepsen's rule: tests/checker/test_order_positions.py)
    )


def test_poll_skip_note_names_the_failed_op_that_read_furthest(tmp_path: Path) -> None:
    lines, res = _skip_after_failed_polls(tmp_path)
    ex = res["anomalies"]["poll-skip"]["examples"][0]
    assert ex["skipped"] == [13]
    text = ex["explanation"]
    m = re.search(r"In between, op (\d+) .* read up to offset (\d+)", text)
    assert m is not None, text
    assert [o for _i, k, o, _v in History(lines).polls(int(m[1])) if k == "x"][-1] == int(m[2])


def test_poll_skip_ops_list_every_op_its_explanation_names(tmp_path: Path) -> None:
    _lines, res = _skip_after_failed_polls(tmp_path)
    ex = res["anomalies"]["poll-skip"]["examples"][0]
    named = {int(x) for x in re.findall(r"(?<![-\w])op (\d+)\b", ex["explanation"])}
    assert named <= set(ex["ops"])


def test_ww_step_names_the_acknowledged_offset_of_a_duplicated_value(tmp_path: Path) -> None:
    # op A's 1 was acknowledged at offset 0; a retry's copy also sits at offset 2
    _lines, res = checked(
        tmp_path,
        [
            *send_pair(1, "x", 0, 1),
            *send_pair(2, "x", 1, 2),
            *poll_pair(3, {"x": [[0, 1], [1, 2], [2, 1]]}),
        ],
    )
    assert "duplicate" in res["bad_error_types"]
    steps = [
        s for n in res["anomalies"] if n.startswith("G") for e in res["anomalies"][n]["examples"]
        for s in e["steps"]
    ]  # fmt: skip
    claims = [
        s for s in steps if re.search(r"op 1 \(.*sent value 1 to key x \(micro-op 0, offset", s)
    ]
    for s in claims:
        assert "offset 0)" in s, s
    # the copy at offset 2 is no version of op 1: no write cycle comes from it
    assert not {n for n in res["anomalies"] if n.startswith("G0")}, res["error_types"]


COPY_META = {"copy": {"route": {"0": 2, "1": 3}, "value_modulus": 1000}}


def _eos_history() -> list[Line]:
    return [
        inv(1, "send", [["send", 0, 10], ["send", 0, 11]]),
        ok(1, "send", [snd(0, 0, 10), snd(0, 1, 11)]),
        inv(2, "txn", [["poll"]]),
        ok(2, "txn", [pl({"0": [[0, 10]]}), snd(2, 0, 1010)]),
        inv(3, "txn", [["poll"]]),
        ok(3, "txn", [pl({"0": [[0, 10]]}), snd(2, 2, 2010)]),
        *poll_pair(4, {"2": [[0, 1010], [2, 2010]]}),
    ]


def test_eos_claims_are_true(tmp_path: Path) -> None:
    lines, res = checked(tmp_path, _eos_history(), COPY_META)
    assert {"eos-duplicate", "eos-loss"} <= set(res["bad_error_types"])
    dup = res["anomalies"]["eos-duplicate"]["examples"][0]
    assert (dup["key"], dup["value"], dup["output_key"], dup["writers"]) == ("0", 10, "2", [3, 5])
    assert dup["offsets"] == [0, 2] and dup["input_offsets"] == [0]
    loss = res["anomalies"]["eos-loss"]["examples"][0]
    assert (loss["key"], loss["value"], loss["offset"], loss["evidence_op"]) == ("0", 11, 1, 1)
    problems = [p for p in fact_check(lines, res) if "'ops'" not in p]
    assert problems == []


def test_eos_examples_carry_ops_like_every_other_type(tmp_path: Path) -> None:
    _lines, res = checked(tmp_path, _eos_history(), COPY_META)
    for name in ("eos-duplicate", "eos-loss"):
        for ex in res["anomalies"][name]["examples"]:
            assert isinstance(ex.get("ops"), list) and ex["ops"], (name, ex)


S = 1_000_000_000


def _liveness_history() -> list[Line]:
    lines: list[Line] = [
        {"process": "nemesis", "type": "info", "f": "start-partition", "value": "x", "time": 0},
        {"process": 1, "type": "invoke", "f": "send", "value": [["send", "x", 1]], "time": S},
        {"process": 1, "type": "ok", "f": "send", "value": [snd("x", 0, 1)], "time": 2 * S},
        {"process": "nemesis", "type": "info", "f": "stop-partition", "value": "x", "time": 3 * S},
        {"process": 1, "type": "invoke", "f": "send", "value": [["send", "x", 2]], "time": 4 * S},
        {"process": 1, "type": "fail", "f": "send", "value": [["send", "x", 2]], "time": 5 * S},
        {"process": 1, "type": "invoke", "f": "send", "value": [["send", "x", 3]], "time": 100 * S},
        {"process": 1, "type": "ok", "f": "send", "value": [snd("x", 1, 3)], "time": 101 * S},
        {"process": 2, "type": "invoke", "f": "poll", "value": [["poll"]], "time": 102 * S},
        {"process": 2, "type": "ok", "f": "poll", "value": [pl({"x": [[0, 1], [1, 3]]})],
         "time": 103 * S},
    ]  # fmt: skip
    for t, rss in ((1, 100), (50, 200), (103, 400)):
        lines.append(
            {"process": "nemesis", "type": "info", "f": "node-stats", "time": t * S,
             "value": {"n1": {"rss_bytes": rss << 20, "pid": 1}}}
        )  # fmt: skip
    lines.sort(key=lambda d: d["time"])
    return [{"index": i, **d} for i, d in enumerate(lines)]


def test_liveness_violations_as_anomalies_are_true(tmp_path: Path) -> None:
    lines = _liveness_history()
    res = run_check(tmp_path, lines, liveness_bad=True)
    assert set(res["bad_error_types"]) == {"memory-growth", "slow-recovery", "stuck-partition"}
    st = res["anomalies"]["stuck-partition"]["examples"][0]
    assert (st["key"], st["value"], st["offset"], st["acked_s"], st["read_s"]) == (
        "x",
        1,
        0,
        2.0,
        103.0,
    )
    assert "value 1 at offset 0" in st["explanation"] and "t=103.0 s" in st["explanation"]
    sr = res["anomalies"]["slow-recovery"]["examples"][0]
    assert lines[sr["index"]]["f"] == "stop-partition" and sr["send_s"] == 97.0
    assert "op 4" in sr["explanation"] and "97.0 s" in sr["explanation"]
    mg = res["anomalies"]["memory-growth"]["examples"][0]
    assert "from 100 MiB to 400 MiB" in mg["explanation"]
    assert fact_check(lines, res) == []


def test_stuck_partition_names_the_writer_and_reader(tmp_path: Path) -> None:
    lines = _liveness_history()
    res = run_check(tmp_path, lines, liveness_bad=True)
    st = res["anomalies"]["stuck-partition"]["examples"][0]
    # ops are named by their completion's index, as everywhere (the send's ok is line 3)
    assert st.get("ops") == [3, 11]
    assert "written by op 3, first read by op 11" in st["explanation"]


# ================================================================ 4. the summary and the caps


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the real entry point in process: (exit code, stdout)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    code = e.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().out


def test_human_summary_prints_each_type_with_count_and_an_explained_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = number(
        [
            *send_pair(1, "x", 0, 1),
            *send_pair(1, "x", 1, 2),
            *send_pair(1, "x", 2, 3),
            *poll_pair(2, {"x": [[0, 1], [2, 3]]}),
            *poll_pair(3, {"x": [[0, 9]]}),
            *poll_pair(4, {"y": [[0, 5]]}),
            *send_pair(5, "y", 0, 5),
        ]
    )
    write(tmp_path / "history.jsonl", lines)
    code, out = cli(["check", str(tmp_path)], capsys)
    assert code == 1, out
    res = json.loads((tmp_path / "results.json").read_text())
    assert {"lost-write", "inconsistent-offsets", "int-poll-skip", "G1c-realtime"} <= set(
        res["error_types"]
    )
    for name in res["error_types"]:
        a = res["anomalies"][name]
        tag = "BAD " if name in res["bad_error_types"] else "ok  "
        assert f"  {tag}{name}: {a['count']:,}\n" in out, name
        assert "e.g. " + a["examples"][0]["explanation"] in out, name
    assert fact_check(lines, res) == []


def test_examples_are_capped_and_counts_are_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 30
    lines = number(
        [
            inv(1, "send", [["send", "x", v] for v in range(n + 1)]),
            ok(1, "send", [snd("x", v, v) for v in range(n + 1)]),
            *poll_pair(2, {"x": [[n, n]]}),
        ]
    )
    for cap in (0, 3, 8):
        res = run_check(tmp_path, lines, max_examples=cap)
        a = res["anomalies"]["lost-write"]
        assert a["count"] == n and len(a["examples"]) == cap
        assert res["anomalies"]["unseen"]["count"] == n
        assert fact_check(lines, res, cap) == []
    write(tmp_path / "history.jsonl", lines)
    code, out = cli(["check", str(tmp_path), "--json", "--max-examples", "2"], capsys)
    res = json.loads((tmp_path / "results.json").read_text())
    assert code == 1 and json.loads(out) == res
    assert all(len(a["examples"]) <= 2 for a in res["anomalies"].values())
    assert res["anomalies"]["lost-write"]["count"] == n
