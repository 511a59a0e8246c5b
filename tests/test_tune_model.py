"""Issue 62: the models of rate and power that propose tune's points under a throughput floor
(run/tune/model.py): non-negative least squares, monotone fits, the design points, the
neighbours of the best (a knob traded against another), and no point below a miss."""

from __future__ import annotations

import itertools

import numpy as np
import optuna
import pytest

from jetbench.run.constraint import Constraint
from jetbench.run.tune.model import (
    Models,
    Reading,
    design_points,
    further,
    next_point,
    nnls,
    trades,
)

# the TX1's GPU table and EMC rates as tune probes them (docs/hardware.md)
TX1 = {"gpu": [76_800_000, 153_600_000, 230_400_000, 307_200_000, 384_000_000, 460_800_000,
               537_600_000, 614_400_000, 691_200_000, 768_000_000, 844_800_000, 921_600_000,
               998_400_000],
       "emc": [204_000_000, 408_000_000, 800_000_000, 1_065_600_000, 1_600_000_000]}


def test_nnls_keeps_coefficients_non_negative():
    # min (x1 - 1)^2 + (x2 + 1)^2 + (x1 + x2)^2 over x >= 0: x2 = 0, then 2 x1 - 1 = 0
    x = nnls(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([1.0, -1.0, 0.0]))
    assert x == pytest.approx([0.5, 0.0], abs=1e-9)
    # unconstrained optimum already non-negative: least squares itself (x = [2, 3])
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert nnls(a, a @ np.array([2.0, 3.0])) == pytest.approx([2.0, 3.0], abs=1e-9)


def _reading(g_hz: int, e_hz: int) -> Reading:
    """An item takes 2 + 3/g + 1/e ms (g, e: shares of the tops); 2 + 3g + 1.5e^3 W."""
    g, e = g_hz / 998_400_000, e_hz / 1_600_000_000
    return Reading({"gpu_hz": g_hz, "emc_hz": e_hz}, 1000 / (2 + 3 / g + 1 / e),
                   2 + 3 * g + 1.5 * e ** 3)


def test_the_rate_model_recovers_an_additive_time_and_stays_monotone():
    read = [_reading(g, e) for g, e in [(998_400_000, 1_600_000_000), (691_200_000, 1_600_000_000),
                                         (998_400_000, 800_000_000), (460_800_000, 408_000_000),
                                         (844_800_000, 1_065_600_000)]]
    models = Models.fit(TX1, read)
    assert models is not None
    # a point not read: 614.4 MHz, 408 MHz -> 2 + 3/0.6154 + 1/0.255 = 10.797 ms: 92.62/s
    rate, power = models.predict(np.array([[614_400_000 / 998_400_000, 408 / 1600]]))
    assert rate[0] == pytest.approx(92.62, rel=0.01)
    assert power[0] == pytest.approx(2 + 3 * 0.6154 + 1.5 * 0.255 ** 3, rel=0.05)
    # a clock raised never slows the workload nor lowers its power, anywhere in the space
    grid = np.array([[g / 998_400_000, e / 1_600_000_000]
                     for g, e in itertools.product(TX1["gpu"], TX1["emc"])])
    rates, watts = models.predict(grid)
    by = rates.reshape(13, 5), watts.reshape(13, 5)
    for table in by:
        assert (np.diff(table, axis=0) >= -1e-9).all() and (np.diff(table, axis=1) >= -1e-9).all()


def test_the_design_points_take_each_knob_alone_down_its_table():
    # 0.7 x 998.4 = 698.9 MHz: 691.2 is nearest; the EMC has 5 rates (few): 0.3 x 1600 = 480
    # MHz, 408 is nearest
    assert design_points(TX1) == [{"gpu_hz": 691_200_000, "emc_hz": 1_600_000_000},
                                  {"gpu_hz": 998_400_000, "emc_hz": 408_000_000}]


def test_the_neighbours_of_the_best_trade_one_knob_against_another():
    space = {"gpu": [1, 2, 3], "emc": [10, 20, 30], "cpu": [100, 200, 300]}
    best = {"gpu_hz": 2, "emc_hz": 20, "cpu_hz": 300}
    got = trades(space, best)
    # each knob one step down (3), each knob down with another up (cpu is at its top: gpu
    # down + emc up, emc down + gpu up, cpu down + gpu up, cpu down + emc up)
    assert sorted(map(lambda p: tuple(p.values()), got)) == sorted([
        (1, 20, 300), (2, 10, 300), (2, 20, 200),
        (1, 30, 300), (3, 10, 300), (3, 20, 200), (2, 30, 200)])


def _trial(number: int, g_hz: int, e_hz: int, floor: float):
    r = _reading(g_hz, e_hz)
    return optuna.trial.create_trial(
        state=optuna.trial.TrialState.COMPLETE, value=r.items_per_s / r.power_w, user_attrs={
            "settings": {"model": "command", "precision": "fp32", "batch": 1,
                         "gpu_hz": g_hz, "emc_hz": e_hz},
            "metrics": {"images_per_s": r.items_per_s, "power_w": r.power_w},
            "valid": True, "constraints": [floor - r.items_per_s, 0.0]})


def test_the_next_point_is_a_design_point_then_never_one_below_a_miss():
    floor = Constraint.parse("images_per_s>=95")
    top = _trial(0, 998_400_000, 1_600_000_000, 95)
    assert next_point([top], TX1, [floor]) == {"gpu_hz": 691_200_000, "emc_hz": 1_600_000_000}
    read = [top, _trial(1, 691_200_000, 1_600_000_000, 95),
            _trial(2, 998_400_000, 1_065_600_000, 95),
            _trial(3, 614_400_000, 800_000_000, 95)]  # 2 + 4.875 + 2 = 8.875 ms: 112.7/s
    # 460.8/408: 2 + 6.5 + 3.92 = 12.42 ms, 80.5/s: a miss; nothing at or below it is read
    read.append(_trial(4, 460_800_000, 408_000_000, 95))
    for _ in range(6):
        point = next_point(read, TX1, [floor])
        assert point is not None
        assert not (point["gpu_hz"] <= 460_800_000 and point["emc_hz"] <= 408_000_000)
        assert point not in [t.user_attrs["settings"] for t in read]
        read.append(_trial(len(read), point["gpu_hz"], point["emc_hz"], 95))


def _edge_trial(number: int, g_hz: int, e_hz: int):
    """An item takes 2 + 3/g + 1/e ms; 1 + 6 g^3 + e W (the GPU's power dominates: img/J
    rises as the GPU falls, so under a floor of 140/s the best lies on the floor's edge);
    the constraint's value as tune stores it (the floor minus the rate: > 0 a miss)."""
    g, e = g_hz / 998_400_000, e_hz / 1_600_000_000
    rate, power = 1000 / (2 + 3 / g + 1 / e), 1 + 6 * g ** 3 + e
    return optuna.trial.create_trial(
        state=optuna.trial.TrialState.COMPLETE, value=rate / power, user_attrs={
            "settings": {"model": "command", "precision": "fp32", "batch": 1,
                         "gpu_hz": g_hz, "emc_hz": e_hz},
            "metrics": {"images_per_s": rate, "power_w": power},
            "valid": True, "constraints": [140 - rate]})


TOP, GPU_DESIGN, EMC_DESIGN = ((998_400_000, 1_600_000_000), (691_200_000, 1_600_000_000),
                               (998_400_000, 408_000_000))


def test_near_the_end_the_edge_is_reached_in_one_step_where_a_miss_brackets_it():
    # at EMC 1600 (1/e = 1 ms): 998.4 MHz 6 ms, 166.7/s; 921.6 (3/0.9231 = 3.25) 6.25 ms,
    # 160/s; 844.8 (3.545) 6.545 ms, 152.8/s; 768 (3.9) 6.9 ms, 144.9/s; 691.2 (4.333)
    # 7.333 ms, 136.4/s: a miss. img/J at 768: 144.9 / (1 + 6 x 0.769^3 + 1) = 144.9 / 4.73 =
    # 30.6, at 921.6: 160 / 6.72 = 23.8: the edge, three GPU steps down, is the best point
    floor = Constraint.parse("images_per_s>=140")
    read = [_edge_trial(n, g, e) for n, (g, e) in enumerate([TOP, GPU_DESIGN, EMC_DESIGN])]
    best = {"gpu_hz": 998_400_000, "emc_hz": 1_600_000_000}
    # one step down at a time would take three trials; the miss at 691.2 brackets the edge
    assert next_point(read, TX1, [floor], best) == {"gpu_hz": 768_000_000,
                                                    "emc_hz": 1_600_000_000}


def test_further_stops_short_of_a_miss_and_needs_one():
    space = {"gpu": [1, 2, 3, 4, 5, 6], "emc": [10, 20]}
    best = {"gpu_hz": 6, "emc_hz": 20}
    # down the GPU: 5 is one step (trades'), 4 and 3 are further, 2 missed: the bracket
    assert further(space, best, [{"gpu_hz": 2, "emc_hz": 20}]) == [
        {"gpu_hz": 4, "emc_hz": 20}, {"gpu_hz": 3, "emc_hz": 20}]
    # nothing below known to miss: no jump (it would be the models' extrapolation)
    assert further(space, best, []) == []


def test_where_the_bests_neighbours_are_all_read_the_next_best_ones_are_proposed():
    floor = Constraint.parse("images_per_s>=140")
    # the best, 768/1600 (30.6 img/J, above), and every point next to it read: 691.2/1600
    # and 768/1065.6 (2 + 3.9 + 1.5 = 7.4 ms: 135.1/s) miss; 844.8/1065.6 (7.045 ms, 141.9/s)
    # meets; 768/800 is below the 768/1065.6 miss
    points = [TOP, GPU_DESIGN, EMC_DESIGN, (768_000_000, 1_600_000_000),
              (921_600_000, 1_600_000_000), (844_800_000, 1_600_000_000),
              (768_000_000, 1_065_600_000), (844_800_000, 1_065_600_000)]
    read = [_edge_trial(n, g, e) for n, (g, e) in enumerate(points)]
    best = {"gpu_hz": 768_000_000, "emc_hz": 1_600_000_000}
    point = next_point(read, TX1, [floor], best)
    # a point is still proposed (not the sampler's random one): not read, not below a miss
    assert point is not None
    assert (point["gpu_hz"], point["emc_hz"]) not in points
    assert not (point["gpu_hz"] <= 768_000_000 and point["emc_hz"] <= 1_065_600_000)
    assert not (point["gpu_hz"] <= 998_400_000 and point["emc_hz"] <= 408_000_000)
