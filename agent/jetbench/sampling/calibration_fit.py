"""The maths of a wall calibration (pure: arrays in, numbers out; docs/power.md, "Wall energy").

1. `common_grid`: both series (the board's total, the meter) on one time grid, each held at its
   last reading (sensors and meters report averages that stand until the next one).
2. `find_lag_s`: the meter's delay behind the board, found (never assumed) as the shift that
   best correlates the two series' changes over every run at once.
3. `binned`: the aligned pairs averaged over BIN_S (the time scale of a measurement window, and
   short enough to keep every step of the plan).
4. `fit`: wall = f(board) for each model in MODELS (affine, affine + quadratic), each judged by
   its error on bins it was not fitted on (FOLDS-fold, bins dealt round-robin); the one with
   the smaller held-out error is kept (the simpler one on a tie within TIE_PCT).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..errors import MeasurementInvalid

GRID_S = 0.01
MAX_LAG_S = 2.0
BIN_S = 0.5
FOLDS = 4
MODELS = {"affine": 1, "quadratic": 2}  # name -> polynomial degree
STEADY_FRAC = 0.02  # a bin whose board power moved more than this is a step, not a level
TIE_PCT = 0.02  # a quadratic term must lower the held-out error by more than this (points)
MIN_SPAN_FRAC = 0.15  # the plan must span at least this share of its top power


def common_grid(t_a: np.ndarray, a: np.ndarray, t_b: np.ndarray, b: np.ndarray,
                step_s: float = GRID_S) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both series sampled on one grid over the span they share (sample-and-hold)."""
    ok_a, ok_b = ~np.isnan(a), ~np.isnan(b)
    t_a, a, t_b, b = t_a[ok_a], a[ok_a], t_b[ok_b], b[ok_b]
    if len(t_a) < 2 or len(t_b) < 2:
        return np.empty(0), np.empty(0), np.empty(0)
    lo, hi = max(t_a[0], t_b[0]), min(t_a[-1], t_b[-1])
    if hi - lo < 4 * step_s:
        return np.empty(0), np.empty(0), np.empty(0)
    grid = np.arange(lo, hi, step_s)
    held_a = a[np.clip(np.searchsorted(t_a, grid, side="right") - 1, 0, len(a) - 1)]
    held_b = b[np.clip(np.searchsorted(t_b, grid, side="right") - 1, 0, len(b) - 1)]
    return grid, held_a, held_b


def find_lag_s(runs: Sequence[Tuple[np.ndarray, np.ndarray]], step_s: float = GRID_S,
               max_lag_s: float = MAX_LAG_S) -> float:
    """The delay (s, >= 0: the meter late) maximising the correlation of the two series,
    summed over runs (weighted by the pairs each lag leaves). `runs`: (board, meter) on a
    common grid each. Levels, not changes: a polled meter's steps land a period apart from
    the sensor's, and only the levels' broad peak is robust to that."""
    max_k = int(round(max_lag_s / step_s))
    scores = np.zeros(max_k + 1)
    for board, meter in runs:
        n = len(board)
        for k in range(0, min(max_k, n - 8) + 1):
            scores[k] += _pearson(board[: n - k], meter[k:]) * (n - k)
    return float(np.argmax(scores)) * step_s


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    dx, dy = x - x.mean(), y - y.mean()
    denom = float(np.sqrt(np.dot(dx, dx) * np.dot(dy, dy)))
    return float(np.dot(dx, dy)) / denom if denom > 0 else 0.0


def shifted(board: np.ndarray, meter: np.ndarray, lag_s: float,
            step_s: float = GRID_S) -> Tuple[np.ndarray, np.ndarray]:
    """The pairs once the meter's lag is taken out."""
    k = int(round(lag_s / step_s))
    return (board[: len(board) - k], meter[k:]) if k > 0 else (board, meter)


def binned(board: np.ndarray, meter: np.ndarray, step_s: float = GRID_S,
           bin_s: float = BIN_S) -> Tuple[np.ndarray, np.ndarray]:
    """Means over bins of bin_s (the last partial bin dropped), keeping only steady bins: a
    bin in which the board's power stepped pairs a mean of two levels with a meter that saw
    them a sampling period apart."""
    per = max(int(round(bin_s / step_s)), 1)
    n = len(board) // per
    if n == 0:
        return np.empty(0), np.empty(0)
    a, b = board[: n * per].reshape(n, per), meter[: n * per].reshape(n, per)
    mean_a = a.mean(axis=1)
    steady = (a.max(axis=1) - a.min(axis=1)) <= STEADY_FRAC * np.abs(mean_a)
    return mean_a[steady], b.mean(axis=1)[steady]


@dataclass(frozen=True)
class Fit:
    kind: str  # a MODELS key
    coefficients: Tuple[float, ...]  # wall = c0 + c1 * board + c2 * board^2
    heldout_rms_pct: float  # relative error on bins not fitted on (RMS, percent)
    heldout_p95_pct: float  # its 95th percentile of |error|
    compared: Dict[str, float] = field(default_factory=dict)  # model -> held-out RMS %
    bins: int = 0

    def predict(self, board_w: float) -> float:
        return predict(self.coefficients, board_w)


def predict(coefficients: Sequence[float], board_w: float) -> float:
    return float(sum(c * board_w ** i for i, c in enumerate(coefficients)))


def _polyfit(x: np.ndarray, y: np.ndarray, degree: int) -> Tuple[float, ...]:
    a = np.vander(x, degree + 1, increasing=True)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return tuple(float(c) for c in coef)


def _heldout_errors_pct(x: np.ndarray, y: np.ndarray, degree: int) -> np.ndarray:
    errors: List[float] = []
    idx = np.arange(len(x))
    for fold in range(FOLDS):
        test = idx % FOLDS == fold
        coef = _polyfit(x[~test], y[~test], degree)
        errors += [100.0 * (predict(coef, float(b)) - float(w)) / float(w)
                   for b, w in zip(x[test], y[test])]
    return np.array(errors)


def check_span(board_w: np.ndarray) -> None:
    """A plan whose board power hardly moved cannot tell a slope from an offset."""
    lo, hi = float(board_w.min()), float(board_w.max())
    if hi <= 0 or (hi - lo) < MIN_SPAN_FRAC * hi:
        raise MeasurementInvalid(
            f"the calibration plan's board power spans only {lo:.2f}-{hi:.2f} W: too flat to "
            "fit (at least a spread of "
            f"{MIN_SPAN_FRAC:.0%} of the top is needed)",
            hint="calibrate from idle to the highest clocks under load (the default plan); "
                 "check that the load ran and the clocks moved")


def fit(board_w: np.ndarray, wall_w: np.ndarray) -> Fit:
    """The model with the smaller held-out error (see the module docstring)."""
    if len(board_w) < 3 * FOLDS:
        raise MeasurementInvalid(f"only {len(board_w)} aligned readings: too few to calibrate",
                               hint="a longer plan (--window), or a meter that answers")
    check_span(board_w)
    compared: Dict[str, float] = {}
    errors: Dict[str, np.ndarray] = {}
    for name, degree in MODELS.items():
        errors[name] = _heldout_errors_pct(board_w, wall_w, degree)
        compared[name] = float(np.sqrt(np.mean(errors[name] ** 2)))
    best = "affine"
    if compared["quadratic"] < compared["affine"] - TIE_PCT:
        best = "quadratic"
    err = np.abs(errors[best])
    return Fit(best, _polyfit(board_w, wall_w, MODELS[best]), compared[best],
               float(np.percentile(err, 95)), compared, len(board_w))


def u95_pct(residual_rms_pct: float, *others_pct: float) -> float:
    """A 95% interval (percent) from the calibration's held-out residual and other
    independent parts (the sensor's, the meter's), added in quadrature, k = 2."""
    return 2.0 * math.sqrt(residual_rms_pct ** 2 + sum((p / 2.0) ** 2 for p in others_pct))
