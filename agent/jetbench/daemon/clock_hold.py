"""Whether the clocks the daemon pinned run at their pins: measured, not assumed.

A firmware can move a clock without touching its knobs: Thor's OSP controller re-floors the EMC
from its QoS clients, so a `bwmgr` pinned at 2133 MHz runs 3199 MHz part of the time while
`min_freq`/`max_freq` read the pin (docs/hardware.md, "EMC"). The daemon's drift check compares
the knobs with its pin, which cannot see that; this compares the running clocks. Each check's
reading of a pinned clock holds until the next (time-weighted, as a measurement window's
`held_share`, run/validity.py) over the last HOLD_WINDOW_S; a clock is *not held* while it ran
where its knobs put it less than HELD_SHARE_MIN of that time. Each time a clock stops being held
is a drift event (`jetbench_clock_drift_events_total{domain}`); the daemon then writes its lock
again (the retry people use), at most RELOCKS_PER_HOUR times an hour, and says so.
"""

from __future__ import annotations

import collections
import time
from typing import Deque, Dict, List, Optional, Sequence, Tuple

from ..documents import ClockDoc
from ..hw.clocks.types import ClockReading
from ..run.validity import HELD_SHARE_MIN, activity_counter_cpu, expected_range
from ..units import format_hz

HOLD_WINDOW_S = 60.0
RELOCKS_PER_HOUR = 3
MIN_READINGS = 5  # a clock is judged on at least this many checks' readings (4 intervals)
_Key = Tuple[str, str]


class ClockHold:
    def __init__(self, window_s: float = HOLD_WINDOW_S):
        self.window_s = window_s
        # (domain, name) -> readings (when, rate, inside its pin's range)
        self._readings: Dict[_Key, Deque[Tuple[float, int, bool]]] = {}
        self.not_held: Dict[_Key, str] = {}  # what status says of each clock not held
        self.events: Dict[str, int] = collections.Counter()
        self._relocks: Deque[float] = collections.deque()

    def forget(self) -> None:
        """A new pin (or none): what the old one ran says nothing of it."""
        self._readings.clear()
        self.not_held.clear()

    def add(self, applied: Sequence[ClockDoc], clocks: Sequence[ClockReading],
            soc: Optional[str], now: Optional[float] = None) -> List[str]:
        """One check's readings; returns the domains that just stopped being held."""
        now = time.monotonic() if now is None else now
        ranges = {(a["domain"], a["name"]): expected_range(a) for a in applied}
        started: List[str] = []
        for c in clocks:
            key = (c.domain, c.name)
            if c.cur_hz is None or key not in ranges or \
                    (c.domain == "cpu" and activity_counter_cpu(soc)):
                continue
            lo, hi = ranges[key]
            if lo is None and hi is None:
                continue
            inside = (lo is None or c.cur_hz >= lo) and (hi is None or c.cur_hz <= hi)
            readings = self._readings.setdefault(key, collections.deque())
            readings.append((now, int(c.cur_hz), inside))
            while len(readings) > 2 and readings[1][0] <= now - self.window_s:
                readings.popleft()
            said = self._judge(key, readings, lo, now)
            if said and key not in self.not_held:
                self.events[c.domain] += 1
                started.append(c.domain)
            if said:
                self.not_held[key] = said
            else:
                self.not_held.pop(key, None)
        return started

    def _judge(self, key: _Key, readings: Deque[Tuple[float, int, bool]], lo: Optional[int],
               now: float) -> str:
        """'emc not held: the firmware raised it to 3.199 GHz for 35% of the last minute', or
        '' while it is held (or too few readings to say)."""
        start = max(readings[0][0], now - self.window_s)
        spans: Dict[int, float] = collections.defaultdict(float)
        inside_s = total = 0.0
        for (t, hz, inside), nxt in zip(readings, list(readings)[1:] + [(now, 0, False)]):
            seconds = max(0.0, nxt[0] - max(t, start))
            total += seconds
            inside_s += seconds if inside else 0.0
            if not inside:
                spans[hz] += seconds
        if len(readings) < MIN_READINGS or total <= 0 or inside_s / total >= HELD_SHARE_MIN \
                or not spans:
            return ""
        hz, seconds = max(spans.items(), key=lambda kv: kv[1])
        who = key[0] if key[0] == key[1] else f"{key[0]} {key[1]}"
        span = "minute" if self.window_s == 60 else f"{self.window_s:g} s"
        if lo is not None and hz < lo:
            how = f"ran below its pin at {format_hz(hz)} (cause unknown)"
        else:
            how = f"the firmware raised it to {format_hz(hz)}"
        return f"{who} not held: {how} for {seconds / total:.0%} of the last {span}"

    def may_relock(self, now: Optional[float] = None) -> bool:
        """Whether another lock retry fits in RELOCKS_PER_HOUR (and count it if so)."""
        now = time.monotonic() if now is None else now
        while self._relocks and self._relocks[0] <= now - 3600:
            self._relocks.popleft()
        if len(self._relocks) >= RELOCKS_PER_HOUR:
            return False
        self._relocks.append(now)
        return True
