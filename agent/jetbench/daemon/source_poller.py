"""`daemon --tune`'s rate source, read off the daemon's loop.

A thread reads the source (a Prometheus page, a log, a journal) every `period_s`; the loop
takes the latest reading without waiting, so the drift check, the control socket and signals
never wait on a workload's endpoint. A read that fails, answers wrong, or is still under way
past its deadline is a fault: counted, kept as the source's last fault (status and metrics say
it), and answered to the loop as a SourceFault, on which the tuning freezes. A fault is never
a crash: whatever a hostile source makes the reader raise ends here as one line.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional, Protocol

from ..errors import JetbenchError
from .live_rate import Reading
from .scrape import DEADLINE_S, SourceFault

log = logging.getLogger("jetbench.daemon")


class RateSource(Protocol):
    def read(self) -> Reading: ...


class PolledSource:
    """`source.read()` every `period_s` in a thread of its own; `read()` answers the latest
    reading at once (SourceFault: the last read failed, or one has been under way for more
    than `deadline_s`)."""

    def __init__(self, source: RateSource, period_s: float,
                 deadline_s: float = DEADLINE_S + 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.source = source
        self.period_s = period_s
        self.deadline_s = deadline_s
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._latest: Optional[Reading] = None
        self._fault: Optional[str] = None
        self._busy_since: Optional[float] = None
        self._due: Optional[float] = None  # a read asked for by then (`read_at`)
        self._wake = threading.Event()
        self._stall_counted = False
        self.faults = 0  # failed reads since the daemon started
        self.last_fault: Optional[str] = None  # the latest, kept after the source recovers
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="jetbench-rate-source",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._busy_since, self._stall_counted = self._clock(), False
            try:
                reading: Optional[Reading] = self.source.read()
                fault = None
            except JetbenchError as err:
                reading, fault = None, err.message
            except Exception as err:  # noqa: BLE001 - hostile input: a fault, never a crash
                reading, fault = None, f"the source's answer could not be read " \
                                       f"({type(err).__name__}: {str(err)[:120]})"
            with self._lock:
                self._busy_since = None
                if self._stop.is_set():
                    return  # closing: a read the deadline cut is no news
                if fault is None:
                    self._latest, self._fault = reading, None
                else:
                    self._note(fault)
            self._pause()

    def read_at(self, t_s: float) -> None:
        """The next read at `t_s` (this source's clock) where that is sooner than a period
        after the last: a window's first reading as the window opens, not up to a period
        later (a probe of a few seconds lost a tenth of its time to waiting so)."""
        with self._lock:  # (kept on the thread's own clock: its waits are real seconds)
            self._due = time.monotonic() + (t_s - self._clock())
        self._wake.set()

    def _pause(self) -> None:
        """Until a period after the last read, or a read asked for sooner is due."""
        end = time.monotonic() + self.period_s
        while not self._stop.is_set():
            with self._lock:
                due = self._due
                now = time.monotonic()
                if due is not None and due <= now:
                    self._due = None
                    return
            left = (end if due is None else min(end, due)) - now
            if left <= 0:
                return
            self._wake.wait(left)
            self._wake.clear()

    def _note(self, fault: str) -> None:
        """A fault, counted and kept; logged when it is a new one (caller holds the lock)."""
        self.faults += 1
        if fault != self._fault:
            log.warning("tune: rate source fault: %s", fault)
        self._fault = self.last_fault = fault

    def read(self) -> Reading:
        with self._lock:
            busy = self._busy_since
            if busy is not None and self._clock() - busy > self.deadline_s:
                stalled = f"the rate source has not answered for {self._clock() - busy:.0f} s"
                if not self._stall_counted:  # one stall, one fault
                    self._stall_counted = True
                    self.faults += 1
                    log.warning("tune: rate source fault: %s", stalled)
                self.last_fault = stalled
                raise SourceFault(stalled)
            if self._fault is not None:
                raise SourceFault(self._fault)
            if self._latest is None:
                raise SourceFault("the rate source has not been read yet")
            return self._latest

    def close(self) -> None:
        """Stop reading (a read under way is left to its deadline: the thread is a daemon
        thread) and let the source's file or process go."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.deadline_s + 1.0)
        close = getattr(self.source, "close", None)
        if close is not None:
            close()
