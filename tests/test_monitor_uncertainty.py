"""`monitor` prints every watt with the sensor's worst-case error (issue 10: "every W jetbench
prints carries its uncertainty"). Expected values from the INA3221 datasheet limits in
docs/hardware.md ("Accuracy"), computed here by hand from the tree's own files."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from jetbench.cli.main import app

from conftest import make_board

runner = CliRunner()
HWMON = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon"


def _hwmon_dir(base):
    dirs = sorted((base / HWMON).glob("hwmon*"))
    assert dirs, "the simulated Orin Nano has its INA3221 under hwmon"
    return dirs[0]


def test_monitor_gives_each_reading_its_datasheet_uncertainty(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    hw = _hwmon_dir(base)
    (hw / "shunt1_resistor").write_text("5000\n")  # 5 mOhm, as on the Orin Nano carrier
    result = runner.invoke(app, ["--root", str(base), "monitor", "--once", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    vdd_in = next(c for c in doc["channels"] if c["name"] == "VDD_IN")
    p_w = vdd_in["power_w"]
    bus_v = int((hw / "in1_input").read_text()) / 1000.0
    # gain 0.25% on V and on I, 80 uV over 5 mOhm = 16 mA at the bus voltage, 16 mV at the current
    expected = 2 * 0.0025 * p_w + bus_v * 0.016 + (p_w / bus_v) * 0.016
    assert vdd_in["power_w_uncertainty_w"] is not None
    assert abs(vdd_in["power_w_uncertainty_w"] - expected) <= 0.02 * expected
    assert doc["total"]["name"] == "VDD_IN"
    assert doc["total"]["power_w_uncertainty_w"] == vdd_in["power_w_uncertainty_w"]

    table = runner.invoke(app, ["--root", str(base), "monitor", "--once"])
    assert table.exit_code == 0, table.output
    assert " +- " in table.output and " W" in table.output


def test_monitor_says_unknown_without_a_shunt_resistance(tmp_path):
    base = make_board(tmp_path, "tx1")  # iio INA3221: no shunt file, none documented
    result = runner.invoke(app, ["--root", str(base), "monitor", "--once", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert all(c["power_w_uncertainty_w"] is None for c in doc["channels"])
    table = runner.invoke(app, ["--root", str(base), "monitor", "--once"])
    assert "+- unknown" in table.output
