"""The tail under `daemon --tune`'s governor (issue 59): a latency quantile's ceiling or a
deadline-miss budget, judged by each point's own windows with an empirical margin, and the
load (the demand over a point's capacity) points are proposed at.

A tail figure is not modelled over the clocks: a point is judged by its windows at this demand,
their mean times the TAIL_QUANTILE of the held windows' ratio to their point's mean (a latency;
a miss rate: plus the quantile of their excess), not mean + k sigma: a window's p99 is skewed,
and its spread is what the held windows show (TAIL_DEFAULT before TAIL_WINDOWS_MIN of them). A
queue's tail grows with its load whatever the clocks, so a point is proposed at a load no higher
than one whose windows met the tail (LOAD_STEP more, to learn) and short of the lowest that
missed (LOAD_START before any).
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from ..run.constraint import Constraint
from .demand_epoch import Epoch
from .online_tuner import MISS_RATE, Point, Window

TAIL_QUANTILE = 0.99  # a tail figure's margin: this quantile of the held windows' spread
TAIL_WINDOWS_MIN = 8  # held windows before their own margin replaces the default
TAIL_DEFAULT = (1.5, 0.0)  # (a latency's ratio, a miss rate's excess) until then
TAIL_HISTORY = 120  # held windows (and loads) kept
LOAD_START = 0.6
LOAD_STEP = 0.05


def is_tail(lim: Constraint) -> bool:
    """A constraint on the tail: a latency quantile's ceiling, or the miss rate's."""
    return lim.name == MISS_RATE or lim.name.startswith("latency_")


class TailJudge:
    """The tail constraints of a governor, and what its windows taught of them."""

    def __init__(self, limits: Sequence[Constraint]):
        self.limits = tuple(lim for lim in limits if is_tail(lim))
        self._seen: Dict[str, List[float]] = {}  # held windows' spread, by figure
        self._loads: List[Tuple[float, bool]] = []  # (load, the tail met) of windows read

    def met(self, epoch: Epoch, point: Point) -> bool:
        """Every tail constraint met at a point by its windows under this demand, with the
        margin; a point whose windows read no tail figure is not judged on it."""
        for lim in self.limits:
            values = epoch.values(point, lim.name)
            if not values:
                continue
            mean = sum(values) / len(values)
            judged = mean + self.margin(lim.name) if lim.name == MISS_RATE else \
                mean * self.margin(lim.name)
            if not lim.met(judged, None):
                return False
        return True

    def margin(self, name: str) -> float:
        """A figure's margin: the TAIL_QUANTILE of the held windows' ratio to their point's
        mean at the time (a latency: >= 1), or of their excess over it (a miss rate: >= 0)."""
        seen = self._seen.get(name, [])
        if len(seen) < TAIL_WINDOWS_MIN:
            return TAIL_DEFAULT[name == MISS_RATE]
        ranked = sorted(seen)
        value = ranked[min(len(ranked) - 1, int(TAIL_QUANTILE * len(ranked)))]
        return max(value, 0.0) if name == MISS_RATE else max(value, 1.0)

    def learn_held(self, epoch: Epoch, point: Point, window: Window) -> None:
        """A held window's spread against its point's mean (three windows there at least)."""
        for lim in self.limits:
            value = window.metric(lim.name)[0]
            values = epoch.values(point, lim.name)
            if value is None or len(values) < 3:
                continue
            mean = sum(values) / len(values)
            seen = self._seen.setdefault(lim.name, [])
            if lim.name == MISS_RATE:
                seen.append(float(value) - mean)
            elif mean > 0:
                seen.append(float(value) / mean)
            del seen[:-TAIL_HISTORY]

    def load_allowed(self) -> float:
        """The highest load a point is proposed at (module doc)."""
        met = [load for load, ok in self._loads if ok]
        missed = [load for load, ok in self._loads if not ok]
        allowed = max([LOAD_START] + [m + LOAD_STEP for m in met])
        if missed:
            allowed = min(allowed, min(missed) * (1 - LOAD_STEP))
        return allowed

    def learn_load(self, load: float, window: Window) -> None:
        """A window's load and whether it met every tail constraint (one that read no tail
        figure says nothing)."""
        values = [(lim, window.metric(lim.name)[0]) for lim in self.limits]
        if not values or any(v is None for _, v in values):
            return
        self._loads.append((load, all(lim.met(v, None) for lim, v in values)))
        del self._loads[:-TAIL_HISTORY]

    def text(self) -> Dict[str, str]:
        """The margins, said in status."""
        out = {}
        for lim in self.limits:
            n = len(self._seen.get(lim.name, []))
            m = self.margin(lim.name)
            shown = f"+{m:.3g}" if lim.name == MISS_RATE else f"x{m:.3g}"
            out[lim.name] = (f"{shown}: the {TAIL_QUANTILE * 100:g}th percentile of {n} held "
                             "windows against their point's mean" if n >= TAIL_WINDOWS_MIN else
                             f"{shown}: the default until {TAIL_WINDOWS_MIN} held windows "
                             f"({n} so far)")
        return out
