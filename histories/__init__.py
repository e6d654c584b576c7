"""Histories: the op model, the JSONL format and the durable run store.

This package imports nothing else of ktrial.
"""

from .jsonl import HistoryError, HistoryWriter, TornLineWarning, iter_history, read_history
from .model import DATA_FS, NEMESIS, OP_TYPES, FormatError, Mop, Op, Poll, Send, norm_key
from .recorder import Recorder

__all__ = [
    "DATA_FS",
    "NEMESIS",
    "OP_TYPES",
    "FormatError",
    "HistoryError",
    "HistoryWriter",
    "Mop",
    "Op",
    "Poll",
    "Recorder",
    "Send",
    "TornLineWarning",
    "iter_history",
    "norm_key",
    "read_history",
]
