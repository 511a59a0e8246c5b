"""One demand of `daemon --tune`'s governor (governor.py): what each point's windows measured
under it, and what they rule out. A demand that moves begins another: windows are compared
within one (a paced workload's items/J depends on the demand as much as on the clocks)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from ..run.constraint import Constraint
from .online_tuner import SIGMAS, Point, Window, _apart

# a window at a point whose modelled capacity lies this far above the demand (or three of the
# capacity fit's rms errors, where more) served the demand itself: it reads the demand too
KEPT_UP_MARGIN = 0.15
# a window busy at least this share of it did not keep up (--busy-from): a queue that empties
# now and then served what arrived
BUSY_FULL = 0.97


def kept_up(window: Window) -> bool:
    """--busy-from read the window busy under BUSY_FULL of it: it served what arrived."""
    return window.busy_share is not None and window.busy_share < BUSY_FULL


def is_rate_floor(limit: Constraint) -> bool:
    """A floor on the items served per second."""
    return limit.name == "items_per_s" and limit.op == ">="


def breaks(window: Window, limit: Constraint) -> bool:
    """Broken beyond the window's noise by its point: a rate floor not where --busy-from
    shows the point kept up (busy under BUSY_FULL): it served what arrived, and a count under
    the floor is the arrivals' (Poisson at 50/s: a 3 s window reads 20% low now and then; the
    fluid benchmark held the top for a demand read so at it, and left a held point that kept
    up for a probe's such count)."""
    return window.breaks(limit) and not (
        kept_up(window) and is_rate_floor(limit))


@dataclass
class Epoch:
    """One demand: its rate (read at the top, or at a held point it fell at), each point's
    windows, the points that missed a constraint, and the search's counts under it."""
    demand: Optional[float] = None
    demand_pct: Optional[float] = None
    reads: Dict[Point, List[Window]] = field(default_factory=dict)
    demand_reads: List[Window] = field(default_factory=list)  # the windows the demand is of
    missed: List[Point] = field(default_factory=list)
    probes: int = 0
    rechecks: int = 0
    unsure: int = 0  # points met within their noise only, read again
    drained: int = 0  # reads that drained a backlog, read again
    read_at: Optional[Point] = None  # where the demand is read (None: the top)
    explore_knob: int = 0  # exploring: the knob halving down now
    explore_at: Dict[int, int] = field(default_factory=dict)  # the index each explores next

    def mean(self, point: Point, each: bool = False) -> Optional[Window]:
        """The windows at a point, as one (rate and power averaged, their noise shrunk; with
        `each`, the noise of one of them: what a window there may read)."""
        ws = self.reads.get(point)
        if not ws:
            return None
        n = len(ws)
        rate = sum(w.items_per_s for w in ws) / n
        power = sum(w.power_w for w in ws) / n

        def pct(values: List[Optional[float]]) -> Optional[float]:
            if any(v is None for v in values):
                return None
            return math.sqrt(sum(v * v for v in values if v is not None)) / (
                math.sqrt(n) if each else n)
        busy = [w.busy_share for w in ws]
        return Window(rate, pct([w.items_per_s_uncertainty_pct for w in ws]), power,
                      pct([w.power_w_uncertainty_pct for w in ws]),
                      busy_share=None if None in busy else
                      sum(b for b in busy if b is not None) / n)

    def excluded(self, point: Point) -> bool:
        """At or below a point that missed under this demand (every clock no higher): it
        misses too (a rate does not rise, nor a latency fall, as a clock comes down)."""
        return any(all(a <= b for a, b in zip(point, m)) for m in self.missed)

    def saturated(self, window: Window, sigmas: float = 1.0) -> bool:
        """Served less than the demand beyond `sigmas` uncertainties: the point's capacity
        (one: what the capacity fit takes; SIGMAS: what rules points out, a verdict). Where
        the window read how busy the workload was, busy BUSY_FULL of it, whatever the noise."""
        if window.busy_share is not None:
            return window.busy_share >= BUSY_FULL
        return self.demand is not None and window.items_per_s < self.demand and _apart(
            window.items_per_s, window.items_per_s_uncertainty_pct, self.demand,
            self.demand_pct, sigmas)

    def read_demand(self, window: Window) -> None:
        """A window that read the demand (at the top, or at the held point after a fall): the
        demand is the mean of those read under this epoch, each by its precision (one short
        read of Poisson arrivals at a low rate is 6-8% noisy; the floor may lie 10% under)."""
        self.demand_reads.append(window)
        weights = [1.0 / max(w.items_per_s_uncertainty_pct or 100.0, 1e-3) ** 2
                   for w in self.demand_reads]
        total = sum(weights)
        self.demand = sum(wt * w.items_per_s for wt, w in zip(weights, self.demand_reads)) \
            / total
        pcts = [w.items_per_s_uncertainty_pct for w in self.demand_reads]
        self.demand_pct = None if any(p is None for p in pcts) else 1.0 / math.sqrt(total)

    def read_kept_up(self, window: Window, capacity: Optional[float],
                     capacity_rms: float) -> bool:
        """A window at a point other than where the demand is read, its modelled `capacity`
        (relative rms error `capacity_rms`) KEPT_UP_MARGIN above the demand, that served the
        demand within noise: a read of the demand too (True). One short read at the top is
        5-10% noisy at a low Poisson rate, and a held point near its capacity then serves 10%
        more when the demand doubles without leaving that noise: every window that served
        what arrived narrows it. A point near its capacity never reads it (a rise it hides
        would pull the demand up to it). Taken within SIGMAS on either side (a window one
        uncertainty under the demand left out as saturated, as it once was, and one two over
        kept, biased the demand up by a quarter of a read's noise: +1.7-2.2% in the fluid
        benchmark, -0.3/+0.8% now)."""
        if self.demand is None or not self.same_demand(window):
            return False
        if window.busy_share is not None:  # how busy it was, read: kept up where not full
            kept = kept_up(window)
        else:
            kept = capacity is not None and \
                capacity >= self.demand * (1 + max(KEPT_UP_MARGIN, 3 * capacity_rms))
        if not kept:
            return False
        self.read_demand(window)
        return True

    def met(self, window: Window, limits: Sequence[Constraint],
            read: Optional[Window] = None, each: Optional[Window] = None) -> bool:
        """Every limit met beyond the window's noise; a rate floor also where the point kept up
        (not saturated) with a demand that meets the floor beyond its own noise, and served at
        least the floor: the demand is read over many windows, a point's own short reads are
        6-8% noisy at a low Poisson rate, and a floor 10% under the demand is then never met
        beyond one read's noise by a point that keeps up with it. And where the point's windows
        as `read` show it kept up (--busy-from: busy under BUSY_FULL), it served what arrived:
        a rate floor is met where its capacity (the rate over the busy share) clears it beyond
        the rate's noise and the demand is not under it beyond its own (a demand read in 3 s at
        21/s is 11% noisy: no point cleared a floor 10% under it until five probes had narrowed
        it, the fluid benchmark's falls). A point that did not keep up serves its capacity in
        every window, so a rate floor is met there only where one window's noise (`each`, the
        point's windows with the noise of one) clears it too, not only their mean's: live run
        AK held a point that served 57-60/s, met over its windows under a floor of 57.9, and
        a 10 s stretch of it served 57.1."""
        kept = self.demand is not None and not self.saturated(window)
        capacity = read.capacity_per_s if read is not None and kept_up(read) else None
        return all((window.meets(lim) and (
            kept or each is None or not is_rate_floor(lim) or each.meets(lim))) or (
            kept and is_rate_floor(lim) and
            lim.met(self.demand, self.demand_pct, sigmas=SIGMAS) and
            window.items_per_s >= lim.value) or (
            read is not None and capacity is not None and is_rate_floor(lim) and
            lim.met(capacity, read.items_per_s_uncertainty_pct, sigmas=SIGMAS) and
            not lim.broken(self.demand, self.demand_pct, sigmas=SIGMAS)) for lim in limits)

    def same_demand(self, window: Window) -> bool:
        """A window's rate is this demand within noise (SIGMAS of both uncertainties)."""
        return self.demand is not None and not _apart(
            window.items_per_s, window.items_per_s_uncertainty_pct, self.demand,
            self.demand_pct, SIGMAS)

    def values(self, point: Point, name: str) -> List[float]:
        """A figure's values in the point's windows (those that read it)."""
        out = []
        for w in self.reads.get(point, []):
            value = w.metric(name)[0]
            if value is not None:
                out.append(float(value))
        return out
