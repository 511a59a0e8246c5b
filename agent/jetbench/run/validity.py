"""What a result claims about its clocks, and whether the claim holds (docs/design.md, "What a
result claims").

Each clock has four values: `requested` (what the user typed), `resolved` (the table entry),
`applied` (the knobs the kernel kept, read back: `hw/clocks/domains.py`) and `observed` (the running
clock sampled through the window: min, mean, max). A result is invalid when an observed clock is
not the applied one, in either direction, beyond the domain's tolerance:

- devfreq clocks and override-pinned clocks (GPU, EMC): exact. The clock must run at the applied
  table entry (or inside the applied min..max when the governor is free to move it).
- Each clock's time at each rate is kept (a reading holds until the next one), so a result says
  the share of the window each pinned clock ran where its knobs put it (`held_share`); an
  exactly judged clock is valid only when that share is at least HELD_SHARE_MIN (a firmware
  that re-floors the EMC a third of the time, Thor's OSP controller, is not a held window).
  With fewer than two timed readings (the daemon's one read) any reading outside counts.
- CPU clocks whose current frequency is *measured* from activity counters (Xavier, Orin, Thor):
  the reading is a few percent off the set clock and drops when cores idle, so these are judged
  on the mean over the window (under load) with ACTIVITY_COUNTER_TOLERANCE. An unpinned one is
  only judged upwards (an idle core reads low: that says nothing about the clock).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..documents import ClockDoc
from ..documents import ObservedClock as ObservedClockDoc
from ..hw.clocks.runs import at_or_below, runs_range
from ..hw.clocks.types import ClockReading
from ..units import format_hz

# SoCs whose cpufreq current frequency comes from activity monitors (docs/hardware.md, CPU).
ACTIVITY_COUNTER_SOCS = ("tegra194", "tegra234", "tegra264")
# How far the mean of such a reading may be from the set clock, as a fraction (5%: the counters
# read "a few percent" off under load; more than that is a different clock).
ACTIVITY_COUNTER_TOLERANCE = 0.05
SAMPLE_EVERY_S = 0.1  # clock polling through the window (a transient cap shows up here)
# The share of a window's time a pinned clock must run where its knobs put it for the window to
# count as held (docs/measure.md, "Validity"): one 0.1 s reading off in a 10 s window passes.
HELD_SHARE_MIN = 0.99
TIME_AT_RATES_KEPT = 8  # the result lists a clock's time at this many rates (the longest)


@dataclass
class ObservedClock:
    """A running clock through the window, accumulated from `cur` readings."""

    domain: str
    name: str
    min_hz: Optional[int] = None
    max_hz: Optional[int] = None
    sum_hz: float = 0.0
    samples: int = 0
    seconds_at: Dict[int, float] = field(default_factory=dict)  # rate -> time it ran there
    last: Optional[Tuple[float, int]] = None  # (when, rate) of the last reading

    def add(self, hz: int, at_s: Optional[float] = None) -> None:
        self.min_hz = hz if self.min_hz is None else min(self.min_hz, hz)
        self.max_hz = hz if self.max_hz is None else max(self.max_hz, hz)
        self.sum_hz += hz
        self.samples += 1
        if at_s is not None:
            if self.last is not None and at_s > self.last[0]:
                rate = self.last[1]
                self.seconds_at[rate] = self.seconds_at.get(rate, 0.0) + at_s - self.last[0]
            self.last = (at_s, hz)

    @property
    def mean_hz(self) -> Optional[float]:
        return self.sum_hz / self.samples if self.samples else None

    def to_dict(self) -> ObservedClockDoc:
        mean = self.mean_hz
        longest = sorted(self.seconds_at.items(), key=lambda kv: -kv[1])[:TIME_AT_RATES_KEPT]
        return {"domain": self.domain, "name": self.name, "min_hz": self.min_hz,
                "mean_hz": None if mean is None else round(mean), "max_hz": self.max_hz,
                "samples": self.samples,
                "time_at_hz": [[hz, round(s, 3)] for hz, s in sorted(longest)]}


class ClockSampler:
    """Reads the current-frequency files every SAMPLE_EVERY_S while the window is open (one
    read at start and one at stop, so even a short window has two samples per clock)."""

    def __init__(self, read: Callable[[], Sequence[ClockReading]],
                 every_s: float = SAMPLE_EVERY_S):
        self._read = read
        self._every_s = every_s
        self._clocks: Dict[Tuple[str, str], ObservedClock] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def sample(self) -> None:
        try:
            readings = self._read()
        except Exception:  # a flaky sysfs read must not end the measurement
            return
        now = time.monotonic()
        with self._lock:
            for r in readings:
                if r.cur_hz is None:
                    continue
                key = (r.domain, r.name)
                clock = self._clocks.setdefault(key, ObservedClock(r.domain, r.name))
                clock.add(int(r.cur_hz), now)

    def start(self) -> None:
        self.sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="jetbench-clock-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.sample()

    def observed(self) -> List[ObservedClockDoc]:
        with self._lock:
            return [c.to_dict() for c in self._clocks.values()]


def pinned_hz(applied: ClockDoc) -> Optional[int]:
    """The one clock the knobs hold (min = max, or an override rate), else None (a range)."""
    override = applied.get("override_hz")
    if override is not None:
        return int(override)
    lo, hi = applied.get("min_hz"), applied.get("max_hz")
    return int(lo) if lo is not None and lo == hi else None


def applied_summary(applied_clocks: Sequence[ClockDoc]) -> Dict[str, Optional[int]]:
    """`settings.applied` as scripts read it: per domain (its first clock: cpu policy0, the
    GPU, EMC) `<domain>_hz` = the pinned knob value (None when the governor has a range) and
    `<domain>_min_hz`/`<domain>_max_hz` = the knob range."""
    out: Dict[str, Optional[int]] = {}
    for c in applied_clocks:
        d = c["domain"]
        if f"{d}_hz" in out:
            continue
        out[f"{d}_hz"] = pinned_hz(c)
        out[f"{d}_min_hz"] = c.get("min_hz")
        out[f"{d}_max_hz"] = c.get("max_hz")
    return out


def expected_range(applied: ClockDoc) -> Tuple[Optional[int], Optional[int]]:
    """The range the running clock must stay in, by the kernel's rules (hw/clocks/runs.py):
    an override rate runs at the highest table entry not above it; min/max knobs run among
    the table entries inside them, or, where none lies inside (a power mode's cap that is no
    table entry), at the highest entry below max."""
    table = applied.get("table_hz") or []
    pin = applied.get("override_hz")
    if pin is not None:
        hz = at_or_below(table, pin) if table else pin
        return hz, hz
    return runs_range(table, applied.get("min_hz"), applied.get("max_hz"))


def activity_counter_cpu(soc: Optional[str]) -> bool:
    return soc in ACTIVITY_COUNTER_SOCS


@dataclass(frozen=True)
class Mismatch:
    domain: str
    name: str
    direction: str  # "below" | "above" the applied clock
    reason: str  # names the domain, the clock and both frequencies


def judge(applied_clocks: Sequence[ClockDoc], observed: Sequence[ObservedClockDoc],
          soc: Optional[str]) -> List[Mismatch]:
    """Where the observed clocks contradict the applied ones (empty: they agree)."""
    by_key = {(c["domain"], c["name"]): c for c in applied_clocks}
    reasons: List[Mismatch] = []
    for obs in observed:
        applied = by_key.get((obs["domain"], obs["name"]))
        if applied is None or not obs.get("samples"):
            continue
        lo, hi = expected_range(applied)
        who = obs['domain'] if obs['name'] == obs['domain'] else f"{obs['domain']} {obs['name']}"
        if obs["domain"] == "cpu" and activity_counter_cpu(soc):
            reason = _judge_mean(who, obs, lo, hi)
        else:
            share = held_share(obs, lo, hi)
            reason = _judge_exact(who, obs, lo, hi) if share is None else \
                _judge_share(who, obs, lo, hi, share)
        if reason:
            reasons.append(Mismatch(obs["domain"], obs["name"], reason[0], reason[1]))
    return reasons


def held_share(obs: ObservedClockDoc, lo: Optional[int], hi: Optional[int]) -> Optional[float]:
    """The share of the timed readings' time the clock ran inside lo..hi; None with too few."""
    timed = obs.get("time_at_hz") or []
    total = sum(s for _hz, s in timed)
    if total <= 0:
        return None
    inside = sum(s for hz, s in timed if (lo is None or hz >= lo) and (hi is None or hz <= hi))
    return inside / total


def held_shares(applied_clocks: Sequence[ClockDoc], observed: Sequence[ObservedClockDoc],
                soc: Optional[str]) -> Dict[Tuple[str, str], float]:
    """Each exactly judged clock's held share (the result's `held_share`)."""
    by_key = {(c["domain"], c["name"]): c for c in applied_clocks}
    out = {}
    for obs in observed:
        applied = by_key.get((obs["domain"], obs["name"]))
        if applied is None or (obs["domain"] == "cpu" and activity_counter_cpu(soc)):
            continue
        lo, hi = expected_range(applied)
        share = held_share(obs, lo, hi)
        if share is not None:
            out[(obs["domain"], obs["name"])] = round(share, 4)
    return out


def _judge_share(who: str, obs: ObservedClockDoc, lo: Optional[int], hi: Optional[int],
                 share: float) -> Optional[Tuple[str, str]]:
    """An exactly judged clock by the time it held lo..hi: below HELD_SHARE_MIN it was not held
    (the rate it ran at most outside, and for how long, named)."""
    if share >= HELD_SHARE_MIN:
        return None
    outside = [(s, hz) for hz, s in obs.get("time_at_hz") or []
               if (lo is not None and hz < lo) or (hi is not None and hz > hi)]
    total = sum(s for _hz, s in obs.get("time_at_hz") or [])
    seconds, hz = max(outside) if outside else (0.0, obs["max_hz"])
    direction = "below" if lo is not None and hz is not None and hz < lo else "above"
    return direction, (f"{who} ran at {format_hz(hz)}, {_range_text(lo, hi)} ({seconds / total:.0%}"
                       f" of the window: not held, held {share:.0%} and a window needs "
                       f"{HELD_SHARE_MIN:.0%}) {_spread(obs)}")


def _range_text(lo: Optional[int], hi: Optional[int]) -> str:
    if lo is not None and lo == hi:
        return f"{format_hz(lo)} was applied"
    return f"{format_hz(lo)} .. {format_hz(hi)} was applied"


def _spread(obs: ObservedClockDoc) -> str:
    return (f"(min {format_hz(obs['min_hz'])}, mean {format_hz(obs['mean_hz'])}, "
            f"max {format_hz(obs['max_hz'])} over {obs['samples']} samples)")


def _judge_exact(who: str, obs: ObservedClockDoc, lo: Optional[int],
                 hi: Optional[int]) -> Optional[Tuple[str, str]]:
    low, high = obs["min_hz"], obs["max_hz"]
    if low is None or high is None:  # no sample: nothing to judge
        return None
    if lo is not None and low < lo:
        return "below", f"{who} ran at {format_hz(low)}, {_range_text(lo, hi)} {_spread(obs)}"
    if hi is not None and high > hi:
        return "above", f"{who} ran at {format_hz(high)}, {_range_text(lo, hi)} {_spread(obs)}"
    return None


def _judge_mean(who: str, obs: ObservedClockDoc, lo: Optional[int],
                hi: Optional[int]) -> Optional[Tuple[str, str]]:
    mean = obs["mean_hz"]
    if mean is None:  # no sample: nothing to judge
        return None
    tol = ACTIVITY_COUNTER_TOLERANCE
    note = (f"{_spread(obs)}; measured from activity counters, judged on the mean within "
            f"{tol:.0%}")
    if lo is not None and lo == hi and mean < lo * (1 - tol):
        return "below", f"{who} ran at {format_hz(mean)} (mean), {_range_text(lo, hi)} {note}"
    if hi is not None and mean > hi * (1 + tol):
        return "above", f"{who} ran at {format_hz(mean)} (mean), {_range_text(lo, hi)} {note}"
    return None


def below_pin(applied_clocks: Sequence[ClockDoc], clocks: Sequence[ClockReading],
              soc: Optional[str]) -> Tuple[str, ...]:
    """The daemon's check between measurements, by the same rule as a result's validity
    (`judge`): one read of each clock (hw ClockReading) against the knobs as kept (an override
    rate at its nearest table entry), said as no more than a fact ("cause unknown": a low
    clock is not evidence of throttling, hw/thermal.py). A CPU measured by activity counters
    is not judged from one read: it reads low whenever its cores rest."""
    now = {(c.domain, c.name): c.cur_hz for c in clocks if c.cur_hz is not None
           and not (c.domain == "cpu" and activity_counter_cpu(soc))}
    observed: List[ObservedClockDoc] = [
        {"domain": d, "name": n, "min_hz": hz, "max_hz": hz, "mean_hz": hz, "samples": 1}
        for (d, n), hz in now.items()]
    by_key = {(c["domain"], c["name"]): c for c in applied_clocks}
    out = []
    for m in judge(applied_clocks, observed, soc):
        if m.direction == "below":
            floor = expected_range(by_key[(m.domain, m.name)])[0]
            out.append(f"{m.domain} {m.name} below its pin ({format_hz(now[(m.domain, m.name)])}"
                       f", pinned floor {format_hz(floor)}), cause unknown")
    return tuple(out)
