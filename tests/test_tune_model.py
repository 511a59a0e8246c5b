"""Issue 62: the models of rate and power that propose tune's points under a throughput floor
(run/tune/model.py): non-negative least squares, monotone fits, the design points, the
neighbours of the best (a knob traded against another), and no point below a miss."""

from __future__ import annotations

import itertools

import numpy as np
import optuna
import pytest

from jetbench.run.constraint import Constraint
from jetbench.run.tune.model import Models, Reading, design_points, next_point, nnls, trades

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
