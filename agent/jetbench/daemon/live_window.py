"""A `daemon --tune` window's timing and figures: how long after a pin it waits, how often it
reads, and its rate and power from its readings, each as sure as the recent windows' spread
says (window_noise.py). live_tuning.py runs the windows; the fluid benchmarks time theirs so.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

from .live_rate import Reading, busy_max, window
from .live_space import energy_power
from .online_tuner import Point, Window
from .window_noise import NoisePool

SETTLE_FRACTION = 0.1
SETTLE_MAX_S = 1.0
# how long a new clock takes to act, by knob (arXiv 2606.16106 on Orin: about 1, 5 and 8 ms):
# added to the workload's settling after a pin that moved the knob
ACTUATION_S = {"cpu": 0.001, "gpu": 0.005, "emc": 0.008}
MIN_SAMPLE_S = 0.25
EARLY_FRACTION = 0.3  # a window that clearly breaks a constraint by then ends there


def pin_settle_s(window_s: float, knobs: Sequence[str], before: Optional[Point],
                 after: Point) -> float:
    """After pinning `after` where `before` ran (None: the first pin), before a window's first
    reading: the workload's settling (a tenth of the window, SETTLE_MAX_S at most) and the
    actuation of the knobs that moved."""
    moved = [k for k, a, b in zip(knobs, after, before or after) if a != b]
    return min(SETTLE_MAX_S, SETTLE_FRACTION * window_s) + max(
        [ACTUATION_S.get(k, 0.0) for k in moved] or [0.0])


def sample_period_s(window_s: float) -> float:
    """How often a window reads the source and the power: a tenth of it, MIN_SAMPLE_S at least."""
    return max(MIN_SAMPLE_S, window_s / 10)


def said_nothing_new(readings: List[Reading]) -> bool:
    """A log's readings with no new value after the window's first: not judged."""
    last = readings[-1].value_at
    return last is not None and last <= readings[0].t_s


def window_figures(readings: Sequence[Reading], powers: Sequence[float],
                   energies: Sequence[Tuple[float, float]], noise: NoisePool,
                   ms_per: float = 1000.0, deadline_ms: Optional[float] = None,
                   learn: bool = False) -> Optional[Window]:
    """A window's figures from its readings, its power readings and the total's energy at
    them (its own difference over its own time where there is one), each sure as the recent
    windows' spread says (window_noise.py; `learn`: this window's spread joins it). None where
    the counter went back (a restart) or there is no power."""
    whole = window(readings[0], readings[-1], ms_per=ms_per, deadline_ms=deadline_ms)
    if whole is None or not powers:
        return None
    counts = [(r.t_s, r.count) for r in readings]
    own = energy_power(energies)
    power, values, kind = (statistics.fmean(powers), list(powers), "readings") if own is None \
        else (own[0], own[1], "energy")
    rate_pct = noise.rate_pct(counts)
    power_pct = noise.power_pct(values, kind)
    if learn:
        noise.learn(counts, values, kind)
    return Window(whole.items_per_s, rate_pct, power, power_pct if power_pct else 0.1,
                  whole.latency_ms, whole.miss_rate, whole.busy_share)


def busy_used(window: Window, items: Optional[float] = None) -> Tuple[Window, Optional[str]]:
    """A window's busy share as the governor takes it: at most all of it (a scrape's timing,
    or an item that began before the window, puts a little over), none over busy_max of the
    `items` it served (no one server's time, live_rate.py), and why."""
    share = window.busy_share
    if share is None or share <= 1.0:
        return window, None
    if share <= busy_max(items):
        return replace(window, busy_share=1.0), None
    return replace(window, busy_share=None), (
        f"the counter rose {share:.2f} s a second: not one server's busy time (several "
        "instances, or a batch's time counted once per request); not used")
