"""Reading one source at its own rate: the loop both samplers run (the in-process `Sampler`'s
threads and the sampler process's, `sampling/sampler_child.py`), written once.

A polled source is read every `interval_s` on a fixed cadence; a pushed source (a CSV stream) is
read as fast as it sends. A `SourceFault` is stored as a gap (`sink.mark_fault`) and, when it
says so, the source is closed and reopened with backoff. No exception ends the loop.

Imports nothing heavy (no numpy): the sampler process stays small on 4 GB boards.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Mapping, Optional, Protocol, Sequence

from ..hw.meters.base import PowerSource, SourceFault

log = logging.getLogger(__name__)

REOPEN_FIRST_S = 0.05
REOPEN_MAX_S = 1.0
# Sleeps longer than this wait on the stop event (so stop() is prompt); shorter ones use
# time.sleep, whose wake-up is sharper at millisecond intervals.
_EVENT_WAIT_S = 0.02


class Sink(Protocol):
    """Where samples go: a `Trace` in process, a record writer in the sampler process."""

    def append(self, t_s: float, values: Sequence[Optional[float]]) -> None: ...

    def mark_fault(self, t_s: float, kind: str) -> None: ...


# A loop "falls behind" when, over one second of ticks, at least this share woke more than half
# an interval late: then `PollState.on_behind` runs, once (the sampler process asks for a
# real-time priority then, and not before: benchmarks/RESULTS.md, issue 64).
BEHIND_SHARE = 0.05
_BEHIND_SPAN_S = 1.0
# One wake-up this late is behind at once: a few more and the window has a gap (an interval
# over window.GAP_FACTOR = 5 sampling intervals), which a short window cannot afford.
STALL_INTERVALS = 3.0
STALL_MIN_S = 0.005


class PollState:
    """What a loop reports while it runs (read by the owner's stats()), and what it calls once
    should it fall behind its cadence (`on_behind`)."""

    def __init__(self, on_behind: Optional[Callable[[], None]] = None) -> None:
        self.reads = 0
        self.late = 0  # ticks that woke more than half an interval late
        self.behind = False  # on_behind has run
        self.on_behind = on_behind
        self.last_error: Optional[BaseException] = None
        self._span_ticks = 0
        self._span_late = 0

    def tick(self, lag_s: float, interval_s: float) -> None:
        """One polled tick that woke `lag_s` after its time; calls on_behind once when a
        second's worth of ticks had BEHIND_SHARE or more late, or at once on a stall (one
        wake-up STALL_INTERVALS intervals late, and at least STALL_MIN_S)."""
        self._span_ticks += 1
        if lag_s > interval_s / 2:
            self.late += 1
            self._span_late += 1
        if lag_s > max(STALL_INTERVALS * interval_s, STALL_MIN_S):
            self._fall_behind()
        if self._span_ticks < max(10, round(_BEHIND_SPAN_S / interval_s)):
            return
        if self._span_late >= BEHIND_SHARE * self._span_ticks:
            self._fall_behind()
        self._span_ticks = self._span_late = 0

    def _fall_behind(self) -> None:
        if not self.behind:
            self.behind = True
            if self.on_behind is not None:
                self.on_behind()


def sampling_interval_s(
    source: PowerSource,
    overrides_s: Mapping[str, float],
    default_s: Optional[float],
) -> float:
    """How often to read `source`: its own `?interval=` (`sample_interval_s`, from the meter
    spec) first, then the sampler's per-name override, then the sampler's interval, then the
    source's natural period (read after open: the INA3221's update_interval)."""
    own = getattr(source, "sample_interval_s", None)
    if own is not None:
        return float(own)
    if source.name in overrides_s:
        return float(overrides_s[source.name])
    if default_s is not None:
        return float(default_s)
    return float(source.period_s)


def poll(
    source: PowerSource,
    sink: Sink,
    interval_s: float,
    stop: threading.Event,
    state: PollState,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Read `source` into `sink` until `stop` is set."""
    pushed = source.pushed
    next_t = clock()
    while not stop.is_set():
        if not pushed and interval_s > 0:
            state.tick(clock() - next_t, interval_s)
        try:
            reading = source.read()
        except SourceFault as fault:
            sink.mark_fault(clock(), fault.kind)
            state.last_error = fault
            if fault.reopen:
                reopen(source, sink, stop, state, clock)
                next_t = clock()
                continue
        except Exception as err:  # a reader bug must not end sampling: count it
            log.debug("power source %s failed", source.name, exc_info=True)
            sink.mark_fault(clock(), "read_error")
            state.last_error = err
            if pushed:
                stop.wait(max(source.period_s, 0.01))
        else:
            sink.append(reading.t_s, reading.power_w)
            state.reads += 1
        if pushed:
            continue
        next_t += interval_s
        delay = next_t - clock()
        if delay > _EVENT_WAIT_S:
            stop.wait(delay)
        elif delay > 0:
            time.sleep(delay)
        elif delay < -interval_s:
            next_t = clock()  # fell behind (a slow read): resume the cadence, no burst


def reopen(
    source: PowerSource,
    sink: Sink,
    stop: threading.Event,
    state: PollState,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Close and reopen a source that reported a disconnect, backing off to REOPEN_MAX_S."""
    delay = REOPEN_FIRST_S
    while not stop.is_set():
        close_quietly(source)
        if stop.wait(delay):
            return
        try:
            source.open()
            return
        except Exception as err:
            sink.mark_fault(clock(), "disconnect")
            state.last_error = err
            delay = min(delay * 2, REOPEN_MAX_S)


def close_quietly(source: PowerSource) -> None:
    try:
        source.close()
    except Exception:  # closing a vanished device must not hide the real error
        log.debug("closing %s failed", source.name, exc_info=True)
