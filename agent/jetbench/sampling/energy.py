"""Exact energy over a window from timestamped samples (pure maths, no I/O).

Power channels: the trapezoid integral of the piecewise-linear interpolant through the samples,
over real timestamps. An interval that straddles a window edge is cut at the edge and the power
there is interpolated, so the result is exact for any trace that is linear between samples.
Energy-counter channels (cumulative joules): the counter is interpolated linearly at the edges.

An interval is integrated only when both its samples are valid (not NaN) and it is no longer than
`max_gap_s`; everything else inside the window is a gap, reported and excluded from `covered_s`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import numpy as np


@dataclass(frozen=True)
class Integral:
    """energy_j over the covered part of [t0, t1]; gaps are (start_s, end_s) absolute times."""

    energy_j: float
    covered_s: float
    duration_s: float
    samples: int
    gaps: Tuple[Tuple[float, float], ...]

    @property
    def coverage(self) -> float:
        return self.covered_s / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def mean_w(self) -> float:
        """Mean power over the covered time (NaN when nothing was covered)."""
        return self.energy_j / self.covered_s if self.covered_s > 0 else math.nan


def integrate(
    t: np.ndarray,
    y: np.ndarray,
    t0: float,
    t1: float,
    *,
    counter: bool = False,
    max_gap_s: float = math.inf,
) -> Integral:
    """Integrate one channel over [t0, t1].

    t: sorted timestamps (s); y: watts (or cumulative joules when counter=True), NaN = invalid.
    max_gap_s: longer intervals between samples are gaps, not interpolated across.
    """
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    duration = max(t1 - t0, 0.0)
    finite = np.isfinite(y)
    samples = int(np.count_nonzero(finite & (t >= t0) & (t <= t1)))
    if duration == 0.0 or len(t) < 2:
        gaps = ((t0, t1),) if duration > 0 else ()
        return Integral(0.0, 0.0, duration, samples, gaps)

    ta, tb = t[:-1], t[1:]
    ya, yb = y[:-1], y[1:]
    dt = tb - ta
    a = np.maximum(ta, t0)
    b = np.minimum(tb, t1)
    ok = finite[:-1] & finite[1:] & (dt <= max_gap_s) & (b > a) & (dt > 0)
    if counter:
        ok &= yb >= ya  # a counter going backwards is a reset the source did not unwrap
    idx = np.nonzero(ok)[0]
    ta, dt, ya, yb, a, b = ta[idx], dt[idx], ya[idx], yb[idx], a[idx], b[idx]
    slope = (yb - ya) / dt
    ya_cut = ya + slope * (a - ta)
    yb_cut = ya + slope * (b - ta)
    if counter:
        energy = float(np.sum(yb_cut - ya_cut))
    else:
        energy = float(np.sum((ya_cut + yb_cut) * 0.5 * (b - a)))
    covered = float(np.sum(b - a))
    return Integral(energy, min(covered, duration), duration, samples, _gaps(a, b, t0, t1))


def _gaps(a: np.ndarray, b: np.ndarray, t0: float, t1: float) -> Tuple[Tuple[float, float], ...]:
    """The parts of [t0, t1] not covered by the (sorted, non-overlapping) intervals [a, b]."""
    gaps = []
    cursor = t0
    eps = 1e-9 * max(1.0, abs(t1))
    for lo, hi in zip(a.tolist(), b.tolist()):
        if lo > cursor + eps:
            gaps.append((cursor, lo))
        cursor = max(cursor, hi)
    if t1 > cursor + eps:
        gaps.append((cursor, t1))
    return tuple(gaps)


def average_of_readings(t: np.ndarray, y: np.ndarray, t0: float, t1: float) -> float:
    """Energy as many tools compute it: mean of the readings inside the window x duration.
    Kept here as the baseline the accuracy benchmark compares against."""
    t = np.asarray(t)
    y = np.asarray(y)
    inside = (t >= t0) & (t <= t1) & np.isfinite(y)
    if not np.any(inside):
        return math.nan
    return float(np.mean(y[inside]) * (t1 - t0))
