"""`daemon --tune`'s controller: which clocks to hold next, from windows of the live workload.

Pure: it is told what each window measured at the point it asked for (the workload's rate from
its counter, the board's mean power, the window's latency quantiles) and answers the point for
the next window. The daemon pins that point (a journalled pin within the power mode's caps),
measures a window and tells it again (live_tuning.py).

The search. Items per joule along one clock is unimodal in practice: falling clocks save power
until the work no longer keeps up (a paced workload: the rate falls below the demand) or until
static power dominates (a saturated one: the rate falls faster than the power). So from a point
that meets the constraints each knob in turn (GPU, then EMC, then CPU) steps down its table, a
quarter of it at first. A step is taken where every constraint is met with its whole interval
(SIGMAS uncertainties) and items/J is not worse than the search's best; one that misses a
constraint is rolled back at once (the next window, back at the last good point, only
settles) and the step halves, as it does where items/J is worse. Below a point that missed,
nothing is tried again in that search. A knob that took no step down is tried upwards (a step
up taken only where items/J is better). Passes repeat while a knob moved (MAX_PASSES). Then the
best point is held.

Holding, it keeps measuring: a window that breaks a constraint with its whole interval goes to
the top of the space at once (the demand outgrew the held point) and searches again from
there; a rate that moved beyond noise in MOVED_WINDOWS windows in a row (the demand changed)
searches again from the held point, upwards first where it rose; every CHECK_UP_EVERY + 1st
window looks one step up (a saturated point serves no change when its demand grows: only a
look above shows that more is served, and more per joule, there). A window the source could
not read (a fault, a log gone silent) freezes the search at the last good point, or where the
daemon began before there is one (phase `frozen`), until it answers again.

Every comparison goes by report/verdict.differ: the uncertainties must separate two figures
before one is called better; a constraint is met only with its whole interval on the right
side (taking a step needs that) and broken only with it on the wrong side (leaving a held point
needs that), so one noisy window neither takes a step nor leaves a point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import UsageError
from ..report.verdict import differ
from ..run.constraint import Constraint, daemon_names
from ..units import format_hz

EXPLORING = "exploring"
HOLDING = "holding"
RETUNING = "re-tuning"
FROZEN = "frozen"
STOPPED = "stopped"  # the operator restored the board, or pinned a profile: until `pin`
PHASES = (EXPLORING, HOLDING, RETUNING, FROZEN, STOPPED)

# A figure's interval, for a decision, is this many of its uncertainties either side (one
# uncertainty is about one standard error: two keep a held point from being left, or a step
# from being taken, on the noise of one window).
SIGMAS = 2.0
DEMAND = "demand"  # demand>=SHARE: serve that share of the demand (measured at the top)
MIN_BUSY_SHARE = 0.05  # a capacity read from a window busy at least this share of it
MISS_RATE = "miss_rate"  # miss_rate<=SHARE: the share of items over --deadline
MAX_PASSES = 3  # passes over the knobs in one search (another only where one moved)
MOVED_WINDOWS = 2  # windows in a row whose rate moved beyond noise before a search again
CHECK_UP_EVERY = 6  # holding: every this many windows, one window one step up

Point = Tuple[int, ...]  # an index into each knob's table, in `Space.knobs` order


@dataclass(frozen=True)
class Space:
    """The knobs searched and their tables (Hz, ascending), within the power mode's caps."""

    knobs: Tuple[str, ...]
    tables: Tuple[Tuple[int, ...], ...]

    def top(self) -> Point:
        return tuple(len(t) - 1 for t in self.tables)

    def hz(self, point: Point) -> Dict[str, int]:
        return {k: t[i] for k, t, i in zip(self.knobs, self.tables, point)}

    def nearest(self, hz: Dict[str, Optional[int]]) -> Point:
        """The table entries nearest to clocks read from the board (the top where unknown)."""
        out: List[int] = []
        for knob, table in zip(self.knobs, self.tables):
            want = hz.get(knob)
            if want is None:
                out.append(len(table) - 1)
            else:
                out.append(min(range(len(table)), key=lambda i: abs(table[i] - want)))
        return tuple(out)


@dataclass(frozen=True)
class Window:
    """What one window at a point measured."""

    items_per_s: float
    items_per_s_uncertainty_pct: Optional[float]
    power_w: float
    power_w_uncertainty_pct: Optional[float]
    latency_ms: Dict[str, float] = field(default_factory=dict)
    miss_rate: Optional[float] = None  # the share of items over --deadline (None: not read)
    # the share of the window the workload was busy serving (--busy-from; None: not read)
    busy_share: Optional[float] = None

    @property
    def capacity_per_s(self) -> Optional[float]:
        """The items/s the point serves busy all the time: the rate over the busy share
        (None: not read, or too little served to say)."""
        if self.busy_share is None or self.busy_share < MIN_BUSY_SHARE:
            return None
        return self.items_per_s / self.busy_share

    @property
    def items_per_j(self) -> float:
        return self.items_per_s / self.power_w if self.power_w > 0 else 0.0

    @property
    def items_per_j_uncertainty_pct(self) -> Optional[float]:
        a, b = self.items_per_s_uncertainty_pct, self.power_w_uncertainty_pct
        if a is None or b is None:
            return None
        return math.hypot(a, b)

    def metric(self, name: str) -> Tuple[Optional[float], Optional[float]]:
        """(value, uncertainty %) of a constraint's metric (latency's uncertainty unknown)."""
        if name == "items_per_s":
            return self.items_per_s, self.items_per_s_uncertainty_pct
        if name == "power_w":
            return self.power_w, self.power_w_uncertainty_pct
        if name.startswith("latency_") and name.endswith("_ms"):
            return self.latency_ms.get(name[len("latency_"):-len("_ms")]), None
        if name == MISS_RATE:
            return self.miss_rate, None
        return None, None

    def meets(self, limit: Constraint) -> bool:
        """Met with the whole interval (SIGMAS uncertainties) on the right side: what a step
        needs to be taken. An unknown figure is not met."""
        return limit.met(*self.metric(limit.name), sigmas=SIGMAS)

    def breaks(self, limit: Constraint) -> bool:
        """Broken with the whole interval on the wrong side: what makes a held point be left.
        An unknown figure is not judged."""
        return limit.broken(*self.metric(limit.name), sigmas=SIGMAS)


def parse_limit(text: str) -> Constraint:
    """'items_per_s>=30' (or images_per_s, fps), 'latency_p99_ms<=40', 'power_w<=10',
    'demand>=0.98', 'miss_rate<=0.02' -> a constraint on a window's figures; UsageError
    (run/constraint.py)."""
    limit = Constraint.parse(text, daemon_names((DEMAND, MISS_RATE)))
    if limit.name == DEMAND and (limit.op != ">=" or not 0 < limit.value <= 1):
        raise UsageError(f"--constraint {text!r}: demand>=SHARE, the share of the demand "
                         "served, above 0 and at most 1",
                         hint="e.g. --constraint 'demand>=0.98': keep up with what arrives")
    if limit.name == MISS_RATE and (limit.op != "<=" or not 0 <= limit.value < 1):
        raise UsageError(f"--constraint {text!r}: miss_rate<=SHARE, the share of items over "
                         "--deadline allowed, at least 0 and under 1",
                         hint="e.g. --constraint 'miss_rate<=0.02' --deadline 50ms")
    return limit


def _apart(a: float, a_pct: Optional[float], b: float, b_pct: Optional[float],
           sigmas: float) -> bool:
    """The one comparison rule (report/verdict.differ) with each interval `sigmas`
    uncertainties wide: an unknown uncertainty is no verdict, so never apart."""
    return bool(differ(a, None if a_pct is None else a_pct * sigmas, b,
                       None if b_pct is None else b_pct * sigmas))


def _better(a: Window, b: Window, sigmas: float = 1.0) -> bool:
    """`a` beats `b` in items/J beyond `sigmas` of the uncertainties."""
    return a.items_per_j > b.items_per_j and _apart(
        a.items_per_j, a.items_per_j_uncertainty_pct, b.items_per_j,
        b.items_per_j_uncertainty_pct, sigmas)


def _worse(a: Window, b: Window) -> bool:
    return _better(b, a)


def _moved(a: Window, b: Window) -> bool:
    """The rate moved beyond noise: the intervals at SIGMAS uncertainties do not overlap."""
    return _apart(a.items_per_s, a.items_per_s_uncertainty_pct, b.items_per_s,
                  b.items_per_s_uncertainty_pct, SIGMAS)


@dataclass
class Decision:
    """The controller's answer after a window: where the next window runs, and why."""

    point: Point
    phase: str
    why: str
    # The window before fell behind (a backlog the next one drains would flatter it), or the
    # board has just been pinned: one window at the point only lets the workload settle and
    # is not judged.
    settle: bool = False
    # the next window's length as a share of --tune-window (the governor's short probes)
    window_share: float = 1.0
    # a settling window's own share (None: as the window's): a backlog drains in less
    settle_share: Optional[float] = None


class OnlineTuner:
    """The search state. `start(point)` gives the first point; `observe(point, window)` (None:
    the source was not read) answers the next."""

    def __init__(self, space: Space, limits: Sequence[Constraint]):
        self.space = space
        self.limits = tuple(limits)
        self.phase = EXPLORING
        self.held: Optional[Point] = None  # the last good point (held when not exploring)
        self.held_window: Optional[Window] = None  # its window when it was chosen
        self.best: Optional[Tuple[Point, Window]] = None  # the best good window ever seen
        self.last: Optional[Tuple[Point, Window]] = None
        self.windows = 0
        self.broken_windows = 0
        self.demand: Optional[float] = None  # items/s at the top of the space (demand>=)
        self._knob = 0
        self._step = 0
        self._recovering = False  # the next window is back at the held point after a break
        self._passes = 0
        self._dir = -1  # -1: stepping down the knob's table; 1: up
        self._search_best: Optional[Window] = None  # the best window taken in this search
        self._went_down = False  # a step down was taken on this knob in this pass
        self._failed: List[Point] = []  # points that did not meet the constraints, this search
        self._pass_from: Optional[Point] = None  # the held point when this pass began
        self._checking = False  # holding: this window is the one step up
        self._held_windows = 0
        self._moved = 0  # holding: windows in a row whose rate moved beyond noise
        self._moved_up = False
        self._start: Optional[Point] = None  # the point the board held when the daemon began

    # -- what the daemon calls -----------------------------------------------------------------
    def start(self, point: Point) -> Decision:
        """Where the first window runs: the point the board holds now (the profile's)."""
        self._start = point
        return Decision(point, self.phase, "measuring the point the board holds", settle=True)

    def judged(self) -> Tuple[Constraint, ...]:
        """The limits as windows are judged by: `demand>=SHARE` becomes items_per_s at least
        SHARE of the demand measured at the top of the space (none while it is unknown)."""
        out = []
        for lim in self.limits:
            if lim.name != DEMAND:
                out.append(lim)
            elif self.demand is not None:
                out.append(Constraint("items_per_s", ">=", lim.value * self.demand, lenient=True))
        return tuple(out)

    def observe(self, point: Point, window: Optional[Window],
                failure: Optional[str] = None) -> Decision:
        """The next point after a window at `point`; `window` None: the source was not read
        (`failure` says why), and the search freezes at a safe point."""
        if window is None:
            return self._freeze(point, failure or "the rate source did not answer")
        self.windows += 1
        self.last = (point, window)
        wants_demand = any(lim.name == DEMAND for lim in self.limits)
        if wants_demand and point == self.space.top():
            # the most the board serves: what arrives, where the top keeps up (its capacity
            # where even it does not)
            self.demand = window.items_per_s
        limits = self.judged()
        if any(window.breaks(lim) for lim in limits):
            self.broken_windows += 1
        unmet = [lim for lim in limits if not window.meets(lim)]
        if not unmet and (self.best is None or _better(window, self.best[1])):
            self.best = (point, window)
        if self.phase == FROZEN:
            self.phase = RETUNING if self.held is not None else EXPLORING
        if wants_demand and self.demand is None:
            return self._to_top("the demand is not known yet: measured at the top")
        if self.phase == HOLDING:
            return self._hold(point, window, [lim for lim in limits if window.breaks(lim)])
        return self._search(point, window, unmet, [lim for lim in limits if window.breaks(lim)])

    # -- searching -----------------------------------------------------------------------------
    def _first_step(self, knob: int) -> int:
        return max(1, len(self.space.tables[knob]) // 4)

    def _begin_search(self, up: bool = False) -> None:
        """A search from the held point: the first knob, a quarter of its table, down (or up
        first, where the rate rose)."""
        assert self.held is not None
        self._knob, self._step = 0, self._first_step(0)
        self._dir, self._went_down = (1 if up else -1), False
        self._search_best = self.held_window
        self._passes, self._pass_from = 1, self.held
        self._failed = []

    def _to_top(self, why: str) -> Decision:
        """A constraint broken at the last good point: the top of the space at once, and the
        search begins again from whatever is good there."""
        top = self.space.top()
        self.held, self.held_window, self._recovering = None, None, False
        return Decision(top, self.phase, f"{why}: to the top at once", settle=True)

    def _search(self, point: Point, window: Window, unmet: List[Constraint],
                broken: List[Constraint]) -> Decision:
        """A step is taken only where every constraint is met beyond its uncertainty; the last
        good point is left only where one is broken beyond it."""
        why_unmet = ", ".join(str(lim) for lim in unmet) + " not met"
        if self.held is None:  # the first good point is not found yet
            if unmet:
                if point == self.space.top():
                    self.held, self.held_window = point, window
                    self.phase = HOLDING
                    return Decision(point, self.phase, f"{why_unmet} even at the top of the "
                                    f"space: holding {self._text(point)}, the top")
                return self._to_top(f"{why_unmet} at {self._text(point)}")
            self.held, self.held_window = point, window
            self._begin_search()
            return self._next_probe(f"{self._met()} at {self._text(point)}: stepping down "
                                    "from there")
        assert self.held_window is not None
        if self._recovering:  # the window back at the last good point after a failed step
            self._recovering = False
            if broken:
                why = ", ".join(str(lim) for lim in broken)
                return self._to_top(f"{why} broken back at {self._text(point)}")
            return self._next_probe(f"back at {self._text(point)}")
        if unmet:
            self._step //= 2
            self._recovering = True
            if self._dir < 0:
                self._failed.append(point)
            return Decision(self.held, self.phase, f"{why_unmet} at {self._text(point)}: "
                            f"back to {self._text(self.held)} at once", settle=True)
        # Down, a point as good within the uncertainties is taken (it draws less power); up,
        # only one better beyond them.
        # Down steps are judged against the best window of this search, not the last taken:
        # steps each within noise of the one before would otherwise walk down a slope.
        ref = self._search_best or self.held_window
        if _worse(window, ref) if self._dir < 0 else not _better(window, self.held_window):
            self._step //= 2
            return self._next_probe(f"{self._text(point)} is not better in items/J: staying "
                                    f"at {self._text(self.held)}")
        self.held, self.held_window = point, window
        if self._search_best is None or _better(window, self._search_best):
            self._search_best = window
        self._went_down = self._went_down or self._dir < 0
        return self._next_probe(f"{self._text(point)} is {'as good or ' if self._dir < 0 else ''}"
                                "better in items/J: taken")

    def _next_probe(self, why: str) -> Decision:
        """The next step from the held point, knob by knob: down first; up where no step down
        was taken (a saturated workload's best can be above where the search began); holding
        when none is left."""
        assert self.held is not None
        while self._knob < len(self.space.knobs):
            index = self.held[self._knob]
            top = len(self.space.tables[self._knob]) - 1
            target = min(top, max(0, index + self._dir * self._step))
            if self._step >= 1 and target != index:
                probe = list(self.held)
                probe[self._knob] = target
                if self._dir < 0 and any(all(p <= f for p, f in zip(probe, failed))
                                         for failed in self._failed):
                    # no clock higher than at a point that failed in this search: it fails too
                    # (a rate does not rise, nor a latency fall, as a clock comes down)
                    self._step //= 2
                    continue
                return Decision(tuple(probe), self.phase, why)
            if self._dir < 0 and not self._went_down:
                self._dir, self._step = 1, self._first_step(self._knob)
                continue
            self._knob += 1
            self._dir, self._went_down = -1, False
            if self._knob == len(self.space.knobs) and self.held != self._pass_from and \
                    self._passes < MAX_PASSES:
                # a knob moved in this pass: the others' best may have moved with it
                self._knob, self._passes, self._pass_from = 0, self._passes + 1, self.held
            if self._knob < len(self.space.knobs):
                self._step = self._first_step(self._knob)
        self.phase = HOLDING
        return Decision(self.held, self.phase, f"{why}; holding {self._text(self.held)}")

    # -- holding -------------------------------------------------------------------------------
    def _hold(self, point: Point, window: Window, broken: List[Constraint]) -> Decision:
        assert self.held is not None and self.held_window is not None
        if self._checking:  # the window one step up
            self._checking = False
            ref = self.held_window
            if all(window.meets(lim) for lim in self.judged()) and \
                    window.items_per_s > ref.items_per_s and _moved(window, ref) and \
                    _better(window, ref):
                # more served one step up, and more per joule: the held point was not keeping
                # up with the demand (a saturated point one step below its best serves more up
                # there too, but not more per joule)
                self.phase = RETUNING
                self.held, self.held_window = point, window
                self._begin_search()
                return self._next_probe(f"one step up, {self._text(point)} serves more "
                                        f"({ref.items_per_s:.3g} -> {window.items_per_s:.3g}/s):"
                                        " searching again from there")
            return Decision(self.held, self.phase, f"one step up, {self._text(point)} serves "
                            f"no more, or not per joule: holding {self._text(self.held)}")
        self._held_windows += 1
        if broken:
            top = self.space.top()
            why = ", ".join(str(lim) for lim in broken)
            if self.held == top:
                return Decision(top, self.phase, f"{why} is not met even at the top of the "
                                f"space: holding {self._text(top)}, the top")
            self.phase = RETUNING
            return self._to_top(f"{why} broken while holding {self._text(self.held)}")
        ref = self.held_window
        moved = _moved(window, ref)
        self._moved = self._moved + 1 if moved and (
            self._moved == 0 or (window.items_per_s > ref.items_per_s) == self._moved_up) else \
            (1 if moved else 0)
        self._moved_up = window.items_per_s > ref.items_per_s
        if self._moved >= MOVED_WINDOWS:
            self._moved = 0
            self.phase = RETUNING
            self.held_window = window
            # more to serve: the search looks up first (below, less would be served)
            self._begin_search(up=window.items_per_s > ref.items_per_s)
            return self._next_probe(f"the rate moved ({ref.items_per_s:.3g} -> "
                                    f"{window.items_per_s:.3g}/s): searching again from "
                                    f"{self._text(point)}")
        up = self._one_up()
        if up is not None and self._held_windows % CHECK_UP_EVERY == 0:
            # A saturated workload whose demand grew shows no change at the held point (it
            # serves what it can, still above the constraint): only a look above tells.
            self._checking = True
            return Decision(up, self.phase, f"holding {self._text(self.held)}; checking one "
                            "step up")
        return Decision(self.held, self.phase, "holding")

    def _one_up(self) -> Optional[Point]:
        """The held point with its first knob not at its top one entry higher."""
        assert self.held is not None
        for k, (index, table) in enumerate(zip(self.held, self.space.tables)):
            if index < len(table) - 1:
                up = list(self.held)
                up[k] = index + 1
                return tuple(up)
        return None

    def _freeze(self, point: Point, why: str) -> Decision:
        """No figure to go by: the last good point, or where the daemon began (the profile's)
        before there is one; never a probe below them."""
        self.phase = FROZEN
        keep = self.held if self.held is not None else (self._start or self.space.top())
        self._recovering = False
        if self.held is not None:
            self._begin_search()
        return Decision(keep, self.phase, f"{why}: frozen at {self._text(keep)}")

    # -- words ---------------------------------------------------------------------------------
    def _text(self, point: Point) -> str:
        return point_text(self.space, point)

    def _met(self) -> str:
        return met_text(self.limits)


def point_text(space: Space, point: Point) -> str:
    """'gpu 691.2 MHz, emc 1.6 GHz': a point as the controllers say it."""
    return ", ".join(f"{k} {format_hz(hz)}" for k, hz in space.hz(point).items())


def met_text(limits: Sequence[Constraint]) -> str:
    """'items_per_s>=27 met' (or 'no constraint')."""
    if not limits:
        return "no constraint"
    return ", ".join(str(lim) for lim in limits) + " met"
