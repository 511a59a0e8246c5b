"""What `daemon --tune`'s governor knows of a live workload (issue 59): its capacity and its
power over the clocks, fitted from every window read, and the demand it serves.

A paced workload serves min(D, C(point)) items/s: the demand D where the point keeps up, its
capacity C where it does not. A window whose rate lies below the demand beyond its noise so
measures C at its point exactly (saturated); one at the demand says only that C is at least
its rate. Capacity does not depend on the demand: what one demand taught holds at the next.

    capacity  1/C^p = c + sum_k a_k x_k^-p     a soft bottleneck (run/tune/model.py's form),
                                               fitted to the saturated windows, p the best of
                                               P_GRID; then clamped between the windows read
                                               (a point above one read keeps up at least as
                                               well; below one read saturated beyond SIGMAS,
                                               no better: a clamp outlives its demand, and one
                                               read 1-2 uncertainties under a demand is as
                                               often a point that kept up, live the optimum's
                                               whole row clamped under the floor for good)
    power     W = sum_j a_j f_j(x) + r sum_j b_j f_j(x),  f = (1, x_k, x_k^3)
                                               a, b >= 0 (NNLS): monotone in every clock and
                                               in the rate r served

A window that read how busy the workload was (--busy-from) measures C at its point at any load
(its rate over its busy share): an exact row of the capacity fit, and a clamp within BUSY_TOL on
the points above and below it.

x is each clock's share of its table's top. The models only propose: a point is held on what
its own windows measured, never on what the models say of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..run.tune.model import P_GRID, nnls

RIDGE = 1e-3  # pulls the power terms towards none where the windows say nothing
BOUND_ROUNDS = 4  # refits adding the windows that kept up where the fit says they could not
CONTRADICTED = 0.03  # a saturated reading beaten by this much at or below its point is noise
BUSY_TOL = 0.02  # a capacity read from the busy share clamps the points above and below so far
HISTORY = 80  # windows kept for the fits (the oldest dropped: a workload drifts)

Point = Tuple[int, ...]


@dataclass(frozen=True)
class Seen:
    """One window, as the models use it."""
    point: Point
    shares: Tuple[float, ...]  # each clock over its table's top
    rate: float  # items/s
    power_w: float
    saturated: bool  # its rate was the point's capacity (below the demand beyond noise)
    firm: bool = False  # ... beyond SIGMAS of it: a ceiling on the points at or below it
    capacity: Optional[float] = None  # read from how busy the workload was (--busy-from)

    @property
    def capacity_read(self) -> float:
        """What the capacity fit takes: the capacity read, else the rate (saturated)."""
        return self.rate if self.capacity is None else self.capacity


@dataclass(frozen=True)
class Fitted:
    """The models at one moment; `capacity`/`power_w` predict over rows of shares."""
    p: Optional[float]  # the bottleneck's sharpness (None: too few saturated windows)
    time_coef: Optional[np.ndarray]
    time_rms: float  # the capacity fit's relative rms error (0 where it is not fitted)
    power_coef: np.ndarray
    rate_ref: float  # the rate the power's rate terms are scaled by
    floors: Tuple[Tuple[Tuple[float, ...], float], ...]  # (shares, rate): C at least rate above
    ceilings: Tuple[Tuple[Tuple[float, ...], float], ...]  # (shares, C): C at most it below

    @property
    def has_capacity(self) -> bool:
        return self.time_coef is not None

    def capacity(self, x: np.ndarray) -> np.ndarray:
        """Items/s each row of shares keeps up with (inf where no fit: unknown)."""
        if self.time_coef is None or self.p is None:
            out = np.full(len(x), np.inf)
        else:
            terms = np.hstack([np.ones((len(x), 1)), x ** -self.p])
            out = 1.0 / np.maximum((terms @ self.time_coef) ** (1 / self.p), 1e-300)
        for shares, rate in self.floors:  # above a point that served `rate`: at least it
            above = np.all(x >= np.array(shares) - 1e-12, axis=1)
            out = np.where(above, np.maximum(out, rate), out)
        for shares, cap in self.ceilings:  # below a saturated point: at most its capacity
            below = np.all(x <= np.array(shares) + 1e-12, axis=1)
            out = np.where(below, np.minimum(out, cap), out)
        return out

    def power_w(self, x: np.ndarray, rate: np.ndarray) -> np.ndarray:
        f = _power_features(x)
        return np.hstack([f, f * (rate / self.rate_ref)[:, None]]) @ self.power_coef


def _power_features(x: np.ndarray) -> np.ndarray:
    return np.hstack([np.ones((len(x), 1)), x, x ** 3])


def fit(seen: Sequence[Seen]) -> Optional[Fitted]:
    """The models from the windows (None: no window with power)."""
    rows = [s for s in seen[-HISTORY:] if s.rate > 0 and s.power_w > 0]
    if not rows:
        return None
    p: Optional[float] = None
    coef: Optional[np.ndarray] = None
    rms = 0.0
    # a window read as saturated whose rate another window at the same point, or below it,
    # beat (beyond CONTRADICTED) was noise, not the point's capacity: it stays a floor only
    exact = [s for s in rows if s.capacity is not None or s.saturated and not any(
        o.rate > s.rate * (1 + CONTRADICTED) and all(a <= b for a, b in zip(o.shares, s.shares))
        for o in rows)]
    rows = [s if s in exact or not s.saturated else
            Seen(s.point, s.shares, s.rate, s.power_w, False) for s in rows]
    if exact:
        p, coef, rms = _fit_capacity(exact, [s for s in rows if not s.saturated
                                             and s.capacity is None])
    x = np.array([s.shares for s in rows])
    w = np.array([s.power_w for s in rows])
    r = np.array([s.rate for s in rows])
    rate_ref = float(np.mean(r))
    f = _power_features(x)
    features = np.hstack([f, f * (r / rate_ref)[:, None]])
    ridge = np.sqrt(RIDGE) / float(np.mean(w)) * np.eye(features.shape[1])
    ridge = np.delete(ridge, 0, axis=0)  # the constant term is not pulled
    power = nnls(np.vstack([features / w[:, None], ridge]),
                 np.concatenate([np.ones(len(x)), np.zeros(len(ridge))]))
    floors = tuple((s.shares, s.rate if s.capacity is None else s.capacity * (1 - BUSY_TOL))
                   for s in rows)
    ceilings = tuple((s.shares, s.rate if s.capacity is None else s.capacity * (1 + BUSY_TOL))
                     for s in exact if s.firm or s.capacity is not None)
    return Fitted(p, coef, rms, power, rate_ref, floors, ceilings)


def _fit_capacity(exact: Sequence[Seen], bounds: Sequence[Seen]
                  ) -> Tuple[float, np.ndarray, float]:
    """The soft bottleneck through the saturated windows (`exact`), the best sharpness of
    P_GRID; a window that kept up (`bounds`: capacity at least its rate) that the fit puts
    below its rate joins the rows it goes through (an active set, BOUND_ROUNDS at most)."""
    rows = list(exact)
    out: Tuple[float, np.ndarray, float] = (P_GRID[0], np.zeros(1 + len(exact[0].shares)), 0.0)
    for _ in range(BOUND_ROUNDS):
        x = np.array([s.shares for s in rows])
        t = np.array([1.0 / s.capacity_read for s in rows])
        best: Optional[Tuple[float, float, np.ndarray]] = None
        for q in P_GRID:
            terms = np.hstack([np.ones((len(x), 1)), x ** -q])
            c = nnls(terms / (t ** q)[:, None], np.ones(len(x)))
            err = float(np.sqrt(np.mean(((terms @ c) ** (1 / q) / t - 1) ** 2)))
            if best is None or err < best[0]:
                best = (err, q, c)
        assert best is not None
        out = (best[1], best[2], best[0])
        if not bounds:
            break
        q, c = out[0], out[1]
        xb = np.array([s.shares for s in bounds])
        tb = (np.hstack([np.ones((len(xb), 1)), xb ** -q]) @ c) ** (1 / q)
        low = [s for s, tt in zip(bounds, tb) if 1.0 / max(tt, 1e-300) < s.rate * 0.99
               and s not in rows]
        if not low:
            break
        rows += low
    return out


def shares_of(tables: Sequence[Sequence[int]], point: Point) -> Tuple[float, ...]:
    """A point's clocks as shares of each table's top: the models' inputs."""
    return tuple(t[i] / max(t) for t, i in zip(tables, point))


def grid_shares(tables: Sequence[Sequence[int]]) -> Tuple[List[Point], np.ndarray]:
    """Every point of the space and its shares (rows)."""
    import itertools
    points = list(itertools.product(*(range(len(t)) for t in tables)))
    return points, np.array([shares_of(tables, pt) for pt in points])
