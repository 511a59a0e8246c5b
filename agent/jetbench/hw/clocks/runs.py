"""What the kernel runs for a set of knob values, by each clock driver's own rule, so jetbench
knows the clock a write will give (and what a file will read back) before it writes, and a
kernel that rounds inside its rules is never taken for another agent (docs/hardware.md, "What
a kernel runs under a cap"). Pure functions over a table (any unit, ascending or not).

- cpufreq: a target (userspace's `scaling_setspeed`; performance's max; powersave's min) is
  clamped to the policy's min..max, then resolved with CPUFREQ_RELATION_L among the table
  entries inside those limits: the lowest entry at or above it. Where no entry lies inside
  (min = max = a cap that is no entry, as nvpmodel's 918000 kHz on a Nano), the highest entry
  not above max. `scaling_setspeed` reads back the clock that runs (`policy->cur`).
- devfreq: `min_freq`/`max_freq` keep what was written; the clock runs at the highest OPP at
  or below max_freq (a max below min wins), at or above min_freq where the table has one.
- tegra210 debugfs overrides (`override.gbus`, `override.emc`): the rate file keeps what was
  written; the clock runs at the highest table rate at or below it.
- BPMP EMC `rate`: rounded down to a table rate, and the file reads back the rounded rate.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple


def at_or_below(table: Sequence[int], value: int) -> int:
    """The highest entry not above `value` (the lowest entry when none is)."""
    below = [f for f in table if f <= value]
    return max(below) if below else min(table)


def cpufreq_runs(table: Sequence[int], lo: int, hi: int, target: int) -> int:
    """The entry a cpufreq policy runs for `target` inside min `lo` .. max `hi`
    (CPUFREQ_RELATION_L inside the limits)."""
    want = min(max(target, lo), hi)
    inside = [f for f in table if lo <= f <= hi]
    above = [f for f in inside if f >= want]
    if above:
        return min(above)
    return max(inside) if inside else at_or_below(table, hi)


def devfreq_runs(table: Sequence[int], hi: int) -> int:
    """The OPP a pinned (or performance) devfreq node runs: the highest at or below max."""
    return at_or_below(table, hi)


def runs_range(table: Sequence[int], lo: Optional[int],
               hi: Optional[int]) -> Tuple[Optional[int], Optional[int]]:
    """The lowest and highest entries a governor may run between knobs `lo` .. `hi` (cpufreq
    and devfreq alike): entries inside the limits; with none inside, the one below max."""
    if not table or lo is None or hi is None:
        return lo, hi
    inside = [f for f in table if lo <= f <= hi]
    if not inside:
        only = at_or_below(table, hi)
        return only, only
    return min(inside), max(inside)


def is_entry(table: Sequence[int], value: int) -> bool:
    return not table or value in table
