"""`daemon --tune --phases`: a point per phase of the workload, pinned as the phases change.

An LLM server runs two phases with different best clocks: prefill is compute-bound (its speed
follows the GPU clock), decode memory-bound (the EMC's; barely the GPU's), and decode is most
of the time. One controller (online_tuner.OnlineTuner, the first generation) per phase searches
that phase's point, told only the windows of its phase (phase_windows.py: pieces between
moves of the phase's own counter, at the point it asked for); the daemon pins the point of
the phase that runs whenever the running phase changes (read every PHASE_SAMPLE_S), and
while nothing runs the first phase's point, ready for the next request (a request begins with
its prefill: one that arrives while another decodes starts at decode's point until its first
chunk is counted). Every constraint applies to each phase's windows, its rate being its own
counter's; `demand>=SHARE` keeps each phase at that share of its speed at the top of the
space (`demand>=0.95`: prefill, and so the time to first token, within 5%).

A phase's rate is its speed while it runs (the engine is busy throughout a phase), so no window
only settles: the first piece after each pin is left out instead (phase_windows.SETTLE_S).
A source fault pins, for every knob, the highest clock any phase holds (never lower than what
a phase chose) until the page answers again. `status` says which phase runs, each phase's
point, its windows and its items (tokens) per joule over all its time and at the point the
daemon started from; no energy saved is counted (the figure per phase stands instead).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence, Tuple, TypedDict

from ..errors import HardwareError, JetbenchError, UsageError
from ..units import format_hz
from .live_space import opened_space, rates_text
from .live_tuning import TuneConfig
from .online_tuner import (
    EXPLORING,
    FROZEN,
    HOLDING,
    RETUNING,
    STOPPED,
    OnlineTuner,
    Point,
    Space,
    Window,
)
from .phase_windows import (
    IDLE,
    PHASE_SAMPLE_S,
    EnergyTrace,
    PhaseCounter,
    PhaseReading,
    PhaseSource,
    PhaseWindows,
)
from .source_poller import PolledSource
from .tune_doc import PointDoc, TuneStatusDoc, point_doc

if TYPE_CHECKING:
    from ..documents import ClockDoc
    from ..hw.board import Board
    from ..hw.fs import Root

log = logging.getLogger("jetbench.daemon")


class PhaseDoc(TypedDict):
    """One phase in the status document's `tune.workload_phases`."""
    counter: str
    state: str  # its controller's: exploring, holding, re-tuning
    why: str
    point_hz: Dict[str, int]  # the point pinned while it runs
    held: Optional[PointDoc]
    at_start: Optional[PointDoc]  # its first window, at the point the daemon started from
    windows: int
    windows_breaking_constraints: int
    items_total: float  # its counter's items in its pieces (tokens)
    seconds_total: float  # its own time (its pieces)
    energy_j: float
    items_per_j: Optional[float]  # over all its pieces, every point


class PhasedStatusDoc(TuneStatusDoc, total=False):
    workload_phase: str  # the phase that runs now, or idle
    workload_phases: Dict[str, PhaseDoc]
    phase_switches: int


class PhasedTuning:
    """Driven by the daemon's loop as LiveTuning is (`begin`, `tick`, `stop`, `resume`,
    `repin`, `close`, `doc`)."""

    def __init__(self, config: TuneConfig, phases: Sequence[PhaseCounter],
                 source: PolledSource, space: Space,
                 read_power: Callable[[], Optional[float]],
                 pin: Callable[[Dict[str, int]], None],
                 paused: Callable[[], Optional[str]] = lambda: None,
                 clock: Callable[[], float] = time.monotonic,
                 read_energy: Callable[[], Optional[Tuple[float, float]]] = lambda: None):
        self.config, self.phases, self.source, self.space = config, tuple(phases), source, space
        self.names = tuple(p.name for p in self.phases)
        self.tuners = {n: OnlineTuner(space, config.limits) for n in self.names}
        self.points: Dict[str, Point] = {}
        self.why: Dict[str, str] = {n: "starting" for n in self.names}
        self.at_start: Dict[str, Window] = {}
        self.windows = PhaseWindows(self.names, config.window_s)
        self.energy = EnergyTrace()
        self._read_power, self._pin, self._paused, self._clock = read_power, pin, paused, clock
        self._read_energy = read_energy
        self._pinned: Point = space.top()
        self._pinned_at = 0.0
        self._start: Point = space.top()
        self._last_t: Optional[float] = None
        self.items_total = 0.0
        self._items_last: Optional[float] = None
        self.stopped: Optional[str] = None
        self._paused_why: Optional[str] = None
        self.frozen: Optional[str] = None

    # -- what the daemon calls ---------------------------------------------------------------
    def begin(self, current_hz: Dict[str, Optional[int]]) -> None:
        """Every phase's first window at the point the board holds (nearest table entries)."""
        self._start = self.space.nearest(current_hz)
        for name in self.names:
            self.points[name] = self.tuners[name].start(self._start).point
        self._go(self._start)

    def _go(self, point: Point) -> None:
        self._pin(self.space.hz(point))
        self._pinned, self._pinned_at = point, self._clock()

    def repin(self) -> None:
        self._go(self._pinned)

    @property
    def phase(self) -> str:
        """The controllers' state, as one word (status' `tune.phase`)."""
        if self.stopped is not None:
            return STOPPED
        if self.frozen is not None:
            return FROZEN
        states = {t.phase for t in self.tuners.values()}
        if states == {HOLDING}:
            return HOLDING
        return EXPLORING if EXPLORING in states else RETUNING

    def stop(self, why: str) -> None:
        if self.stopped is None:
            log.info("tune: stopped (%s)", why)
        self.stopped = why
        self.windows.reset()

    def resume(self) -> None:
        if self.stopped is None:
            return
        self.stopped = None
        log.info("tune: resumed")
        self._go(self._pinned)

    def close(self) -> None:
        self.source.close()

    def tick(self) -> float:
        """Read the page's latest counters: which phase runs, the windows it finished, the
        point of the phase that runs pinned. The time to be woken next."""
        now = self._clock()
        if self.stopped is not None:
            return now + self.config.window_s
        why = self._paused()
        if why is not None:  # a borrower holds the board
            if self._paused_why is None:
                log.info("tune: paused (%s)", why)
            self._paused_why = why
            self.windows.reset()
            return now + PHASE_SAMPLE_S
        if self._paused_why is not None:
            log.info("tune: resumed")
            self._paused_why = None
            self._go(self._pinned)
        self._read_power()  # the daemon's total energy, read now (read_energy answers it)
        energy = self._read_energy()
        if energy is not None:
            self.energy.add(*energy)
        try:
            reading = self.source.read()
        except JetbenchError as err:
            self._freeze(err.message)
            return now + PHASE_SAMPLE_S
        if self.frozen is not None:
            log.info("tune: the rate source answers again: tuning per phase")
            self.frozen = None
        if self._last_t is not None and reading.t_s <= self._last_t:
            return now + PHASE_SAMPLE_S / 2  # nothing new yet
        self._last_t = reading.t_s
        assert isinstance(reading, PhaseReading)
        self._count_items(reading)
        for name, point, window in self.windows.observe(reading, self.energy.at, self._pinned,
                                                        self._pinned_at):
            self._judge(name, point, window)
        running = self.windows.running
        want = self.points[self.names[0] if running == IDLE else running]
        if want != self._pinned:
            self._go(want)
        return now + PHASE_SAMPLE_S

    def _count_items(self, reading: PhaseReading) -> None:
        if self._items_last is not None and reading.count >= self._items_last:
            self.items_total += reading.count - self._items_last
        self._items_last = reading.count

    def _judge(self, name: str, point: Point, window: Window) -> None:
        tuner = self.tuners[name]
        if name not in self.at_start and point == self._start:
            self.at_start[name] = window
        decision = tuner.observe(point, window)
        if decision.why != self.why[name]:
            log.info("tune %s: %s: %s", name, decision.phase, decision.why)
        self.why[name], self.points[name] = decision.why, decision.point

    def _freeze(self, why: str) -> None:
        """No counters: for every knob the highest clock a phase holds (never lower)."""
        if self.frozen is None:
            log.info("tune: frozen (%s)", why)
        self.frozen = why
        self.windows.reset()
        held = [t.held if t.held is not None else self._start for t in self.tuners.values()]
        safe = tuple(max(p[k] for p in held) for k in range(len(self.space.knobs)))
        if safe != self._pinned:
            self._go(safe)

    # -- what status shows -------------------------------------------------------------------
    def _phase_doc(self, counter: PhaseCounter) -> PhaseDoc:
        name = counter.name
        tuner, totals = self.tuners[name], self.windows.totals[name]
        held = point_doc(self.space, tuner.held, tuner.held_window) \
            if tuner.held is not None and tuner.held_window is not None else None
        start = self.at_start.get(name)
        return {"counter": counter.selector.text(), "state": tuner.phase, "why": self.why[name],
                "point_hz": self.space.hz(self.points.get(name, self._start)), "held": held,
                "at_start": point_doc(self.space, self._start, start) if start else None,
                "windows": tuner.windows, "windows_breaking_constraints": tuner.broken_windows,
                "items_total": totals.items, "seconds_total": round(totals.seconds, 3),
                "energy_j": round(totals.joules, 3),
                "items_per_j": totals.items / totals.joules if totals.joules > 0 else None}

    def doc(self) -> PhasedStatusDoc:
        phases = {c.name: self._phase_doc(c) for c in self.phases}
        running = self.windows.running
        shown = phases[self.names[0] if running == IDLE else running]
        return {
            "phase": self.phase,
            "source": self.config.rate.text(),
            "constraints": [str(lim) for lim in self.config.limits],
            "demand_per_s": None,
            "window_s": self.config.window_s,
            "held": shown["held"],
            "last": None,
            "best": None,
            "why": self.stopped or self.frozen or "; ".join(
                f"{n}: {self.why[n]}" for n in self.names),
            "windows": sum(t.windows for t in self.tuners.values()),
            "windows_breaking_constraints": sum(t.broken_windows for t in self.tuners.values()),
            "energy_saved_j": 0.0,
            "items_total": self.items_total,
            "energy_saved_basis": "not counted with --phases: each phase's items per joule "
                                  "(workload_phases) instead",
            "latency_ms": {},
            "paused": self._paused_why,
            "stopped": self.stopped,
            "source_faults": int(getattr(self.source, "faults", 0)),
            "source_fault": getattr(self.source, "last_fault", None),
            "quiet_windows": 0,
            "resumed_from_hz": None,
            "space_hz": {k: list(t) for k, t in zip(self.space.knobs, self.space.tables)},
            "workload_phase": running,
            "workload_phases": phases,
            "phase_switches": self.windows.switches,
        }


def open_phased_tuning(root: Root, board: Board, tune: TuneConfig, beyond_power_mode: bool,
                       total_power_w: Callable[[], Optional[float]],
                       pin: Callable[[Dict[str, int]], None],
                       read_clocks: Callable[[], Sequence[ClockDoc]],
                       lent_to: Callable[[], Optional[str]],
                       known_rates: Callable[[Sequence[int]], None] = lambda hz: None,
                       read_energy: Callable[[], Optional[Tuple[float, float]]] = lambda: None,
                       *, phases: Sequence[PhaseCounter]) -> PhasedTuning:
    """--tune --phases: the page answers with every counter and the board has power readings
    and the knobs' tables, or the daemon does not start (one message, as --tune alone)."""
    from .live_rate import PrometheusSource

    if not isinstance(tune.rate, PrometheusSource):
        raise UsageError("--phases reads counters beside a prometheus: --throughput-from")
    source = PhaseSource(tune.rate, phases)
    try:
        source.check()
    except JetbenchError as err:
        raise HardwareError(f"--tune --phases: {err.message}", hint=err.hint or
                            "start the workload first, or point --throughput-from at its "
                            "metrics") from None
    held, tables = opened_space(root, board, tune.knobs, beyond_power_mode, total_power_w,
                                pin, read_clocks, known_rates)
    space = Space(tuple(tables), tuple(tuple(tables[k]) for k in tables))
    polled = PolledSource(source, PHASE_SAMPLE_S)
    polled.start()
    tuning = PhasedTuning(tune, phases, polled, space, total_power_w, pin, paused=lent_to,
                          read_energy=read_energy)
    tuning.begin(held)
    log.info("tune: phases %s from %s; within the power mode the clocks run %s; windows of "
             "%.3g s of each phase's own time",
             ", ".join(f"{p.name} ({p.selector.text()})" for p in phases), tune.rate.url,
             "; ".join(f"{k} {rates_text(v)}" for k, v in tables.items()), tune.window_s)
    log.info("tune: starting every phase at %s", ", ".join(
        f"{k} {format_hz(hz)}" for k, hz in space.hz(tuning.points[phases[0].name]).items()))
    return tuning

