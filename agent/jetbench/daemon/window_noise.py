"""How sure a `daemon --tune` window is of its rate and power, from the spread of the recent
windows together (issue 59).

A short window's own spread is a poor measure of its noise: three stretches of a counter or four
power readings give a standard error that is as often half the truth as near it (a chi-square of
two or three degrees of freedom), and the governor then finds differences in noise: a window of
1.5 s at 33 items/s read 27.5 items/s +-3% against a floor of 29.4, where 41 items arriving at
random are +-16%. The spreads are pooled over the last POOL_WINDOWS windows instead:

- the counter: its dispersion D, the variance of the items counted between two readings over
  their mean (1 for items arriving at random, as Poisson; near 0 for a paced camera; more for
  bursts), pooled from every interval's squared deviation from its window's rate, starting from
  PRIOR_DOF degrees of freedom of Poisson's 1. A window of N items is then sqrt(D / N) sure of
  its rate, never surer than its counting step, 1 / N. D is never under the window's own: a
  workload's counter is regular where it does not keep up (one item per service time) and as
  random as its arrivals where it does, and windows of the one must not make those of the other
  look sure (numbers in benchmarks/RESULTS.md, "How sure a window is").
- the power: a reading's variance about its window's mean, relative to it, pooled (the readings
  of an energy counter's intervals apart from those of instant ones: they average differently).
  A window of k readings is then sqrt(V / k) sure of its power, V never under the window's own:
  a point that does not keep up draws a steady power (busy all the time) and one that does a
  power that follows its random arrivals; after a run of the first (a simulated meter's with
  no noise at all), those of the second said +-0.1% where they varied by 2-4%.

A window whose own spread is CLIP times the pool's or more (a rate that moved within it, a load
that changed) enters the pool clipped there: one change does not make the next windows unsure.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Deque, Dict, Optional, Sequence, Tuple

POOL_WINDOWS = 12  # the windows whose spreads are pooled (two minutes of 10 s windows)
PRIOR_DOF = 4.0  # the counter's dispersion starts as Poisson's 1 with this many degrees of freedom
CLIP = 4.0  # a window's spread enters the pool at most this many times the pool's

Spread = Tuple[float, float]  # (sum of squared relative deviations, degrees of freedom)


def counter_spread(counts: Sequence[Tuple[float, float]]) -> Optional[Spread]:
    """A window's counter readings, (seconds, count) in order: each interval's squared deviation
    from the window's rate over its expected count, and the degrees of freedom (intervals less
    one); None where nothing was counted or fewer than two intervals."""
    spans = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(counts, counts[1:]) if b[0] > a[0]]
    items = counts[-1][1] - counts[0][1] if counts else 0.0
    seconds = sum(dt for dt, _ in spans)
    if len(spans) < 2 or items <= 0 or seconds <= 0:
        return None
    rate = items / seconds
    return sum((n - rate * dt) ** 2 / (rate * dt) for dt, n in spans), len(spans) - 1.0


def reading_spread(values: Sequence[float]) -> Optional[Spread]:
    """Readings of one figure in a window: their squared deviations from their mean, relative
    to it, and the degrees of freedom; None under two readings or a mean <= 0."""
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    if mean <= 0:
        return None
    return math.fsum(((v - mean) / mean) ** 2 for v in values), len(values) - 1.0


class _Pool:
    def __init__(self, prior: Optional[Spread] = None):
        self._prior = prior
        self._windows: Deque[Spread] = deque(maxlen=POOL_WINDOWS)

    def variance(self, extra: Optional[Spread] = None) -> Optional[float]:
        """The pooled variance with a window not yet learned (`extra`), never under that
        window's own (module doc); None: nothing yet."""
        total, dof = self._sums()
        if extra is None or extra[1] <= 0:
            return total / dof if dof > 0 else None
        clipped = self._clipped(extra, total, dof)
        return max((total + clipped[0]) / (dof + clipped[1]), extra[0] / extra[1])

    def learn(self, spread: Optional[Spread]) -> None:
        if spread is not None and spread[1] > 0:
            self._windows.append(self._clipped(spread, *self._sums()))

    def _sums(self) -> Spread:
        total = math.fsum(s for s, _ in self._windows)
        dof = math.fsum(d for _, d in self._windows)
        if self._prior is not None:
            total, dof = total + self._prior[0], dof + self._prior[1]
        return total, dof

    @staticmethod
    def _clipped(spread: Spread, total: float, dof: float) -> Spread:
        if dof <= 0:
            return spread
        return min(spread[0], CLIP * total / dof * spread[1]), spread[1]


class NoisePool:
    """The recent windows' spreads (module doc): `rate_pct` and `power_pct` say a window's
    uncertainty, `learn` adds a finished window's."""

    def __init__(self) -> None:
        self._counter = _Pool(prior=(PRIOR_DOF, PRIOR_DOF))
        self._power: Dict[str, _Pool] = {}

    def rate_pct(self, counts: Sequence[Tuple[float, float]]) -> Optional[float]:
        """A window's rate uncertainty, % (None: nothing counted)."""
        items = counts[-1][1] - counts[0][1] if len(counts) > 1 else 0.0
        if items <= 0:
            return None
        dispersion = self._counter.variance(counter_spread(counts)) or 0.0
        spread = 100.0 * math.sqrt(dispersion / items)
        return max(spread, 100.0 / items)

    def power_pct(self, values: Sequence[float], kind: str = "readings") -> Optional[float]:
        """A window's power uncertainty, % (None: no spread known yet), from its readings of
        one `kind` (instant readings, or an energy counter's intervals)."""
        if not values:
            return None
        variance = self._power.setdefault(kind, _Pool()).variance(reading_spread(values))
        return None if variance is None else 100.0 * math.sqrt(variance / len(values))

    def learn(self, counts: Sequence[Tuple[float, float]], powers: Sequence[float],
              kind: str = "readings") -> None:
        """A finished window's spreads, into the pools."""
        self._counter.learn(counter_spread(counts))
        self._power.setdefault(kind, _Pool()).learn(reading_spread(powers))
