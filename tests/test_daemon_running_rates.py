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

import os
import signal
import time
from pathlib import Path

import pytest
from helpers.daemons import Daemon, board_state, start_sim_app

from conftest import bound_s, diff, make_board, wait_until

MHZ = 1_000_000
# The Orin Nano's EMC table (sim/boards.py): the rates its clock framework runs.
ORIN_NANO_EMC = (204 * MHZ, 665_600_000, 2133 * MHZ)
# Its GPU devfreq table: 306, 408, 510, 624.75 MHz.
ORIN_NANO_GPU = (306 * MHZ, 408 * MHZ, 510 * MHZ, 624_750_000)
# The candidates asked for, shares of the EMC's max (1, 0.75, 0.5, 0.375, 0.25 of 2133 MHz):
# 2133, 1599.75, 1066.5, 799.875, 533.25 MHz; each rounded down to the table: 2133, 665.6,
# 665.6, 665.6, 204 MHz. Distinct: the three table rates, each once.
EMC_RUNS = [204 * MHZ, 665_600_000, 2133 * MHZ]

EMC_RATE = "sys/kernel/debug/bpmp/debug/clk/emc/rate"
MOVED = "moved behind jetbench's back"


def _emc_running(status: dict) -> int:
    emc = [c["cur_hz"] for c in status["clocks"] if c["domain"] == "emc"]
    assert emc, status["clocks"]
    return emc[0]


def _another_tool_writes(path: Path, text: str) -> None:
    """Another tool's write of a clock file, whole as a reader sees it (a kernel's is:
    Path.write_text truncates first, and the daemon's check once read the empty file between,
    re-pinned on it and named no value moved)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    os.replace(part, path)


def test_the_daemons_candidates_are_the_rates_that_run_within_the_modes_cap(tmp_path):
    """In process: the daemon's space on an Orin Nano in its 7 W mode (GPU capped at 420 MHz,
    no table entry: 408 MHz runs), with a profile already pinning the GPU at 306 MHz (the
    daemon's --profile: its pin is no cap), the EMC probed with the daemon's own pins."""
    from jetbench.daemon.live_space import live_space
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.ownership import journal
    from jetbench.profiles.apply import apply_profile
    from jetbench.profiles.profile import FreqRange, Profile
    from jetbench.sim.create import create_board
    from jetbench.sim.file_kernel import FileKernel

    base = tmp_path / "nano"
    create_board("orin-nano", base, power_mode=1)  # 7W: GPU max_freq 420000000
    root = Root(base)
    board = detect(root)
    pins = []

    def pin(hz):
        pins.append(hz)
        apply_profile(root, board, Profile("live-tuned", "test", emc_freq=hz["emc"],
                                           sections=("emc",)))

    with FileKernel(base, power=False):
        apply_profile(root, board, Profile("held", "test", gpu_freq=FreqRange(306 * MHZ,
                                                                           306 * MHZ),
                                           gpu_railgate=False, sections=("gpu",)))
        space = live_space(root, board, ("gpu", "emc"), False, pin)
        journal.restore(root)
    # GPU: the table's entries at or below the 420 MHz cap (306 and 408 MHz), not the 306 MHz
    # the held profile pinned into max_freq
    assert space["gpu"] == [306 * MHZ, 408 * MHZ], space
    assert space["emc"] == EMC_RUNS, space
    assert [p["emc"] for p in pins] == [533_250_000, 799_875_000, 1_066_500_000, 1_599_750_000,
                                        2133 * MHZ]


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
    _another_tool_writes(rate, "2133000000\n")
    assert wait_until(lambda: d.ask("status")["counters"]["repins"] >= 1), d.output()
    assert wait_until(lambda: rate.read_text().strip() == "665600000"), rate.read_text()
    assert MOVED in d.output() and "emc/rate: 2133000000" in d.output(), d.output()
    repins = d.ask("status")["counters"]["repins"]
    checks = d.ask("status")["counters"]["checks"]
    assert wait_until(lambda: d.ask("status")["counters"]["checks"] >= checks + 10)
    assert d.ask("status")["counters"]["repins"] == repins  # its re-pin rounded: no drift
    assert d.stop() == 0, d.output()
    assert diff(before, board_state(base)) == []


@pytest.mark.long
def test_the_daemon_tunes_over_the_emc_rates_that_run_and_holds_what_runs(tmp_path, started):
    """End to end on a simulated Orin Nano serving `sim app` at 30 frames/s, started from a
    profile pinning EMC at 1066 MHz (665.6 MHz runs): the candidates are the rates that run,
    the point held names the EMC that runs, no tuning step is taken for drift, and another
    tool's write is still caught."""
    base = make_board(tmp_path, "orin-nano")
    before = board_state(base)
    profile = tmp_path / "emc-1066.toml"
    profile.write_text('description = "EMC at 1066 MHz"\n[emc]\nfreq = "1066MHz"\n')
    app, url = start_sim_app(base, "--demand", "30", "--model", "sim:resnet18")
    try:
        d = Daemon(tmp_path, base, "--profile", str(profile), "--tune", "--tune-window", "1s",
                   "--throughput-from", f"prometheus:{url}#sim_app_items",
                   "--constraint", "items_per_s>=27", interval="0.2s")
        started.append(d)
        d.ready()
        tune = d.ask("status")["tune"]
        assert tune["space_hz"]["emc"] == EMC_RUNS, tune
        assert tune["space_hz"]["gpu"] == list(ORIN_NANO_GPU), tune  # 15 W: no GPU cap
        # several tuning steps (the first settles, then steps down and up each knob), then
        # held: its EMC is one that runs, and the one running
        deadline = time.monotonic() + bound_s(120)
        status: dict = {}
        while time.monotonic() < deadline:
            status = d.ask("status")
            tune = status["tune"]
            if tune["phase"] == "holding" and tune["windows"] >= 5 and \
                    tune["held"]["point_hz"]["emc"] == _emc_running(status):
                break
            time.sleep(0.2)
        held = tune["held"]["point_hz"]["emc"]
        assert tune["phase"] == "holding" and held == _emc_running(status), \
            (tune, status["clocks"], d.output())
        assert held in EMC_RUNS
        # the log names it as it runs
        named = {204 * MHZ: "emc 204 MHz", 665_600_000: "emc 665.6 MHz",
                 2133 * MHZ: "emc 2.133 GHz"}[held]
        gpu = {306 * MHZ: "gpu 306 MHz", 408 * MHZ: "gpu 408 MHz", 510 * MHZ: "gpu 510 MHz",
               624_750_000: "gpu 624.8 MHz"}[tune["held"]["point_hz"]["gpu"]]
        assert f"holding {gpu}, {named}" in d.output(), d.output()
        # its own pins over those steps: none taken for another tool's
        assert status["counters"]["repins"] == 0 and MOVED not in d.output(), d.output()
        # another tool writes the EMC rate: caught, re-pinned to the point held
        other = next(hz for hz in (204 * MHZ, 2133 * MHZ) if hz != held)
        _another_tool_writes(base / EMC_RATE, f"{other}\n")
        assert wait_until(lambda: d.ask("status")["counters"]["repins"] >= 1), d.output()
        assert MOVED in d.output() and f"emc/rate: {other}" in d.output(), d.output()
        assert d.stop() == 0, d.output()
    finally:
        app.send_signal(signal.SIGTERM)
        app.wait(timeout=bound_s(20))
    assert diff(before, board_state(base)) == []
