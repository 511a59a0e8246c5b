"""Issue 56: `daemon --tune` tunes over the rates the kernel runs, and its own pins are no drift.

A simulated Orin Nano's EMC (BPMP, tegra234) lists no rates; its clock framework rounds a
rate down to its table, 204, 665.6 and 2133 MHz (sim/boards.py, the board's table facts), and
the `rate` file reads back the rounded rate (docs/hardware.md). The daemon used to step EMC
through shares of its max (1600, 1066.5, 800 MHz: all three run 665.6 MHz), held one of them
(`tune held ... emc 1.6 GHz` beside `emc 665.6 MHz`) and took the kernel's rounding of its own
pin for another tool every check ("clocks moved behind jetbench's back").

Expected values are computed here from those table facts, never from jetbench's helpers.
"""

from __future__ import annotations

from helpers.daemons import Daemon, board_state

from conftest import diff, make_board, wait_until

MHZ = 1_000_000
# The Orin Nano's EMC table (sim/boards.py): the rates its clock framework runs.
ORIN_NANO_EMC = (204 * MHZ, 665_600_000, 2133 * MHZ)

EMC_RATE = "sys/kernel/debug/bpmp/debug/clk/emc/rate"
MOVED = "moved behind jetbench's back"


def _emc_running(status: dict) -> int:
    emc = [c["cur_hz"] for c in status["clocks"] if c["domain"] == "emc"]
    assert emc, status["clocks"]
    return emc[0]


def test_a_held_emc_rate_the_kernel_rounds_is_no_drift_and_a_foreign_write_is(tmp_path,
                                                                            started):
    """A profile pinning EMC at 1.6 GHz (no table rate: 665.6 MHz runs, and the rate file
    reads it back) held for many checks: no re-pin, no warning. Another tool writing the rate
    is still caught and put back."""
    base = make_board(tmp_path, "orin-nano")
    before = board_state(base)
    profile = tmp_path / "emc-1600.toml"
    profile.write_text('description = "EMC at 1.6 GHz"\n[emc]\nfreq = "1600MHz"\n')
    d = Daemon(tmp_path, base, "--profile", str(profile), interval="0.1s")
    started.append(d)
    d.ready()
    rate = base / EMC_RATE
    assert wait_until(lambda: rate.read_text().strip() == "665600000"), rate.read_text()
    checks = d.ask("status")["counters"]["checks"]
    assert wait_until(lambda: d.ask("status")["counters"]["checks"] >= checks + 15)
    status = d.ask("status")
    assert status["counters"]["repins"] == 0 and MOVED not in d.output(), d.output()
    assert _emc_running(status) == 665_600_000
    # another tool: the EMC at 2133 MHz
    rate.write_text("2133000000\n")
    assert wait_until(lambda: d.ask("status")["counters"]["repins"] >= 1), d.output()
    assert wait_until(lambda: rate.read_text().strip() == "665600000"), rate.read_text()
    assert MOVED in d.output() and "emc/rate: 2133000000" in d.output(), d.output()
    repins = d.ask("status")["counters"]["repins"]
    checks = d.ask("status")["counters"]["checks"]
    assert wait_until(lambda: d.ask("status")["counters"]["checks"] >= checks + 10)
    assert d.ask("status")["counters"]["repins"] == repins  # its re-pin rounded: no drift
    assert d.stop() == 0, d.output()
    assert diff(before, board_state(base)) == []
