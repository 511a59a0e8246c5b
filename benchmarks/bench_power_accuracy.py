"""Energy accuracy on synthetic traces with exact integrals: jetbench's window integration
against the 1 Hz average-of-readings method (what tegrastats/jtop users do: read power once a
second, average the readings inside the window, multiply by the duration).

Run: .venv/bin/python benchmarks/bench_power_accuracy.py

A sensor is modelled as sampling the true power at its rate with a random phase and a random
timing jitter (10% of the period); windows start and end at random instants between samples.
Errors are |estimate - exact| / exact over 200 random windows per trace; mean and worst shown.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))

from jetbench.sampling.energy import average_of_readings, integrate  # noqa: E402


def _phase(t):
    """(cycle number, time into the cycle) of the 0.8 s burst pattern, computed consistently."""
    n = np.floor(np.asarray(t) / 0.8)
    return n, np.asarray(t) - n * 0.8


# (name, P(t) in W, exact integral F(t) with F' = P)
TRACES = {
    "step 2 W -> 6 W at t=7.3 s": (
        lambda t: np.where(t < 7.3, 2.0, 6.0),
        lambda t: np.where(t < 7.3, 2.0 * t, 2.0 * 7.3 + 6.0 * (t - 7.3)),
    ),
    "ramp 3 W + 0.4 W/s": (
        lambda t: 3.0 + 0.4 * t,
        lambda t: 3.0 * t + 0.2 * t * t,
    ),
    "sine 5 W +- 2 W at 0.37 Hz": (
        lambda t: 5.0 + 2.0 * np.sin(2 * math.pi * 0.37 * t),
        lambda t: 5.0 * t - 2.0 / (2 * math.pi * 0.37) * np.cos(2 * math.pi * 0.37 * t),
    ),
    "bursts 3 W / 9 W, 0.8 s period, 40% duty": (
        lambda t: np.where(_phase(t)[1] < 0.32, 9.0, 3.0),
        lambda t: 3.0 * t + 6.0 * (_phase(t)[0] * 0.32 + np.minimum(_phase(t)[1], 0.32)),
    ),
}


def sample_times(rate_hz: float, t_end: float, rng: np.random.Generator) -> np.ndarray:
    period = 1.0 / rate_hz
    n = int(t_end * rate_hz) + 2
    t = rng.uniform(0, period) + np.arange(n) * period
    t = t + rng.uniform(-0.1, 0.1, n) * period
    return np.sort(t[(t >= 0) & (t <= t_end)])


def errors(p, big_f, rate_hz, method, duration, rng, n_windows=200, t_end=60.0):
    t = sample_times(rate_hz, t_end, rng)
    y = p(t).astype(float)
    errs = []
    for _ in range(n_windows):
        t0 = rng.uniform(1.0, t_end - duration - 1.0)
        t1 = t0 + duration
        exact = float(big_f(np.float64(t1)) - big_f(np.float64(t0)))
        if method == "jetbench":
            est = integrate(t, y, t0, t1).energy_j
        else:
            est = average_of_readings(t, y, t0, t1)
        errs.append(abs(est - exact) / exact)
    errs = np.array(errs)
    return float(np.nanmean(errs)) * 100, float(np.nanmax(errs)) * 100


def main() -> None:
    rng = np.random.default_rng(42)
    print("| trace | window | jetbench @ 100 Hz | jetbench @ 1 kHz | 1 Hz average-of-readings |")
    print("|---|---|---|---|---|")
    worst = {"jetbench100": 0.0, "jetbench1k": 0.0}
    for name, (p, big_f) in TRACES.items():
        for duration in (5.0, 20.0):
            j100 = errors(p, big_f, 100.0, "jetbench", duration, rng)
            j1k = errors(p, big_f, 1000.0, "jetbench", duration, rng)
            avg = errors(p, big_f, 1.0, "average", duration, rng)
            worst["jetbench100"] = max(worst["jetbench100"], j100[1])
            worst["jetbench1k"] = max(worst["jetbench1k"], j1k[1])
            print(f"| {name} | {duration:.0f} s | {j100[0]:.4f}% (max {j100[1]:.4f}%) "
                  f"| {j1k[0]:.4f}% (max {j1k[1]:.4f}%) | {avg[0]:.2f}% (max {avg[1]:.2f}%) |")
    print(f"\nworst jetbench window error: {worst['jetbench100']:.4f}% at 100 Hz, "
          f"{worst['jetbench1k']:.4f}% at 1 kHz (target 0.5%)")


if __name__ == "__main__":
    main()
