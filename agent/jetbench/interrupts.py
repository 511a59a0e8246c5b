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
from types import FrameType
from typing import Iterator, List, Optional


@contextmanager
def held_sigint() -> Iterator[None]:
    """Hold SIGINT for the duration of the block, then deliver it (KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread handles signals; nothing to hold here
        return
    caught: List[int] = []

    def hold(signum: int, _frame: Optional[FrameType]) -> None:
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
    `check()`, called at safe points of the measurement loop (the progress callback, and
    measure's phase boundaries through `checkpoint()`), raises it again. While the latch is
    entered it is the process's active one: `Hold` and `interrupt_main` use it. Only in the
    main thread; elsewhere (a test runner's worker) it does nothing."""

    def __init__(self) -> None:
        self.received = False
        self.cause: Optional[str] = None  # "SIGINT", "SIGTERM", or why the board was taken back
        self._previous: dict = {}
        self._held = 0  # Hold depth: while > 0, an interrupt is recorded, not raised
        self._outer: Optional[InterruptLatch] = None
        self._entered = False

    def __enter__(self) -> InterruptLatch:
        global _active
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                current = signal.getsignal(sig)
                if sig == signal.SIGINT and current == signal.SIG_IGN:
                    continue  # started in the background with Ctrl-C ignored: keep it so
                self._previous[sig] = signal.signal(sig, self._on_signal)
            self._outer, _active, self._entered = _active, self, True
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        if self._entered:
            _active, self._outer, self._entered = self._outer, None, False

    def note(self, cause: str) -> None:
        """Record an interrupt (the first cause is kept)."""
        if not self.received:
            self.cause = cause
        self.received = True

    def _on_signal(self, signum: int, _frame: Optional[FrameType]) -> None:
        self.note(signal.Signals(signum).name)
        if not self._held:
            raise KeyboardInterrupt

    def check(self) -> None:
        """Raise the interrupt again if one was received (and so was swallowed on its way);
        not while it is held."""
        if self.received and not self._held:
            raise KeyboardInterrupt


_active: Optional[InterruptLatch] = None  # the latch entered last in the main thread


def checkpoint() -> None:
    """A safe point: raise an interrupt the active latch received (nothing without one)."""
    if _active is not None and threading.current_thread() is threading.main_thread():
        _active.check()


def pending() -> Optional[str]:
    """The cause of an interrupt received and not acted upon yet (held), or None."""
    latch = _active
    return latch.cause if latch is not None and latch.received else None


class Hold:
    """Interrupts held from `start()` to `end()`: recorded, not raised, so a result finishes
    and is written whole, or the clocks are put back whole; `end()` then raises the held one
    (KeyboardInterrupt). With no active latch (a library caller), one is entered for the hold
    (an ignored SIGINT stays ignored). Only in the main thread."""

    def __init__(self, deliver: bool = True) -> None:
        self._latch: Optional[InterruptLatch] = None
        self._own = False
        self._deliver = deliver  # False: the caller raises the interrupt itself

    @property
    def active(self) -> bool:
        return self._latch is not None

    def start(self) -> None:
        if self._latch is not None or threading.current_thread() is not threading.main_thread():
            return
        latch = _active
        self._own = latch is None
        if latch is None:
            latch = InterruptLatch().__enter__()
        latch._held += 1
        self._latch = latch

    def end(self, deliver: bool = True) -> None:
        """Stop holding; raise a held interrupt when `deliver` (not while an outer hold lasts:
        that one raises it)."""
        latch, self._latch = self._latch, None
        if latch is None:
            return
        latch._held -= 1
        if self._own:
            latch.__exit__(None, None, None)
        if deliver and latch.received and not latch._held:
            raise KeyboardInterrupt

    def __enter__(self) -> Hold:
        self.start()
        return self

    def __exit__(self, exc_type: Optional[type], *exc: object) -> None:
        # an exception on its way goes on as it is
        self.end(deliver=self._deliver and exc_type is None)


def interrupt_main(cause: str) -> None:
    """From another thread (the daemon taking its board back): interrupt the main thread as
    SIGTERM would, whatever SIGINT's disposition (`_thread.interrupt_main` does nothing when
    SIGINT is ignored, as in a background job). Recorded first, so even a swallowed
    KeyboardInterrupt is raised again at the next checkpoint."""
    import _thread

    latch = _active
    if latch is not None:
        latch.note(cause)
        if signal.getsignal(signal.SIGTERM) == latch._on_signal:
            # at the main thread itself: a blocking call there is interrupted at once
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
        return
    if callable(signal.getsignal(signal.SIGINT)):
        _thread.interrupt_main()
