"""`daemon --tune --phases`: which phase of the workload runs, and each phase's windows.

    --phases prefill:vllm:prompt_tokens_total,decode:vllm:generation_tokens_total

names a counter per phase, on the page --throughput-from reads. A serving engine moves one
counter per phase: vLLM counts a prefill chunk's prompt tokens as the chunk ends and each
generated token as its step ends. Between two readings of the page (every PHASE_SAMPLE_S):

- the counters that moved say which phase ran: one moved, that phase; several, the first of
  them in the order --phases gives (list first the phase that is waited on: a prefill that
  shares a step with a decode is what the user is waiting for);
- none moved: the phase that ran goes on (a prefill chunk takes longer than a reading's
  period), until nothing has moved for IDLE_AFTER_S: idle.

A phase's window is made of pieces between two moves of its own counter at the point its tuner
asked for: from one move to the next, the items its counter counted over the time between them
and the energy the daemon's total measured over that time (interpolated at the two readings'
times). So a counter that counts in steps (a chunk of 256 prompt tokens) is measured from step
to step, never from the start of a step that began before the point was pinned; a piece across
a move of another counter, a pin (and SETTLE_S after it), a counter that went back or a pause
longer than IDLE_AFTER_S is not counted. A window ends once its pieces add up to the window's
length of the phase's own time, wherever the other phases ran in between.

Pure: readings and energies in, windows out (phased_tuning.py drives it).
"""

from __future__ import annotations

import bisect
import math
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple

from ..errors import UsageError
from ..sampling.uncertainty import sem_pct
from .live_rate import PrometheusSource, Reading, Selector, counter_value, parse_source, scrape
from .online_tuner import Point, Window
from .scrape import DEADLINE_S, SourceFault

PHASE_SAMPLE_S = 0.05  # the page is read this often: a phase's change is seen within it
IDLE_AFTER_S = 1.0  # no counter moved this long: idle (longer than any prefill chunk)
SETTLE_S = 0.05  # after a pin, the clocks' actuation (EMC ~8 ms) and a simulated kernel's pass
POWER_GROUP_S = 0.2  # the power's spread is taken over stretches this long
IDLE = "idle"
ENERGY_KEEP_S = 120.0
_NAME = re.compile(r"[a-z][a-z0-9_-]*")


@dataclass(frozen=True)
class PhaseCounter:
    """One phase and the counter that moves while it runs."""

    name: str
    selector: Selector


def _split_top(text: str) -> List[str]:
    """Split on commas outside {label="..."} braces."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch == "{":
            depth += 1
        elif not quoted and ch == "}":
            depth -= 1
        elif not quoted and depth == 0 and ch == ",":
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_phases(text: str, rate: PrometheusSource) -> Tuple[PhaseCounter, ...]:
    """'prefill:vllm:prompt_tokens_total,decode:vllm:generation_tokens_total' -> the phases,
    their counters on --throughput-from's page; UsageError."""
    out: List[PhaseCounter] = []
    for part in _split_top(text):
        name, sep, metric = part.partition(":")
        if not sep or not metric.strip():
            raise UsageError(f"--phases {text!r}: {part!r} is not NAME:COUNTER",
                             hint="e.g. --phases prefill:vllm:prompt_tokens_total,"
                                  "decode:vllm:generation_tokens_total")
        name = name.strip().lower()
        if not _NAME.fullmatch(name) or name == IDLE:
            raise UsageError(f"--phases {text!r}: {name!r} is not a phase name (lower-case "
                             f"letters, digits, - and _; not {IDLE!r})")
        source = parse_source(f"prometheus:{rate.url}#{metric.strip()}", "--phases")
        out.append(PhaseCounter(name, source.selector))
    if len(out) < 2 or len({p.name for p in out}) < len(out) or \
            len({p.selector for p in out}) < len(out):
        raise UsageError(f"--phases {text!r}: two phases at least, each with its own name "
                         "and counter")
    return tuple(out)


@dataclass(frozen=True)
class PhaseReading(Reading):
    """A reading of the page: the throughput counter (`count`) and each phase's counter."""

    counts: Tuple[float, ...] = ()


class PhaseSource:
    """Reads the throughput counter and every phase's counter from one page, in one GET
    (a SourceFault, one line, where one is missing or the page does not answer)."""

    def __init__(self, rate: PrometheusSource, phases: Sequence[PhaseCounter],
                 timeout_s: float = DEADLINE_S, clock: Callable[[], float] = time.monotonic):
        self.rate, self.phases, self.timeout_s = rate, tuple(phases), timeout_s
        self._clock = clock
        self._names: List[str] = []
        for sel in [rate.selector] + [p.selector for p in self.phases]:
            self._names += [sel.name, sel.name + "_total"]

    def read(self) -> PhaseReading:
        series = scrape(self.rate.url, self._names, self.timeout_s)
        t_s = self._clock()
        counts: List[float] = []
        for sel in [self.rate.selector] + [p.selector for p in self.phases]:
            value = counter_value(series, sel)
            if value is None:
                raise SourceFault(f"{sel.text()} is not on {self.rate.url}",
                                  hint="the counter's name as the page shows it (curl the URL)")
            counts.append(value)
        return PhaseReading(t_s, counts[0], counts=tuple(counts[1:]))

    def check(self) -> PhaseReading:
        return self.read()


class EnergyTrace:
    """The daemon's total energy (t, J) as read with each sample; `at(t)` interpolates."""

    def __init__(self) -> None:
        self._t: Deque[float] = deque()
        self._j: Deque[float] = deque()

    def add(self, t_s: float, joules: float) -> None:
        if self._t and t_s <= self._t[-1]:
            return
        if self._j and joules < self._j[-1]:  # a total that went back: a new trace
            self._t.clear()
            self._j.clear()
        self._t.append(t_s)
        self._j.append(joules)
        while self._t and self._t[0] < t_s - ENERGY_KEEP_S:
            self._t.popleft()
            self._j.popleft()

    def at(self, t_s: float) -> Optional[float]:
        """The energy at `t_s`, between two readings around it (None outside them)."""
        times = self._t
        i = bisect.bisect_left(times, t_s)
        if i < len(times) and times[i] == t_s:
            return self._j[i]
        if i == 0 or i == len(times):
            return None
        t0, t1, j0, j1 = times[i - 1], times[i], self._j[i - 1], self._j[i]
        return j0 + (j1 - j0) * (t_s - t0) / (t1 - t0)


@dataclass
class _Piece:
    items: float
    seconds: float
    joules: float
    start_s: float


@dataclass
class _Accum:
    """A phase's window so far: its runs (pieces end to end) at one point."""

    point: Point
    runs: List[List[_Piece]] = field(default_factory=list)
    last_end_s: Optional[float] = None

    @property
    def seconds(self) -> float:
        return sum(p.seconds for run in self.runs for p in run)

    def add(self, piece: _Piece) -> None:
        if self.runs and self.last_end_s == piece.start_s:
            self.runs[-1].append(piece)
        else:
            self.runs.append([piece])
        self.last_end_s = piece.start_s + piece.seconds

    def window(self, sample_s: float) -> Window:
        """The window's figures. The rate's uncertainty: the larger of the runs' spread (the
        standard error of their rates, three runs or more) and the timing of their ends (a
        move is seen up to a reading's period late, at each end of a run: period / sqrt(6)
        per run); the power's: the standard error of stretches of POWER_GROUP_S."""
        pieces = [p for run in self.runs for p in run]
        items = sum(p.items for p in pieces)
        seconds = sum(p.seconds for p in pieces)
        joules = sum(p.joules for p in pieces)
        timing = 100.0 * sample_s * math.sqrt(len(self.runs) / 6.0) / seconds
        rates = [sum(p.items for p in run) / sum(p.seconds for p in run) for run in self.runs]
        spread = sem_pct(rates) if len(rates) >= 3 else None
        powers, group = [], _Piece(0.0, 0.0, 0.0, 0.0)
        for p in pieces:
            group = _Piece(0.0, group.seconds + p.seconds, group.joules + p.joules, 0.0)
            if group.seconds >= POWER_GROUP_S:
                powers.append(group.joules / group.seconds)
                group = _Piece(0.0, 0.0, 0.0, 0.0)
        power_pct = sem_pct(powers) if len(powers) >= 3 else None
        return Window(items / seconds, max(timing, spread or 0.0), joules / seconds,
                      power_pct or 0.1)


@dataclass
class PhaseTotals:
    """A phase's items, time and energy since the daemon started (its pieces, every point)."""

    items: float = 0.0
    seconds: float = 0.0
    joules: float = 0.0


@dataclass
class _Open:
    """The last move of a phase's counter, from which the next piece runs."""

    phase: int
    point: Point
    t_s: float
    count: float
    joules: float


class PhaseWindows:
    """Readings in (`observe`), the phase that runs and each phase's finished windows out."""

    def __init__(self, names: Sequence[str], window_s: float,
                 idle_after_s: float = IDLE_AFTER_S, settle_s: float = SETTLE_S,
                 sample_s: float = PHASE_SAMPLE_S):
        self.names, self.sample_s = tuple(names), sample_s
        self.window_s, self.idle_after_s, self.settle_s = window_s, idle_after_s, settle_s
        self.running = IDLE
        self.totals: Dict[str, PhaseTotals] = {n: PhaseTotals() for n in self.names}
        self.switches = 0  # times the running phase changed
        self._last: Optional[PhaseReading] = None
        self._last_move_s: Optional[float] = None
        self._open: Optional[_Open] = None
        self._accum: Dict[int, _Accum] = {}

    def reset(self) -> None:
        """The board was lent or stopped: no piece spans it."""
        self._open = None
        self._last = None

    def observe(self, reading: PhaseReading, joules_at: Callable[[float], Optional[float]],
                point: Point, pinned_at: float) -> List[Tuple[str, Point, Window]]:
        """One reading; the windows it finished, as (phase, point, window)."""
        last, self._last = self._last, reading
        if last is None or reading.t_s <= last.t_s:
            return []
        if any(now < before for now, before in zip(reading.counts, last.counts)):
            self._open = None  # the workload restarted: nothing is counted across it
            return []
        moved = [i for i, (now, before) in enumerate(zip(reading.counts, last.counts))
                 if now > before]
        self._set_running(moved, reading.t_s)
        if not moved:
            return []  # the last move still anchors the next piece (a chunk takes a while)
        if len(moved) > 1:
            self._open = None  # a step of two phases: its time is neither's
            return []
        phase, count = moved[0], reading.counts[moved[0]]
        joules = joules_at(reading.t_s)
        opened = self._open
        settled = pinned_at + self.settle_s
        self._open = _Open(phase, point, reading.t_s, count, joules) \
            if joules is not None and reading.t_s >= settled else None
        if opened is None or self._open is None or opened.phase != phase or \
                opened.point != point or opened.t_s < settled or \
                reading.t_s - opened.t_s > self.idle_after_s:
            return []
        return self._add(phase, point, _Piece(count - opened.count, reading.t_s - opened.t_s,
                                              self._open.joules - opened.joules, opened.t_s))

    def _set_running(self, moved: List[int], t_s: float) -> None:
        before = self.running
        if moved:
            self.running, self._last_move_s = self.names[moved[0]], t_s
        elif self._last_move_s is None or t_s - self._last_move_s >= self.idle_after_s:
            self.running = IDLE
        if self.running != before:
            self.switches += 1

    def _add(self, phase: int, point: Point, piece: _Piece) -> List[Tuple[str, Point, Window]]:
        totals = self.totals[self.names[phase]]
        totals.items += piece.items
        totals.seconds += piece.seconds
        totals.joules += piece.joules
        accum = self._accum.get(phase)
        if accum is None or accum.point != point:
            accum = self._accum[phase] = _Accum(point)
        accum.add(piece)
        if accum.seconds < self.window_s:
            return []
        del self._accum[phase]
        return [(self.names[phase], point, accum.window(self.sample_s))]
