"""Issue 61: `info` shows the board's total power now, one reading of its own rails, with its
uncertainty (digits from it) and where it was measured; `info --json` as `power_now`."""

import json
import re

from conftest import cli, make_board

# the simulated Orin Nano's INA3221 (docs/hardware.md): VDD_IN is channel 1 of hwmon1
HWMON = "sys/devices/platform/bus@0/c240000.i2c/i2c-1/1-0040/hwmon/hwmon1"


def test_info_reads_the_boards_total_power_now_with_its_uncertainty(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    # a reading of our own: 12.000 V x 0.500 A = 6.000 W (not the tree's idle figure)
    (base / HWMON / "in1_input").write_text("12000\n")
    (base / HWMON / "curr1_input").write_text("500\n")
    r = cli(base, "info", "--json")
    assert r.exit_code == 0, r.output
    now = json.loads(r.output)["power_now"]
    assert now["name"] == "VDD_IN" and now["point"] == "module_input"
    assert now["source"] == "ina3221" and now["power_w"] == 6.0
    # the shunts are known on this board: a datasheet bound, small beside the reading
    assert 0 < now["power_w_uncertainty_w"] < 0.1 * 6.0
    r = cli(base, "info")
    assert r.exit_code == 0, r.output
    row = next(ln for ln in r.output.splitlines() if ln.startswith("power now"))
    assert re.search(r"power now +6\.\d+ \+- 0\.\d+ W: VDD_IN at module input \(ina3221\)",
                     row), row


def test_info_says_an_unknown_uncertainty_and_nothing_without_rails(tmp_path):
    base = make_board(tmp_path, "tx1")  # its shunt resistance is not documented: unknown
    r = cli(base, "info", "--json")
    now = json.loads(r.output)["power_now"]
    assert now["power_w"] > 0 and now["power_w_uncertainty_w"] is None
    assert "W +- unknown: VDD_IN at module input" in cli(base, "info").output
    # no power source (--meter none): no reading, no row
    r = cli(base, "info", "--meter", "none", "--json")
    assert json.loads(r.output)["power_now"] is None
    assert "power now" not in cli(base, "info", "--meter", "none").output
