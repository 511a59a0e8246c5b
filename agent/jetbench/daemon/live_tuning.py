"""`daemon --tune`: windows of the live workload, measured for the controller, and the points
it chooses pinned.

A window: after a pin, SETTLE_FRACTION of a window (at most 1 s) for the workload to reach the
new speed; then the workload's counter is read every `sample_s` (a tenth of the window, 0.25 s
at least) together with the board's total power, the first reading as the window opens (the
poller is asked for it: `read_at`). A window at the point the last one ran, nothing pinned in
between, goes on from the last one's last sample (the same clocks, nothing to settle). At the
window's end: the rate is the counter's increase over the window, the power the mean of the
samples (or the total's energy over the window, where it counts one), each as sure as the
spread of the recent windows' samples says (window_noise.py: a short window's own spread is too
few samples to tell). Latency quantiles come from the histogram's buckets over the window. A
window that breaks a constraint beyond its uncertainty by EARLY_FRACTION of its length ends
there; where the controller asks for one (after a miss, after the first pin) a window only lets
the workload settle and is not judged, unless it ends early so (then it is).

The source is read off the daemon's loop (source_poller.py; a Prometheus page within a total
deadline and a size bound, scrape.py): a fault, or a log silent for `silence_s`, freezes the
search at the point held (where it began, before there is one), never lower; a window in
which a log said nothing new is not judged; a counter that goes back starts a new window. The
operator's restore/apply/maxperf `stop` the tuning until `resume` (pin, a reload).

The controller is the governor (governor.py: models of the workload's capacity and power
choose the point, short windows confirm it) where every constraint is one its models predict,
the first generation's search (online_tuner.py) for a latency constraint. A decision's
`window_share` makes its window that share of --tune-window (a probe), and a pin that moved a
knob adds the knob's ACTUATION_S to the settling.

The energy saved is counted against the point the daemon started from at the same demand
(savings.py); the status says on what basis, and how long was not counted.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..errors import HardwareError, JetbenchError
from ..ownership.tune_memory import recall, remember
from ..run.constraint import Constraint
from ..units import format_hz
from .governor import Governor, modelled
from .live_log import LogSource
from .live_rate import LiveRate, PrometheusSource, Reading, ms_per_unit
from .live_space import opened_space, rates_text
from .live_window import (
    EARLY_FRACTION,
    busy_used,
    pin_settle_s,
    said_nothing_new,
    sample_period_s,
    window_figures,
)
from .online_tuner import (
    EXPLORING,
    FROZEN,
    STOPPED,
    Decision,
    OnlineTuner,
    Point,
    Space,
    Window,
)
from .savings import EnergySaved
from .source_poller import PolledSource, RateSource
from .tune_doc import TuneStatusDoc, point_doc
from .window_noise import NoisePool

if TYPE_CHECKING:
    from ..documents import ClockDoc
    from ..hw.board import Board
    from ..hw.fs import Root

log = logging.getLogger("jetbench.daemon")

SILENT_WINDOWS = 3  # a log silent for this many windows freezes the search
CATCH_S = 0.05  # waiting for the source's next reading: looked for this often


@dataclass(frozen=True)
class TuneConfig:
    """What `daemon --tune` was given."""

    rate: Union[PrometheusSource, LogSource]
    limits: Tuple[Constraint, ...] = ()
    latency: Optional[PrometheusSource] = None
    knobs: Optional[Tuple[str, ...]] = None  # None: the clocks this board has (knobs_for)
    window_s: float = 10.0
    gpu_index: int = 0  # the NVML GPU the workload runs on, where the power is NVML's
    silent_after_s: Optional[float] = None  # a log with no new value this long: frozen
    deadline_ms: Optional[float] = None  # an item's deadline (miss_rate<=SHARE)
    busy: Optional[PrometheusSource] = None  # the workload's busy seconds (--busy-from)

    @property
    def silence_s(self) -> float:
        """How long a log may say nothing before the search freezes (SILENT_WINDOWS windows
        unless given)."""
        return self.silent_after_s if self.silent_after_s is not None \
            else SILENT_WINDOWS * self.window_s


class LiveTuning:
    """Driven by the daemon's loop: `begin` once, then `tick()` whenever it wakes (it answers
    when it wants to be woken next). `pin(hz)` pins a point (the daemon's journalled pin);
    `read_power()` is the board's total power now (None: no reading); `paused()` says why not
    to tune now (a borrower holds the board), or None."""

    def __init__(self, config: TuneConfig, source: RateSource, space: Space,
                 read_power: Callable[[], Optional[float]],
                 pin: Callable[[Dict[str, int]], None],
                 paused: Callable[[], Optional[str]] = lambda: None,
                 clock: Callable[[], float] = time.monotonic,
                 read_energy: Callable[[], Optional[Tuple[float, float]]] = lambda: None,
                 on_held: Callable[[Dict[str, int], Window], object] = lambda hz, w: None):
        self.config = config
        self.source = source
        self.space = space
        # the governor (second generation) where its models cover every constraint; the
        # first generation's search for a latency constraint (governor.py)
        self.tuner: Union[Governor, OnlineTuner] = Governor(space, config.limits) \
            if modelled(config.limits) else OnlineTuner(space, config.limits)
        self._read_power, self._pin, self._paused, self._clock = read_power, pin, paused, clock
        self._read_energy = read_energy
        self._on_held = on_held  # a new point held: kept for a restart (ownership/tune_memory)
        self.resumed_from: Optional[Dict[str, int]] = None  # the point held before a restart
        self.sample_s = sample_period_s(config.window_s)
        self.noise = NoisePool()  # the recent windows' spread: how sure a window is
        self._ms_per = ms_per_unit(config.latency.selector.name) if config.latency else 1000.0
        self._point: Point = space.top()
        self._decision: Optional[Decision] = None
        self._readings: List[Reading] = []
        self._powers: List[float] = []
        # (t, J): the total's energy since the daemon started, read with each sample: a
        # window's power is its own difference over its own time (other readers of a counter
        # cut the intervals `read_power` sees, the drift check's and `readings`' reads)
        self._energies: List[Tuple[float, float]] = []
        self._window_from = 0.0  # when the window's first reading is due
        # the last sample (reading, power, energy): the next window's first where the point
        # stays and nothing needs to settle (consecutive windows at one point share it)
        self._last_sample: Optional[Tuple[Reading, Optional[float],
                                          Optional[Tuple[float, float]]]] = None
        self._window_s = config.window_s  # this window's length (a governor's probe: shorter)
        self.saved: Optional[EnergySaved] = None  # from `begin`: against the starting point
        # the workload's items counted since the daemon started (jetbench_items_total): the
        # counter's increases between readings, nothing across a restart
        self.items_total = 0.0
        self._items_last: Optional[float] = None
        self._latency: Dict[str, float] = {}
        self._paused_why: Optional[str] = None
        self._quiet_windows = 0  # windows a log said nothing new in: not judged
        self.stopped: Optional[str] = None  # why the operator stopped the tuning (None: not)
        self.busy_unused: Optional[str] = None  # why --busy-from's shares are not used
        self._phase_before_stop = EXPLORING

    def begin(self, current_hz: Dict[str, Optional[int]]) -> None:
        """The first window, at the point the board holds now (nearest table entries)."""
        start = self.space.nearest(current_hz)
        predicted = getattr(self.tuner, "predicted", lambda p: None)
        self.saved = EnergySaved(start, predicted)
        self._decision = self.tuner.start(start)
        self._go(self._decision.point, force=True)

    @property
    def energy_saved_j(self) -> float:
        return self.saved.joules if self.saved is not None else 0.0

    def _go(self, point: Point, force: bool = False) -> None:
        """The next window at `point`: pinned where it is not the point pinned now; as long
        as the decision asks (a share of --tune-window), after the workload's settling and the
        moved knobs' actuation."""
        before = self._point
        pinned = force or point != before
        if pinned:
            self._pin(self.space.hz(point))
        self._point = point
        self._readings, self._powers, self._energies = [], [], []
        decision = self._decision
        share = decision.window_share if decision is not None else 1.0
        if decision is not None and decision.settle and decision.settle_share is not None:
            share = decision.settle_share  # the settling window's own length
        self._window_s = self.config.window_s * share
        if not pinned:  # the same clocks, nothing to settle: the window goes on from the last
            self._window_from = self._clock()
            self._carry()
            return
        self._window_from = self._clock() + pin_settle_s(self.config.window_s,
                                                         self.space.knobs, before, point)
        self._last_sample = None
        read_at = getattr(self.source, "read_at", None)
        if read_at is not None:  # its first reading as it opens (source_poller.py)
            read_at(self._window_from)

    def _carry(self) -> None:
        """The last sample as the new window's first (the point held on, unpinned)."""
        if self._last_sample is None:
            return
        reading, power, energy = self._last_sample
        self._readings = [reading]
        self._powers = [] if power is None else [power]
        self._energies = [] if energy is None else [energy]
        self._window_from = min(self._window_from, reading.t_s)

    def repin(self) -> None:
        """The board was pinned by someone else's hand (a reload): the point again, and a new
        window."""
        self._go(self._point, force=True)

    @property
    def phase(self) -> str:
        return STOPPED if self.stopped is not None else self.tuner.phase

    def stop(self, why: str) -> None:
        """The operator took the board (`restore`, `apply`, `maxperf` through the daemon): no
        window, no pin until `resume` (`pin`, a reload)."""
        if self.stopped is None:
            log.info("tune: stopped (%s)", why)
            self._phase_before_stop = self.tuner.phase
        self.stopped = why
        self.tuner.phase = STOPPED
        self._readings, self._powers, self._energies = [], [], []

    def resume(self) -> None:
        """`pin` or a reload after a stop: the search again from the point it held."""
        if self.stopped is None:
            return
        self.stopped = None
        self.tuner.phase = self._phase_before_stop  # the search goes on where it was
        log.info("tune: resumed (%s)", self.tuner.phase)
        self._go(self._point, force=True)

    def close(self) -> None:
        """The source's file or process, let go (the daemon is stopping)."""
        close = getattr(self.source, "close", None)
        if close is not None:
            close()

    def tick(self) -> float:
        """Take the samples due and end a window that is due; the time to be woken next."""
        now = self._clock()
        if self.stopped is not None:
            return now + self.config.window_s
        why = self._paused()
        if why is not None:  # a borrower holds the board: its clocks are not ours to judge
            if self._paused_why is None:
                log.info("tune: paused (%s)", why)
            self._paused_why = why
            self._readings, self._powers, self._energies = [], [], []
            return now + self.sample_s
        if self._paused_why is not None:
            log.info("tune: resumed")
            self._paused_why = None
            self._go(self._point, force=True)  # the board was lent: pinned again, a new window
            return self._window_from
        if now < self._window_from:
            return self._window_from
        try:
            reading = self.source.read()  # the latest: read off the loop (source_poller.py)
        except JetbenchError as err:
            self._decide(None, err.message)
            return self._window_from
        if self._items_last is not None and reading.count >= self._items_last:
            self.items_total += reading.count - self._items_last
        self._items_last = reading.count
        last = self._readings[-1] if self._readings else None
        if reading.t_s < self._window_from or (last is not None and reading.t_s <= last.t_s):
            return now + min(self.sample_s / 4, CATCH_S)  # nothing new since the last sample
        if last is not None and reading.count < last.count:
            # a restart, not a rate: nothing is counted across it
            log.info("tune: the counter went back (the workload restarted): a new window")
            self._readings, self._powers, self._energies = [], [], []
        self._readings.append(reading)
        power = self._read_power()
        if power is not None and math.isfinite(power):
            self._powers.append(power)
        else:
            power = None
        energy = self._read_energy()
        if energy is not None and all(math.isfinite(x) for x in energy):
            self._energies.append(energy)
        else:
            energy = None
        self._last_sample = (reading, power, energy)
        first = self._readings[0]
        if self._readings[-1].t_s - first.t_s >= self._window_s:
            if said_nothing_new(self._readings):
                # a log that said nothing in the whole window: its last value is no rate
                self._quiet_windows += 1
                self._readings, self._powers, self._energies = [], [], []
                self._window_from = self._clock()
                return self._window_from
            if self._decision is not None and self._decision.settle:
                self._decision.settle = False  # that window let the workload settle: unjudged
                self._window_s = self.config.window_s * self._decision.window_share
                self._readings, self._powers, self._energies = [], [], []
                self._window_from = self._clock()
                self._carry()  # the judged window from where the settling one ended
                return self._window_from
            self._decide(self._measured(), None)
            return self._window_from
        if self._breaks_early():
            self._decide(self._measured(), None, early=True)
            return self._window_from
        return self._readings[-1].t_s + self.sample_s

    def _breaks_early(self) -> bool:
        """A window past EARLY_FRACTION of its length that already breaks a constraint beyond
        its uncertainty: the rest would only miss more (and pile up a backlog). A settling
        window too, which is then judged: a backlog drained can only flatter a point's rate, so
        one that misses while it settles misses (the point the daemon starts from, say); the
        governor's tail is the exception (Governor.ends_early)."""
        readings = self._readings
        if len(readings) < 3 or said_nothing_new(readings) or \
                readings[-1].t_s - readings[0].t_s < EARLY_FRACTION * self._window_s:
            return False  # (a log's last value, repeated, is judged by no one)
        partial = self._figures()
        if partial is None:
            return False
        ends = getattr(self.tuner, "ends_early", None)  # the governor's: a demand moved too
        if ends is not None:
            return bool(ends(self._point, partial, settling=bool(
                self._decision is not None and self._decision.settle)))
        return any(partial.breaks(lim) for lim in self.tuner.judged())

    def _measured(self) -> Optional[Window]:
        """The window's figures (its spread learned), counted in the energy saved."""
        measured = self._figures(learn=True)
        if measured is None:
            return None
        seconds = self._readings[-1].t_s - self._readings[0].t_s
        self._latency = measured.latency_ms
        if self.saved is not None:
            self.saved.window(self._point, measured, seconds)
        return measured

    def _figures(self, learn: bool = False) -> Optional[Window]:
        """The window so far (window_figures; its busy share as busy_used takes it)."""
        figures = window_figures(self._readings, self._powers, self._energies, self.noise,
                                 self._ms_per, self.config.deadline_ms, learn)
        if figures is None:
            return None
        figures, unused = busy_used(figures, self._readings[-1].count - self._readings[0].count)
        if unused is not None and self.busy_unused is None:
            log.warning("tune: --busy-from: %s", unused)
        self.busy_unused = unused or self.busy_unused
        return figures

    def _decide(self, measured: Optional[Window], failure: Optional[str],
                early: bool = False) -> None:
        held_before = self.tuner.held
        decision = self.tuner.observe(self._point, measured, failure)
        if self.tuner.held is not None and self.tuner.held != held_before and \
                self.tuner.held_window is not None:
            self._on_held(self.space.hz(self.tuner.held), self.tuner.held_window)
        if early:
            decision.why = f"{decision.why} (that window ended early)"
        if failure is not None:
            pass  # said by the freeze
        elif measured is None:
            decision.why = f"{decision.why} (the counter went back, or no power reading)"
        again = self._decision is not None and decision.phase == FROZEN == self._decision.phase
        if not again and (self._decision is None or decision.why != self._decision.why or
                          decision.phase != self._decision.phase):
            log.info("tune: %s: %s", decision.phase, decision.why)
        self._decision = decision
        if decision.phase == FROZEN:
            if decision.point != self._point:  # the safe point: the held one, or the start
                self._pin(self.space.hz(decision.point))
                self._point = decision.point
            self._readings, self._powers, self._energies = [], [], []
            self._window_from = self._clock() + self.sample_s
            return
        self._go(decision.point)

    def doc(self) -> TuneStatusDoc:
        t = self.tuner
        held = None
        if t.held is not None and t.held_window is not None:
            held = point_doc(self.space, t.held, t.held_window)
        return {
            "phase": self.phase,
            "source": self.config.rate.text(),
            "busy_source": self.config.busy.text() if self.config.busy is not None else None,
            "busy_unused": self.busy_unused,
            "constraints": [str(lim) for lim in t.limits],
            "demand_per_s": t.demand,
            "window_s": self.config.window_s,
            "held": held,
            "last": point_doc(self.space, *t.last) if t.last else None,
            "best": point_doc(self.space, *t.best) if t.best else None,
            "why": self.stopped or (self._decision.why if self._decision else "starting"),
            "windows": t.windows,
            "windows_breaking_constraints": t.broken_windows,
            "energy_saved_j": round(self.energy_saved_j, 3),
            "items_total": self.items_total,
            "energy_saved_basis": self.saved.basis() if self.saved is not None else "",
            "controller": "governor" if isinstance(t, Governor) else "first generation",
            "tail_margin": t.tail_text() if isinstance(t, Governor) else {},
            "latency_ms": dict(self._latency),
            "paused": self._paused_why,
            "stopped": self.stopped,
            "source_faults": int(getattr(self.source, "faults", 0)),
            "source_fault": getattr(self.source, "last_fault", None),
            "quiet_windows": self._quiet_windows,
            "resumed_from_hz": self.resumed_from,
            "space_hz": {k: list(t) for k, t in zip(self.space.knobs, self.space.tables)},
        }


def memory_key(board: Board, tune: TuneConfig, knobs: Sequence[str]) -> str:
    """What a held point is remembered under: the board, what was tuned, under what limits."""
    return " | ".join([board.family, board.model, tune.rate.text(), ",".join(knobs),
                       ";".join(str(lim) for lim in tune.limits)])


def open_live_tuning(root: Root, board: Board, tune: TuneConfig, beyond_power_mode: bool,
                     total_power_w: Callable[[], Optional[float]],
                     pin: Callable[[Dict[str, int]], None],
                     read_clocks: Callable[[], Sequence[ClockDoc]],
                     lent_to: Callable[[], Optional[str]],
                     known_rates: Callable[[Sequence[int]], None] = lambda hz: None,
                     read_energy: Callable[[], Optional[Tuple[float, float]]] = lambda: None
                     ) -> LiveTuning:
    """--tune: the rate source answers and the board has power readings and the knobs'
    tables, or the daemon does not start (one message); then the first window begins at the
    point the board holds (`read_clocks`), among the rates that run (`live_space`; told to
    `known_rates` before the first pin)."""
    from .live_log import open_log_rate

    source = LiveRate(tune.rate, tune.latency, busy=tune.busy) \
        if isinstance(tune.rate, PrometheusSource) \
        else open_log_rate(tune.rate, tune.silence_s)
    try:
        source.check()
    except JetbenchError as err:
        raise HardwareError(f"--tune: {err.message}", hint=err.hint or
                            "start the workload first, or point --throughput-from at its "
                            "metrics") from None
    held, tables = opened_space(root, board, tune.knobs, beyond_power_mode, total_power_w,
                                pin, read_clocks, known_rates)
    space = Space(tuple(tables), tuple(tuple(tables[k]) for k in tables))
    polled = PolledSource(source, sample_period_s(tune.window_s))
    polled.start()
    key = memory_key(board, tune, tuple(tables))
    tuning = LiveTuning(tune, polled, space, total_power_w, pin, paused=lent_to,
                        read_energy=read_energy,
                        on_held=lambda hz, w: remember(root, key, hz, {
                            "items_per_s": w.items_per_s, "items_per_j": w.items_per_j,
                            "power_w": w.power_w}))
    before = recall(root, key)
    if before is not None and all(before.get(k) in tables[k] for k in tables):
        # the point held before a restart: the first window is at it (and re-checks it)
        log.info("tune: starting from the point held before the restart (%s)",
                 ", ".join(f"{k} {format_hz(hz)}" for k, hz in before.items()))
        tuning.resumed_from = before
        held = {k: before[k] for k in tables}
    tuning.begin(held)
    log.info("tune: %s, within the power mode the clocks run %s; windows of %.3g s",
             tune.rate.text(), "; ".join(f"{k} {rates_text(v)}" for k, v in tables.items()),
             tune.window_s)
    return tuning
