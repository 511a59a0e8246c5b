"""The tail under `daemon --tune`'s governor (issue 59): a latency quantile's ceiling or a
deadline-miss budget, judged by each point's own windows with an empirical margin, and the
load (the demand over a point's capacity) points are proposed at.

A tail figure is not modelled over the clocks: a point is judged by its windows at this demand,
their mean times the TAIL_QUANTILE of the held windows' ratio to the mean of their point's
windows before them (a latency; a miss rate: plus the quantile of their excess over it), not
mean + k sigma: a window's p99 is skewed, and its spread is what the held windows show
(TAIL_DEFAULT before TAIL_WINDOWS_MIN of them; a window busy throughout, a closed loop or a
point past its capacity, shows no queue and is not counted, nor its load: shows_queue). Fewer than
1/(1 - TAIL_QUANTILE) windows hold no 99th percentile: it is extrapolated from their largest
(upper_quantile).

A queue's tail grows with its load whatever the clocks, so a point is proposed at a load no
higher than one whose window met the tail with the margin (LOAD_STEP more, to learn) and short
of the lowest that did not (LOAD_START before any). A load is kept with the demand it was read
at: a queue's latencies counted in the arrivals' mean gaps depend on its load alone (arrivals
of one shape at every rate, Poisson or periodic), so a latency read at demand d_w is
latency * d_w / d at demand d under the same load. It is judged so where d is lower (a fall
after a busy hour kept loads learnt at the busy demand, twice the latency now, and missed) and
as read where d is higher (a window read as the demand moved counts at the old demand; crediting
it with the new one proposed points past the tail after a rise). A miss rate's deadline is
fixed: its windows are judged as read.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

from ..run.constraint import Constraint
from .demand_epoch import BUSY_FULL, Epoch, kept_up
from .online_tuner import MISS_RATE, Point, Window

TAIL_QUANTILE = 0.99  # a tail figure's margin: this quantile of the held windows' spread
TAIL_WINDOWS_MIN = 8  # held windows before their own margin replaces the default
# (a latency's ratio, a miss rate's excess) until then: a 10 s window's p99 over the mean of
# its point's, Poisson arrivals at loads 0.5-0.8, is 1.5-2.1 at its 99th percentile
TAIL_DEFAULT = (2.0, 0.01)
TAIL_TOP = 12  # the most windows over the threshold that upper_quantile extrapolates from
TAIL_HISTORY = 120  # held windows (and loads) kept
LOAD_START = 0.6
LOAD_STEP = 0.05


def is_tail(lim: Constraint) -> bool:
    """A constraint on the tail: a latency quantile's ceiling, or the miss rate's."""
    return lim.name == MISS_RATE or lim.name.startswith("latency_")


def shows_queue(window: Window, load: Optional[float]) -> bool:
    """Whether a window shows a queue's tail under its load: not one busy throughout (a closed
    loop serves back to back and meets any tail; an open queue past its capacity grows without
    bound): as --busy-from read it, else as the load says (the demand over the point's modelled
    capacity, BUSY_FULL or more). Without --busy-from the max demand's closed loop taught loads
    of 1.5 met and a spread of exactly 1.0, and after the fall points past their capacity were
    proposed and held at that margin: four stretches missed in a row."""
    if window.busy_share is not None:
        return kept_up(window)
    return load is None or load < BUSY_FULL


def upper_quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of values; where fewer than k of them lie above it, extrapolated from
    the k largest taken as exponential excesses over the (k+1)-th (peaks over a threshold). The
    largest of 20 windows is their 95th percentile, not their 99th: margins so read let 3-6% of
    the next windows through where 1% was meant; and the largest of 55 is one window, which may
    be a demand that moved under a held point (taken as the margin, 4.4x held the top after
    a fall)."""
    ranked = sorted(values, reverse=True)
    n = len(ranked)
    k = max(2, min(TAIL_TOP, n // 4))
    if n <= k or n * (1 - q) >= k:
        return ranked[n - 1 - min(n - 1, int(q * n))]
    threshold = ranked[k]
    scale = sum(v - threshold for v in ranked[:k]) / k
    return threshold + scale * math.log(k / (n * (1 - q)))


class TailJudge:
    """The tail constraints of a governor, and what its windows taught of them."""

    def __init__(self, limits: Sequence[Constraint]):
        self.limits = tuple(lim for lim in limits if is_tail(lim))
        self._seen: Dict[str, List[float]] = {}  # held windows' spread, by figure
        # (load, the demand read, each tail figure) of windows read
        self._loads: List[Tuple[float, float, Dict[str, float]]] = []
        self._recent: List[List] = []  # the lists the last window read was added to

    def met(self, epoch: Epoch, point: Point) -> bool:
        """Every tail constraint met at a point by its windows under this demand, with the
        margin; a point whose windows read no tail figure is not judged on it."""
        for lim in self.limits:
            values = epoch.values(point, lim.name)
            if values and not lim.met(self._judged(lim.name, sum(values) / len(values),
                                                   self.margin(lim.name)), None):
                return False
        return True

    @staticmethod
    def _judged(name: str, value: float, margin: float) -> float:
        """A figure as judged: with its margin (module doc)."""
        return value + margin if name == MISS_RATE else value * margin

    def margin(self, name: str) -> float:
        """A figure's margin: the TAIL_QUANTILE of the held windows' ratio to the mean of their
        point's windows before them (a latency: >= 1), or of their excess over it (a miss
        rate: >= 0)."""
        seen = self._seen.get(name, [])
        if len(seen) < TAIL_WINDOWS_MIN:
            return TAIL_DEFAULT[name == MISS_RATE]
        value = upper_quantile(seen, TAIL_QUANTILE)
        return max(value, 0.0) if name == MISS_RATE else max(value, 1.0)

    def learn_held(self, epoch: Epoch, point: Point, window: Window,
                   load: Optional[float]) -> None:
        """A held window (the last of its point's) against the mean of the point's windows
        before it, two at least: what a point judged by its windows' mean meets next, that
        mean's own error with it (against a mean holding the window itself, three windows
        read 1.3-1.4 where the next fell at 1.7-2 times their mean). Not a window that shows
        no queue (shows_queue)."""
        for lim in self.limits:
            value = window.metric(lim.name)[0]
            before = epoch.values(point, lim.name)[:-1]
            if value is None or len(before) < 2 or not shows_queue(window, load):
                continue
            mean = sum(before) / len(before)
            seen = self._seen.setdefault(lim.name, [])
            if lim.name == MISS_RATE:
                seen.append(float(value) - mean)
            elif mean > 0:
                seen.append(float(value) / mean)
            else:
                continue
            del seen[:-TAIL_HISTORY]
            self._recent.append(seen)

    def load_allowed(self, demand: float) -> float:
        """The highest load a point is proposed at under this demand (module doc)."""
        met: List[float] = []
        missed: List[float] = []
        margins = {lim.name: self.margin(lim.name) for lim in self.limits}
        for load, read_at, values in self._loads:
            (met if self._load_met(demand, read_at, values, margins) else missed).append(load)
        allowed = max([LOAD_START] + [m + LOAD_STEP for m in met])
        if missed:
            allowed = min(allowed, min(missed) * (1 - LOAD_STEP))
        return allowed

    def _load_met(self, demand: float, read_at: float, values: Dict[str, float],
                  margins: Dict[str, float]) -> bool:
        """Whether a window read at demand read_at met every tail constraint with the margin,
        judged at this demand (module doc)."""
        scale = max(1.0, read_at / demand)
        return all(lim.met(self._judged(lim.name, values[lim.name] * (
            1.0 if lim.name == MISS_RATE else scale), margins[lim.name]), None)
            for lim in self.limits)

    def learn_load(self, load: Optional[float], demand: Optional[float], window: Window
                   ) -> None:
        """A window's load, the demand it was read at and its tail figures, first of what each
        window read teaches (one with either unknown, that read no tail figure, or that shows
        no queue says nothing)."""
        self._recent = []
        values = {lim.name: window.metric(lim.name)[0] for lim in self.limits}
        if load is None or demand is None or demand <= 0 or not values or \
                any(v is None for v in values.values()) or not shows_queue(window, load):
            return
        self._loads.append((load, demand, {k: float(v) for k, v in values.items()
                                           if v is not None}))
        del self._loads[:-TAIL_HISTORY]
        self._recent.append(self._loads)

    def forget_last(self) -> None:
        """Take back what the last window read taught (its load, its spread): the demand moved
        under it, and its tail was the move's, at a load misread (TX1 surface 11: the held
        window the demand doubled in read 4x its point's p99, the margin 4x for the next 30
        windows)."""
        for learnt in self._recent:
            if learnt:
                learnt.pop()
        self._recent = []

    def text(self) -> Dict[str, str]:
        """The margins, said in status."""
        out = {}
        for lim in self.limits:
            n = len(self._seen.get(lim.name, []))
            m = self.margin(lim.name)
            shown = f"+{m:.3g}" if lim.name == MISS_RATE else f"x{m:.3g}"
            out[lim.name] = (f"{shown}: the {TAIL_QUANTILE * 100:g}th percentile of {n} held "
                             "windows against their point's windows before them"
                             if n >= TAIL_WINDOWS_MIN else
                             f"{shown}: the default until {TAIL_WINDOWS_MIN} held windows "
                             f"({n} so far)")
        return out
