"""The sampler's window API, and its in-process form: one thread per source, each read at its
own rate, samples kept in compact traces.

Two samplers share this API. `Sampler` (here) reads in threads of the calling process: for
in-memory sources, tests, and callers that do nothing else. `ProcessSampler`
(`sampling/sampler_process.py`) reads in a process of its own, so a workload holding the GIL can
neither starve nor be slowed by it: measure and monitor use that one.

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
as it sends; a source's own `?interval=` overrides both (`sampling/poll.py`, shared by both
samplers). Faults raised by a source (`SourceFault`) are counted and stored as gaps; a
disconnect closes and reopens the source with backoff. No exception ends a sampling thread.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from ..hw.meters.base import Channel, PowerSource, Total
from .poll import PollState, close_quietly, poll, sampling_interval_s
from .trace import Trace
from .window import GAP_FACTOR, MIN_PERIODS, SourceTrace, WindowResult, compute_window


class _Slot:
    """One source as the window maths sees it (its description after open), its trace, and,
    in process, the source object and its thread."""

    def __init__(self, name: str, channels: Sequence[Channel], total: Optional[Total],
                 period_s: float, interval_s: float, pushed: bool,
                 source: Optional[PowerSource] = None):
        self.name = name
        self.channels = tuple(channels)
        self.total = total
        self.period_s = period_s
        self.interval_s = interval_s
        self.pushed = pushed
        self.source = source
        self.trace = Trace(len(self.channels))
        self.state = PollState()
        self.thread: Optional[threading.Thread] = None

    @classmethod
    def of(cls, source: PowerSource, interval_s: float) -> _Slot:
        return cls(source.name, source.channels(), source.total(), source.period_s,
                   interval_s, source.pushed, source)

    def as_source_trace(self) -> SourceTrace:
        return SourceTrace(self.name, self.channels, self.total, self.period_s,
                           0.0 if self.pushed else self.interval_s, self.trace)

    def step_s(self) -> float:
        """The longest time between two samples when all is well."""
        return max(self.period_s, 0.0 if self.pushed else self.interval_s)


class Window:
    """A measurement window; use as a context manager or through Sampler.begin/end."""

    def __init__(self, sampler: Sampler, t_start_s: float):
        self._sampler = sampler
        self.t_start_s = t_start_s
        self.t_end_s: Optional[float] = None
        self._result: Optional[WindowResult] = None

    def __enter__(self) -> Window:
        return self

    def __exit__(self, *exc: object) -> None:
        self._result = self._sampler.end(self, check=False)  # the body's exception goes on

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
    """Samples power sources in background threads of this process. See the module docstring;
    `ProcessSampler` (sampling/sampler_process.py) has the same API and samples in a process of
    its own."""

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
        intervals_s: per source name, overriding interval_s; a source's own `?interval=`
        (its `sample_interval_s`) overrides both."""
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
                close_quietly(src)
            raise
        self._stop.clear()
        self._slots = [
            _Slot.of(src, sampling_interval_s(src, self._intervals_s, self._interval_s))
            for src in self._sources
        ]
        for slot in self._slots:
            slot.thread = threading.Thread(
                target=poll, args=(slot.source, slot.trace, slot.interval_s, self._stop,
                                   slot.state, self._clock),
                name=f"jetbench-power-{slot.name}", daemon=True,
            )
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
            if slot.source is not None:
                close_quietly(slot.source)
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
        self._check_alive("when a window was opened")
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
        self._check_alive(f"during the window (closed after {t1 - window.t_start_s:.3f} s)")
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
            step = slot.step_s()
            deadline = time.monotonic() + 3 * step + 0.25
            while True:
                self._collect()
                if slot.trace.count_after(t1) or time.monotonic() >= deadline \
                        or not self._sampling(slot):
                    break
                time.sleep(min(step / 4, 0.005) or 0.0005)

    # -- what a backend provides -------------------------------------------------------------
    def _collect(self) -> None:
        """Bring every sample taken so far into the traces (in process: nothing to do)."""

    def _check_alive(self, when: str) -> None:
        """Raise SamplerDied when the sampling has ended on its own (in process: never)."""

    def _sampling(self, slot: _Slot) -> bool:
        """Whether samples for `slot` may still come."""
        return slot.thread is not None and slot.thread.is_alive()

    # -- inspection --------------------------------------------------------------------------
    def channels(self) -> List[Channel]:
        return [c for slot in self._slots for c in slot.channels] if self._slots else [
            c for s in self._sources for c in s.channels()
        ]

    def traces(self) -> List[SourceTrace]:
        """Every source's trace (for the raw CSV dump and for monitor)."""
        if self._started:
            self._check_alive("while sampling")
        return [s.as_source_trace() for s in self._slots]

    def stats(self) -> Dict[str, Dict[str, object]]:
        """Per source: reads, stored samples, bytes, faults, last error."""
        return {
            s.name: {
                "reads": s.state.reads,
                "samples": len(s.trace),
                "bytes": s.trace.nbytes,
                "faults": s.trace.faults(),
                "last_error": str(s.state.last_error) if s.state.last_error else None,
            }
            for s in self._slots
        }
