"""Issue 57: the memory clock (EMC) on JetPack 6 and 7 on their own terms.

Facts (docs/hardware.md, "EMC", from NVIDIA's nvpmodel confs and clock guide, tiiuae/ghaf PR
#2071): R36+ keeps the power mode's EMC cap in /sys/kernel/nvpmodel_clk_cap/emc (Hz; R35 and
older in nvpmodel_emc_cap/emc_iso_cap); AGX Orin's BPMP on R36 boots with the EMC capped at its
boot rate, 2133 MHz against a 3199 MHz table, and clamps `rate` writes above it without an
error; R36 lock recipes also set clk/emc/state and bwmgr/bwmgr_halt; Thor's firmware re-floors
the EMC (the bwmgr devfreq node) without touching its knobs. The expected rates are those facts
and the boards' tables (sim/boards.py), never jetbench's own helpers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers.daemons import board_state

from conftest import cli, diff, make_board, snapshot

MHZ = 1_000_000
EMC = "sys/kernel/debug/bpmp/debug/clk/emc"
CLK_CAP = "sys/kernel/nvpmodel_clk_cap/emc"
ISO_CAP = "sys/kernel/nvpmodel_emc_cap/emc_iso_cap"
FACTS = "var/lib/jetbench/boot-facts.json"


def _write(base: Path, rel: str, text: str) -> None:
    path = base / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _r36_tree(base: Path, cap_hz: int) -> Path:
    """An Orin Nano Super on L4T R36.4.3 in its 15 W mode, written by hand from the public
    facts above (not by jetbench's simulator): only the files EMC detection reads."""
    _write(base, "proc/device-tree/model",
           "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super\0")
    _write(base, "proc/device-tree/compatible",
           "nvidia,p3768-0000+p3767-0005-super\0nvidia,p3767-0005-super\0nvidia,tegra234\0")
    _write(base, "etc/nv_tegra_release", "# R36 (release), REVISION: 4.3, GCID: 1, BOARD: "
                                         "generic, EABI: aarch64, DATE: x\n")
    _write(base, "var/lib/nvpmodel/status", "pmode:0000 fmode:quiet\n")
    _write(base, "etc/nvpmodel.conf", "< POWER_MODEL ID=0 NAME=15W >\n"
                                      "< POWER_MODEL ID=2 NAME=MAXN_SUPER >\n")
    _write(base, f"{EMC}/rate", "2133000000\n")
    _write(base, f"{EMC}/max_rate", "3199000000\n")
    _write(base, f"{EMC}/min_rate", "204000000\n")
    _write(base, f"{EMC}/mrq_rate_locked", "0\n")
    _write(base, CLK_CAP, f"{cap_hz}\n")
    _write(base, "proc/sys/kernel/random/boot_id", "6b1d7c3e-0000-4000-8000-000000000001\n")
    return base


def _emc_writes(result) -> dict:
    doc = json.loads(result.output)
    return {w["path"].lstrip("/"): w["new"] for w in doc["writes"] if "emc" in w["path"]}


def test_r36_cap_is_read_from_nvpmodel_clk_cap_on_a_tree_written_apart(tmp_path):
    base = _r36_tree(tmp_path / "r36", 2133 * MHZ)
    info = cli(base, "info", "--json")
    assert info.exit_code == 0, info.output
    emc = json.loads(info.output)["emc"]
    assert (emc["max_hz"], emc["cap_hz"], emc["table_max_hz"]) == (2133 * MHZ, 2133 * MHZ,
                                                                   3199 * MHZ)
    assert emc["cap_file"] == "/" + CLK_CAP
    plan = cli(base, "maxperf", "--dry-run", "--json")
    assert plan.exit_code == 0, plan.output
    rates = [int(v) for p, v in _emc_writes(plan).items() if p.endswith("/rate")]
    assert all(r <= 2133 * MHZ for r in rates), rates
    doc = json.loads(plan.output)
    emc_req = [r for r in doc["requested"] if r["domain"] == "emc"]
    assert emc_req[0]["resolved_hz"] == 2133 * MHZ
    assert any("nvpmodel_clk_cap/emc" in n for n in doc["notes"]), doc["notes"]


def test_the_lowest_cap_binds_where_both_files_exist(tmp_path):
    base = _r36_tree(tmp_path / "both", 2133 * MHZ)
    _write(base, ISO_CAP, "665600000\n")
    emc = json.loads(cli(base, "info", "--json").output)["emc"]
    assert (emc["cap_hz"], emc["cap_file"]) == (665_600_000, "/" + ISO_CAP)
    _write(base, ISO_CAP, "0\n")  # 0 is no cap
    emc = json.loads(cli(base, "info", "--json").output)["emc"]
    assert (emc["cap_hz"], emc["cap_file"]) == (2133 * MHZ, "/" + CLK_CAP)


def test_orin_nano_super_15w_never_plans_emc_above_its_cap(tmp_path):
    """Mode 0 (15W) of the simulated Orin Nano Super writes 2133 MHz into nvpmodel_clk_cap/emc
    (sim/boards.py); MAXN_SUPER (mode 2) writes 0."""
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.run.tune.space import search_space

    base = make_board(tmp_path, "orin-nano-super", power_mode=0)
    assert (base / CLK_CAP).read_text().strip() == "2133000000"
    assert not (base / ISO_CAP).exists()  # R36: the R35 file is gone
    plan = cli(base, "maxperf", "--dry-run", "--json")
    assert plan.exit_code == 0, plan.output
    assert [int(v) for p, v in _emc_writes(plan).items() if p.endswith("/rate")] \
        in ([], [2133 * MHZ])
    # tune's and sweep's space: no candidate above the mode's cap
    root = Root(base)
    space = search_space(root, detect(root), ("emc",), False)
    assert space["emc"] and max(space["emc"]) <= 2133 * MHZ, space
    maxn = make_board(tmp_path, "orin-nano-super")
    assert (maxn / CLK_CAP).read_text().strip() == "0"
    assert json.loads(cli(maxn, "info", "--json").output)["emc"]["max_hz"] == 3199 * MHZ


def test_beyond_power_mode_lifts_the_emc_cap_journalled_and_restored_byte_for_byte(tmp_path):
    base = make_board(tmp_path, "orin-nano-super", power_mode=0)
    before = snapshot(base, exclude=("var",))
    result = cli(base, "maxperf", "--beyond-power-mode", "--json")
    assert result.exit_code == 0, result.output
    writes = _emc_writes(result)
    assert writes[CLK_CAP] == "3199000000"
    assert writes[f"{EMC}/rate"] == "3199000000"
    assert (base / f"{EMC}/rate").read_text().strip() == "3199000000"
    notes = json.loads(result.output)["notes"]
    assert any("emc 2.133 GHz -> 3.199 GHz" in n for n in notes), notes
    # without --beyond-power-mode the mode's cap (the journal's original) still binds
    again = cli(base, "maxperf", "--dry-run", "--json")
    req = [r for r in json.loads(again.output)["requested"] if r["domain"] == "emc"]
    assert req[0]["resolved_hz"] == 2133 * MHZ
    assert cli(base, "restore").exit_code == 0
    assert diff(before, snapshot(base, exclude=("var",))) == []


def test_r36_lock_recipe_sets_state_and_bwmgr_halt_and_restores_them(tmp_path):
    base = make_board(tmp_path, "orin-agx")
    before = snapshot(base, exclude=("var",))
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    writes = [w["path"].lstrip("/") for w in json.loads(result.output)["writes"]]
    lock = [w for w in writes if w.startswith("sys/kernel/debug/bpmp")]
    # lock first, the rate last (NVIDIA's clock guide); the rate is already at its max here
    assert lock[:3] == [f"{EMC}/mrq_rate_locked", f"{EMC}/state",
                        "sys/kernel/debug/bpmp/debug/bwmgr/bwmgr_halt"], lock
    assert (base / "sys/kernel/debug/bpmp/debug/bwmgr/bwmgr_halt").read_text().strip() == "1"
    assert cli(base, "restore").exit_code == 0
    assert diff(before, snapshot(base, exclude=("var",))) == []


def _boot_capped_orin(tmp_path: Path) -> Path:
    from jetbench.sim.create import create_board

    base = tmp_path / "orin-agx-bootcap"
    create_board("orin-agx", base, quirks=("emc-boot-cap",))
    return base


def test_boot_capped_agx_orin_maxperf_names_the_firmware_ceiling(tmp_path):
    base = _boot_capped_orin(tmp_path)
    before = snapshot(base, exclude=("var",))
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    said = [n for n in doc["notes"] if "firmware runs 2.133 GHz" in n]
    assert said and "3.199 GHz asked" in said[0] and "nvphs" in said[0], doc["notes"]
    emc = [r for r in doc["requested"] if r["domain"] == "emc"][0]
    assert emc["resolved_hz"] == 2133 * MHZ  # the clock that runs, not the one asked
    facts = json.loads((base / FACTS).read_text())
    boot = (base / "proc/sys/kernel/random/boot_id").read_text().strip()
    assert (facts["boot_id"], facts["emc_ceiling_hz"], facts["emc_asked_hz"]) == \
        (boot, 2133 * MHZ, 3199 * MHZ)
    # known from now on: planned at the ceiling, said as the firmware's, and `info` shows it
    plan = json.loads(cli(base, "maxperf", "--dry-run", "--json").output)
    emc = [r for r in plan["requested"] if r["domain"] == "emc"][0]
    assert emc["resolved_hz"] == 2133 * MHZ and "firmware" in emc["why"]
    info = json.loads(cli(base, "info", "--json").output)["emc"]
    assert (info["ceiling_hz"], info["max_hz"]) == (2133 * MHZ, 2133 * MHZ)
    assert cli(base, "restore").exit_code == 0
    assert diff(before, snapshot(base, exclude=("var",))) == []
    # another boot (nvphs, a reboot): the ceiling is forgotten
    (base / "proc/sys/kernel/random/boot_id").write_text("another-boot\n")
    info = json.loads(cli(base, "info", "--json").output)["emc"]
    assert (info["ceiling_hz"], info["max_hz"]) == (None, 3199 * MHZ)


def test_a_rate_file_of_its_own_that_has_not_moved_yet_is_no_ceiling(tmp_path):
    """Thor's EMC (the bwmgr devfreq node) shows the rate that runs in cur_freq, a file of its
    own: until the kernel acts on a pin it reads the rate before it (204 MHz, idle). A loaded
    machine's simulated kernel, its pass 0.3 s late, had that recorded as a firmware ceiling
    (a reliability run beside two burners found boot-facts.json after a kill -9 mid-maxperf).
    The read-back waits for the rate asked; a rate that never comes is a ceiling still."""
    import threading

    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.profiles import emc_ceiling
    from jetbench.sim.file_kernel import FileKernel

    for late_s, ceiling in ((0.3, None), (None, 204 * MHZ)):
        base = make_board(tmp_path / str(late_s), "thor")
        root = Root(base)
        board = detect(root)
        emc = board.emc
        assert emc is not None and emc.cur_freq != emc.rate
        assert root.read_int(emc.cur_freq) == 204 * MHZ
        root.write(emc.rate, str(4266 * MHZ))  # maxperf's pin: max_freq, then min_freq
        root.write(emc.lock, str(4266 * MHZ))
        timer = threading.Timer(late_s, FileKernel(base).sync) if late_s else None
        if timer is not None:
            timer.start()
        found = emc_ceiling.find(root, board, 4266 * MHZ)
        if timer is not None:
            timer.join()
        assert (None if found is None else found.hz) == ceiling, (late_s, found)


def test_measure_emc_max_on_a_boot_capped_orin_is_valid_at_the_ceiling(tmp_path):
    base = _boot_capped_orin(tmp_path)
    out = tmp_path / "out"
    result = cli(base, "measure", "--model", "sim:resnet50", "--emc-freq", "max",
                 "--duration", "0.5", "--meter", "none", "--out", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(next(out.glob("*.json")).read_text())
    assert doc["validity"]["valid"], doc["validity"]
    emc = [c for c in doc["clocks"]["observed"] if c["domain"] == "emc"][0]
    assert emc["min_hz"] == emc["max_hz"] == 2133 * MHZ
    assert any("firmware" in w and "2.133 GHz" in w for w in doc["warnings"]), doc["warnings"]


def test_tune_space_on_a_boot_capped_orin_leaves_the_rate_above_the_ceiling_out(tmp_path):
    """tune probes the EMC's candidates (shares of its max) before any trial: the probe that
    asks 3199 MHz finds the ceiling, and no trial is spent on a rate above it."""
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.run.tune.space import probe_emc_rates, search_space

    base = _boot_capped_orin(tmp_path)
    root = Root(base)
    space = search_space(root, detect(root), ("emc",), False)
    assert max(space["emc"]) == 3199 * MHZ  # nothing known yet
    runs = probe_emc_rates(root, space["emc"], False)
    assert max(runs) == 2133 * MHZ, runs
    assert json.loads((base / FACTS).read_text())["emc_ceiling_hz"] == 2133 * MHZ
    again = search_space(root, detect(root), ("emc",), False)
    assert max(again["emc"]) == 2133 * MHZ, again


def test_thor_firmware_refloor_is_never_a_held_window(tmp_path):
    """The simulated firmware raises the EMC to the table's top (4266 MHz) for 35% of each
    second; a window at a 2133 MHz pin held it about 65% of the time: not held."""
    from jetbench.sim.create import create_board

    base = tmp_path / "thor"
    create_board("thor", base, quirks=("emc-refloor",))
    _write(base, "etc/jetbench/emc-refloor", "0.35\n")
    out = tmp_path / "out"
    result = cli(base, "measure", "--model", "sim:resnet50", "--emc-freq", "2133MHz",
                 "--duration", "2", "--meter", "none", "--out", str(out))
    assert result.exit_code != 0
    doc = json.loads(next(out.glob("*.json")).read_text())
    assert not doc["validity"]["valid"]
    assert any(r.startswith("emc ran at 4.266 GHz, 2.133 GHz was applied (") and "not held"
               in r for r in doc["validity"]["reasons"]), doc["validity"]
    emc = [c for c in doc["clocks"]["observed"] if c["domain"] == "emc"][0]
    assert 0.4 < emc["held_share"] < 0.9, emc  # 65% expected; wide: a loaded host samples late


def test_thor_without_refloor_holds_the_whole_window(tmp_path):
    base = make_board(tmp_path, "thor")
    out = tmp_path / "out"
    result = cli(base, "measure", "--model", "sim:resnet50", "--emc-freq", "2133MHz",
                 "--duration", "1", "--meter", "none", "--out", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(next(out.glob("*.json")).read_text())
    emc = [c for c in doc["clocks"]["observed"] if c["domain"] == "emc"][0]
    assert emc["held_share"] == 1.0 and emc["time_at_hz"][0][0] == 2133 * MHZ


def test_held_share_is_time_weighted():
    """Readings at t = 0, 1, 1.5, 4 s of 2133, 4266, 2133, 2133 MHz: 4266 MHz held 0.5 s of
    the 4 s, so the pin (2133 MHz) held 3.5 / 4 = 87.5%."""
    from jetbench.run.validity import ObservedClock, held_share

    clock = ObservedClock("emc", "emc")
    for t, hz in ((0.0, 2133), (1.0, 4266), (1.5, 2133), (4.0, 2133)):
        clock.add(hz * MHZ, t)
    doc = clock.to_dict()
    assert doc["time_at_hz"] == [[2133 * MHZ, 3.5], [4266 * MHZ, 0.5]]
    assert held_share(doc, 2133 * MHZ, 2133 * MHZ) == 0.875


def test_kernel_clamps_bpmp_rate_writes_to_the_caps(tmp_path):
    """The simulated BPMP (both kernels share sim/attributes.py): a write above the mode's
    nvpmodel_clk_cap or the boot cap is accepted and runs the cap, as on the board."""
    from jetbench.hw.fs import Root
    from jetbench.sim.attributes import KernelModel, read_initial
    from jetbench.sim.boards import get
    from jetbench.sim.create import create_board

    base = tmp_path / "nano15"
    create_board("orin-nano-super", base, power_mode=0)
    model = KernelModel(get("orin-nano-super"), read_initial(base))
    model.attrs[f"/{EMC}/rate"].store("3199000000")
    assert model.attrs[f"/{EMC}/rate"].show() == "2133000000"
    model.attrs[f"/{CLK_CAP}"].store("3199000000")  # a lift: the rate kept runs
    assert model.attrs[f"/{EMC}/rate"].show() == "3199000000"
    base2 = tmp_path / "agx"
    create_board("orin-agx", base2, quirks=("emc-boot-cap",))
    model = KernelModel(get("orin-agx"), read_initial(base2), ("emc-boot-cap",))
    model.attrs[f"/{EMC}/rate"].store("3199000000")
    assert model.attrs[f"/{EMC}/rate"].show() == "2133000000"
    assert Root(base2).exists(f"/{EMC}/state")
    assert os.path.exists(base2 / "sys/kernel/debug/bpmp/debug/bwmgr/bwmgr_halt")


def test_thor_maxperf_pins_both_gpu_nodes_at_their_max_and_restores_them(tmp_path):
    """jetson_clocks pins every GPU devfreq node at its max: Thor's gpu-gpc-0 at 1575 MHz and
    gpu-nvd-0 at its table's top (601.6 MHz in the simulated table); a measure at a GPU clock
    below max leaves gpu-nvd-0 to its governor."""
    base = make_board(tmp_path, "thor")
    before = board_state(base)
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    nvd = base / "sys/class/devfreq/gpu-nvd-0"
    gpc = base / "sys/class/devfreq/gpu-gpc-0"
    assert (nvd / "min_freq").read_text().strip() == (nvd / "max_freq").read_text().strip() \
        == "601600000"
    assert (gpc / "min_freq").read_text().strip() == "1575000000"
    assert cli(base, "restore").exit_code == 0
    assert diff(before, board_state(base)) == []
    out = tmp_path / "out"
    result = cli(base, "measure", "--model", "sim:resnet50", "--freq", "918MHz",
                 "--duration", "0.3", "--meter", "none", "--out", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(next(out.glob("*.json")).read_text())
    nvd_knobs = [c for c in doc["settings"]["clocks"] if c["name"] == "gpu-nvd-0"]
    assert nvd_knobs and nvd_knobs[0]["min_hz"] < nvd_knobs[0]["max_hz"], nvd_knobs
    assert diff(before, board_state(base)) == []  # the rails' readings aside


def test_r39_agx_orin_pins_its_gpu_at_max_without_enable_3d_scaling(tmp_path):
    """JetPack 7.2 (R39.2) on AGX Orin has no enable_3d_scaling: the pin is the devfreq node's
    min = max (1300.5 MHz, the table's top), whatever its governor."""
    base = make_board(tmp_path, "orin-agx-jp7")
    gpu = base / "sys/devices/platform/bus@0/17000000.gpu"
    assert not (gpu / "enable_3d_scaling").exists()
    before = snapshot(base, exclude=("var",))
    result = cli(base, "maxperf")
    assert result.exit_code == 0, result.output
    node = gpu / "devfreq/17000000.gpu"
    assert (node / "min_freq").read_text().strip() == "1300500000"
    assert (node / "cur_freq").read_text().strip() == "1300500000"
    assert cli(base, "restore").exit_code == 0
    assert diff(before, snapshot(base, exclude=("var",))) == []


def test_ina238_accuracy_from_its_datasheet(tmp_path):
    """TI SLYS025 max limits: gain 0.1% on V and on I, shunt offset 5 uV, bus offset 5 mV. A
    reading of 3 mV across the shunt at 1500 mA and 19 V bus: the shunt taken as (3 - 0.5) mV /
    1.5 A = 1.667 mOhm, so the offset current is 5 uV / 1.667 mOhm = 3 mA. At 28.5 W:
    2 x 0.001 x 28.5 + 19 V x 0.003 A + 28.5 W / 19 V x 0.005 V = 0.057 + 0.057 + 0.0075."""
    from jetbench.hw.board import Rail
    from jetbench.hw.fs import Root
    from jetbench.hw.meters.accuracy import _ina_accuracy

    hwmon = tmp_path / "sys/bus/i2c/devices/2-0044/hwmon/hwmon3"
    hwmon.mkdir(parents=True)
    for name, value in (("name", "ina238"), ("in0_input", "3"), ("curr1_input", "1500"),
                        ("in1_input", "19000")):
        (hwmon / name).write_text(value + "\n")
    rail = Rail("VIN", "/sys/bus/i2c/devices/2-0044/hwmon/hwmon3", 1, "hwmon", "board_input",
                "2-0044", "ina238")
    acc = _ina_accuracy(Root(tmp_path), rail, "thor")
    assert acc.known, acc.basis
    assert abs(acc.worst_case_w(28.5) - 0.1215) < 1e-9
    (hwmon / "curr1_input").write_text("0\n")  # no current: the shunt cannot be inferred
    assert not _ina_accuracy(Root(tmp_path), rail, "thor").known


def test_power_modes_are_listed_and_taken_by_name(tmp_path):
    """Issue 61, 4: `sim list` names each board's modes, `--power-mode` takes a name (or a part
    of one naming a single mode) as well as an id, and a wrong one lists them."""
    import subprocess
    import sys

    from conftest import REPO

    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "jetbench.cli.main", "sim", "list"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=60).stdout
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert "1 5W" in out and "2 MAXN_SUPER (usual)" in out
    made = cli(tmp_path / "unused", "sim", "create", "-b", "xavier-nx", "--power-mode", "10W",
               str(tmp_path / "nx"))
    assert made.exit_code == 0, made.output
    assert (tmp_path / "nx/var/lib/nvpmodel/status").read_text().startswith("pmode:0004")
    bad = cli(tmp_path / "unused", "sim", "create", "-b", "nano", "--power-mode", "10W",
              str(tmp_path / "nano"))
    assert bad.exit_code == 1 and "0 MAXN (usual), 1 5W" in bad.output
