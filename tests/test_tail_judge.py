"""The governor's tail judge (daemon/tail_judge.py): margins from the held windows' empirical
tail, extrapolated where too few windows hold the quantile, and the loads points are proposed at,
judged at the demand of the time."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace
from typing import Optional, Sequence

import pytest

from jetbench.daemon.demand_epoch import Epoch
from jetbench.daemon.governor import Governor
from jetbench.daemon.online_tuner import Space, Window
from jetbench.daemon.tail_judge import (
    LOAD_START,
    LOAD_STEP,
    TAIL_DEFAULT,
    TailJudge,
    upper_quantile,
)
from jetbench.run.constraint import Constraint

P99 = Constraint("latency_p99_ms", "<=", 250.0)
MISS = Constraint("miss_rate", "<=", 0.02)
POINT = (3, 1)


def _window(p99_ms: Optional[float] = None, miss: Optional[float] = None) -> Window:
    return Window(40.0, 2.0, 5.0, 2.0, {} if p99_ms is None else {"p99": p99_ms}, miss)


def _held(judge: TailJudge, p99s: Sequence[float], load: float) -> Epoch:
    """Held windows at one point, in a row, at 40/s: each teaches its load and its spread."""
    epoch = Epoch(demand=40.0)
    for p99 in p99s:
        w = _window(p99)
        epoch.reads.setdefault(POINT, []).append(w)
        judge.learn_load(load, 40.0, w)
        judge.learn_held(epoch, POINT, w, load)
    return epoch


def test_the_quantile_of_few_windows_is_extrapolated_past_their_largest():
    # exponential spreads, as a window's p99 over its point's mean has in its tail: the 99th
    # percentile is ln(100) = 4.6; the largest of 20 is their 95th percentile on average
    rng = random.Random(1)
    true_q99 = math.log(100)
    estimates, largest, through_est, through_max = [], [], [], []
    for _ in range(400):
        sample = [rng.expovariate(1.0) for _ in range(20)]
        estimates.append(upper_quantile(sample, 0.99))
        largest.append(max(sample))
        through_est.append(math.exp(-estimates[-1]))  # the share of next windows above it
        through_max.append(math.exp(-largest[-1]))
    assert statistics.median(estimates) > statistics.median(largest)
    assert abs(statistics.median(estimates) - true_q99) < 0.15 * true_q99
    assert statistics.mean(through_est) < 0.025 < statistics.mean(through_max)
    # enough windows hold the quantile themselves: read as it is
    many = [float(i) for i in range(2000)]
    assert upper_quantile(many, 0.99) == 1980.0
    assert upper_quantile([3.0, 1.0], 0.99) == 3.0
    # one window far out (a demand that moved under a held point) moves the estimate, but the
    # largest of 55 is not taken for the 99th percentile
    spread = [1.0 + 0.01 * i for i in range(54)] + [4.4]
    assert 1.6 < upper_quantile(spread, 0.99) < 4.4


def test_a_held_window_is_set_against_the_mean_of_its_points_windows_before_it():
    judge = TailJudge([P99])
    epoch = _held(judge, (100.0, 100.0, 200.0), 0.7)
    # the third against the two before (2.0), not against a mean holding itself (1.5)
    assert judge._seen["latency_p99_ms"] == [2.0]
    # a window busy throughout (a closed loop: no queue; or one past its capacity) says
    # nothing of a queue's spread under its load
    w = replace(_window(300.0), busy_share=1.0)
    epoch.reads[POINT].append(w)
    judge.learn_held(epoch, POINT, w, 0.7)
    assert judge._seen["latency_p99_ms"] == [2.0]


def test_the_default_margin_is_the_spread_of_a_windows_p99_until_eight_held_windows():
    judge = TailJudge([P99, MISS])
    assert judge.margin(P99.name) == TAIL_DEFAULT[0] == 2.0
    assert judge.margin(MISS.name) == TAIL_DEFAULT[1] > 0
    epoch = Epoch(demand=40.0)
    # a point whose windows read 120 ms: 240 with the margin, under 250; 130 ms is not met
    epoch.reads[(1, 1)] = [_window(120.0, 0.0)] * 3
    epoch.reads[(2, 2)] = [_window(130.0, 0.0)] * 3
    epoch.reads[(3, 3)] = [_window(100.0, 0.015)] * 3  # +0.01: over the budget
    assert judge.met(epoch, (1, 1))
    assert not judge.met(epoch, (2, 2))
    assert not judge.met(epoch, (3, 3))


def test_a_load_is_allowed_by_windows_that_met_the_tail_with_the_margin():
    judge = TailJudge([P99])
    assert judge.load_allowed(40.0) == LOAD_START
    judge.learn_load(0.7, 40.0, _window(100.0))  # 200 with the margin: met
    assert math.isclose(judge.load_allowed(40.0), 0.7 + LOAD_STEP)
    # met as read (150 under 250) but not with the margin (300): no higher load, and short of it
    tight = TailJudge([P99])
    tight.learn_load(0.7, 40.0, _window(150.0))
    assert math.isclose(tight.load_allowed(40.0), min(LOAD_START, 0.7 * (1 - LOAD_STEP)))
    # a window that read no tail figure says nothing
    judge.learn_load(0.9, 40.0, _window(None))
    assert math.isclose(judge.load_allowed(40.0), 0.7 + LOAD_STEP)


def test_a_latency_read_at_a_higher_demand_is_judged_longer_at_a_lower_one():
    judge = TailJudge([P99])
    judge.learn_load(0.7, 80.0, _window(100.0))
    # at 80/s: 200 with the margin, met; at 40/s the same load's latencies are twice as long:
    # 400, not met (the fall after a busy demand)
    assert math.isclose(judge.load_allowed(80.0), 0.7 + LOAD_STEP)
    assert judge.load_allowed(40.0) < 0.7
    # read at a lower demand: judged as read at a higher one (not credited with the rise)
    low = TailJudge([P99])
    low.learn_load(0.7, 20.0, _window(150.0))
    assert low.load_allowed(40.0) < 0.7 == low._loads[0][0]
    # a miss rate's deadline is fixed: judged as read at every demand
    miss = TailJudge([MISS])
    miss.learn_load(0.7, 80.0, _window(miss=0.005))
    assert math.isclose(miss.load_allowed(40.0), 0.7 + LOAD_STEP)
    miss.learn_load(0.65, 80.0, _window(miss=0.015))  # +0.01: over the budget
    assert miss.load_allowed(40.0) < 0.65


def test_the_window_a_demand_moved_in_is_taken_back():
    # the held window the demand doubled in read 4x its point's p99: learnt as the spread it
    # made the margin 4x (every point but the top past the ceiling for the rise), learnt as a
    # load it capped the loads allowed at the load misread
    judge = TailJudge([P99])
    _held(judge, (100.0, 100.0, 110.0, 400.0), 0.6)
    assert judge._seen["latency_p99_ms"] == pytest.approx([1.1, 400 / 310 * 3])
    assert len(judge._loads) == 4
    assert judge.load_allowed(40.0) < 0.6
    judge.forget_last()
    assert judge._seen["latency_p99_ms"] == pytest.approx([1.1]) and len(judge._loads) == 3
    assert math.isclose(judge.load_allowed(40.0), 0.65)
    judge.forget_last()  # once: nothing more is taken back
    assert len(judge._loads) == 3
    # a window whose load is not known yet teaches nothing, and is the last window read
    judge.learn_load(None, 40.0, _window(100.0))
    assert len(judge._loads) == 3
    judge.forget_last()
    assert len(judge._loads) == 3


def test_a_new_demand_takes_back_what_the_window_before_it_taught():
    space = Space(("gpu", "emc"), ((76_800_000, 998_400_000), (408_000_000, 1_600_000_000)))
    gov = Governor(space, [Constraint("items_per_s", ">=", 10.0), P99])
    gov._tail.learn_load(0.6, 40.0, _window(400.0))
    assert gov._tail._loads
    gov._new_demand("the rate rose")
    assert not gov._tail._loads


def test_a_window_at_a_load_of_one_or_more_teaches_nothing_of_a_queue():
    # without --busy-from the max demand's closed loop (frames back to back, latency one
    # service time) taught loads of 1.5 met and a spread of exactly 1.0
    judge = TailJudge([P99])
    epoch = _held(judge, (10.0,) * 4, 1.5)
    assert not judge._loads and not judge._seen.get("latency_p99_ms")
    assert judge.load_allowed(40.0) == LOAD_START
    # under it (or with no load known) it does
    judge.learn_load(0.7, 40.0, _window(10.0))
    judge.learn_held(epoch, POINT, _window(10.0), None)
    assert len(judge._loads) == 1 and judge._seen["latency_p99_ms"] == [1.0]
    # --busy-from says it where read: busy under 97% is a queue whatever the load modelled
    busy = TailJudge([P99])
    busy.learn_load(1.5, 40.0, replace(_window(10.0), busy_share=0.8))
    assert len(busy._loads) == 1
