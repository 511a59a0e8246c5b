import json
import os

import pytest

from jetbench.hw.board import detect
from jetbench.hw.board_tables import parse_l4t_release
from jetbench.hw.fs import Root

from conftest import SIM_BOARDS, make_board, make_generic_host

EXPECTED = {
    # family, soc, l4t, gpu kind, gpu node, emc kind, rails, total
    "tx1-r24": ("tx1-r24", "tegra210", "R24.2.1", "debugfs", "gbus", "debugfs-clock",
                ["VDD_IN", "VDD_GPU", "VDD_CPU"], "VDD_IN"),
    "tx1": ("tx1", "tegra210", "R32.7.1", "devfreq", "57000000.gpu", "debugfs-clk",
            ["VDD_IN", "VDD_GPU", "VDD_CPU"], "VDD_IN"),
    "nano": ("nano", "tegra210", "R32.7.1", "devfreq", "57000000.gpu", "debugfs-clk",
             ["POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"], "POM_5V_IN"),
    "tx2": ("tx2", "tegra186", "R32.7.1", "devfreq", "17000000.gp10b", "bpmp",
            ["VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI", "VDD_IN", "VDD_SYS_CPU",
             "VDD_SYS_DDR"], "VDD_IN"),
    "xavier-agx": ("xavier-agx", "tegra194", "R32.7.1", "devfreq", "17000000.gv11b", "bpmp",
                   ["GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"], None),
    "xavier-nx": ("xavier-nx", "tegra194", "R35.4.1", "devfreq", "17000000.gv11b", "bpmp",
                  ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"], "VDD_IN"),
    "orin-agx": ("orin-agx", "tegra234", "R36.4.0", "devfreq", "17000000.gpu", "bpmp",
                 ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"], None),
    "orin-agx-jp5": ("orin-agx", "tegra234", "R35.4.1", "devfreq", "17000000.ga10b", "bpmp",
                     ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"], None),
    "orin-nano": ("orin-nano", "tegra234", "R36.4.0", "devfreq", "17000000.gpu", "bpmp",
                  ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"], "VDD_IN"),
    "orin-agx-jp7": ("orin-agx", "tegra234", "R39.2.0", "devfreq", "17000000.gpu", "bpmp",
                     ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"], None),
    "orin-nano-super": ("orin-nano-super", "tegra234", "R36.4.3", "devfreq", "17000000.gpu",
                        "bpmp", ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"], "VDD_IN"),
    # Thor: the carrier's INA238 (VIN, the whole board) is the total, never VIN_SYS_5V0.
    "thor": ("thor", "tegra264", "R38.2.0", "devfreq", "gpu-gpc-0", "devfreq",
             ["VIN", "VDD_GPU", "VDD_CPU_SOC_MSS", "VIN_SYS_5V0"], "VIN"),
}


@pytest.mark.parametrize("key", SIM_BOARDS)
def test_detect_simulated_board(tmp_path, key):
    board = detect(Root(make_board(tmp_path, key)))
    family, soc, l4t, gpu_kind, gpu_name, emc_kind, rails, total = EXPECTED[key]
    assert (board.family, board.soc, board.l4t) == (family, soc, l4t)
    assert board.simulated
    assert board.gpu.kind == gpu_kind and board.gpu.name == gpu_name
    assert board.emc.kind == emc_kind
    assert [r.name for r in board.rails] == rails
    assert board.total_rail == total
    assert board.cpu.policies and board.thermal_zones and board.fan
    assert all(p.available_hz and min(p.available_hz) >= 100_000_000 for p in board.cpu.policies)
    layouts = {r.layout for r in board.rails}
    assert layouts == ({"hwmon"} if key.startswith(("orin", "xavier-nx", "thor")) else {"iio"})
    # hwmon channels are 1-based, iio 0-based; NC channels are not rails.
    assert min(r.channel for r in board.rails) == (1 if layouts == {"hwmon"} else 0)


def test_tx1_r24_knobs(tmp_path):
    board = detect(Root(make_board(tmp_path, "tx1-r24")))
    assert board.cpu.cpuquiet_enable.endswith("tegra_cpuquiet/enable")
    assert board.cpu.policies[0].cpus == (0, 1, 2, 3)  # per-cpu dirs linked to cpu0's
    assert board.gpu.max_hz == 998_400_000


def test_xavier_nx_emc_iso_cap(tmp_path):
    board = detect(Root(make_board(tmp_path, "xavier-nx")))
    assert board.emc.max_hz == 1_600_000_000  # capped below the 1866 MHz max_rate
    assert board.emc.cap_hz == 1_600_000_000
    # R35 keeps the mode's EMC cap in nvpmodel_emc_cap (docs/hardware.md, "EMC")
    assert board.emc.cap_file == "/sys/kernel/nvpmodel_emc_cap/emc_iso_cap"
    assert board.emc.top_hz == 1_866_000_000


def test_gpu_found_by_of_node_not_by_path(tmp_path):
    base = make_board(tmp_path, "tx1")
    # Move the GPU's devfreq link under another name: detection must still find it.
    link = base / "sys/class/devfreq/57000000.gpu"
    target = os.readlink(link)
    link.unlink()
    os.symlink(target, base / "sys/class/devfreq/zz-renamed")
    board = detect(Root(base))
    assert board.gpu.control.endswith("devfreq/57000000.gpu")
    # The decoy host1x devfreq node is not the GPU.
    assert "host1x" not in board.gpu.control


def test_generic_host_cpufreq_only(tmp_path):
    make_generic_host(tmp_path)
    board = detect(Root(tmp_path))
    assert board.family == "generic" and board.soc is None and not board.simulated
    assert board.gpu is None and board.emc is None and board.rails == ()
    assert board.cpu.policies[0].max_hz == 3_400_000_000


def test_container_nothing_to_pin(tmp_path):
    board = detect(Root(tmp_path))
    assert board.family == "none" and not board.can_pin
    assert any("nothing to pin" in n for n in board.notes)


def test_l4t_release_parsing():
    assert parse_l4t_release("# R32 (release), REVISION: 7.1, GCID: 1, BOARD: t210ref") == \
        "R32.7.1"
    assert parse_l4t_release("garbage") is None


def test_info_json(tmp_path):
    from typer.testing import CliRunner

    from jetbench.cli.main import app

    base = make_board(tmp_path, "nano")
    result = CliRunner().invoke(app, ["--root", str(base), "info", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["board"]["model"] == "NVIDIA Jetson Nano Developer Kit"
    assert doc["board"]["soc"] == "tegra210" and doc["board"]["l4t"] == "R32.7.1"
    assert doc["board"]["simulated"] is True and doc["simulated"] is True
    gpu = [c for c in doc["clocks"] if c["domain"] == "gpu"][0]
    assert gpu["max_hz"] == 921_600_000 and 691_200_000 in gpu["available_hz"]
    cpu = [c for c in doc["clocks"] if c["domain"] == "cpu"][0]
    assert cpu["max_hz"] == 1_479_000_000 and cpu["governor"] == "schedutil"
    assert [(r["name"], r["sensor"], r["channel"]) for r in doc["rails"]] == [
        ("POM_5V_IN", "6-0040", 0), ("POM_5V_GPU", "6-0040", 1), ("POM_5V_CPU", "6-0040", 2)]
    assert doc["total_rail"] == "POM_5V_IN"


def test_info_table_says_simulated(tmp_path):
    from typer.testing import CliRunner

    from jetbench.cli.main import app

    base = make_board(tmp_path, "orin-agx")
    result = CliRunner().invoke(app, ["--root", str(base), "info"])
    assert result.exit_code == 0
    assert "SIMULATED" in result.output
    assert "sum of" in result.output  # AGX Orin has no total rail: the sum is named
