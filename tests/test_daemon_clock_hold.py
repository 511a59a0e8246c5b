"""Issue 57: a daemon holding a clock a firmware moves says it is not held.

Thor's OSP controller re-floors the EMC (the bwmgr devfreq node) from its QoS clients: the pin's
knobs stay in place while the clock runs higher part of the time (docs/hardware.md, "EMC").
The simulated firmware (quirk `emc-refloor`) raises it to the table's top, 4266 MHz, for a set
share of each second. The daemon's drift check used to read only the knobs (`holding ... emc
2.133 GHz`, 0 re-pins, nothing said); it now compares the running clock with its pin.
"""

from __future__ import annotations

import urllib.request

from helpers.daemons import Daemon, board_state
from prometheus_client.parser import text_string_to_metric_families

from conftest import diff, wait_until

MHZ = 1_000_000


def _thor_refloored(tmp_path, share: str):
    from jetbench.sim.create import create_board

    base = tmp_path / "thor"
    create_board("thor", base, quirks=("emc-refloor",))
    (base / "etc/jetbench/emc-refloor").write_text(f"{share}\n")
    profile = tmp_path / "emc2133.toml"
    profile.write_text('[emc]\nfreq = "2133MHz"\n')
    return base, profile


def test_daemon_says_the_emc_is_not_held_counts_it_and_relocks_a_bounded_number_of_times(
        tmp_path, started):
    base, profile = _thor_refloored(tmp_path, "0.5")
    before = board_state(base)
    d = Daemon(tmp_path, base, "--profile", str(profile), "--metrics", "127.0.0.1:0",
               interval="0.1s")
    started.append(d)
    d.ready()

    assert wait_until(lambda: d.ask("status").get("not_held"))
    status = d.ask("status")
    said = status["not_held"][0]
    assert said.startswith("emc not held: the firmware raised it to 4.266 GHz for "), said
    assert "not held" in status["summary"]
    assert status["clock_drift_events"]["emc"] >= 1
    assert status["counters"]["repins"] == 0  # the knobs never moved
    assert 1 <= status["counters"]["relocks"] <= 3
    port = status["metrics"].rsplit(":", 1)[1]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(text.decode())
               for s in fam.samples}
    assert samples[("jetbench_clock_drift_events_total", (("domain", "emc"),))] >= 1
    assert d.stop() == 0
    # the running EMC (cur_freq, target_freq) follows the simulated firmware: a reading
    moving = ("bwmgr/cur_freq", "bwmgr/target_freq")
    assert [f for f in diff(before, board_state(base)) if not f.endswith(moving)] == []


def test_clock_hold_share_over_the_window_is_time_weighted():
    """Readings (one per check) at t = 0..9 s, the EMC pinned at 2133 MHz: 4266 MHz at t = 2
    and 3 (2 s of the 9 s between the first and the last reading, 22%), then held again: not
    held (22% off > 1%), one drift event; held again once the window (6 s) has passed it."""
    from jetbench.daemon.clock_hold import ClockHold
    from jetbench.hw.clocks.types import ClockReading

    applied = [{"domain": "emc", "name": "emc", "min_hz": 2133 * MHZ, "max_hz": 2133 * MHZ,
                "table_hz": [2133 * MHZ, 4266 * MHZ]}]
    hold = ClockHold(window_s=60.0)
    started = []
    for t in range(10):
        hz = 4266 if t in (2, 3) else 2133
        reading = ClockReading(domain="emc", name="emc", governor=None, min_hz=None,
                               max_hz=None, cur_hz=hz * MHZ, available_hz=(), locked=True)
        started += hold.add(applied, [reading], "tegra264", now=float(t))
    assert started == ["emc"]  # one event, not one per reading
    assert hold.not_held[("emc", "emc")] == \
        "emc not held: the firmware raised it to 4.266 GHz for 22% of the last minute"
    short = ClockHold(window_s=4.0)
    for t in range(10):
        hz = 4266 if t in (2, 3) else 2133
        reading = ClockReading(domain="emc", name="emc", governor=None, min_hz=None,
                               max_hz=None, cur_hz=hz * MHZ, available_hz=(), locked=True)
        short.add(applied, [reading], "tegra264", now=float(t))
    assert short.not_held == {}  # t = 5..9: held the last 4 s


def test_relocks_are_bounded_per_hour():
    from jetbench.daemon.clock_hold import RELOCKS_PER_HOUR, ClockHold

    hold = ClockHold()
    allowed = [hold.may_relock(now=float(t)) for t in range(RELOCKS_PER_HOUR + 2)]
    assert allowed == [True] * RELOCKS_PER_HOUR + [False, False]
    assert hold.may_relock(now=3600.5)  # the first one is an hour old
