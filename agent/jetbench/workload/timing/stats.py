"""Statistics of per-iteration latencies (pure functions, no numpy, no torch)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Sequence

from .loop import is_stable  # noqa: F401 - the warm-up rule lives with the loop (Python 3.6)

CV_WARN = 0.025  # above this, latency varies too much to trust one number: lock the clocks
# what the CV warning advises where nothing is known of the clocks (`time`); `measure` says
# what fits the board's state instead (run/result.py, noise_advice)
LOCK_ADVICE = "lock the clocks (`jetbench maxperf`) and stop other work on the machine"
CV_NOISY = 0.10  # above this, a valid result is labelled "valid, noisy" (report, measure)


@dataclass(frozen=True)
class LatencyStats:
    """Per-iteration latency in milliseconds (one iteration = one batch)."""

    min_ms: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    stdev_ms: float

    def to_dict(self) -> Dict[str, float]:
        """The result schema's `latency_ms` object: {min, mean, p50, p90, p99, max}."""
        return {"min": self.min_ms, "mean": self.mean_ms, "p50": self.p50_ms,
                "p90": self.p90_ms, "p99": self.p99_ms, "max": self.max_ms}


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """q-th percentile (0..100) of already-sorted values, linear interpolation between closest
    ranks (numpy's default), so p50 of [1, 2, 3, 4] is 2.5."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def stdev(values: Sequence[float]) -> float:
    """Sample standard deviation (n-1); 0 for a single value."""
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def coefficient_of_variation(values: Sequence[float]) -> float:
    m = mean(values)
    return stdev(values) / m if m > 0 else 0.0


def latency_stats(latencies_ms: Sequence[float]) -> LatencyStats:
    ordered = sorted(latencies_ms)
    return LatencyStats(
        min_ms=ordered[0],
        mean_ms=mean(ordered),
        p50_ms=percentile(ordered, 50),
        p90_ms=percentile(ordered, 90),
        p99_ms=percentile(ordered, 99),
        max_ms=ordered[-1],
        stdev_ms=stdev(ordered),
    )


def images_per_s(batch: int, iterations: int, wall_s: float) -> float:
    """Throughput as the seeds report it: batch x iterations / wall time of the timed loop."""
    return batch * iterations / wall_s if wall_s > 0 else 0.0
