"""The background sampler: one thread per source, each read at its own rate, samples kept in
compact traces, and a window API over them.

    sampler = Sampler([ina, meter])       # constructing opens nothing
    sampler.start()                       # opens the sources, starts one thread each
    with sampler.window() as w:           # or: w = sampler.begin(); ...; res = sampler.end(w)
        run_timed_iterations()
    res = w.result                        # WindowResult; raises MeasurementInvalid (exit 3)
                                          # when the window is too short; w.result_unchecked
                                          # gives the flagged result without raising
    sampler.stop()                        # joins the threads, closes the sources

Rates: a polled source is read every `interval_s` (default its `period_s`: the INA3221
update interval, the instrument's natural rate); a pushed source (a CSV stream) is read as fast
as it sends. Faults raised by a source (`SourceFault`) are counted and stored as gaps; a
disconnect closes and reopens the source with backoff. No exception ends a sampling thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from .source import Channel, PowerSource, SourceFault
from .trace import Trace
from .window import GAP_FACTOR, MIN_PERIODS, SourceTrace, WindowResult, compute_window

log = logging.getLogger(__name__)

_REOPEN_FIRST_S = 0.05
_REOPEN_MAX_S = 1.0


class _Slot:
    """One source with its trace, its thread and its counters."""

    def __init__(self, source: PowerSource, interval_s: float):
        self.source = source
        self.channels = tuple(source.channels())
        self.interval_s = interval_s
        self.trace = Trace(len(self.channels))
        self.thread: Optional[threading.Thread] = None
        self.reads = 0
        self.last_error: Optional[BaseException] = None

    def as_source_trace(self) -> SourceTrace:
        return SourceTrace(
            self.source.name, self.channels, self.source.total(), self.source.period_s,
            0.0 if self.source.pushed else self.interval_s, self.trace,
        )


class Window:
    """A measurement window; use as a context manager or through Sampler.begin/end."""

    def __init__(self, sampler: Sampler, t_start_s: float):
        self._sampler = sampler
        self.t_start_s = t_start_s
        self.t_end_s: Optional[float] = None
        self._result: Optional[WindowResult] = None

    def __enter__(self) -> Window:
        return self

    def __exit__(self, *exc: object) -> bool:
        self._result = self._sampler.end(self, check=False)
        return False  # never swallow the body's exception

    @property
    def result(self) -> WindowResult:
        """The result; raises MeasurementInvalid when the window cannot be reported."""
        return self.result_unchecked.require_valid()

    @property
    def result_unchecked(self) -> WindowResult:
        if self._result is None:
            raise RuntimeError("the window is still open")
        return self._result


class Sampler:
    """Samples power sources in background threads. See the module docstring."""

    def __init__(
        self,
        sources: Sequence[PowerSource],
        *,
        interval_s: Optional[float] = None,
        intervals_s: Optional[Mapping[str, float]] = None,
        min_periods: float = MIN_PERIODS,
        gap_factor: float = GAP_FACTOR,
        clock: Callable[[], float] = time.monotonic,
    ):
        """interval_s: read every polled source this often (default: each one's period_s);
        intervals_s: per source name, overriding interval_s."""
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ValueError(f"source names must be unique: {names}")
        self._sources = list(sources)
        self._interval_s = interval_s
        self._intervals_s = dict(intervals_s or {})
        self.min_periods = min_periods
        self.gap_factor = gap_factor
        self._clock = clock
        self._slots: List[_Slot] = []
        self._stop = threading.Event()
        self._started = False

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> Sampler:
        """Open every source (errors propagate: a meter that is not there is a clear failure)
        and start sampling."""
        if self._started:
            return self
        opened: List[PowerSource] = []
        try:
            for src in self._sources:
                src.open()
                opened.append(src)
        except BaseException:
            for src in opened:
                _close_quietly(src)
            raise
        self._stop.clear()
        for src in self._sources:
            interval = self._intervals_s.get(src.name, self._interval_s)
            slot = _Slot(src, interval if interval is not None else src.period_s)
            slot.thread = threading.Thread(
                target=self._run, args=(slot,), name=f"jetbench-power-{src.name}", daemon=True
            )
            self._slots.append(slot)
        self._started = True
        for slot in self._slots:
            assert slot.thread is not None
            slot.thread.start()
        return self

    def stop(self) -> None:
        if not self._started:
            return
        self._stop.set()
        for slot in self._slots:
            if slot.thread is not None:
                slot.thread.join(timeout=5.0)
            _close_quietly(slot.source)
        self._started = False

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._started

    # -- windows -----------------------------------------------------------------------------
    def begin(self) -> Window:
        if not self._started:
            raise RuntimeError("start the sampler before opening a window")
        return Window(self, self._clock())

    def window(self) -> Window:
        """`with sampler.window() as w: ...` then `w.result`."""
        return self.begin()

    def end(self, window: Window, *, check: bool = True) -> WindowResult:
        """Close a window: wait (briefly) for each source's first sample after the end so the
        edge can be interpolated, then integrate. check=True raises MeasurementInvalid."""
        if window._result is not None:
            return window._result.require_valid() if check else window._result
        t1 = self._clock()
        window.t_end_s = t1
        self._wait_past(t1)
        result = compute_window(
            [s.as_source_trace() for s in self._slots], window.t_start_s, t1,
            min_periods=self.min_periods, gap_factor=self.gap_factor,
        )
        window._result = result
        return result.require_valid() if check else result

    def _wait_past(self, t1: float) -> None:
        for slot in self._slots:
            if not slot.channels:
                continue
            step = max(slot.source.period_s, 0.0 if slot.source.pushed else slot.interval_s)
            deadline = time.monotonic() + 3 * step + 0.25
            while slot.trace.count_after(t1) == 0 and time.monotonic() < deadline:
                if slot.thread is None or not slot.thread.is_alive():
                    break
                time.sleep(min(step / 4, 0.005) or 0.0005)

    # -- inspection --------------------------------------------------------------------------
    def channels(self) -> List[Channel]:
        return [c for slot in self._slots for c in slot.channels] if self._slots else [
            c for s in self._sources for c in s.channels()
        ]

    def traces(self) -> List[SourceTrace]:
        """Every source's trace (for the raw CSV dump and for monitor)."""
        return [s.as_source_trace() for s in self._slots]

    def stats(self) -> Dict[str, Dict[str, object]]:
        """Per source: reads, stored samples, bytes, faults, last error."""
        return {
            s.source.name: {
                "reads": s.reads,
                "samples": len(s.trace),
                "bytes": s.trace.nbytes,
                "faults": s.trace.faults(),
                "last_error": str(s.last_error) if s.last_error else None,
            }
            for s in self._slots
        }

    # -- the sampling thread -----------------------------------------------------------------
    def _run(self, slot: _Slot) -> None:
        src, trace, clock, stop = slot.source, slot.trace, self._clock, self._stop
        interval = slot.interval_s
        pushed = src.pushed
        next_t = clock()
        while not stop.is_set():
            try:
                reading = src.read()
            except SourceFault as fault:
                trace.mark_fault(clock(), fault.kind)
                slot.last_error = fault
                if fault.reopen:
                    self._reopen(slot)
                    next_t = clock()
                    continue
            except Exception as err:  # a reader bug must not end sampling: count it
                log.debug("power source %s failed", src.name, exc_info=True)
                trace.mark_fault(clock(), "read_error")
                slot.last_error = err
                if pushed:
                    stop.wait(max(src.period_s, 0.01))
            else:
                trace.append(reading.t_s, reading.power_w)
                slot.reads += 1
            if pushed:
                continue
            next_t += interval
            delay = next_t - clock()
            if delay > 0.02:
                stop.wait(delay)
            elif delay > 0:
                time.sleep(delay)
            elif delay < -interval:
                next_t = clock()  # fell behind (a slow read): resume the cadence, no burst

    def _reopen(self, slot: _Slot) -> None:
        delay = _REOPEN_FIRST_S
        while not self._stop.is_set():
            _close_quietly(slot.source)
            if self._stop.wait(delay):
                return
            try:
                slot.source.open()
                return
            except Exception as err:
                slot.trace.mark_fault(self._clock(), "disconnect")
                slot.last_error = err
                delay = min(delay * 2, _REOPEN_MAX_S)


def _close_quietly(source: PowerSource) -> None:
    try:
        source.close()
    except Exception:  # closing a vanished device must not hide the real error
        log.debug("closing %s failed", source.name, exc_info=True)
