"""`daemon --tune`'s second-generation controller (issue 59): the point the models of the
workload (workload_model.py) say is the most efficient that meets the constraints, confirmed by
short windows, held, and found again within a few windows when the demand moves.

The first generation (online_tuner.py) steps one knob at a time through its table and learns
nothing it can carry to the next demand: on GPU x EMC with 2% jitter it settled 100-150 s after
a change, up to 15% short of the optimum (benchmarks/RESULTS.md). This one keeps every window:

- Demand. The rate at the top of the space is the demand (all the top serves where the demand
  is above it: every point is then saturated, which is the same for the search). A held point's
  rate that falls beyond noise is read again there, the new demand (not where --busy-from shows
  it busy throughout that read: a rise whose first window read low, read at the top); one that
  rises sends a short window to the top to read it; a broken constraint too (with a settling
  window after it: a backlog drained would flatter the next point). A demand is an epoch:
  windows at a point are compared within one. A demand read after a move that is the one before
  it within noise takes that one back with its windows (the move was a window's noise: Poisson
  arrivals at a low rate are 6% noisy in a short window, and a new epoch would search again
  from the models), the read one more of that demand, the held window that showed the move one
  more of its point's, and the point held then, its walk where it was, unless a point read is
  ahead of it beyond noise (_resumed). A window at a point the
  capacity model puts well above the demand reads it too (Epoch.read_kept_up): one read at the
  top is 5-10% noisy, and a held point near its capacity serves only 10% more when it doubles.
  A point that serves more than the demand beyond noise may have drained a backlog a point
  before left: it is read again, and twice running is a rise (read at the top); at once where
  it was busy throughout after a window whose queue emptied (--busy-from), beyond
  RISE_SIGMAS: no backlog was left (Holding._rose_at_once); such a window ends as soon as it
  shows it, never idle so far (ends_early).
  Where the workload says how busy it was (--busy-from), a window busy BUSY_FULL of it did not
  keep up and one less busy served what arrived (Epoch.saturated, read_kept_up): whatever its
  rate's noise; and its rate over its busy share is its point's capacity, at any load.
- Exploring, while the capacity cannot be fitted (fewer than two points read saturated): each
  knob alone halves down its table from the top, in short windows, until it saturates or
  misses (a miss rules out what lies below it, in this epoch; a rate floor's only where the
  point served less than the demand beyond SIGMAS: one that kept up says the demand is under
  the floor).
- Choosing: every point of the space is scored, a point read in this epoch by its windows
  (met beyond SIGMAS of its noise; a rate floor also where the point kept up with a demand that
  meets it, or, read keeping up, where its capacity clears it and the demand is not under it:
  Epoch.met; one met at its figures only is read again, point_choice.unsure), any
  other by the models (its capacity clearing every rate floor with the models' own error as
  margin: it serves the floor, or all that arrives where less does; its rate min(demand,
  capacity), its items/J by the power model). A point read that kept up (--busy-from: busy
  under BUSY_FULL) is scored at the demand, not at what arrived in its windows
  (Holding._at_demand: a 4 s probe of Poisson arrivals at 50/s is 7% noisy in its rate and its
  items/J, where the demand is read over many windows); two such points compare by their power
  alone (the demand's error is common to both).
  The best is read in a short window (PROBE_SHARE of one) where it is a point not read yet
  and the models put it ahead of the best read by more than that read's noise (AHEAD_SIGMAS
  in point_choice.py; ahead of its figure read or of the models' own for it, whichever is
  lower: their error is much the same at both), at most MAX_PROBES a demand; otherwise the
  best point read is held. A close call (the best two read within noise of each other) holds
  the better at once (its own full windows read it again) and reads the other again among the
  walk's first probes: a probe before holding is time off the 30 s a change is given. At a
  later demand a point newly held was just read by its probe: its first neighbour is read at
  once, its own half window after (not under a tail constraint: its windows teach the margin).
- The demand's reads and epochs: governor_demand.py.
- Holding (governor_hold.py): half windows while the edge is walked (WALK_WINDOWS; not under a
  tail constraint), full ones after; a short one a step up now and then (often near the point's
  capacity, where a rising demand shows nowhere else; at once where --busy-from shows a held
  window busy throughout after windows that were not, the held window ended as soon as it has
  not been idle for EARLY_FRACTION of it); the neighbours of a point just held read
  (the edge walked jointly), a close call's other point read again.

Constraints: items_per_s and power_w floors and ceilings and demand>=SHARE, which the models
predict; a latency quantile's ceiling and a miss rate, the tail, judged by the windows
(tail_judge.py): a point is proposed only at a load the tail allows, and with --busy-from
(the loads read, not bounded) not explored past it either (_over_load). `modelled` says
whether a set is the governor's (live_tuning.py falls back to the first generation otherwise;
`--phases` runs the first generation per phase).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..run.constraint import Constraint
from .demand_epoch import breaks, is_rate_floor
from .governor_demand import DemandReading
from .governor_hold import (
    PROBE_SHARE,
    RECHECKS,
    TOP_SHARE,
    WALK_SHARE,
    WALK_WINDOWS,
)
from .online_tuner import (
    DEMAND,
    EXPLORING,
    FROZEN,
    HOLDING,
    RETUNING,
    SIGMAS,
    Decision,
    Window,
    _apart,
)
from .point_choice import best_neighbour, explore, propose, rival, unsure
from .tail_judge import is_tail
from .workload_model import Point, Seen, fit, shares_of

MAX_PROBES = 5  # points read per demand before the best read is held
EARLY_SIGMAS = 3.0  # a held point's rate moved, judged before its window's end
# a held window so far busy at least this share of it (--busy-from), where the point's windows
# before were not busy throughout, ends there: never idle, the queue never emptied (at 97% of
# its capacity a point is idle now and then within any few seconds; a window busy 97-99.5%
# waits for its end, as Poisson arrivals near capacity fill a short one by chance)
BUSY_NO_IDLE = 0.995
MAX_DRAINS = 4  # reads read again for a drained backlog, per demand


def modelled(limits: Sequence[Constraint]) -> bool:
    """Every constraint one the models predict (the rate, the power, the demand share) or one
    of the tail judged by its reads (a latency quantile, the miss rate)."""
    return all(lim.name in ("items_per_s", "power_w", DEMAND) or is_tail(lim) for lim in limits)


class Governor(DemandReading):
    """The second-generation controller: `start(point)`, then `observe(point, window)` after
    each window, as OnlineTuner (the daemon drives either)."""

    generation = 2

    # -- what the daemon calls -------------------------------------------------------------------
    @property
    def demand(self) -> Optional[float]:
        return self._epoch.demand

    def ends_early(self, point: Point, partial: Window, settling: bool = False) -> bool:
        """Whether a window so far is enough: it breaks a constraint beyond its noise, or, at
        the held point, its rate moved beyond it (the demand changed: the rest of the window
        would only straddle the change), or it has not been idle (--busy-from: BUSY_NO_IDLE)
        where the point's windows before were not busy throughout (a demand past its capacity:
        the look one step up follows, Holding._busier); elsewhere (a probe, a look), never
        idle so far and already a rise at once (Holding._rose_at_once: live run AP's look
        served 97.8/s against a demand read at 64.3, busy throughout, for its whole 4 s). A
        rate floor does not end a window that reads the demand (at the top, or where a fall is
        read): nothing serves more there, and a read stopped where it happened to look low is
        low on average (the fluid benchmark's reads of the demand: 3.0% under the truth, 0.27
        of their uncertainty; 0.6% without). Nor does a tail a settling window that serves
        more than the demand: it drains the queue a point before left, and its latencies are
        that queue's (ended and judged, the top broke a p99 ceiling so after a probe below the
        demand and was held "met nowhere read" for the rest of the demand, the drain among its
        windows; where it serves less, its own queue grows, and it ends)."""
        held = self.phase == HOLDING and point == self.held
        reading = not held and point in (self.space.top(), self._epoch.read_at)
        demand = self._epoch.demand
        draining = settling and demand is not None and partial.items_per_s > demand
        if any(breaks(partial, lim) for lim in self.judged()
               if not (reading and is_rate_floor(lim) or draining and is_tail(lim))):
            return True
        if not held:
            # a probe or a look never idle so far (--busy-from) that already served more than
            # the demand read where that is a rise at once (_rose_at_once): the rest of it
            # would read only what it shows
            return not reading and partial.busy_share is not None and \
                partial.busy_share >= BUSY_NO_IDLE and \
                self._rose_at_once(partial, self.last) is not None
        if self._busier(partial, counted=False, full=BUSY_NO_IDLE):
            return True  # never idle so far where it was not: the look one step up now
        # (looked at every sample: a stricter margin than a whole window's keeps the looks
        # from finding a move in the noise)
        ref = self._epoch.mean(point)
        return ref is not None and _apart(
            partial.items_per_s, partial.items_per_s_uncertainty_pct, ref.items_per_s,
            ref.items_per_s_uncertainty_pct, EARLY_SIGMAS)

    def start(self, point: Point) -> Decision:
        self._start = point
        return Decision(point, self.phase, "measuring the point the board holds", settle=True)

    def observe(self, point: Point, window: Optional[Window],
                failure: Optional[str] = None) -> Decision:
        decision = self._next(point, window, failure)
        if decision.phase == HOLDING and decision.point == self.held and not decision.settle \
                and decision.window_share == 1.0 and self._held_windows < WALK_WINDOWS and \
                not self._tail.limits:
            # a point just held: the walk's windows (full under a tail constraint: the held
            # windows teach its margin, and half as many frames give a noisier quantile)
            decision.window_share = WALK_SHARE
        return decision

    def _next(self, point: Point, window: Optional[Window], failure: Optional[str]) -> Decision:
        if window is None:
            return self._freeze(failure or "the rate source did not answer")
        self.windows += 1
        before, self.last = self.last, (point, window)
        top = self.space.top()
        if self.phase == FROZEN:
            self.phase = RETUNING if self.held is not None else EXPLORING
        # (a fall read at the held point: its window is the demand's read, once, whichever
        # epoch keeps it; not read again as a window that kept up, _remember)
        fall_read = self._epoch.demand is None and point == self._epoch.read_at
        new_demand = self._demand_from(point, window)
        if new_demand is not None:
            return new_demand
        ep = self._epoch
        more = point != top and ep.demand is not None and window.items_per_s > ep.demand and \
            _apart(window.items_per_s, window.items_per_s_uncertainty_pct, ep.demand,
                   ep.demand_pct, SIGMAS)
        rose = self._rose_at_once(window, before) if more else None
        if rose is not None:
            return self._new_demand(f"{self._text(point)} served more than the demand read "
                                    f"({window.items_per_s:.3g} > {ep.demand:.3g}/s), busy "
                                    f"throughout after {rose}")
        if more and ep.drained < MAX_DRAINS and \
                not self._rose_past_held(point, window, before):
            # more than arrives: it drained a backlog a point before left (and looks better
            # than it is); read again, drained
            ep.drained += 1
            if self._drained_last == point:  # twice running, drained: more arrives
                self._drained_last = None
                return self._new_demand(f"{self._text(point)} served more than the demand read "
                                        f"({window.items_per_s:.3g} > {ep.demand:.3g}/s) twice")
            self._drained_last = point
            return Decision(point, self.phase, f"{self._text(point)} served more than arrives "
                            f"({window.items_per_s:.3g} > {ep.demand:.3g}/s: a backlog "
                            "drained): reading it again", window_share=PROBE_SHARE)
        self._drained_last = None
        limits = self.judged()
        broken = [lim for lim in limits if breaks(window, lim)]
        if broken:
            self.broken_windows += 1
        self._epoch.reads.setdefault(point, []).append(window)
        self._remember(point, window, fall_read)
        self._tail.learn_load(self._load(point), ep.demand, window)
        meets = all(window.meets(lim) for lim in limits)
        if meets and (self.best is None or window.items_per_j > self.best[1].items_per_j):
            self.best = (point, window)
        if self.phase == HOLDING and point == self.held:
            return self._hold(point, window, broken)
        if self.phase == HOLDING and point == self._checking and self.held is not None:
            self._checking = None
            # more than the demand read (not merely more than the held point: a point held
            # saturated, as at a demand beyond the top's, serves more one step up anyway)
            if ep.demand is not None and window.items_per_s > ep.demand and _apart(
                    window.items_per_s, window.items_per_s_uncertainty_pct, ep.demand,
                    ep.demand_pct, SIGMAS):
                return self._new_demand(f"one step up serves more than the demand read "
                                        f"({ep.demand:.3g} -> {window.items_per_s:.3g}/s)")
            return Decision(self.held, self.phase, f"one step up, {self._text(point)} serves "
                            f"no more: holding {self._text(self.held)}")
        if broken and point == top:  # nothing below does better (a clock lowered never
            # serves more): the top, held until the demand moves
            self.held, self.held_window = top, self._epoch.mean(top)
            self.phase, self._held_windows, self._resume = HOLDING, 0, None
            return Decision(top, self.phase, f"{self._said(broken)} even at the top of the "
                            f"space: holding {self._text(top)}, the top")
        if (self._capacity_miss(broken, window) or not meets and point != top and
                self._misses(point, window)):
            self._epoch.missed.append(point)  # (a held point that breaks while held: _hold)
        said, self._kept = self._kept, ""
        return self._choose(why=said, after_miss=bool(broken))

    def _remember(self, point: Point, window: Window, read_demand: bool = False) -> None:
        ep, models = self._epoch, self._models
        capacity = self._capacity(point)
        if point not in (self.space.top(), ep.read_at) and not read_demand:
            # (a read of the demand too; a fall's read taken back as the demand before it,
            # _same_as_before, is one read of it, not two)
            ep.read_kept_up(window, capacity, models.time_rms if models is not None else 0.0)
        # (one uncertainty: a point read a little under the demand is taken at its rate; the
        # capacity fit keeps it no lower than that where it kept up after all)
        # (a ceiling on the points below it only beyond SIGMAS: workload_model.py)
        self._seen.append(Seen(point, shares_of(self.space.tables, point), window.items_per_s,
                               window.power_w, ep.saturated(window), ep.saturated(window, SIGMAS),
                               window.capacity_per_s))
        self._models = fit(self._seen)

    def _misses(self, point: Point, window: Window) -> bool:
        """Not met and not for noise: a floor's figure under it (a point may be unmet only
        for a wide interval, and is then read again rather than ruled out)."""
        values = [(lim, window.metric(lim.name)[0]) for lim in self.judged() if lim.op == ">="]
        return self._capacity_miss([lim for lim, v in values if v is not None and v < lim.value],
                                   window)

    def _capacity_miss(self, missed: Sequence[Constraint], window: Window) -> bool:
        """Whether a window's missed limits rule its point out (and those below it): a rate
        floor only where it served less than the demand beyond SIGMAS (a point that kept up
        with a demand under the floor says that of the demand, not of its clocks: live, a fall
        read 11% low at the held point ruled out every point below it, the optimum among them;
        and one read under the demand within SIGMAS may have kept up)."""
        kept_up = self._epoch.demand is not None and not self._epoch.saturated(window, SIGMAS)
        return any(not (kept_up and is_rate_floor(lim))
                   for lim in missed)

    # -- choosing ----------------------------------------------------------------------------------
    def _choose(self, why: str = "", after_miss: bool = False) -> Decision:
        ep = self._epoch
        if ep.demand is None:
            return Decision(self.space.top(), self.phase, "the demand is not known yet: read at "
                            "the top", settle=after_miss, window_share=TOP_SHARE)
        read = self._read_scores()
        best_read = max(read, key=lambda kv: kv[1].items_per_j, default=None)
        resume = self._resumed(read, best_read)
        if resume is not None:
            self.held, self.held_window = resume, ep.mean(resume)
            self.phase = HOLDING
            return Decision(resume, self.phase, self._join(why, f"holding {self._text(resume)} "
                            "again"), settle=after_miss)
        models = self._models
        # the first demand explored whole (what each knob does, for the power model); a later
        # one goes by the models
        probe = explore(self.space, self._epoch) if self.epochs == 0 or models is None else None
        if probe is not None:
            return Decision(probe, self.phase, self._join(why, "exploring: each knob down "
                            "until it no longer keeps up"), settle=after_miss,
                            window_share=PROBE_SHARE)
        proposal = propose(self._points, self._x, self._models, ep, self.judged(), self._tail,
                           best_read)
        if proposal is not None and ep.probes < MAX_PROBES:
            ep.probes += 1
            return Decision(proposal, self.phase, self._join(why, f"the models put "
                            f"{self._text(proposal)} ahead: reading it"), settle=after_miss,
                            window_share=PROBE_SHARE)
        again = unsure(ep, {p for p, _ in read}, self.judged(), best_read[1] if best_read
                       else None, self.space.top())
        if again is not None:
            ep.unsure += 1
            return Decision(again, self.phase, self._join(why, f"{self._text(again)} met "
                            "within its noise only: reading it again"), settle=after_miss,
                            window_share=PROBE_SHARE)
        if (best_read is None or best_read[0] == self.space.top()) and self.epochs > 0:
            # the models found nothing better than the top (too few points read to fit, or
            # they hoped wrong): each knob down from the top, as the first demand was (not past
            # the load a tail allows where the loads are read: _over_load)
            probe = explore(self.space, self._epoch)
            if probe is not None and not self._over_load(probe):
                return Decision(probe, self.phase, self._join(why, "nothing better than the "
                                "top known: each knob down from it"), settle=after_miss,
                                window_share=PROBE_SHARE)
        if best_read is None:  # nothing read meets the constraints: the top
            top = self.space.top()
            self.held, self.held_window = top, ep.mean(top)
            self.phase = HOLDING
            return Decision(top, self.phase, self._join(why, f"{self._met()} nowhere read: "
                            f"holding {self._text(top)}, the top"), settle=after_miss)
        point, window = best_read
        # a close call (the best two read within noise of each other): the better held at
        # once (its own windows read it again), the other read again among the walk's probes
        self._rival = rival(ep, read) if ep.rechecks < RECHECKS else None
        moved = point != self.held
        self.held, self.held_window = point, ep.mean(point)
        self.phase = HOLDING
        self._held_windows = 0
        if moved and self.epochs > 0 and not self._tail.limits:
            # a later demand's point just moved to was read by its probe: its first neighbour
            # is read at once, its own half window after (5 s of the 30 a change is given,
            # wherever the walk moves on); under a tail constraint its own windows first
            near = best_neighbour(self.space, ep, point, self.judged(), self.predicted,
                                  self._load_ok, self._capacity)
            if near is not None:
                return Decision(near, self.phase, self._join(why, f"holding "
                                f"{self._text(point)}; reading {self._text(near)} beside it"),
                                settle=after_miss, window_share=PROBE_SHARE)
        return Decision(point, self.phase, self._join(why, f"holding {self._text(point)} "
                        f"({window.items_per_j:.3g} items/J, {self._met()})"),
                        settle=after_miss)

    def _resumed(self, read: Sequence[Tuple[Point, Window]],
                 best_read: Optional[Tuple[Point, Window]]) -> Optional[Point]:
        """After a move read again as the demand before it (its windows taken back): the point
        held then, where it meets every constraint still and no point read is ahead of it
        beyond noise, to hold again with its walk where it was (chosen afresh, a point ahead
        within noise only was held and the edge walked again from the models: a fall on the
        TX1 within 5% of the optimum at 107 s went 6.6% off and back until 235 s); None
        otherwise."""
        resume, self._resume = self._resume, None
        mine = next((w for p, w in read if p == resume), None)
        if mine is None or best_read is None:
            return None
        return None if self._ahead(best_read[1], mine) else resume

    def _over_load(self, point: Point) -> bool:
        """Under a tail constraint, where the workload says how busy it is and the point the
        demand was read at (the top, or the held one after a fall) kept up with it: a point the
        capacity model puts over the load the tail allows (the capacities read from the busy
        share, its load is the one that would run; exploring there is a stretch of missed tail
        after a rise or a fall). Without the busy share the capacities modelled below the
        points read are lower bounds, the loads too high: exploring is what reads them. Nor
        where that point was busy throughout (a saturated workload: no queue to keep short,
        every point's load over 1)."""
        read = self._epoch.mean(self._epoch.read_at or self.space.top())
        if not self._tail.limits or read is None or read.busy_share is None or \
                self._epoch.saturated(read):
            return False
        return not self._load_ok(point)

    def _read_scores(self) -> List[Tuple[Point, Window]]:
        """The points read under this demand that meet every constraint beyond noise (a rate
        floor also where the point kept up with a demand that meets it, or where --busy-from
        read it keeping up with a capacity that clears it: Epoch.met)."""
        limits = [lim for lim in self.judged() if not is_tail(lim)]
        ep = self._epoch
        return [(point, self._at_demand(point, w)) for point in ep.reads
                for w in [ep.mean(point)]
                if w is not None and ep.met(self._at_demand(point, w, judged=True), limits, w,
                                            ep.mean(point, each=True)) and
                self._tail.met(ep, point)]

    def tail_text(self) -> Dict[str, str]:
        """The tail constraints' margins, said in status (tail_judge.py)."""
        return self._tail.text()

    def _freeze(self, why: str) -> Decision:
        self.phase = FROZEN
        keep = self.held if self.held is not None else (self._start or self.space.top())
        return Decision(keep, self.phase, f"{why}: frozen at {self._text(keep)}")
