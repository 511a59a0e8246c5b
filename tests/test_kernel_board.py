"""The FUSE-served simulated board: each attribute answers as its driver does (`kernel` tests).

Expected values are the board description's facts (the Orin Nano tables below, as in
sim/boards.py and docs/hardware.md) and the drivers' documented store semantics, not jetbench's
code.
"""

from __future__ import annotations

import errno
import re
import time

import pytest

from conftest import fuse_board

pytestmark = pytest.mark.kernel

CPU0 = "/sys/devices/system/cpu/cpufreq/policy0"
GPU = "/sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu"
EMC = "/sys/kernel/debug/bpmp/debug/clk/emc"
FAN = "/sys/devices/platform/pwm-fan/hwmon/hwmon0/pwm1"
HWMON = "/sys/devices/platform/bus@0/c240000.i2c/i2c-1/1-0040/hwmon/hwmon1"
# Orin Nano tables (kHz for the CPU, Hz for GPU and EMC).
CPU_MIN_KHZ, CPU_MAX_KHZ = 115200, 1651200
GPU_TABLE_HZ = (306000000, 408000000, 510000000, 624750000)
EMC_TABLE_HZ = (204000000, 665600000, 2133000000)


def refused(board, path: str, value: object) -> int:
    with pytest.raises(OSError) as info:
        board.write(path, value)
    return info.value.errno


def test_cpufreq_min_above_max_is_einval_and_keeps_the_old_value(fuse_orin_nano):
    b = fuse_orin_nano
    b.write(f"{CPU0}/scaling_max_freq", 499200)
    assert refused(b, f"{CPU0}/scaling_min_freq", 652800) == errno.EINVAL
    assert b.read(f"{CPU0}/scaling_min_freq") == str(CPU_MIN_KHZ)
    assert refused(b, f"{CPU0}/scaling_min_freq", "fast") == errno.EINVAL
    b.write(f"{CPU0}/scaling_min_freq", 499200)  # equal to max: accepted
    assert refused(b, f"{CPU0}/scaling_max_freq", 422400) == errno.EINVAL
    assert b.read(f"{CPU0}/scaling_max_freq") == "499200"


def test_cpufreq_clamps_to_cpuinfo_limits(fuse_orin_nano):
    b = fuse_orin_nano
    b.write(f"{CPU0}/scaling_max_freq", 9999999)
    assert b.read(f"{CPU0}/scaling_max_freq") == str(CPU_MAX_KHZ)


def test_setspeed_only_under_userspace(fuse_orin_nano):
    b = fuse_orin_nano
    assert b.read(f"{CPU0}/scaling_setspeed") == "<unsupported>"
    assert refused(b, f"{CPU0}/scaling_setspeed", 960000) == errno.EINVAL
    b.write(f"{CPU0}/scaling_governor", "userspace")
    b.write(f"{CPU0}/scaling_setspeed", 960000)
    assert b.read(f"{CPU0}/scaling_setspeed") == "960000"
    assert b.read(f"{CPU0}/scaling_cur_freq") == "960000"
    # Between two table entries: the lowest entry at or above (CPUFREQ_RELATION_L).
    b.write(f"{CPU0}/scaling_setspeed", 1000000)
    assert b.read(f"{CPU0}/scaling_cur_freq") == "1036800"
    b.write(f"{CPU0}/scaling_governor", "performance")
    assert b.read(f"{CPU0}/scaling_setspeed") == "<unsupported>"
    assert b.read(f"{CPU0}/scaling_cur_freq") == str(CPU_MAX_KHZ)


def test_unknown_governor_is_einval(fuse_orin_nano):
    b = fuse_orin_nano
    assert refused(b, f"{CPU0}/scaling_governor", "turbo") == errno.EINVAL
    assert refused(b, f"{GPU}/governor", "turbo") == errno.EINVAL
    assert b.read(f"{CPU0}/scaling_governor") == "schedutil"


def test_devfreq_refuses_min_above_max_and_computes_cur(fuse_orin_nano):
    b = fuse_orin_nano
    assert b.read(f"{GPU}/cur_freq") == str(GPU_TABLE_HZ[0])  # nvhost_podgov, GPU idle
    b.write(f"{GPU}/max_freq", GPU_TABLE_HZ[1])
    assert refused(b, f"{GPU}/min_freq", GPU_TABLE_HZ[2]) == errno.EINVAL
    b.write(f"{GPU}/governor", "performance")
    assert b.read(f"{GPU}/cur_freq") == str(GPU_TABLE_HZ[1])
    b.write(f"{GPU}/max_freq", 600000000)  # off the table: kept, the clock runs below it
    assert b.read(f"{GPU}/max_freq") == "600000000"
    assert b.read(f"{GPU}/cur_freq") == str(GPU_TABLE_HZ[2])


def test_read_only_attributes_refuse_writes_with_eacces(fuse_orin_nano):
    b = fuse_orin_nano
    for path in (f"{CPU0}/scaling_cur_freq", f"{CPU0}/cpuinfo_max_freq", f"{GPU}/cur_freq",
                 f"{HWMON}/curr1_input"):
        assert refused(b, path, 1) == errno.EACCES, path


def test_bpmp_emc_rate_range_and_rounding(fuse_orin_nano):
    b = fuse_orin_nano
    assert refused(b, f"{EMC}/rate", 3000000000) == errno.EINVAL
    assert refused(b, f"{EMC}/rate", 100000000) == errno.EINVAL
    b.write(f"{EMC}/rate", 1000000000)  # rounded down to a rate of the table
    assert b.read(f"{EMC}/rate") == str(EMC_TABLE_HZ[1])
    assert refused(b, f"{EMC}/mrq_rate_locked", 2) == errno.EINVAL


def test_fan_pwm_range(fuse_orin_nano):
    b = fuse_orin_nano
    assert refused(b, FAN, 256) == errno.EINVAL
    assert refused(b, FAN, -1) == errno.EINVAL
    b.write(FAN, 255)
    assert b.read(FAN) == "255"


def test_taking_the_last_cpu_offline_is_ebusy(fuse_orin_nano):
    b = fuse_orin_nano
    for cpu in range(1, 6):
        b.write(f"/sys/devices/system/cpu/cpu{cpu}/online", 0)
    # cpu0 has no online file (not hotpluggable): cpu5 was the last one that could go.
    b.write("/sys/devices/system/cpu/cpu5/online", 1)
    b.write("/sys/devices/system/cpu/cpu5/online", 0)
    assert refused(b, "/sys/devices/system/cpu/cpu1/online", 2) == errno.EINVAL


def test_ina3221_readings_follow_the_power_model_unpadded(tmp_path):
    """At load 0 and boot clocks (GPU 306 MHz, CPU 115.2 MHz, EMC 2133 MHz), by hand from
    docs/boards.md's model and sim/power_model.py's tegra234 coefficients. Unscaled dynamic
    parts: GPU 25 * (306/624.75) * (0.8/1.1)^2 * 0.1 = 0.647662 W; CPU 10 * (115.2/1651.2) *
    (0.8/1.1)^2 * 0.1 = 0.036902 W; SoC 0.2 W; DDR 2.0 * 0.3 = 0.6 W. The Orin Nano's modes
    are 15 W and 7 W, so the dynamic parts are scaled to fit 15 W at full load and top clocks:
    room = 15 * 0.9 - static (0.6 + 0.5 + 2.0 + 0.6 + 0.4 + 1.5 + 0.25 = 5.85) = 7.65 W over a
    full dynamic 25 + 10 + 0.2 + 2.0 = 37.2 W: scale 0.2056452. Module = 5.85 + 0.2056452 *
    1.484564 = 6.155294 W; VDD_IN = 6.155294 / 0.9 = 6.839216 W at 19 V = 360 mA;
    VDD_CPU_GPU_CV = 0.6 + 0.5 + 0.4 + 0.2056452 * 0.684564 = 1.640778 W at 5 V = 328 mA;
    VDD_SOC = 2.0 + 0.2056452 * 0.2 = 2.041129 W at 5 V = 408 mA."""
    with fuse_board(tmp_path, "orin-nano", load=0.0) as b:
        raw = b.p(f"{HWMON}/curr1_input").read_bytes()
        assert re.fullmatch(rb"\d+\n", raw), raw  # unpadded, as the driver prints it
        assert [b.read(f"{HWMON}/curr{ch}_input") for ch in (1, 2, 3)] == ["360", "328", "408"]
        assert b.read(f"{HWMON}/in1_input") == "19000"
        # Shunt voltage: 328 mA over shunt2_resistor (10000 uOhm) = 3280 uV.
        assert b.read(f"{HWMON}/in5_input") == "3280"


def test_ina3221_values_change_only_at_update_interval(tmp_path):
    with fuse_board(tmp_path, "orin-nano", load=0.0) as b:
        b.write(f"{HWMON}/update_interval", 2000)  # 2 s conversion cycles,
        b.write(f"{HWMON}/samples", 1)  # one each: a reading every 2 s
        time.sleep(2.0 - time.monotonic() % 2.0 + 0.05)  # just after a conversion
        before = b.read(f"{HWMON}/curr1_input")
        b.write(f"{GPU}/governor", "performance")  # 624.75 MHz: more power
        assert b.read(f"{HWMON}/curr1_input") == before  # same conversion period
        time.sleep(2.0 - time.monotonic() % 2.0 + 0.05)
        assert int(b.read(f"{HWMON}/curr1_input")) > int(before)
        assert refused(b, f"{HWMON}/update_interval", 0) == errno.EINVAL


def test_tegra210_debugfs_overrides(tmp_path):
    clock = "/sys/kernel/debug/clock"
    with fuse_board(tmp_path, "tx1-r24") as b:
        b.write(f"{clock}/override.emc/rate", 800000000)
        assert b.read(f"{clock}/emc/rate") == "1600000000"  # override off: the boot rate
        b.write(f"{clock}/override.emc/state", 1)
        assert b.read(f"{clock}/emc/rate") == "800000000"
        assert refused(b, f"{clock}/override.emc/rate", 1700000000) == errno.EINVAL
        assert refused(b, f"{clock}/override.emc/state", 2) == errno.EINVAL
        b.write(f"{clock}/override.gbus/rate", 700000000)  # kept as written, runs below it
        b.write(f"{clock}/override.gbus/state", 1)
        assert b.read(f"{clock}/override.gbus/rate") == "700000000"
        assert b.read(f"{clock}/gbus/rate") == "691200000"


def test_files_outside_sysfs_behave_as_files(fuse_orin_nano):
    b = fuse_orin_nano
    state = b.p("/var/lib/jetbench/x.tmp")
    state.write_text("a")
    state.rename(b.p("/var/lib/jetbench/x"))
    assert b.p("/var/lib/jetbench/x").read_text() == "a"
    with pytest.raises(OSError) as info:
        b.p("/sys/devices/new_file").write_text("1")
    assert info.value.errno == errno.EACCES
