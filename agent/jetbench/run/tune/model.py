"""A model of rate and power over the clocks, fitted from the points read, that proposes the
next point under a throughput floor (issue 62).

Under a floor that binds, the best point lies on the floor's edge, and that edge runs across
the knobs: a GPU step down may be paid for by a CPU step up. A sampler keeps no edge in view,
and halving one knob at a time walks it only along that knob. So after the top of the space
and one design point per knob (`design_points`), each next point is the one the models say is
most efficient among those they say meet the floor: any point of the space, so one knob traded
against another where the fitted edge runs across both; in the search's last trials, among the
best point's neighbours (`trades`: a knob one step down, or one down and another one up) and,
where a miss down one knob brackets the edge, the points between (`further`: the edge reached
in one trial, not one a step); where none of those is left to read, near the next best point
read, then anywhere. A point at or below one that missed the floor is never proposed
(monotone.py's rule).

Both models are monotone where physics is (a clock raised never slows a workload nor lowers
its power), by non-negative least squares over terms that each rise with every clock, in
shares of each knob's top clock (x, in (0, 1]):

    time of an item  t^p = c + sum_k a_k x_k^-p       (a soft bottleneck: p = 1 adds the
                                                       knobs' times, a large p takes the slowest;
                                                       p each of P_GRID that fits within
                                                       FIT_TOLERANCE of the best: the rate
                                                       the most hopeful of them)
    power            W   = c + sum_k (b_k x_k + d_k x_k^3)   (C f below a voltage knee, C V^2 f
                                                             above it)

each fitted for the relative error (rows weighted by their reading). The answer is never the
models': every point they propose is measured, and tune answers with the best point read.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from ..constraint import Constraint

P_GRID = (2.0, 3.0, 1.5, 4.0, 1.0, 6.0)  # the bottleneck's sharpness tried; ties: the first
FIT_TOLERANCE = 0.01  # a sharpness fitting within this (relative rms) of the best is kept
RIDGE = 1e-3  # pulls the power terms towards none where the points say nothing
MIN_READINGS = 2  # points read before the models propose
DESIGN = 0.7  # a design point's knob: the entry nearest this share of its top clock
# a knob of few entries (an EMC's 4 or 5 rates): its steps are large, and what it does shows
# over its range, not one step down: its design point is nearer its bottom
COARSE_ENTRIES, COARSE_DESIGN = 6, 0.3
NEAR_LAST = 3  # the search's last trials (a quarter, at least these) walk the best's edge
NEAR_SLACK = 0.05  # there, a neighbour the models put this close under the floor is read

Clocks = Dict[str, int]  # <knob>_hz of a point


@dataclass(frozen=True)
class Reading:
    """A point read: its clocks, rate and power."""
    clocks: Clocks
    items_per_s: float
    power_w: float


def nnls(a: np.ndarray, b: np.ndarray, max_iter: int = 200) -> np.ndarray:
    """argmin |a x - b| over x >= 0 (Lawson and Hanson's active set)."""
    n = a.shape[1]
    active = np.zeros(n, dtype=bool)
    x = np.zeros(n)
    for _ in range(max_iter):
        w = a.T @ (b - a @ x)
        free = ~active
        if not free.any() or w[free].max() <= 1e-12:
            break
        active[int(np.argmax(np.where(free, w, -np.inf)))] = True
        for _ in range(max_iter):
            z = np.zeros(n)
            z[active] = np.linalg.lstsq(a[:, active], b, rcond=None)[0]
            if (z[active] > 0).all():
                break
            neg = active & (z <= 0)
            alpha = float(np.min(x[neg] / (x[neg] - z[neg])))
            x = x + alpha * (z - x)
            active &= x > 1e-12
        else:
            break
        x = z
    return x


def _shares(space: Mapping[str, Sequence[int]], clocks: Mapping[str, object]) -> List[float]:
    return [float(clocks[f"{k}_hz"]) / max(v) for k, v in space.items()]  # type: ignore


@dataclass(frozen=True)
class Models:
    """Rate and power fitted over a space's knobs (module doc). The rate is the most hopeful
    of the sharpnesses that fit the points about as well as the best (within FIT_TOLERANCE):
    a few points tell a soft bottleneck from a sharp one only where they were read, and a
    point that a hopeful model puts over the floor is read; if it misses, it rules out what
    lies below it and the sharpness that hoped for it."""
    space: Dict[str, List[int]]
    time_fits: Tuple[Tuple[float, np.ndarray], ...]  # (p, coefficients) of each kept fit
    power_coef: np.ndarray

    @classmethod
    def fit(cls, space: Mapping[str, Sequence[int]], readings: Sequence[Reading]
            ) -> Optional[Models]:
        """The models from the points read (None: fewer than MIN_READINGS)."""
        if len(readings) < MIN_READINGS:
            return None
        tables = {k: list(v) for k, v in space.items()}
        x = np.array([_shares(tables, r.clocks) for r in readings])
        t = np.array([1.0 / r.items_per_s for r in readings])
        fits = []
        for p in P_GRID:
            terms = np.hstack([np.ones((len(x), 1)), x ** -p])
            coef = nnls(terms / (t ** p)[:, None], np.ones(len(x)))
            err = float(np.sqrt(np.mean(((terms @ coef) ** (1 / p) / t - 1) ** 2)))
            fits.append((err, p, coef))
        least = min(err for err, _, _ in fits)
        kept = tuple((p, coef) for err, p, coef in fits if err <= least + FIT_TOLERANCE)
        w = np.array([r.power_w for r in readings])
        features = cls._power_features(x)
        # (in shares of the mean power: a term of the power's size costs RIDGE)
        ridge = np.sqrt(RIDGE) / float(np.mean(w)) * np.eye(features.shape[1])[1:]
        power = nnls(np.vstack([features / w[:, None], ridge]),
                     np.concatenate([np.ones(len(x)), np.zeros(len(ridge))]))
        return cls(tables, kept, power)

    @staticmethod
    def _power_features(x: np.ndarray) -> np.ndarray:
        return np.hstack([np.ones((len(x), 1)), x, x ** 3])

    def predict(self, x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(items/s, W) at points given as shares (rows)."""
        rates = []
        for p, coef in self.time_fits:
            t = (np.hstack([np.ones((len(x), 1)), x ** -p]) @ coef) ** (1 / p)
            rates.append(1.0 / np.maximum(t, 1e-300))
        return np.max(rates, axis=0), self._power_features(x) @ self.power_coef


def propose(space: Mapping[str, Sequence[int]], readings: Sequence[Reading],
            floors: Sequence[float], excluded: Sequence[Clocks],
            candidates: Optional[Sequence[Clocks]] = None) -> Optional[Clocks]:
    """The point the models say is most efficient among those they say meet every floor
    (items/s at least each), of `candidates` (default: the whole space) not in `excluded`
    (read, queued, or known to miss); None where the models cannot be fitted yet or no such
    point is left."""
    models = Models.fit(space, readings)
    if models is None:
        return None
    grid = candidates if candidates is not None else _grid(space)
    chosen = _most_efficient(models, grid, max(floors, default=0.0), excluded)
    return None if chosen is None else chosen[1]


def _most_efficient(models: Models, candidates: Sequence[Clocks], floor: float,
                    excluded: Sequence[Clocks]) -> Optional[Tuple[float, Clocks]]:
    """(the models' items/J, the point) of the candidate not in `excluded` that the models
    say is most efficient among those they put at or over `floor`; None where there is none."""
    knobs = list(models.space)
    skip = {tuple(c.get(f"{k}_hz") for k in knobs) for c in excluded}
    grid = [p for p in (tuple(c[f"{k}_hz"] for k in knobs) for c in candidates)
            if p not in skip]
    if not grid:
        return None
    x = np.array([[hz / max(models.space[k]) for k, hz in zip(knobs, p)] for p in grid])
    rate, power = models.predict(x)
    ok = rate >= floor
    if not ok.any():
        return None
    score = np.where(ok, rate / np.maximum(power, 1e-12), -np.inf)
    at = int(np.argmax(score))
    return float(score[at]), {f"{k}_hz": int(hz) for k, hz in zip(knobs, grid[at])}


def design_points(space: Mapping[str, Sequence[int]]) -> List[Clocks]:
    """The points read before the models propose, after the top of the space: each knob alone
    at the entry nearest DESIGN of its top clock (COARSE_DESIGN for a knob of few entries), the
    others at their top (what each knob alone does to rate and power)."""
    top = {f"{k}_hz": max(v) for k, v in space.items()}
    out = []
    for knob, values in space.items():
        share = COARSE_DESIGN if len(values) <= COARSE_ENTRIES else DESIGN
        lower = min(values, key=lambda hz: (abs(hz - max(values) * share), hz))
        if lower != max(values):
            out.append(dict(top, **{f"{knob}_hz": lower}))
    return out


def next_point(trials: Sequence[FrozenTrial], space: Mapping[str, Sequence[int]],
               constraints: Sequence[Constraint], best: Optional[Clocks] = None
               ) -> Optional[Clocks]:
    """The next point of a search under throughput floors alone (every constraint one): a
    design point not read yet, else the models' proposal (`propose`), judged from `trials`
    (this board's, of one workload setting, their settings checked); with `best` (the best
    point read, in the search's last trials), the proposal near it (`_near`), else near the
    next best point read, else anywhere. None where there is none (the sampler goes on)."""
    knobs = list(space)
    readings: List[Reading] = []
    misses: List[Clocks] = []
    seen: List[Clocks] = []
    for t in trials:
        settings = t.user_attrs.get("settings") or {}
        # (checked settings: each clock an int of its table, choice.settings_problem)
        clocks: Clocks = {f"{k}_hz": int(settings.get(f"{k}_hz") or 0) for k in knobs}
        seen.append(clocks)
        metrics = t.user_attrs.get("metrics") or {}
        rate, power = metrics.get("images_per_s"), metrics.get("power_w")
        if t.state.name != "COMPLETE" or t.user_attrs.get("valid") is not True:
            continue
        if rate and power and rate > 0 and power > 0:
            readings.append(Reading(clocks, float(rate), float(power)))
        violations = t.user_attrs.get("constraints") or []
        if any(v > 0 for v in violations[:len(constraints)]):
            misses.append(clocks)
    for point in design_points(space):
        if point not in seen and not any(_below(point, m) for m in misses):
            return point
    floor = max((c.value for c in constraints), default=0.0)
    everywhere = seen + [p for p in _grid(space) if any(_below(p, m) for m in misses)]
    models = Models.fit(space, readings)
    if models is None:
        return None
    if best is not None:
        # the edge near the best, then near the next best point read (the edge runs through
        # each point that met the floor: where the best's neighbours are all read, the next
        # one's may not be), ranked by the models
        met = sorted((r for r in readings if r.clocks not in misses),
                     key=lambda r: -r.items_per_s / r.power_w)
        for leader in [best] + [r.clocks for r in met if r.clocks != best]:
            chosen = _near(models, space, leader, misses, floor, everywhere)
            if chosen is not None:
                return chosen
    # (no neighbour of a point read is left to read: where the models say anywhere)
    found = _most_efficient(models, _grid(space), floor, everywhere)
    return None if found is None else found[1]


def _near(models: Models, space: Mapping[str, Sequence[int]], leader: Clocks,
          misses: Sequence[Clocks], floor: float, excluded: Sequence[Clocks]
          ) -> Optional[Clocks]:
    """Of the points near `leader`, the one the models rank first: its neighbours with the
    floor hoped for (NEAR_SLACK), and further down one knob alone, short of a miss, where the
    models put the floor met (the edge further than a step: one trial reaches it, not one per
    step)."""
    chosen = max((c for c in (
        _most_efficient(models, trades(space, leader), floor * (1 - NEAR_SLACK), excluded),
        _most_efficient(models, further(space, leader, misses), floor, excluded))
        if c is not None), key=lambda c: c[0], default=None)
    return None if chosen is None else chosen[1]


def trades(space: Mapping[str, Sequence[int]], best: Clocks) -> List[Clocks]:
    """The points next to `best`: each knob one step down, and each pair of knobs one step
    down and the other one step up (a knob traded against another along the floor's edge)."""
    knobs = list(space)
    at = {k: list(space[k]).index(best[f"{k}_hz"]) for k in knobs}
    out = []
    for k in knobs:
        if at[k] > 0:
            out.append(dict(best, **{f"{k}_hz": space[k][at[k] - 1]}))
        for j in knobs:
            if j != k and at[k] > 0 and at[j] < len(space[j]) - 1:
                out.append(dict(best, **{f"{k}_hz": space[k][at[k] - 1],
                                         f"{j}_hz": space[j][at[j] + 1]}))
    return out


def further(space: Mapping[str, Sequence[int]], best: Clocks, misses: Sequence[Clocks]
            ) -> List[Clocks]:
    """The points down one knob alone from `best`, two steps and more (`trades` has one),
    above the first point down that knob known to miss: where a miss brackets the edge, so
    the models interpolate between a point read that met the floor and one that missed it
    (with no miss below, a point far down would be their extrapolation)."""
    out = []
    for k, values in space.items():
        at = list(values).index(best[f"{k}_hz"])
        down = [dict(best, **{f"{k}_hz": values[j]}) for j in range(at - 1, -1, -1)]
        bracket = next((j for j, p in enumerate(down) if any(_below(p, m) for m in misses)),
                       None)
        out += [] if bracket is None else down[1:bracket]
    return out


def _below(point: Mapping[str, object], miss: Mapping[str, object]) -> bool:
    """Every clock of `point` at or below `miss`'s: it misses a floor `miss` missed."""
    return all(point[k] <= miss[k] for k in point)  # type: ignore[operator]


def _grid(space: Mapping[str, Sequence[int]]) -> List[Clocks]:
    knobs = list(space)
    return [{f"{k}_hz": hz for k, hz in zip(knobs, p)}
            for p in itertools.product(*(space[k] for k in knobs))]
