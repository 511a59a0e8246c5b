"""End to end: the sampler over a simulated serial meter with faults -> window with gaps."""

from __future__ import annotations

import time

import pytest

from jetbench.hw.fs import Root
from jetbench.hw.meters.registry import open_sources
from jetbench.sampling.sampler import Sampler
from jetbench.sim.meters import StreamSim, sim_for


def test_window_over_a_faulty_stream_meter(tmp_path):
    origin = time.monotonic()
    ramp = lambda t: 4.0 + 2.0 * (t - origin)  # noqa: E731
    with StreamSim(ramp, columns="ms,W", interval_s=0.005, directory=tmp_path) as sim:
        (src,) = open_sources(
            [sim.spec + "?columns=ms,W&timeout=0.1&interval=5ms"], Root("/")
        )
        with Sampler([src]) as sampler:
            time.sleep(0.05)
            with sampler.window() as w:
                time.sleep(0.1)
                sim.garbage(2)
                time.sleep(0.1)
                sim.disconnect(0.1)
                time.sleep(0.4)
            res = w.result
    ch = res.channel("P")
    faults = res.faults[src.name]
    assert faults.get("garbage", 0) >= 1 and faults.get("disconnect", 0) >= 1
    assert ch.gaps and 0.4 < ch.coverage < 0.95
    a, b = w.t_start_s - origin, w.t_end_s - origin
    assert ch.mean_w == pytest.approx(4.0 + (a + b), rel=0.05)  # a ramp: mean ~ midpoint
    assert any("covered" in m for m in res.warnings)
    assert sim.connections == 2


@pytest.mark.parametrize("protocol", ["scpi", "um25c"])
def test_polled_meter_window_is_exact_for_constant_power(protocol, tmp_path):
    with sim_for(protocol, 6.5, directory=tmp_path) as sim:
        (src,) = open_sources([sim.spec + "?interval=10ms&timeout=0.2"], Root("/"))
        with Sampler([src]) as sampler:
            # A window opened before the first sample starts with a gap: wait for one (a sleep
            # is too short on a loaded machine, where the meter's process starts late).
            deadline = time.monotonic() + 5.0
            while not sampler.stats()[src.name]["samples"] and time.monotonic() < deadline:
                time.sleep(0.005)
            with sampler.window() as w:
                time.sleep(0.15)
    res = w.result
    ch = res.channel("P")
    assert res.total.mean_w == pytest.approx(6.5)
    assert res.total.energy_j == pytest.approx(6.5 * res.duration_s)
    assert ch.measured_energy_j == pytest.approx(6.5 * res.duration_s * ch.coverage)
    # Whole coverage unless a poll came late enough to be a gap (a starved thread on a loaded
    # machine): then exactly the gaps are missing.
    missing_s = sum(g.duration_s for g in ch.gaps)
    assert ch.coverage == pytest.approx(1.0 - missing_s / res.duration_s)
    assert missing_s < res.duration_s / 2
