"""The governor's state, its words, and what it does while it holds a point (governor_demand.py
reads the demand, governor.py explores and chooses; the governor is one class of the three).

- Holding: full windows (WALK_SHARE of one while the edge is walked, below, but for a tail
  constraint, whose margin the held windows teach: each step of the walk costs less of the 30 s
  a change is given); every CHECK_UP_EVERY windows (every CHECK_UP_NEAR_EVERY near the point's
  capacity: the demand over its modelled capacity at least NEAR_CAPACITY; at once where
  --busy-from shows it busy throughout a window after one that was not, before a close call's
  read again or the walk's next probe) a short window a step up on every knob (a saturated
  point's rate cannot show a rising demand, nor one window's noise a small rise): where more
  than the demand read is served there, the demand is read at the top (more than the held point
  is not enough: at a demand beyond the top's every point is saturated, and a step up always
  serves more). A point just held has its neighbours read in its first WALK_WINDOWS windows,
  then now and then (the edge walked jointly: a knob down, or one down and another up, or a knob
  up: the models' order, up last where it keeps up); a close call's other point is read again
  among them, and at any time a point read ahead of the held one within noise and fewer times
  than it (RECHECKS a demand in all).
- A tail constraint missed while holding: the top at once, the point and those below it ruled
  out at this demand.
- A rise told from a drained backlog (_rose_at_once, _rose_past_held): which windows that served
  more than the demand read need no second read.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..run.constraint import Constraint
from .demand_epoch import BUSY_FULL, Epoch, kept_up
from .online_tuner import (
    DEMAND,
    EXPLORING,
    RETUNING,
    SIGMAS,
    Decision,
    Space,
    Window,
    _apart,
    met_text,
    point_text,
)
from .point_choice import best_neighbour
from .tail_judge import TailJudge, is_tail
from .workload_model import Fitted, Point, Seen, grid_shares, shares_of

# a point not read yet: this share of a window (a miss shows in a third; 0.4 before: each
# probe's time at a point not the best was the fluid benchmark's energy, 0.07-0.12 points of
# items/J below the optimum more, with as many changes held within 30 s)
PROBE_SHARE = 0.3
TOP_SHARE = 0.3  # the demand read at the top
SETTLE_SHARE = 0.15  # before it, a settling window (a one-second backlog drains at the top)
CHECK_UP_EVERY = 6  # holding: one step up read every this many windows
# ... every this many where the held point runs near its capacity (the demand over its modelled
# capacity at least NEAR_CAPACITY): a demand that grows shows nowhere else there
CHECK_UP_NEAR_EVERY, NEAR_CAPACITY = 2, 0.85
WALK_WINDOWS = 4  # a point just held: its neighbours read in each of its first windows
WALK_SHARE = 0.5  # ... which are this share of a window long (the walk's pace)
RECHECKS = 2  # close calls read again per demand (while the better is held)
RISE_SIGMAS = 3.0  # more served than the demand where no backlog was left: a rise, read at once


def _busy_throughout(window: Window) -> bool:
    """--busy-from read the window busy BUSY_FULL of it or more (it did not keep up)."""
    return window.busy_share is not None and window.busy_share >= BUSY_FULL


class Holding:
    """The governor's state (its constructor), its words and its holding (module doc);
    governor.Governor is the rest of it."""

    def __init__(self, space: Space, limits: Sequence[Constraint]):
        self.space = space
        self.limits = tuple(limits)
        self.phase = EXPLORING
        self.held: Optional[Point] = None
        self.held_window: Optional[Window] = None
        self.best: Optional[Tuple[Point, Window]] = None
        self.last: Optional[Tuple[Point, Window]] = None
        self.windows = 0
        self.broken_windows = 0
        self.epochs = 0  # demands seen (a change begins another)
        self._epoch = Epoch()
        self._before: Optional[Epoch] = None  # the demand before a move, until the next is read
        # the held window that showed the move (its point, the window), until the next is read
        self._moved: Optional[Tuple[Point, Window]] = None
        self.same_again = 0  # moves read again as the demand before them
        self._kept = ""  # said before the next choice: a demand taken back
        self._resume: Optional[Point] = None  # ... and the point held when it seemed to move
        self._seen: List[Seen] = []
        self._models: Optional[Fitted] = None
        self._start: Optional[Point] = None
        self._held_windows = 0
        self._checking: Optional[Point] = None  # holding: the window one step up
        self._rival: Optional[Point] = None  # held on a close call: the other, read again
        self._tail = TailJudge(limits)
        self._top_settled = False  # the window at the top now was read after a settling one
        self._drained_last: Optional[Point] = None  # the point last read again for a drain
        self._points, self._x = grid_shares(space.tables)

    def predicted(self, point: Point) -> Optional[Tuple[float, float]]:
        """(items/s, W) at the demand now (None: no models); no capacity fitted: it keeps up."""
        models, ep = self._models, self._epoch
        if models is None or ep.demand is None:
            return None
        x = np.array([shares_of(self.space.tables, point)])
        rate = np.minimum(ep.demand, models.capacity(x))
        return float(rate[0]), float(models.power_w(x, rate)[0])

    def judged(self) -> Tuple[Constraint, ...]:
        out = []
        for lim in self.limits:
            if lim.name != DEMAND:
                out.append(lim)
            elif self._epoch.demand is not None:
                out.append(Constraint("items_per_s", ">=", lim.value * self._epoch.demand,
                                      lenient=True))
        return tuple(out)

    # -- holding -----------------------------------------------------------------------------------
    def _hold(self, point: Point, window: Window, broken: List[Constraint]) -> Decision:
        self._held_windows += 1
        mean = self._epoch.mean(point)
        if mean is not None:
            self.held_window = mean
        self._tail.learn_held(self._epoch, point, window, self._load(point))
        tail = [lim for lim in broken if is_tail(lim)]
        if broken and point == self.space.top():
            return Decision(point, self.phase, f"{self._said(broken)} even at the top of "
                            f"the space: holding {self._text(point)}, the top")
        if tail and len(tail) == len(broken) or (
                not broken and not self._tail.met(self._epoch, point)):
            return self._tail_missed(point, tail)
        if broken:
            return self._new_demand(f"{self._said(broken)} while holding {self._text(point)}")
        read = self._read_scores()
        best = max(read, key=lambda kv: kv[1].items_per_j, default=None)
        if best is not None and best[0] != point and mean is not None and \
                self._ahead(best[1], self._at_demand(point, mean)):
            # read more often, the held point proved worse than another read at this demand
            return self._choose(why=f"{self._text(point)} read again is behind "
                                    f"{self._text(best[0])}")
        if point != self.space.top() and self._busier(window):
            return self._look_up(point, window.busy_share)  # (before the walk: module doc)
        walking = self._held_windows <= WALK_WINDOWS  # just held: the edge walked at once
        other, self._rival = self._rival, None
        # a point read ahead of the held one within noise only, and read fewer times, is read
        # again (the rival is chosen as a point is held; the held point's windows may then fall
        # behind a point read once, and two points read once each make no rival)
        reads = self._epoch.reads
        lead = best[0] if best is not None and best[0] != point and \
            len(reads[best[0]]) < len(reads[point]) else None
        if lead is not None:
            other = lead
        if (walking or lead is not None) and other is not None and other != point and \
                self._epoch.rechecks < RECHECKS:
            self._epoch.rechecks += 1
            return Decision(other, self.phase, f"holding {self._text(point)}; reading "
                            f"{self._text(other)} again (within noise of it)",
                            window_share=PROBE_SHARE)
        if walking or self._held_windows % CHECK_UP_EVERY == CHECK_UP_EVERY // 2:
            near = best_neighbour(self.space, self._epoch, point, self.judged(),
                                  self.predicted, self._load_ok, self._capacity)
            if near is not None:
                # the edge walked jointly while holding: a neighbour not read at this demand
                # (a knob one step down, or one down and another up), the models' best
                return Decision(near, self.phase, f"holding {self._text(point)}; reading "
                                f"{self._text(near)} beside it", window_share=PROBE_SHARE)
        load = self._load(point)
        every = CHECK_UP_NEAR_EVERY if load is not None and load >= NEAR_CAPACITY else \
            CHECK_UP_EVERY
        if point != self.space.top() and self._held_windows % every == 0:
            return self._look_up(point)
        return Decision(point, self.phase, "holding")

    def _look_up(self, point: Point, busy: Optional[float] = None) -> Decision:
        """A short window one entry up on every knob: a saturated point serves no more when
        more arrives, and a rise within one window's noise shows nowhere; more served there
        than the demand read, the demand is read at the top. Where the held window was busy
        throughout where it was not before (_busier) the look comes first, before a close
        call's read again or the walk's next probe (live run AN: a rise's held window ended
        early busy, then a read again of a point below and a walk probe, 9 s, before the
        demand was read)."""
        up = tuple(min(i + 1, len(t) - 1) for i, t in zip(point, self.space.tables))
        self._checking = up
        return Decision(up, self.phase, f"holding {self._text(point)}; " + (
            f"busy {busy:.0%} of the window: " if busy is not None else "") +
            "checking one step up", window_share=PROBE_SHARE)

    def _at_demand(self, point: Point, window: Window, judged: bool = False) -> Window:
        """A point's windows (as one) as they compare at this demand: where --busy-from shows
        it kept up (busy under BUSY_FULL), it served what arrived, so its rate read is the
        arrivals' (Poisson at a low rate: a short probe 7-11% noisy, its items/J as noisy),
        not the point's: its rate is the demand, read over the epoch's windows, and its power
        is moved by the power model from the rate it served to it. Else as read. Its rate's
        uncertainty is the demand's where it is `judged` against a constraint, none where it is
        compared: two such points compare by their power alone at one demand (the demand's
        error is the same in both)."""
        demand, models = self._epoch.demand, self._models
        if demand is None or models is None or not kept_up(window):
            return window
        x = np.array([shares_of(self.space.tables, point)] * 2)
        modelled = models.power_w(x, np.array([window.items_per_s, demand]))
        power = window.power_w + float(modelled[1] - modelled[0])
        if not power > 0:
            return window
        return replace(window, items_per_s=demand, power_w=power,
                       items_per_s_uncertainty_pct=self._epoch.demand_pct if judged else 0.0)

    @staticmethod
    def _ahead(window: Window, than: Window) -> bool:
        """A point's windows (as one) ahead of another's in items/J beyond SIGMAS of noise."""
        return window.items_per_j > than.items_per_j and _apart(
            window.items_per_j, window.items_per_j_uncertainty_pct, than.items_per_j,
            than.items_per_j_uncertainty_pct, SIGMAS)

    def _busier(self, window: Window, counted: bool = True, full: float = BUSY_FULL) -> bool:
        """The held point busy all of a window (--busy-from) where the window before it was
        not, or its windows before on average (held near its capacity, busy 95-99% of each: a
        demand past the top looked for a window later): a demand that grew past its capacity
        (its rate, stuck there, may not show it beyond noise), or a burst of arrivals. The
        look one step up tells them apart: at once, and cheaper than a read at the top (a
        burst at a point near its capacity read there every time cost 0.3-0.6% of the fluid
        benchmark's energy)."""
        reads = self._epoch.reads.get(self.held, []) if self.held is not None else []
        # (the last is this window where it is `counted`, not where it is one under way)
        before = [w.busy_share for w in (reads[:-1] if counted else reads)]
        if window.busy_share is None or not before or None in before:
            return False
        return window.busy_share >= full and BUSY_FULL > min(before[-1] or 0.0,
                                                    sum(b or 0.0 for b in before) / len(before))

    def _rose_at_once(self, window: Window, before: Optional[Tuple[Point, Window]]
                      ) -> Optional[str]:
        """A window that served more than the demand read: whether it is a rise without a
        second read (as a drain): busy throughout (--busy-from) beyond RISE_SIGMAS, after a
        window whose queue emptied (busy under BUSY_FULL: no backlog left to drain), or after
        a held window busy throughout where the held point's windows before were not (a
        backlog only arrivals beyond its capacity build: live, a walk's probe 2 s after such a
        window served 85/s against a demand read at 63, read again: 4 s of the 39 the rise
        took). Where it kept up it is read again: a burst (the held point's windows sent to
        the top, 0.2% of the fluid benchmark's energy); so within RISE_SIGMAS (a point near its
        capacity is busy throughout a burst: a fall's probe 7.5% over the demand went to the
        top). Returns what the window before showed, or None."""
        ep = self._epoch
        if before is None or ep.demand is None or not _busy_throughout(window) or not _apart(
                window.items_per_s, window.items_per_s_uncertainty_pct, ep.demand,
                ep.demand_pct, RISE_SIGMAS):
            return None
        point, last = before
        if kept_up(last):
            return f"{self._text(point)} kept up (busy {last.busy_share:.0%})"
        if self._after_busier_held(window, before):
            return f"{self._text(point)} was busy throughout where it had kept up"
        return None

    def _after_busier_held(self, window: Window, before: Tuple[Point, Window]) -> bool:
        """A window busy throughout (--busy-from) right after a held window busy throughout
        where the held point's windows before it were not (Holding._busier)."""
        return _busy_throughout(window) and before[0] == self.held and self._busier(before[1])

    def _rose_past_held(self, point: Point, window: Window,
                        before: Optional[Tuple[Point, Window]]) -> bool:
        """The look one step up (--busy-from) busy throughout, after a held window busy
        throughout where the held point's windows before it were not (Holding._busier): more
        arrived than the held point serves, not a backlog it left (one that keeps the step up
        busy a whole probe would have taken arrivals beyond the held point's capacity to
        build, from an empty queue): the demand rose, read at once (read again as a drain, 4 s
        of the 30 a change is given went to it in the fluid benchmark's rises). Not where the
        held point was busy throughout before too: its standing backlog drains up there."""
        return point == self._checking and before is not None and \
            self._after_busier_held(window, before)

    def _capacity(self, point: Point) -> Optional[float]:
        """The point's modelled capacity, items/s (None: no capacity fitted)."""
        models = self._models
        if models is None or not models.has_capacity:
            return None
        capacity = float(models.capacity(np.array([shares_of(self.space.tables, point)]))[0])
        return capacity if math.isfinite(capacity) and capacity > 0 else None

    def _load(self, point: Point) -> Optional[float]:
        """The demand over the point's modelled capacity (None: either unknown)."""
        capacity, demand = self._capacity(point), self._epoch.demand
        return None if capacity is None or demand is None else demand / capacity

    def _load_ok(self, point: Point) -> bool:
        """Under a tail constraint, a point's load within what the windows allow
        (tail_judge.py); always without one."""
        if not self._tail.limits:
            return True
        load, demand = self._load(point), self._epoch.demand
        return load is not None and demand is not None and \
            load <= self._tail.load_allowed(demand)

    def _tail_missed(self, point: Point, broken: List[Constraint]) -> Decision:
        """The held point missed a tail constraint (a window over it, or its windows with the
        margin): the top at once (a run of missed windows ends there; a demand that grew shows
        there), the point and those below it ruled out at this demand."""
        self._epoch.missed.append(point)
        self.phase = RETUNING
        said = self._said(broken) if broken else "the tail with its margin not met"
        return self._to_top_settled(f"{said} at {self._text(point)}: the demand read at the "
                                    "top (the shortest tail), then chosen again")

    def _to_top_settled(self, why: str) -> Decision:
        """A settled read at the top within this demand; a new one where it moved."""
        self._top_settled = True
        return Decision(self.space.top(), self.phase, why, settle=True,
                        window_share=TOP_SHARE, settle_share=SETTLE_SHARE)

    # -- words -------------------------------------------------------------------------------------
    def _text(self, point: Point) -> str:
        return point_text(self.space, point)

    def _met(self) -> str:
        return met_text(self.limits)

    @staticmethod
    def _said(broken: List[Constraint]) -> str:
        return ", ".join(str(lim) for lim in broken) + " broken"

    @staticmethod
    def _join(why: str, what: str) -> str:
        return f"{why}: {what}" if why else what

    # -- governor.py's ---------------------------------------------------------------------------
    def _choose(self, why: str = "", after_miss: bool = False) -> Decision:
        raise NotImplementedError

    def _new_demand(self, why: str, at: Optional[Point] = None) -> Decision:
        raise NotImplementedError

    def _read_scores(self) -> List[Tuple[Point, Window]]:
        raise NotImplementedError

    def _remember(self, point: Point, window: Window, read_demand: bool = False) -> None:
        raise NotImplementedError
