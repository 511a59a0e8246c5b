"""Energy integration against traces whose integrals are known exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jetbench.sampling.energy import average_of_readings, integrate


def test_constant_power_whole_window():
    t = np.linspace(0.0, 10.0, 101)
    res = integrate(t, np.full_like(t, 5.0), 0.0, 10.0)
    assert res.energy_j == pytest.approx(50.0, rel=1e-12)
    assert res.coverage == pytest.approx(1.0)
    assert res.gaps == ()
    assert res.samples == 101


def test_ramp_is_exact_with_edges_inside_intervals():
    # P(t) = 2 + 3t sampled at irregular times; window edges fall between samples
    rng = np.random.default_rng(1)
    t = np.sort(np.concatenate([[0.0, 10.0], rng.uniform(0, 10, 200)]))
    p = 2.0 + 3.0 * t
    t0, t1 = 1.2345, 8.7654
    exact = 2.0 * (t1 - t0) + 1.5 * (t1**2 - t0**2)
    res = integrate(t, p, t0, t1)
    assert res.energy_j == pytest.approx(exact, rel=1e-12)
    assert res.mean_w == pytest.approx(exact / (t1 - t0), rel=1e-12)


def test_step_sampled_at_the_step_is_exact():
    # a step from 1 W to 4 W at t=5, with samples on both sides of the edge at t=5
    t = np.array([0.0, 2.0, 5.0, 5.0, 7.0, 10.0])
    p = np.array([1.0, 1.0, 1.0, 4.0, 4.0, 4.0])
    res = integrate(t, p, 0.0, 10.0)
    assert res.energy_j == pytest.approx(5 * 1.0 + 5 * 4.0)


def test_sine_converges_to_exact_integral():
    f = 3.0
    t = np.linspace(0.0, 2.0, 20001)
    p = 5.0 + 2.0 * np.sin(2 * np.pi * f * t)
    t0, t1 = 0.1, 1.9
    exact = 5.0 * (t1 - t0) - 2.0 / (2 * np.pi * f) * (
        np.cos(2 * np.pi * f * t1) - np.cos(2 * np.pi * f * t0)
    )
    res = integrate(t, p, t0, t1)
    assert res.energy_j == pytest.approx(exact, rel=1e-6)


def test_nan_sample_makes_a_gap_and_is_never_zero():
    t = np.arange(0.0, 11.0)
    p = np.full(11, 3.0)
    p[5] = np.nan  # a fault at t=5: [4, 6] is not covered
    res = integrate(t, p, 0.0, 10.0)
    assert res.gaps == ((4.0, 6.0),)
    assert res.covered_s == pytest.approx(8.0)
    assert res.energy_j == pytest.approx(24.0)  # not 30 - 2*3 as if 0 W had been read
    assert res.mean_w == pytest.approx(3.0)
    assert res.samples == 10


def test_long_interval_is_a_gap_not_interpolated():
    t = np.array([0.0, 1.0, 2.0, 8.0, 9.0, 10.0])
    p = np.full(6, 2.0)
    res = integrate(t, p, 0.0, 10.0, max_gap_s=1.5)
    assert res.gaps == ((2.0, 8.0),)
    assert res.coverage == pytest.approx(0.4)


def test_window_before_first_sample_is_a_gap():
    t = np.array([2.0, 3.0, 4.0])
    res = integrate(t, np.ones(3), 0.0, 4.0)
    assert res.gaps == ((0.0, 2.0),)
    assert res.energy_j == pytest.approx(2.0)


def test_window_inside_one_interval_interpolates_both_edges():
    t = np.array([0.0, 10.0])
    p = np.array([0.0, 10.0])  # P = t
    res = integrate(t, p, 2.0, 4.0)
    assert res.energy_j == pytest.approx((16 - 4) / 2)
    assert res.samples == 0


def test_empty_and_degenerate_windows():
    assert integrate(np.array([]), np.array([]), 0.0, 1.0).gaps == ((0.0, 1.0),)
    res = integrate(np.array([0.0, 1.0]), np.array([1.0, 1.0]), 0.5, 0.5)
    assert res.energy_j == 0.0 and res.coverage == 0.0
    assert math.isnan(integrate(np.array([0.0]), np.array([1.0]), 0.0, 1.0).mean_w)


def test_counter_energy_interpolated_at_edges():
    # cumulative joules of a constant 4 W, read at irregular times
    t = np.array([0.0, 0.3, 1.1, 2.0, 2.9, 4.0])
    e = 100.0 + 4.0 * t
    res = integrate(t, e, 0.5, 3.5, counter=True)
    assert res.energy_j == pytest.approx(12.0, rel=1e-12)


def test_counter_going_backwards_is_a_gap():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    e = np.array([10.0, 12.0, 1.0, 3.0])  # an unhandled reset between 1 and 2
    res = integrate(t, e, 0.0, 3.0, counter=True)
    assert res.energy_j == pytest.approx(4.0)
    assert res.gaps == ((1.0, 2.0),)


def test_average_of_readings_is_biased_on_a_ramp_edge():
    # the naive method: readings inside the window only, mean x duration
    t = np.arange(0.0, 10.5, 1.0)
    p = t.copy()
    assert average_of_readings(t, p, 0.5, 9.5) == pytest.approx(5.0 * 9.0)
    assert math.isnan(average_of_readings(t, p, 0.2, 0.8))
