"""Running energy totals per channel: what the daemon exports as `jetbench_energy_joules_total`.

Pure bookkeeping, no I/O. Power channels are integrated by the trapezoid between consecutive
readings; energy-counter channels (RAPL, NVML's total energy) add the counter's own increments,
which are exact. A missing reading (None) breaks the chain: the gap adds nothing (an unknown is
never guessed as 0 W or as the last value), and the next two readings start a new segment. A
counter that goes backwards (a wrap or a driver reset) adds nothing for that step. The totals only
ever grow, whatever happens to the clocks; a new `EnergyTotals` (a daemon restart) starts at 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Hashable, Optional

# A segment longer than this is a stall (a suspended daemon, a hung sensor), not a reading
# interval: integrating a straight line across it would invent energy.
MAX_SEGMENT_S = 60.0


@dataclass
class _Last:
    t_s: float
    value: float  # W for a power channel, J (the counter's reading) for an energy counter


class EnergyTotals:
    def __init__(self, max_segment_s: float = MAX_SEGMENT_S):
        self.max_segment_s = max_segment_s
        self._joules: Dict[Hashable, float] = {}
        self._last: Dict[Hashable, _Last] = {}

    def add_power(self, key: Hashable, t_s: float, power_w: Optional[float]) -> None:
        """A power reading (W) at monotonic time `t_s`."""
        self._add(key, t_s, power_w, lambda last, v, dt: 0.5 * (last.value + v) * dt)

    def add_counter(self, key: Hashable, t_s: float, counter_j: Optional[float]) -> None:
        """A cumulative energy counter's reading (J) at monotonic time `t_s`."""
        self._add(key, t_s, counter_j,
                  lambda last, v, dt: v - last.value if v >= last.value else 0.0)

    def _add(self, key: Hashable, t_s: float, value: Optional[float], step) -> None:
        self._joules.setdefault(key, 0.0)
        if value is None:
            self._last.pop(key, None)
            return
        last = self._last.get(key)
        if last is not None:
            dt = t_s - last.t_s
            if dt <= 0:
                return  # not later than the previous reading: keep the older one
            if dt <= self.max_segment_s:
                self._joules[key] += max(0.0, step(last, value, dt))
        self._last[key] = _Last(t_s, value)

    def joules(self, key: Hashable) -> float:
        return self._joules.get(key, 0.0)

    def totals(self) -> Dict[Hashable, float]:
        return dict(self._joules)
