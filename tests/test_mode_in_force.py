"""Issue 57: a power mode can be reported and not in force.

nvpmodel's status names the mode it last switched to; a switch that fails part way (Orin NX
modes that take cores offline fail silently over SSH, ARK Electronics' notes) leaves the kernel
with other caps. nvpmodel's conf format (PARAM blocks naming files, then each POWER_MODEL's
`PARAM KEY VALUE` lines; CPU in kHz, GPU and EMC in Hz) says what each mode sets. The conf below
is written here in that format (not NVIDIA's file), with values chosen for the test.
"""

from __future__ import annotations

import json

from conftest import cli, make_board

CONF = """\
< PARAM TYPE=FILE NAME=CPU_ONLINE >
CORE_1 /sys/devices/system/cpu/cpu1/online
CORE_2 /sys/devices/system/cpu/cpu2/online
< PARAM TYPE=CLOCK NAME=CPU_A78_0 >
FREQ_TABLE /sys/devices/system/cpu/cpufreq/policy0/scaling_available_frequencies
MAX_FREQ /sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq
MAX_FREQ_KNEXT /sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq
< PARAM TYPE=CLOCK NAME=EMC >
MAX_FREQ_KNEXT /sys/kernel/nvpmodel_clk_cap/emc
< POWER_MODEL ID=0 NAME=MAXN >
CPU_ONLINE CORE_1 1
CPU_ONLINE CORE_2 1
CPU_A78_0 MAX_FREQ -1
EMC MAX_FREQ 0
< POWER_MODEL ID=1 NAME=10W >
CPU_ONLINE CORE_1 1
CPU_ONLINE CORE_2 0
CPU_A78_0 MAX_FREQ 1200000
EMC MAX_FREQ 2133000000
"""


def _tree(base, online2: str, cpu_max_khz: str, emc_cap: str):
    files = {
        "etc/nvpmodel.conf": CONF,
        "var/lib/nvpmodel/status": "pmode:0001\n",
        "sys/devices/system/cpu/cpu1/online": "1\n",
        "sys/devices/system/cpu/cpu2/online": online2 + "\n",
        "sys/devices/system/cpu/cpufreq/policy0/scaling_available_frequencies":
            "729600 1190400 1497600\n",
        "sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq": cpu_max_khz + "\n",
        "sys/kernel/nvpmodel_clk_cap/emc": emc_cap + "\n",
    }
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    return base


def test_the_reported_mode_compared_with_the_files(tmp_path):
    from jetbench.hw.fs import Root
    from jetbench.hw.mode_in_force import not_in_force

    # in force: cpu2 offline, the CPU cap read back as the nearest table entry (nvpmodel
    # rounds 1200000 kHz to 1190400), the EMC cap as written
    base = _tree(tmp_path / "ok", "0", "1190400", "2133000000")
    assert not_in_force(Root(base), {}) == []
    # a failed switch: cpu2 still online, the CPU cap and the EMC cap still MAXN's
    base = _tree(tmp_path / "failed", "1", "1497600", "0")
    assert not_in_force(Root(base), {}) == [
        "cpu2 online: mode 1 10W takes it offline",
        "CPU_A78_0 max 1.498 GHz: mode 1 10W sets 1.2 GHz "
        "(/sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq)",
        "EMC no cap in force: mode 1 10W sets 2.133 GHz (/sys/kernel/nvpmodel_clk_cap/emc)",
    ]
    # jetbench wrote the max since (--beyond-power-mode): the journal's original is judged
    base = _tree(tmp_path / "lifted", "0", "1497600", "2133000000")
    originals = {"/sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq": "1200000\n"}
    assert not_in_force(Root(base), originals) == []


def test_a_switch_that_left_cores_online_is_said_in_info_and_in_results(tmp_path):
    from jetbench.sim.create import create_board

    base = tmp_path / "nx"
    create_board("xavier-nx", base, quirks=("mode-cores-online",), power_mode=4)
    info = json.loads(cli(base, "info", "--json").output)
    assert info["board"]["power_mode"]["not_in_force"] == [
        "cpu4 online: mode 4 MODE_10W_4CORE takes it offline",
        "cpu5 online: mode 4 MODE_10W_4CORE takes it offline"]
    out = tmp_path / "out"
    result = cli(base, "measure", "--model", "sim:resnet50", "--duration", "0.3", "--meter",
                 "none", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "not in force: cpu4 online" in result.output
    doc = json.loads(next(out.glob("*.json")).read_text())
    assert len(doc["board"]["power_mode"]["not_in_force"]) == 2


def test_a_mode_in_force_says_nothing_also_after_jetbench_pinned_past_it(tmp_path):
    base = make_board(tmp_path, "xavier-nx", power_mode=4)
    assert "not_in_force" not in json.loads(cli(base, "info", "--json").output)["board"][
        "power_mode"]
    assert cli(base, "maxperf", "--beyond-power-mode").exit_code == 0
    mode = json.loads(cli(base, "info", "--json").output)["board"]["power_mode"]
    assert "not_in_force" not in mode, mode  # jetbench's own writes are no failed switch
    assert cli(base, "restore").exit_code == 0
