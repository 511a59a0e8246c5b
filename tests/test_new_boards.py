"""The 2026 boards (docs/hardware.md): AGX Thor (tegra264, JetPack 7), Orin Nano Super (JetPack
6.2), JetPack 7.2 on AGX Orin; the INA238; the power mode (nvpmodel) in every output."""

from __future__ import annotations

import json
import os
import pickle
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app
from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.hw.meters.ina3221 import rail_sources, scan_rails
from jetbench.hw.nvpmodel import parse_mode_names, parse_status, read_power_mode
from jetbench.sim.attributes import KernelModel
from jetbench.sim.file_kernel import FileKernel

from conftest import cli, diff, make_board, snapshot

runner = CliRunner()

THOR_GPU = "sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0"
THOR_GPC = f"{THOR_GPU}/devfreq/gpu-gpc-0"
THOR_BWMGR = "sys/devices/platform/bwmgr/devfreq/bwmgr"
THOR_INA238 = "sys/devices/platform/bus@0/c250000.i2c/i2c-2/2-0044/hwmon/hwmon2"
NANO_SUPER_INA = "sys/devices/platform/bus@0/c240000.i2c/i2c-1/1-0040/hwmon/hwmon1"



def read(base: Path, path: str) -> str:
    return (base / path.lstrip("/")).read_text().strip()


# -- detection -----------------------------------------------------------------------------------


def test_thor_detected_by_what_exists(tmp_path):
    board = detect(Root(make_board(tmp_path, "thor")))
    assert (board.family, board.soc, board.l4t) == ("thor", "tegra264", "R38.2.0")
    gpu = board.gpu
    # The GPC clock by its class entry name (no of_node), gpu-nvd-0 listed beside it.
    assert gpu.name == "gpu-gpc-0" and gpu.control == "/" + THOR_GPC
    assert [name for name, _ in gpu.side_clocks] == ["gpu-nvd-0"]
    assert gpu.max_hz == 1_575_000_000 and gpu.hz_per_unit == 1
    # Railgating: the PCI device named under /proc/driver/nvidia/gpus (0000:01:00.0).
    assert gpu.railgate == f"/{THOR_GPU}/power/control"
    assert gpu.railgate_values == ("on", "auto")
    assert board.emc.kind == "devfreq" and board.emc.control == "/" + THOR_BWMGR
    assert board.total_rail == "VIN"
    assert board.power_mode.id == 0 and board.power_mode.name == "MAXN"
    assert len(board.cpu.policies) == 14


def test_orin_nano_super_from_its_super_device_tree(tmp_path):
    board = detect(Root(make_board(tmp_path, "orin-nano-super")))
    assert board.family == "orin-nano-super"
    assert board.gpu.max_hz == 1_020_000_000  # 624.75 MHz before JetPack 6.2
    assert board.emc.max_hz == 3_199_000_000
    assert (board.power_mode.id, board.power_mode.name) == (2, "MAXN_SUPER")


def test_jetpack72_orin_has_no_enable_3d_scaling_and_nothing_needs_it(tmp_path):
    jp6 = make_board(tmp_path, "orin-agx")
    jp7 = make_board(tmp_path, "orin-agx-jp7")
    gpu_dir = "sys/devices/platform/bus@0/17000000.gpu"
    assert (jp6 / gpu_dir / "enable_3d_scaling").is_file()
    assert not (jp7 / gpu_dir / "enable_3d_scaling").exists()
    board = detect(Root(jp7))
    assert (board.family, board.l4t, board.gpu.name) == ("orin-agx", "R39.2.0", "17000000.gpu")
    before = snapshot(jp7)
    result = cli(jp7, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    assert not any("3d_scaling" in w["path"] for w in json.loads(result.output)["writes"])
    assert cli(jp7, "restore").exit_code == 0
    assert diff(before, snapshot(jp7)) == []


def test_unknown_future_gpu_layout_is_reported_and_the_rest_still_works(tmp_path):
    base = make_board(tmp_path, "thor")
    # A future release renames the GPU's devfreq entry: nothing jetbench knows.
    (base / "sys/class/devfreq/gpu-gpc-0").rename(base / "sys/class/devfreq/gpu-xyz-0")
    result = cli(base, "info")
    assert result.exit_code == 0, result.output
    doc = json.loads(cli(base, "info", "--json").output)
    assert doc["gpu"] is None
    assert "GPU: not controllable here; found devfreq nodes: bwmgr, gpu-nvd-0, gpu-xyz-0" \
        in doc["notes"]
    # maxperf still pins what is controllable (CPU, EMC) and says the GPU was skipped.
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert any("no gpu control" in n for n in out["notes"])
    assert read(base, f"{THOR_BWMGR}/min_freq") == "4266000000"
    assert read(base, f"{THOR_GPC}/min_freq") == "306000000"  # untouched


def test_devfreq_values_in_khz_are_recognised_and_written_in_khz(tmp_path):
    base = make_board(tmp_path, "thor")
    node = base / THOR_GPC
    table_khz = [306000, 612000, 1575000]
    (node / "available_frequencies").write_text(" ".join(map(str, table_khz)) + "\n")
    (node / "min_freq").write_text("306000\n")
    (node / "max_freq").write_text("1575000\n")
    (node / "cur_freq").write_text("306000\n")
    board = detect(Root(base))
    assert board.gpu.hz_per_unit == 1000
    assert board.gpu.available_hz == (306_000_000, 612_000_000, 1_575_000_000)
    assert any("read as kHz" in n for n in board.notes)
    doc = json.loads(cli(base, "info", "--json").output)
    assert doc["gpu"]["file_unit"] == "kHz"
    gpu = [c for c in doc["clocks"] if c["domain"] == "gpu"][0]
    assert (gpu["min_hz"], gpu["max_hz"]) == (306_000_000, 1_575_000_000)
    from jetbench.hw.clocks.gpu import plan
    from jetbench.hw.clocks.types import GpuTarget

    steps = plan(Root(base), board, GpuTarget(min_hz=612_000_000, max_hz=612_000_000))
    writes = {w.path.rsplit("/", 1)[-1]: w.value for s in steps for w in s.writes}
    assert writes == {"min_freq": "612000", "max_freq": "612000"}


# -- info --json ---------------------------------------------------------------------------------

INFO = {
    # board: soc, l4t, power mode text, GPU table top, rails (name, point), total
    "thor": ("tegra264", "R38.2.0", "0 MAXN", 1_575_000_000,
             [("VIN", "board_input"), ("VDD_GPU", "rail"), ("VDD_CPU_SOC_MSS", "rail"),
              ("VIN_SYS_5V0", "rail")], "VIN"),
    "orin-nano-super": ("tegra234", "R36.4.3", "2 MAXN_SUPER", 1_020_000_000,
                        [("VDD_IN", "module_input"), ("VDD_CPU_GPU_CV", "rail"),
                         ("VDD_SOC", "rail")], "VDD_IN"),
    "orin-agx-jp7": ("tegra234", "R39.2.0", "0 MAXN", 1_300_500_000,
                     [("VDD_GPU_SOC", "rail"), ("VDD_CPU_CV", "rail"), ("VIN_SYS_5V0", "rail"),
                      ("VDDQ_VDD2_1V8AO", "rail")], None),
}


@pytest.mark.parametrize("key", sorted(INFO))
def test_info_json_new_boards(tmp_path, key):
    soc, l4t, mode, gpu_top, rails, total = INFO[key]
    result = cli(make_board(tmp_path, key), "info", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert (doc["board"]["soc"], doc["board"]["l4t"]) == (soc, l4t)
    assert doc["board"]["power_mode"]["text"] == mode
    gpu = [c for c in doc["clocks"] if c["domain"] == "gpu"][0]
    assert max(gpu["available_hz"]) == gpu_top
    assert [(r["name"], r["point"]) for r in doc["rails"]] == rails
    assert doc["total_rail"] == total


def test_info_groups_per_core_policies_but_keeps_clusters(tmp_path):
    thor = json.loads(cli(make_board(tmp_path, "thor"), "info", "--json").output)
    assert [(g["name"], len(g["policies"])) for g in thor["cpu_clusters"]] == [("cpu0-13", 14)]
    orin = json.loads(cli(make_board(tmp_path, "orin-agx"), "info", "--json").output)
    assert [g["name"] for g in orin["cpu_clusters"]] == ["cpu0-3", "cpu4-7", "cpu8-11"]
    table = runner.invoke(app, ["--root", str(make_board(tmp_path / "t", "thor")), "info"],
                          env={"COLUMNS": "200"}).output
    assert "cpu0-13 (14 policies)" in table and "0 MAXN" in table


# -- maxperf / restore ---------------------------------------------------------------------------


def _non_cpu_writes(result) -> dict:
    writes = json.loads(result.output)["writes"]
    return {w["path"].lstrip("/"): w["new"] for w in writes
            if not w["path"].startswith("/sys/devices/system/cpu")}


def test_thor_maxperf_writes_exactly_the_named_files(tmp_path):
    base = make_board(tmp_path, "thor")
    before = snapshot(base)
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    # GPC min = max = top (max already is), PCI runtime PM on, bwmgr min = top (max already is).
    assert _non_cpu_writes(result) == {
        f"{THOR_GPU}/power/control": "on",
        f"{THOR_GPC}/min_freq": "1575000000",
        f"{THOR_BWMGR}/min_freq": "4266000000",
        # jetson_clocks pins every GPU devfreq node at its max (issue 57): gpu-nvd-0 too
        f"{THOR_GPU}/devfreq/gpu-nvd-0/min_freq": "601600000",
    }
    assert read(base, f"{THOR_GPC}/max_freq") == "1575000000"
    assert read(base, f"{THOR_BWMGR}/max_freq") == "4266000000"
    assert cli(base, "restore").exit_code == 0
    assert diff(before, snapshot(base)) == []


def test_orin_nano_super_maxperf_reaches_1020mhz_and_3199mhz(tmp_path):
    base = make_board(tmp_path, "orin-nano-super")
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    gpu = "sys/devices/platform/bus@0/17000000.gpu"
    emc = "sys/kernel/debug/bpmp/debug/clk/emc"
    assert _non_cpu_writes(result) == {
        f"{gpu}/railgate_enable": "0",
        f"{gpu}/devfreq/17000000.gpu/min_freq": "1020000000",
        f"{emc}/mrq_rate_locked": "1",
        # R36's lock recipe (NVIDIA's clock guide, JetPack 6.2 scripts): the clock's state and
        # the bandwidth manager halted, before the rate
        f"{emc}/state": "1",
        "sys/kernel/debug/bpmp/debug/bwmgr/bwmgr_halt": "1",
    }
    assert read(base, f"{emc}/rate") == "3199000000"
    assert not any("BPMP" in n for n in json.loads(result.output)["notes"])


def test_old_bpmp_firmware_cap_is_named(tmp_path, monkeypatch):
    """The Super device tree lists 1020 MHz, but old BPMP firmware keeps the GPU at 624.75 MHz."""
    # The running GPU clock held at 624.75 MHz whatever is pinned (the simulated kernel's
    # cap hook, as its qos-cap quirk uses; the knobs untouched).
    monkeypatch.setattr(KernelModel, "_capped", lambda self, hz: min(hz, 624_750_000))
    base = make_board(tmp_path, "orin-nano-super")
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    notes = [n for n in json.loads(result.output)["notes"] if "BPMP" in n]
    assert len(notes) == 1
    assert "running clock reads 624.8 MHz" in notes[0] and "1.02 GHz" in notes[0]
    assert "old BPMP firmware" in notes[0]


# -- power: INA238, totals, monitor --------------------------------------------------------------


def _hwmon(base: Path, d: str, files: dict) -> None:
    for name, value in files.items():
        p = base / d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"{value}\n")


def _thor_like_tree(base: Path) -> None:
    dev238, dev3221 = "sys/devices/x/2-0044", "sys/devices/x/1-0040"
    _hwmon(base, f"{dev238}/hwmon/hwmon5", {"name": "ina238", "in0_input": 12,
                                            "in1_input": 19800, "curr1_input": 1237,
                                            "power1_input": 24_500_000, "power1_max": 3e8})
    _hwmon(base, f"{dev3221}/hwmon/hwmon3", {
        "in1_label": "VDD_GPU", "in1_input": 5000, "curr1_input": 1000,
        "in2_label": "VDD_CPU_SOC_MSS", "in2_input": 5000, "curr2_input": 600,
        "in3_label": "VIN_SYS_5V0", "in3_input": 5000, "curr3_input": 400,
        "update_interval": 2})
    for driver, dev in (("ina238", dev238), ("ina3221", dev3221)):
        link = base / f"sys/bus/i2c/drivers/{driver}/{dev.rsplit('/', 1)[-1]}"
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(base / dev, link.parent), link)


def test_ina238_power_is_microwatts_at_the_board_input(tmp_path):
    _thor_like_tree(tmp_path)
    root = Root(tmp_path)
    rails = scan_rails(root)
    assert [(r.name, r.chip, r.point) for r in rails] == [
        ("VIN", "ina238", "board_input"), ("VDD_GPU", "ina3221", "rail"),
        ("VDD_CPU_SOC_MSS", "ina3221", "rail"), ("VIN_SYS_5V0", "ina3221", "rail")]
    ina238, ina3221 = rail_sources(root, rails, "VIN")
    assert (ina238.name, ina3221.name) == ("ina238", "ina3221")
    assert ina238.total().channels == ("VIN",) and ina238.total().point == "board_input"
    assert ina3221.total() is None  # VIN_SYS_5V0 (nor the module's rails) is never the total
    assert [c.unit for c in ina238.channels()] == ["uW"]
    assert ina238.period_s == pytest.approx(0.05) and ina3221.period_s == pytest.approx(0.002)
    for src in (ina238, ina3221):
        src.open()
    try:
        assert ina238.read().power_w == pytest.approx((24.5,))  # 24 500 000 uW
        assert ina3221.read().power_w == pytest.approx((5.0, 3.0, 2.0))
        # Picklable for a sampler child: no descriptors travel, the copy opens its own.
        copy = pickle.loads(pickle.dumps(ina238))
        assert copy._fds == [] and copy._plan == []
        copy.open()
        assert copy.read().power_w == pytest.approx((24.5,))
        copy.close()
    finally:
        for src in (ina238, ina3221):
            src.close()


def _monitor(base: Path) -> dict:
    result = cli(base, "monitor", "--once", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_monitor_total_is_the_ina238_power1_input_on_thor(tmp_path, monkeypatch):
    base = make_board(tmp_path, "thor")
    # Rail files frozen (the simulated kernel still runs the clocks): an exact comparison.
    monkeypatch.setattr(FileKernel, "_sync_rails", lambda self, *a: None)
    doc = _monitor(base)
    micro_w = int(read(base, f"{THOR_INA238}/power1_input"))
    assert doc["total"]["name"] == "VIN"
    assert doc["total"]["power_w"] == pytest.approx(micro_w / 1e6, rel=1e-12)  # uW -> W
    vin = [c for c in doc["channels"] if c["name"] == "VIN"][0]
    assert (vin["source"], vin["point"]) == ("ina238", "board_input")
    assert doc["power_mode"]["text"] == "0 MAXN"
    assert {c["domain"] for c in doc["clocks"]} == {"cpu", "gpu", "gpu-side", "emc"}


def test_monitor_total_is_vdd_in_on_orin_nano_super(tmp_path, monkeypatch):
    base = make_board(tmp_path, "orin-nano-super")
    monkeypatch.setattr(FileKernel, "_sync_rails", lambda self, *a: None)
    doc = _monitor(base)
    mv, ma = int(read(base, f"{NANO_SUPER_INA}/in1_input")), \
        int(read(base, f"{NANO_SUPER_INA}/curr1_input"))
    assert read(base, f"{NANO_SUPER_INA}/in1_label") == "VDD_IN"
    assert doc["total"]["name"] == "VDD_IN"
    assert doc["total"]["power_w"] == pytest.approx(mv * ma / 1e6, rel=1e-12)
    assert doc["power_mode"]["text"] == "2 MAXN_SUPER"


def test_thor_board_input_includes_the_module_under_a_live_kernel(tmp_path):
    doc = _monitor(make_board(tmp_path, "thor"))
    watts = {c["name"]: c["power_w"] for c in doc["channels"]}
    assert doc["total"]["name"] == "VIN"
    assert watts["VIN"] > watts["VDD_GPU"] + watts["VDD_CPU_SOC_MSS"] + watts["VIN_SYS_5V0"]


# -- NVML on Thor, NotSupported on Orin ----------------------------------------------------------


def _fake_pynvml(power_mw=None):
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def not_supported(*_a):
        raise NVMLError("Not Supported")

    nv.NVMLError = NVMLError
    nv.nvmlInit = lambda: None
    nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: 1
    nv.nvmlDeviceGetHandleByIndex = lambda i: f"gpu{i}"
    nv.nvmlDeviceGetTotalEnergyConsumption = not_supported
    nv.nvmlDeviceGetPowerUsage = (lambda h: power_mw) if power_mw is not None else not_supported
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=37, memory=5)
    return nv


def test_nvml_on_thor_adds_the_gpu_beside_the_rails(tmp_path, monkeypatch):
    from jetbench.hw.meters.registry import auto_sources
    from jetbench.hw.nvml import gpu_utilisation_pct

    _thor_like_tree(tmp_path)
    rails = scan_rails(Root(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(power_mw=23_000))
    sources = auto_sources(Root("/"), rails, "VIN")  # constructed only: nothing is opened
    assert [s.name for s in sources] == ["ina238", "ina3221", "nvml"]
    assert [(c.name, c.point) for c in sources[2].channels()] == [("GPU0", "gpu_board")]
    assert gpu_utilisation_pct() == 37.0


def test_nvml_on_orin_stays_not_supported_never_zero(tmp_path, monkeypatch):
    from jetbench.errors import HardwareError
    from jetbench.hw.meters.nvml import NvmlSource
    from jetbench.hw.meters.registry import auto_sources

    _thor_like_tree(tmp_path)
    rails = scan_rails(Root(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(power_mw=None))
    assert [s.name for s in auto_sources(Root("/"), rails, "VIN")] == ["ina238", "ina3221"]
    with pytest.raises(HardwareError, match="not available here"):
        NvmlSource().open()


# -- the power mode ------------------------------------------------------------------------------


def test_nvpmodel_parsing():
    assert parse_status("pmode:0002 fmode:quiet\n") == 2
    assert parse_status("fmode:quiet") is None
    conf = "< POWER_MODEL ID=0 NAME=15W >\nstuff\n< POWER_MODEL ID=2 NAME=MAXN_SUPER >\n" \
           "< PM_CONFIG DEFAULT=2 >\n"
    assert parse_mode_names(conf) == {0: "15W", 2: "MAXN_SUPER"}


def test_no_nvpmodel_means_no_mode(tmp_path):
    assert read_power_mode(Root(make_board(tmp_path, "tx1"))) is None
    doc = json.loads(cli(tmp_path / "tx1", "info", "--json").output)
    assert doc["board"]["power_mode"] is None


def test_compare_warns_when_power_modes_differ():
    from jetbench.report.compare import caveats

    def doc(mode):
        return {"board": {"power_mode": mode}, "workload": {}, "power": {}}

    maxn = {"id": 2, "name": "MAXN_SUPER", "text": "2 MAXN_SUPER"}
    w15 = {"id": 0, "name": "15W", "text": "0 15W"}
    assert not [c for c in caveats(doc(maxn), doc(maxn)) if "power mode" in c]
    warned = [c for c in caveats(doc(maxn), doc(w15)) if "power mode" in c]
    assert len(warned) == 1 and "2 MAXN_SUPER vs 0 15W" in warned[0]
    assert [c for c in caveats(doc(maxn), doc(None)) if "not recorded" in c]


def test_metrics_carry_the_power_mode():
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest

    from jetbench.daemon.metrics import _Collector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(lambda: {"power_mode": {"id": 2, "name": "MAXN_SUPER"},
                                          "gpu_load_pct": 12.5}))
    text = generate_latest(registry).decode()
    assert 'jetbench_power_mode_info{id="2",name="MAXN_SUPER"} 1.0' in text
    assert "jetbench_gpu_load_percent 12.5" in text


def test_sim_list_shows_the_new_boards():
    out = runner.invoke(app, ["sim", "list"]).output
    for key in ("thor", "orin-nano-super", "orin-agx-jp7"):
        assert any(line.split()[0] == key for line in out.splitlines()), key


# -- a Thor owner's day: measure and the daemon --------------------------------------------------


def test_measure_on_thor_records_the_mode_and_the_board_input(tmp_path):
    import subprocess

    from helpers.workloads import board_snapshot, write_tiny

    from conftest import REPO

    write_tiny(tmp_path)
    base = make_board(tmp_path, "thor")
    before = board_snapshot(base, "thor")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure", "--model",
         "jb_tinynet:tiny", "--input-shape", "3,16,16", "--iterations", "2", "--warmup", "0",
         "--device", "cpu", "--freq", "max", "--precision", "fp32", "--batch", "1",
         "--duration", "0.5", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
        env=dict(os.environ, PYTHONPATH=str(REPO / "agent"), COLUMNS="160"))
    assert result.returncode in (0, 3), result.stderr  # 3: judged invalid, still written
    assert "Power mode (nvpmodel)" in result.stdout and "0 MAXN" in result.stdout
    doc = json.loads(next(out.glob("*.json")).read_text())
    assert doc["board"]["power_mode"] == {"id": 0, "name": "MAXN", "text": "0 MAXN"}
    assert doc["board"]["family"] == "thor" and doc["simulated"] is True
    assert (doc["power"]["total"]["name"], doc["power"]["total"]["point"]) == \
        ("VIN", "board_input")
    assert doc["settings"]["applied"]["gpu_hz"] == 1_575_000_000
    assert diff(before, board_snapshot(base, "thor")) == []  # clocks and power/control put back


def test_daemon_on_thor_status_has_the_power_mode(tmp_path):
    from helpers.daemons import Daemon

    base = make_board(tmp_path, "thor")
    daemon = Daemon(tmp_path, base, "--profile", "thor-maxn")
    try:
        daemon.ready()
        status = daemon.ask("status")
        assert status["power_mode"]["text"] == "0 MAXN"
        assert status["total"]["name"] == "VIN" and status["total"]["point"] == "board_input"
        assert read(base, f"{THOR_GPU}/power/control") == "on"
    finally:
        assert daemon.stop() == 0
    assert read(base, f"{THOR_GPU}/power/control") == "auto"


def test_a_gpu_max_the_firmware_refuses_names_the_bpmp_firmware(tmp_path, monkeypatch):
    """Old BPMP firmware: max_freq reads back 624.75 MHz after 1020 MHz is written."""
    from jetbench.errors import WriteRejected
    from jetbench.hw.clocks.gpu import plan
    from jetbench.hw.clocks.steps import apply_step
    from jetbench.hw.clocks.types import GpuTarget

    base = make_board(tmp_path, "orin-nano-super")
    node = base / "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu"
    (node / "max_freq").write_text("624750000\n")
    root = Root(base)
    board = detect(root)
    (step,) = plan(root, board, GpuTarget(min_hz=1_020_000_000, max_hz=1_020_000_000))
    real_read = Root.read

    def capped_read(self, path, *a, **kw):
        value = real_read(self, path, *a, **kw)
        return "624750000" if path.endswith("17000000.gpu/max_freq") else value

    monkeypatch.setattr(Root, "read", capped_read)
    with pytest.raises(WriteRejected) as err:
        apply_step(root, step)
    assert "BPMP firmware" in err.value.hint and "1.02 GHz" in err.value.hint


def test_an_unknown_release_and_soc_work_with_what_is_found(tmp_path):
    base = make_board(tmp_path, "thor")
    (base / "etc/nv_tegra_release").write_text(
        "# R40 (release), REVISION: 0.1, GCID: 1, BOARD: generic, EABI: aarch64, DATE: x\n")
    (base / "sys/firmware/devicetree/base/compatible").write_bytes(
        b"nvidia,p9999-0000\0nvidia,tegra300\0")
    (base / "sys/firmware/devicetree/base/model").write_bytes(b"NVIDIA Jetson Future\0")
    board = detect(Root(base))
    assert (board.family, board.soc, board.l4t) == ("tegra300", "tegra300", "R40.0.1")
    assert board.gpu.name == "gpu-gpc-0" and board.emc.kind == "devfreq"
    before = snapshot(base)
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    assert read(base, f"{THOR_GPC}/min_freq") == "1575000000"
    assert cli(base, "restore").exit_code == 0
    assert diff(before, snapshot(base)) == []


def test_meter_ina3221_on_thor_reads_both_chips_total_first(tmp_path):
    base = make_board(tmp_path, "thor")
    for spec in ("auto", "ina3221"):
        doc = json.loads(cli(base, "info", "--json", "--meter", spec).output)
        assert [(s["name"], s["total"]) for s in doc["sources"]] == [
            ("ina238", "VIN (measured at board_input)"), ("ina3221", None)], spec
        assert [c["unit"] for c in doc["sources"][0]["channels"]] == ["uW"]
