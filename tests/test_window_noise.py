"""How sure a `daemon --tune` window is (daemon/window_noise.py, live_window.window_figures):
the spread of the recent windows, pooled, never under a window's own."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from jetbench.daemon.live_rate import Reading
from jetbench.daemon.live_window import window_figures
from jetbench.daemon.window_noise import NoisePool, counter_spread, reading_spread


def _counts(rng: np.random.Generator, rate: float, seconds: int, paced: bool = False):
    """A counter read every second: items arriving at random (Poisson) or one every 1/rate."""
    out, total = [(0.0, 0.0)], 0.0
    for t in range(1, seconds + 1):
        total += rate if paced else float(rng.poisson(rate))
        out.append((float(t), total))
    return out


def test_the_counters_spread_is_its_dispersion_one_for_items_arriving_at_random():
    rng = np.random.default_rng(1)
    spreads = [counter_spread(_counts(rng, 30.0, 10)) for _ in range(400)]
    total = sum(s for s, _ in spreads)  # type: ignore[misc]
    dof = sum(d for _, d in spreads)  # type: ignore[misc]
    assert total / dof == pytest.approx(1.0, abs=0.08)
    assert counter_spread(_counts(rng, 30.0, 10, paced=True)) == (0.0, 9.0)
    assert counter_spread([(0.0, 5.0), (1.0, 5.0), (2.0, 5.0)]) is None  # nothing counted
    assert counter_spread([(0.0, 0.0), (1.0, 9.0)]) is None  # one interval: no spread


def test_a_short_window_at_a_low_random_rate_is_as_unsure_as_its_few_items():
    """Three intervals' own spread is as often half the truth as near it; the pool is not."""
    rng = np.random.default_rng(2)
    pool = NoisePool()
    for _ in range(12):  # ten-second windows of items arriving at random, 33/s
        pool.learn(_counts(rng, 33.0, 10), [10.0, 10.1, 9.9])
    pcts, errors = [], []
    for _ in range(300):  # four-second probes
        counts = _counts(rng, 33.0, 4)
        pcts.append(pool.rate_pct(counts))
        errors.append((counts[-1][1] / 4.0 - 33.0) / 33.0 * 100)
    true_pct = 100 / (33.0 * 4) ** 0.5  # Poisson: 8.7%
    assert statistics.median(pcts) == pytest.approx(true_pct, rel=0.15)
    assert min(pcts) > 0.6 * true_pct  # never the 1/N counting step (0.8%)
    assert statistics.pstdev(errors) == pytest.approx(true_pct, rel=0.15)  # and it is true


def test_a_paced_counter_is_learned_sure_and_a_window_never_surer_than_its_own_spread():
    rng = np.random.default_rng(3)
    pool = NoisePool()
    first = pool.rate_pct(_counts(rng, 30.0, 10, paced=True))
    for _ in range(12):
        pool.learn(_counts(rng, 30.0, 10, paced=True), [5.0, 5.0])
    learned = pool.rate_pct(_counts(rng, 30.0, 10, paced=True))
    assert learned is not None and first is not None and learned < first
    assert learned < 2.0  # 300 items: Poisson's would be 5.8%
    # the windows learned regular (a point that did not keep up) do not make one of items
    # arriving at random look sure: its own spread stands
    random_pct = pool.rate_pct(_counts(rng, 30.0, 10))
    assert random_pct is not None and random_pct > 2 * learned


def test_a_window_whose_rate_moved_enters_the_pool_clipped():
    rng = np.random.default_rng(4)
    pool = NoisePool()
    for _ in range(12):
        pool.learn(_counts(rng, 30.0, 10), [5.0, 5.0])
    before = pool.rate_pct(_counts(rng, 30.0, 10, paced=True))
    moved = [(float(t), 30.0 * t if t <= 5 else 150 + 90.0 * (t - 5)) for t in range(11)]
    pool.learn(moved, [5.0, 5.0])  # 30/s, then 90/s: a dispersion of 40 in its own intervals
    after = pool.rate_pct(_counts(rng, 30.0, 10, paced=True))
    assert before is not None and after is not None
    assert after < 1.5 * before


def test_the_powers_spread_is_pooled_apart_for_an_energy_counter():
    pool = NoisePool()
    rnd = random.Random(5)
    for _ in range(12):
        pool.learn([(0.0, 0.0), (1.0, 1.0), (2.0, 2.0)],
                   [10.0 * (1 + rnd.gauss(0, 0.05)) for _ in range(10)])
    four = pool.power_pct([10.0, 10.0, 10.0, 10.0])  # four equal readings: the pool's 5%
    assert four is not None and four == pytest.approx(5.0 / 2, rel=0.35)
    # an energy counter's intervals: nothing pooled yet, their own spread (its standard error)
    own = pool.power_pct([10.0, 10.4], kind="energy")
    assert own == pytest.approx(100 * statistics.stdev([10.0, 10.4]) / 2 ** 0.5 / 10.2)
    assert pool.power_pct([10.0], kind="energy") is None
    assert reading_spread([1.0]) is None and reading_spread([0.0, 0.0]) is None


def test_a_window_whose_power_follows_its_arrivals_is_never_surer_than_its_own_spread():
    # a saturated point draws a steady power (a simulated meter: exactly steady); a point that
    # keeps up draws one that follows its random arrivals. After twelve windows of the first,
    # one of the second said +-0.1% (the pool's nothing, its own spread clipped to it) where
    # its readings varied by 4%
    pool = NoisePool()
    for _ in range(12):
        pool.learn([(0.0, 0.0), (1.0, 70.0), (2.0, 140.0)], [6.77] * 6, kind="energy")
    varied = [4.84, 4.64, 4.82, 4.51, 4.79, 4.70]
    pct = pool.power_pct(varied, kind="energy")
    own = 100 * statistics.stdev(varied) / statistics.fmean(varied) / len(varied) ** 0.5
    assert pct is not None and pct == pytest.approx(own)
    assert pool.power_pct([6.77] * 6, kind="energy") == 0.0  # steady: as sure as it is


def test_window_figures_uses_the_pool_and_learns_only_when_asked():
    pool = NoisePool()
    readings = [Reading(float(t), 20.0 * t) for t in range(5)]
    powers = [4.0, 4.2, 3.8, 4.0, 4.0]
    w = window_figures(readings, powers, [], pool)
    assert w is not None and w.items_per_s == pytest.approx(20.0)
    # a paced counter, its own three intervals' spread 0, pooled with the prior (Poisson's 1,
    # four degrees of freedom): sqrt((4 + 0) / (4 + 3) / 80 items)
    assert w.items_per_s_uncertainty_pct == pytest.approx(100 * (4 / 7 / 80) ** 0.5)
    assert window_figures(readings, powers, [], pool) == w  # nothing learned
    window_figures(readings, powers, [], pool, learn=True)
    assert pool.rate_pct([(r.t_s, r.count) for r in readings]) < w.items_per_s_uncertainty_pct
    # the total's energy, where counted: its own difference over its own time
    energy = window_figures(readings, powers, [(0.0, 0.0), (2.0, 9.0), (4.0, 18.0)], pool)
    assert energy is not None and energy.power_w == pytest.approx(4.5)
    assert window_figures([Reading(0.0, 5.0), Reading(1.0, 2.0)], powers, [], pool) is None
