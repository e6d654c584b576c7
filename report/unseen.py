"""A live count of unseen values, read from history.jsonl as it grows.

The live view shows how many acknowledged values no consumer has read yet; a
number that keeps growing during a fault and does not fall after it heals is
the first sign of a loss. `UnseenCounter(path)` is a ready `unseen_fn` for
:class:`~ktrial.report.live.LiveView`: each call reads only the lines appended
since the last call (keeping a torn last line for the next), so it costs the
same as the ops it has not seen yet, and it keeps memory small by forgetting a
value as soon as it has been both acknowledged and read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

Pair = tuple[str, Any]  # (key as a string, value)


class UnseenCounter:
    """Callable: the number of values sent by ok ops that no ok op has read so far."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._pos = 0
        self._partial = b""
        self._unseen: set[Pair] = set()  # acknowledged, not read yet
        self._read_early: set[Pair] = set()  # read before their send was acknowledged

    def __call__(self) -> int:
        self.poll()
        return len(self._unseen)

    def poll(self) -> None:
        """Consume the lines appended since the last call."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._pos)
                chunk = fh.read()
        except OSError:
            return
        if not chunk:
            return
        self._pos += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended with a newline
        for line in lines:
            if line.strip():
                self._feed(line)

    def _feed(self, line: bytes) -> None:
        try:
            op = orjson.loads(line)
            if op.get("type") != "ok" or op.get("process") == "nemesis":
                return
            mops = op.get("value")
        except (orjson.JSONDecodeError, AttributeError):
            return
        if not isinstance(mops, list):
            return
        for m in mops:
            if not isinstance(m, list) or not m:
                continue
            if m[0] == "send" and len(m) == 3 and isinstance(m[2], list) and len(m[2]) == 2:
                pair = (str(m[1]), m[2][1])
                if pair in self._read_early:
                    self._read_early.discard(pair)
                else:
                    self._unseen.add(pair)
            elif m[0] == "poll" and len(m) == 2 and isinstance(m[1], dict):
                for k, recs in m[1].items():
                    for rec in recs if isinstance(recs, list) else ():
                        if isinstance(rec, list) and len(rec) == 2:
                            pair = (str(k), rec[1])
                            if pair in self._unseen:
                                self._unseen.discard(pair)
                            else:
                                self._read_early.add(pair)
