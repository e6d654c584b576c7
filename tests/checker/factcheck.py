"""A fact checker of the checker's explanations: re-derives, from the raw history, every
claim an example makes (ops, processes, keys, values, offsets, outcomes, steps of a
cycle) and lists the false ones. Used by test_explain.py and test_order_positions.py.
"""

from __future__ import annotations

import re
from typing import Any

from ktrial.tests.histlines import Line


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
        # (sends count only of ops that must have committed: docs/anomalies.md)
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
