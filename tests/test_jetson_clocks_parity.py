"""The smaller differences from NVIDIA's jetson_clocks (issue 22, item 4): the R24 cluster switch
writes force=0 as NVIDIA's R24 script does; the "old BPMP firmware" cause is named only on the
boards that have JetPack 6.2's Super modes (Orin Nano / Orin NX); `info` says which cores are
online and which idle states are disabled; a table entry above cpuinfo_max_freq is clamped."""

import json

from typer.testing import CliRunner

from jetbench.sim.create import create_board

from conftest import cli, make_board

runner = CliRunner()



def read(base, path):
    return (base / path.lstrip("/")).read_text().strip()


def test_r24_cluster_switch_writes_force_0_as_nvidia_does(tmp_path):
    base = make_board(tmp_path, "tx1-r24")
    (base / "sys/kernel/cluster/active").write_text("LP\n")
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    writes = {w["path"]: w["new"] for w in json.loads(result.output)["writes"]}
    assert writes["/sys/kernel/cluster/active"] == "G"
    assert writes.get("/sys/kernel/cluster/force", "0") == "0"  # never 1
    assert read(base, "/sys/kernel/cluster/force") == "0"


def test_a_capped_gpu_on_xavier_does_not_blame_the_super_firmware(tmp_path):
    # qos-cap: the running GPU clock held at half the table's top, whatever is pinned.
    base = tmp_path / "xavier-agx"
    create_board("xavier-agx", base, quirks=["qos-cap"])
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    notes = [n for n in json.loads(result.output)["notes"] if "below the table's top" in n]
    assert len(notes) == 1, json.loads(result.output)["notes"]
    assert "BPMP" not in notes[0] and "Super" not in notes[0]
    assert "another agent" in notes[0]


def test_a_cpu_table_entry_above_cpuinfo_max_is_clamped(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    policy = "/sys/devices/system/cpu/cpufreq/policy0"
    top = int(read(base, f"{policy}/cpuinfo_max_freq"))
    table = read(base, f"{policy}/scaling_available_frequencies")
    (base / policy.lstrip("/") / "scaling_available_frequencies").write_text(
        f"{table} {top + 76800}\n")
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    writes = {w["path"]: w["new"] for w in json.loads(result.output)["writes"]}
    assert writes[f"{policy}/scaling_min_freq"] == str(top)


def test_info_says_which_cores_are_online_and_which_idle_states_are_off(tmp_path):
    from jetbench.sim.create import create_board

    base = tmp_path / "tx2"
    create_board("tx2", base, power_mode=1)  # MAXQ: the Denver cores (cpu1-2) off
    state1 = base / "sys/devices/system/cpu/cpu0/cpuidle/state1"
    (state1 / "disable").write_text("1\n")
    doc = json.loads(cli(base, "info", "--json").output)
    assert (doc["cpu"]["online"], doc["cpu"]["offline"]) == ([0, 3, 4, 5], [1, 2])
    assert doc["cpu"]["idle_disabled"] == {"cpu0": [(state1 / "name").read_text().strip()]}
    names = [g["name"] for g in doc["cpu_clusters"]]
    assert "cpu0-5" not in names and names == ["cpu0,3-5", "cpu1-2 offline"]
    text = cli(base, "info").output
    assert "cpu0,3-5 (cpu1-2 offline)" in text
