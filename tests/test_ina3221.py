"""INA3221 rails on hand-built trees, both driver layouts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Tuple

import pytest

from jetbench.errors import MissingFile
from jetbench.hw.fs import Root
from jetbench.hw.meters.ina3221 import Ina3221Source, Rail, module_total, scan_rails

IIO_DEV = "/sys/devices/platform/6-0040/iio:device0"
HWMON_DEV = "/sys/devices/platform/1-0040/hwmon/hwmon3"


def _write(base: Path, board_path: str, text: str) -> None:
    p = base / board_path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def _link(base: Path, link: str, target: str) -> None:
    p = base / link.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(base / target.lstrip("/"), p.parent), p)


def iio_tree(base: Path, rails: Dict[int, Tuple[str, int, int]]) -> None:
    """rails: channel -> (name, mV, mA); in_powerN_input written as mV*mA/1000."""
    for n, (name, mv, ma) in rails.items():
        _write(base, f"{IIO_DEV}/rail_name_{n}", name)
        _write(base, f"{IIO_DEV}/in_voltage{n}_input", str(mv))
        _write(base, f"{IIO_DEV}/in_current{n}_input", str(ma))
        _write(base, f"{IIO_DEV}/in_power{n}_input", str(mv * ma // 1000))
    _link(base, "/sys/bus/i2c/drivers/ina3221x/6-0040", "/sys/devices/platform/6-0040")


def hwmon_tree(base: Path, rails: Dict[int, Tuple[str, int, int]], interval_ms: int = 8) -> None:
    for n, (name, mv, ma) in rails.items():
        _write(base, f"{HWMON_DEV}/in{n}_label", name)
        _write(base, f"{HWMON_DEV}/in{n}_input", str(mv))
        _write(base, f"{HWMON_DEV}/curr{n}_input", str(ma))
    _write(base, f"{HWMON_DEV}/in7_label", "sum of shunt voltages")
    _write(base, f"{HWMON_DEV}/in7_input", "12")
    _write(base, f"{HWMON_DEV}/update_interval", str(interval_ms))
    _link(base, "/sys/bus/i2c/drivers/ina3221/1-0040", "/sys/devices/platform/1-0040")


NANO = {0: ("POM_5V_IN", 5000, 1000), 1: ("POM_5V_GPU", 5000, 200), 2: ("POM_5V_CPU", 5000, 300)}
ORIN = {1: ("VDD_GPU_SOC", 5000, 800), 2: ("VDD_CPU_CV", 5000, 400), 3: ("VIN_SYS_5V0", 5000, 600)}


def test_iio_nano_reads_mw_and_total_is_the_input_rail(tmp_path):
    iio_tree(tmp_path, NANO)
    root = Root(tmp_path)
    rails = scan_rails(root)
    assert [(r.name, r.channel, r.layout, r.point) for r in rails] == [
        ("POM_5V_IN", 0, "iio", "module_input"),
        ("POM_5V_GPU", 1, "iio", "rail"),
        ("POM_5V_CPU", 2, "iio", "rail"),
    ]
    src = Ina3221Source(root, rails, "POM_5V_IN")
    src.open()
    try:
        r = src.read()
        assert r.power_w == pytest.approx((5.0, 1.0, 1.5))
        assert src.period_s == pytest.approx(0.01)
        # values change on disk: the next read sees them (pread at offset 0, no cached file)
        _write(tmp_path, f"{IIO_DEV}/in_power1_input", "2500")
        assert src.read().power_w[1] == pytest.approx(2.5)
    finally:
        src.close()
    total = src.total()
    assert (total.kind, total.name, total.channels) == ("channel", "POM_5V_IN", ("POM_5V_IN",))
    assert [c.point for c in src.channels()] == ["module_input", "rail", "rail"]


def test_iio_without_power_file_uses_v_times_i(tmp_path):
    iio_tree(tmp_path, {0: ("VDD_IN", 19000, 300)})
    os.remove(tmp_path / IIO_DEV.lstrip("/") / "in_power0_input")
    src = Ina3221Source(Root(tmp_path), scan_rails(Root(tmp_path)))
    src.open()
    assert src.read().power_w == pytest.approx((5.7,))
    src.close()


def test_hwmon_orin_is_v_times_i_and_total_is_the_sum(tmp_path):
    rails = dict(ORIN)
    hwmon_tree(tmp_path, rails)
    _write(tmp_path, f"{HWMON_DEV}/in4_label", "NC")  # an unconnected channel
    root = Root(tmp_path)
    found = scan_rails(root)
    assert [r.name for r in found] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]
    src = Ina3221Source(root, found, None)
    src.open()
    assert src.read().power_w == pytest.approx((4.0, 2.0, 3.0))
    assert src.period_s == pytest.approx(0.008)
    src.close()
    total = src.total()
    assert total.kind == "sum"
    assert total.channels == ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")
    assert "sum of" in total.name and "VIN_SYS_5V0" in total.describe()


def test_board_rails_skip_nc_and_shunt_sum_and_never_add_the_input_rail():
    dev = "/sys/x/hwmon/hwmon1"
    rails = [
        Rail("VDD_IN", dev, 1, "hwmon", "module_input"),
        Rail("VDD_CPU_GPU_CV", dev, 2, "hwmon", "rail"),
        Rail("NC", dev, 3, "hwmon", "rail"),
        Rail("sum of shunt voltages", dev, 7, "hwmon", "rail"),
    ]
    src = Ina3221Source(Root("/nonexistent"), rails, "VDD_IN")
    assert [c.name for c in src.channels()] == ["VDD_IN", "VDD_CPU_GPU_CV"]
    assert src.total().channels == ("VDD_IN",)
    # even without board knowledge, a module-input rail is the total, never summed
    assert module_total(rails, None).channels == ("VDD_IN",)
    assert module_total([], None) is None


def test_missing_file_is_a_clear_error(tmp_path):
    rails = [Rail("VDD_IN", "/sys/devices/none/hwmon/hwmon0", 1, "hwmon", "module_input")]
    src = Ina3221Source(Root(tmp_path), rails)
    with pytest.raises(MissingFile) as err:
        src.open()
    assert "in1_input" in str(err.value)


def test_unreadable_value_is_none_not_zero(tmp_path):
    hwmon_tree(tmp_path, ORIN)
    src = Ina3221Source(Root(tmp_path), scan_rails(Root(tmp_path)))
    src.open()
    _write(tmp_path, f"{HWMON_DEV}/curr2_input", "garbage")
    assert src.read().power_w == (pytest.approx(4.0), None, pytest.approx(3.0))
    src.close()


def test_sampler_over_a_hwmon_tree(tmp_path):
    from jetbench.sampling.sampler import Sampler

    hwmon_tree(tmp_path, ORIN, interval_ms=2)
    src = Ina3221Source(Root(tmp_path), scan_rails(Root(tmp_path)))
    with Sampler([src]) as sampler:
        with sampler.window() as w:
            import time

            time.sleep(0.1)
    res = w.result
    assert res.total.mean_w == pytest.approx(9.0)
    assert res.total.energy_j == pytest.approx(9.0 * res.duration_s)
    assert res.channel("VDD_GPU_SOC").samples >= 20
