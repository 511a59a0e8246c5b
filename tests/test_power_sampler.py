"""The sampler and windows with in-memory sources: real threads, real clock."""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

import numpy as np
import pytest

from jetbench.errors import MeasurementInvalid
from jetbench.hw.meters.base import Channel, EmptySource, Reading, SourceFault, Total
from jetbench.sampling.sampler import Sampler
from jetbench.sampling.trace import Trace, write_csv
from jetbench.sampling.window import SourceTrace, compute_window

from conftest import bound_s, wait_until


class FuncSource:
    """P(t) in watts from a function of the monotonic time; optional fault schedule."""

    pushed = False

    def __init__(self, name: str, power: Callable[[float], float], period_s: float = 0.002,
                 fault: Optional[Callable[[int], Optional[SourceFault]]] = None):
        self.name = name
        self.period_s = period_s
        self.power = power
        self.fault = fault
        self.n = 0
        self.opens = 0
        self.closes = 0

    def channels(self):
        return (Channel("A", self.name, "rail"), Channel("B", self.name, "rail"))

    def total(self):
        return Total("sum of A+B", "sum", ("A", "B"), "module_input")

    def open(self):
        self.opens += 1

    def close(self):
        self.closes += 1

    def read(self):
        self.n += 1
        if self.fault is not None:
            f = self.fault(self.n)
            if f is not None:
                raise f
        t = time.monotonic()
        return Reading(t, (self.power(t), None if self.n % 7 == 0 else 1.0))


def test_ramp_energy_is_exact_over_a_real_window():
    origin = time.monotonic()
    src = FuncSource("fake", lambda t: 2.0 + 10.0 * (t - origin))
    # A trapezoid over a ramp is exact whatever the spacing: a loaded CI machine may starve the
    # sampling thread for tens of ms, which must not count as a gap here (gaps are tested apart).
    with Sampler([src], gap_factor=1000.0) as sampler:
        time.sleep(0.02)
        with sampler.window() as w:
            time.sleep(0.15)
        res = w.result
    a, b = w.t_start_s - origin, w.t_end_s - origin
    exact = 2.0 * (b - a) + 5.0 * (b * b - a * a)
    ch = res.channel("A")
    assert ch.energy_j == pytest.approx(exact, rel=1e-9)
    assert ch.coverage == pytest.approx(1.0)
    assert ch.samples > 20
    # B is None every 7th read: those are gaps, and B never averages in a zero
    b_res = res.channel("fake/B")
    assert b_res.mean_w == pytest.approx(1.0)
    assert b_res.coverage < 1.0
    assert res.total is not None and res.total.total.kind == "sum"
    assert res.total.mean_w == pytest.approx(ch.mean_w + 1.0)
    assert src.opens == 1 and src.closes >= 1


def test_short_window_is_refused_with_a_reason():
    src = FuncSource("slow", lambda t: 1.0, period_s=0.05)
    with Sampler([src]) as sampler:
        time.sleep(0.06)
        with sampler.window() as w:
            time.sleep(0.01)
    assert not w.result_unchecked.valid
    with pytest.raises(MeasurementInvalid, match="shorter than 4 update periods of slow"):
        _ = w.result


def test_end_raises_by_default_and_window_exception_is_not_masked():
    src = FuncSource("slow", lambda t: 1.0, period_s=0.05)
    with Sampler([src]) as sampler:
        w = sampler.begin()
        with pytest.raises(MeasurementInvalid):
            sampler.end(w)
        with pytest.raises(ZeroDivisionError):
            with sampler.window():
                1 / 0  # noqa: B018


def test_faults_become_gaps_and_disconnect_reopens():
    def fault(n):
        if n == 20:
            return SourceFault("disconnect", "gone", reopen=True)
        if n % 10 == 5:
            return SourceFault("garbage", "bad line")
        return None

    src = FuncSource("flaky", lambda t: 3.0, fault=fault)
    with Sampler([src]) as sampler:
        with sampler.window() as w:
            time.sleep(0.25)
    res = w.result
    assert res.faults["flaky"]["disconnect"] == 1
    assert res.faults["flaky"]["garbage"] >= 3
    ch = res.channel("A")
    assert 0.3 < ch.coverage < 1.0
    assert ch.gaps
    assert ch.mean_w == pytest.approx(3.0)
    assert src.opens >= 2  # reopened after the disconnect
    assert any("faults during the window" in m for m in res.warnings)


def test_two_sources_at_their_own_rates():
    fast = FuncSource("fast", lambda t: 1.0, period_s=0.002)
    slow = FuncSource("slow", lambda t: 2.0, period_s=0.02)
    with Sampler([fast, slow]) as sampler:
        with sampler.window() as w:
            time.sleep(0.2)
    res = w.result
    n_fast = res.channel("fast/A").samples
    n_slow = res.channel("slow/A").samples
    assert n_fast > 3 * n_slow
    assert [t.source for t in res.totals] == ["fast", "slow"]
    assert res.total.source == "fast"


def test_interval_override_and_stats():
    """A source whose own period is 1 ms, read every 20 ms (the override): its reads are 20 ms
    apart on average on any machine (a busy one only spaces them further; the test once slept
    0.2 s and counted reads, and a loaded machine's late wake-up made 15 of at most 14)."""
    src = FuncSource("s", lambda t: 1.0, period_s=0.001)
    sampler = Sampler([src], intervals_s={"s": 0.02})
    sampler.start()
    assert wait_until(lambda: sampler.stats()["s"]["reads"] >= 8, step=0.01)
    sampler.stop()
    assert not sampler.running
    n = sampler.stats()["s"]["reads"]
    (trace,) = sampler.traces()
    t, _ = trace.trace.slice(-np.inf, np.inf)
    assert len(t) == n >= 8
    assert (t[-1] - t[0]) / (n - 1) >= 0.02 * 0.95  # not the source's 1 ms


def test_reader_bug_is_counted_not_fatal():
    """One read raises a bug (not a SourceFault) inside the window: counted as a read error of
    that window, and sampling goes on. The fault is armed only once the window is open, and the
    window closes only after reads went on past it: no timing decides the outcome."""
    window_open, fired = threading.Event(), threading.Event()
    fired_at = []

    def fault(n):
        if window_open.is_set() and not fired.is_set():
            fired_at.append(n)
            fired.set()
            raise KeyError("bug")
        return None

    src = FuncSource("buggy", lambda t: 1.0, fault=fault)
    with Sampler([src]) as sampler:
        with sampler.window() as w:
            window_open.set()
            assert fired.wait(30)
            deadline = time.monotonic() + bound_s(30)
            while src.n < fired_at[0] + 10:  # sampling goes on after the bug
                assert time.monotonic() < deadline
                time.sleep(0.005)
    assert w.result.faults["buggy"] == {"read_error": 1}
    assert sampler.stats()["buggy"]["reads"] >= fired_at[0] + 5


def test_empty_source_and_unique_names():
    with Sampler([EmptySource()]) as sampler:
        with sampler.window() as w:
            time.sleep(0.01)
    # nothing measured: no channels, no total, not a crash (and not 0 W)
    assert w.result_unchecked.channels == () and w.result_unchecked.total is None
    with pytest.raises(ValueError):
        Sampler([EmptySource(), EmptySource()])


def test_trace_slice_csv_and_compute_window(tmp_path):
    trace = Trace(2)
    for i in range(11):
        trace.append(float(i), (float(i), None))
    trace.mark_fault(10.5, "stall")
    t, v = trace.slice(2.5, 7.5)
    assert t.tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert np.isnan(v[:, 1]).all()
    assert trace.faults() == {"stall": 1}
    assert trace.nbytes == 12 * 8 * 3
    path = tmp_path / "trace.csv"
    with open(path, "w") as f:
        write_csv(f, *trace.arrays(), ["A", "B"], t0=0.0)
    lines = path.read_text().splitlines()
    assert lines[0] == "t_s,A,B" and lines[2] == "1.000000,1.0," and lines[-1] == "10.500000,,"
    chans = (Channel("A", "x", "rail"), Channel("B", "x", "rail"))
    res = compute_window(
        [SourceTrace("x", chans, Total("A", "channel", ("A",), "module_input"), 1.0, 1.0, trace)],
        2.5, 7.5,
    )
    assert res.channel("A").energy_j == pytest.approx(25.0)
    assert not res.valid and "x/B: no valid samples" in res.reasons[0]
    assert res.total.mean_w == pytest.approx(5.0)
    assert res.to_dict()["total"]["energy_j"] == pytest.approx(25.0)
