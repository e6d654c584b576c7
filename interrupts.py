"""Ctrl-C and SIGTERM handed to one handler for the length of a block.

Signal handlers can only be set from the main thread; elsewhere (a test calling a
trial from a worker thread) the block runs with the process's handlers as they are.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

Handler = Callable[[int, FrameType | None], None]


@contextlib.contextmanager
def handling(handler: Handler) -> Iterator[None]:
    """Route SIGINT and SIGTERM to `handler` inside the block; restore the old ones after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, handler)
    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        signal.signal(signal.SIGTERM, old_term)
