"""`sim create --quirk`: the simulated kernel shows each real-kernel behaviour of
sim/quirks.py; the default boards keep behaving as before."""

import json

import pytest

from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.sim import quirks
from jetbench.sim.create import create_board
from jetbench.sim.file_kernel import FileKernel

from conftest import run_cli, wait_until

T210_GPU = "sys/devices/57000000.gpu/devfreq/57000000.gpu"


def _pin_gpu(base, hz):
    node = base / T210_GPU
    (node / "max_freq").write_text(f"{hz}\n")
    (node / "min_freq").write_text(f"{hz}\n")
    return node


def _read(path):
    return int(path.read_text().split()[0])


def test_cli_writes_the_quirks_into_the_marker(tmp_path):
    proc = run_cli("sim", "create", str(tmp_path / "b"), "--board", "nano",
                   "--quirk", "static-cur", "--quirk", "qos-cap")
    assert proc.returncode == 0, proc.stderr
    marker = json.loads((tmp_path / "b/etc/jetbench/simulated.json").read_text())
    assert marker["quirks"] == ["static-cur", "qos-cap"]
    bad = run_cli("sim", "create", str(tmp_path / "c"), "--quirk", "warp-drive")
    assert bad.returncode == 1 and "unknown quirk" in bad.stderr and "Traceback" not in bad.stderr
    plain = tmp_path / "d"
    create_board("nano", plain)
    assert json.loads((plain / "etc/jetbench/simulated.json").read_text())["quirks"] == []


def test_default_board_follows_the_pin(tmp_path):
    base = tmp_path / "b"
    create_board("tx1", base)
    node = _pin_gpu(base, 691_200_000)
    FileKernel(base).sync()
    assert _read(node / "cur_freq") == 691_200_000


def test_static_cur_never_follows(tmp_path):
    base = tmp_path / "b"
    create_board("nano", base, quirks=["static-cur"])
    node = _pin_gpu(base, 691_200_000)
    FileKernel(base).sync()
    assert _read(node / "cur_freq") == 76_800_000  # the table's first entry, as at boot
    assert _read(node / "max_freq") == 691_200_000  # the knobs are kept


def test_static_cur_on_the_tegra210_debugfs_override(tmp_path):
    base = tmp_path / "b"
    create_board("tx1-r24", base, quirks=["static-cur"])
    clock = base / "sys/kernel/debug/clock"
    (clock / "override.gbus/rate").write_text("691200000\n")
    (clock / "override.gbus/state").write_text("1\n")
    FileKernel(base).sync()
    assert _read(clock / "gbus/rate") == 76_800_000  # never follows the override


def test_qos_cap_holds_the_clock_below_the_pin(tmp_path):
    base = tmp_path / "b"
    create_board("tx1", base, quirks=["qos-cap"])
    node = _pin_gpu(base, 921_600_000)
    FileKernel(base).sync()
    # Half of the 998.4 MHz top is 499.2 MHz: the highest entry at or below it is 460.8 MHz.
    assert _read(node / "cur_freq") == 460_800_000
    assert _read(node / "min_freq") == 921_600_000  # knobs untouched


def test_amu_cpu_reads_low_when_idle_and_a_little_low_when_busy(tmp_path):
    base = tmp_path / "b"
    create_board("orin-nano", base, quirks=["amu-cpu"])
    policy = base / "sys/devices/system/cpu/cpufreq/policy0"
    (policy / "scaling_governor").write_text("performance\n")
    kernel = FileKernel(base, power=False)
    kernel._load = lambda: 0.0  # idle
    kernel.sync()
    top_khz = 1_651_200  # the Orin Nano table top (kHz, as the file says)
    assert _read(policy / "scaling_cur_freq") == int(top_khz * 0.3)
    kernel._load = lambda: 1.0  # one core busy
    kernel.sync()
    assert _read(policy / "scaling_cur_freq") == int(top_khz * 0.98)


def test_round_emc_runs_the_nearest_step(tmp_path):
    base = tmp_path / "b"
    create_board("tx1", base, quirks=["round-emc"])
    over = base / "sys/kernel/debug/clk/override.emc"
    (over / "clk_update_rate").write_text("1000000000\n")
    (over / "clk_state").write_text("1\n")
    FileKernel(base).sync()
    # 1000 MHz / 6.4 MHz = 156.25 steps -> 156 x 6.4 MHz = 998.4 MHz
    assert _read(base / "sys/kernel/debug/clk/emc/clk_rate") == 998_400_000
    assert _read(over / "clk_update_rate") == 1_000_000_000  # the knob kept what was written


def test_late_gpu_appears_after_the_kernel_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(quirks, "LATE_GPU_S", 0.3)
    base = tmp_path / "b"
    create_board("orin-nano", base, quirks=["late-gpu"])
    assert detect(Root(base)).gpu is None
    with FileKernel(base):
        wait_until(lambda: detect(Root(base)).gpu is not None)
    gpu = detect(Root(base)).gpu
    assert gpu is not None and gpu.available_hz[-1] == 624_750_000


def test_late_gpu_needs_a_devfreq_gpu(tmp_path):
    from jetbench.errors import UsageError

    with pytest.raises(UsageError, match="devfreq"):
        create_board("tx1-r24", tmp_path / "b", quirks=["late-gpu"])
