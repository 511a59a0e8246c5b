"""Ctrl-C that lands while native code initialises is held until it has finished.

A KeyboardInterrupt raised inside a C extension's import (torch runs Python from C++ while
`import torch` loads it) can be swallowed ("Exception ignored"), turned into another error, or
make CPython end the process *by SIGINT* after a clean `sys.exit(130)` (it remembers an
interrupt that escaped code run through `PyRun_String` and re-kills itself at exit). So the
interrupt is recorded during such a section and raised as soon as it ends, in plain Python code:
the usual path then restores the clocks and exits 130, every time.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, List


@contextmanager
def held_sigint() -> Iterator[None]:
    """Hold SIGINT for the duration of the block, then deliver it (KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread handles signals; nothing to hold here
        return
    caught: List[int] = []

    def hold(signum: int, _frame: Any) -> None:
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        if callable(previous):
            previous(signal.SIGINT, None)  # default_int_handler raises KeyboardInterrupt
        elif previous == signal.SIG_DFL:
            raise KeyboardInterrupt


class InterruptLatch:
    """SIGINT (and, as for systemd or a CI timeout, SIGTERM) become KeyboardInterrupt, and are
    remembered: a library that swallows the exception (a finaliser running while it lands
    reports "Exception ignored" and carries on) would let a 60 s measurement run to its end.
    `check()`, called at safe points of the measurement loop (the progress callback), raises
    it again. Only in the main thread; elsewhere (a test runner's worker) it does nothing."""

    def __init__(self) -> None:
        self.received = False
        self._previous: dict = {}

    def __enter__(self) -> InterruptLatch:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                current = signal.getsignal(sig)
                if sig == signal.SIGINT and current == signal.SIG_IGN:
                    continue  # started in the background with Ctrl-C ignored: keep it so
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.received = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise the interrupt again if one was received (and so was swallowed on its way)."""
        if self.received:
            raise KeyboardInterrupt
