"""Issue 64: the sampler's reading threads start at a nice value and take a real-time priority
only once they fall behind their cadence (sampling/poll.py PollState.tick). A real-time thread
wakes on the core it last ran on and preempts the workload there even with another core idle;
a nice one wakes on the idle core."""

from __future__ import annotations

import threading

from jetbench.sampling.poll import PollState, poll

INTERVAL_S = 0.001  # 1 kHz: a second is 1000 ticks; "late" is more than 0.5 ms after its time


def ticks(state: PollState, late_per_1000: int, seconds: int = 1) -> None:
    for _ in range(seconds):
        for k in range(1000):
            state.tick(0.0006 if k < late_per_1000 else 0.0001, INTERVAL_S)


def test_a_loop_on_time_never_asks_for_more():
    calls = []
    state = PollState(on_behind=lambda: calls.append(1))
    ticks(state, late_per_1000=40, seconds=3)  # 4% late, under the 5% share
    assert calls == [] and not state.behind
    assert state.late == 120


def test_a_loop_that_falls_behind_asks_once():
    calls = []
    state = PollState(on_behind=lambda: calls.append(1))
    ticks(state, late_per_1000=0)
    assert calls == []
    ticks(state, late_per_1000=50, seconds=3)  # 5% of a second's ticks: behind
    assert calls == [1] and state.behind


def test_poll_times_each_tick_against_its_cadence():
    """poll() hands tick() how late each wake-up was: a clock that jumps 0.8 ms past every
    tick's time makes every tick late, and the loop asks for more within its first second."""

    class Source:
        name, pushed, period_s = "fake", False, INTERVAL_S

        def read(self):
            from jetbench.hw.meters.base import Reading

            return Reading(t_s=now[0], power_w=(1.0,))

    now = [0.0]

    def clock():  # every look at the clock is 0.8 ms later: each wake-up is that late
        now[0] += 0.0008
        return now[0]

    stop = threading.Event()
    state = PollState(on_behind=stop.set)

    class Sink:
        def append(self, t_s, values):
            pass

        def mark_fault(self, t_s, kind):
            pass

    poll(Source(), Sink(), INTERVAL_S, stop, state, clock=clock)
    assert state.behind and state.late >= 10


def test_one_stall_is_behind_at_once():
    """A single wake-up 5 ms late at 1 kHz (a gap is 5 intervals: window.GAP_FACTOR) asks at
    once, not after a second of ticks: a short window cannot wait that long."""
    calls = []
    state = PollState(on_behind=lambda: calls.append(1))
    for lag in (0.0001, 0.0001, 0.0051):
        state.tick(lag, INTERVAL_S)
    assert calls == [1]
    state = PollState(on_behind=lambda: calls.append(2))
    for lag in (0.0001, 0.0029, 0.0001):  # under 3 intervals: no stall
        state.tick(lag, INTERVAL_S)
    assert calls == [1]
