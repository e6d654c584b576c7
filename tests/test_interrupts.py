"""interrupts.py: SIGINT and SIGTERM go to the handler inside the block only."""

from __future__ import annotations

import os
import signal
import threading

from ktrial.interrupts import handling


def test_signals_reach_the_handler_inside_the_block_and_the_old_ones_come_back() -> None:
    got: list[int] = []
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with handling(lambda signum, frame: got.append(signum)):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
    assert got == [signal.SIGINT, signal.SIGTERM]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_off_the_main_thread_the_handlers_are_left_alone() -> None:
    before = signal.getsignal(signal.SIGINT)
    seen: list[object] = []

    def body() -> None:
        with handling(lambda signum, frame: None):
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [before]
